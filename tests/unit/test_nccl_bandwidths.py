# Copyright 2026 The nova-gpu-p2p Authors
#
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The guest's NCCL computes the host's bandwidths, types and transports.

Judged by NCCL's own rules (:mod:`lab.nccl_paths`,
:mod:`lab.nccl_bandwidths`, NVIDIA/nccl v2.30.7, cited by line there):
NCCL on the host reads the host's sysfs, its CPU and NVML; NCCL in the
guest reads the guest's sysfs (root ports at what our XML sets, devices
at their own link, which vfio-pci passes through), the guest agent's
topology file written from the description the driver's own code made,
and a guest CPU that is not the host's (a named Skylake-Server model under
a Sapphire Rapids host). Every GPU-GPU and GPU-NIC pair must get the same
path type, bandwidth and transport (P2P, SHM or NET; GPUDirect RDMA or
not) on the corpus hosts and on hosts made for this: Gen5 cards in Gen4
slots, Gen4 switches with Gen5 NICs, a dual-port NIC.
"""

import contextlib
import dataclasses
import io
import os

import fixtures

from lab import nccl_bandwidths
from lab import nccl_paths
from nova_gpu_p2p.guest import devices
from nova_gpu_p2p.guest import plan
from nova_gpu_p2p.guest import root_port_links
from nova_gpu_p2p.guest import topology_description as td
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import nccl_links
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p_guest import cli
from tests.fixtures import guest_sysfs
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder as b
from tests.unit import base
from tests.unit import test_corpus
from tests.unit import test_guest_plan as tgp

#: The host: Sapphire Rapids (NCCL's SRP: 22 GB/s between sockets).
HOST_CPU = {'vendor': 'GenuineIntel', 'familyid': 6, 'modelid': 143}
#: The guest's CPUID under a named Skylake-Server model (NCCL: 10 GB/s).
GUEST_CPU = {'vendor': 'GenuineIntel', 'familyid': 6, 'modelid': 85}
GUEST_CPUINFO = ('processor\t: 0\nvendor_id\t: GenuineIntel\n'
                 'cpu family\t: 6\nmodel\t\t: 85\n'
                 'model name\t: Intel Xeon Processor (Skylake)\n')
#: Each IB port's speed: 400 Gb/s.
NET_GBS = 50.0
#: QEMU's pcie-root-port without x-speed/x-width (machine types 4.0+).
QEMU_DEFAULT_PORT = ('16.0 GT/s PCIe', '32')
NEW_QEMU, OLD_QEMU = (9, 2, 0), (7, 2, 0)
#: QEMU's x-speed values as Linux's max_link_speed writes them.
LINUX_SPEED = {'2_5': '2.5 GT/s PCIe', '5': '5.0 GT/s PCIe',
               '8': '8.0 GT/s PCIe', '16': '16.0 GT/s PCIe',
               '32': '32.0 GT/s PCIe', '64': '64.0 GT/s PCIe'}


def cpuid(cpu: dict) -> dict:
    return {'arch': 'x86_64', 'vendor': cpu['vendor'],
            'familyid': str(cpu['familyid']),
            'modelid': str(cpu['modelid'])}


def _gen4(thing):
    return dataclasses.replace(thing, link=(4, 16))


_H100 = b.nvidia_gpu('H100-PCIE')
#: Hosts made for this test, beside the corpus.
NEW_HOSTS = {
    # Two sockets, each with two Gen5 cards and a Gen5 NIC in Gen4 slots.
    'gen5-cards-in-gen4-slots': b.Host(b.numa_nodes('0-15', '16-31'), (
        b.root_complex(0x00, 0, _gen4(b.RootPort(_H100)),
                       _gen4(b.RootPort(_H100)),
                       _gen4(b.RootPort(b.mellanox_nic()))),
        b.root_complex(0x80, 1, _gen4(b.RootPort(_H100)),
                       _gen4(b.RootPort(_H100))))),
    # Eight Gen5 cards and four Gen5 NICs under Gen4 switches.
    'gen4-switches-gen5-nics': b.Host(b.numa_nodes('0-15', '16-31'), tuple(
        b.root_complex(bus, node, *(
            _gen4(b.switch(_H100, _H100, b.mellanox_nic()))
            for _ in range(2)))
        for bus, node in ((0x00, 0), (0x80, 1)))),
    # A dual-port NIC beside two GPUs under one switch.
    'dual-port-nic': b.Host(b.numa_nodes('0-15', '16-31'), (
        b.root_complex(0x00, 0, b.switch(_H100, _H100,
                                         b.mellanox_nic(functions=2))),
        b.root_complex(0x80, 1, b.switch(_H100, _H100)))),
}


class Host:
    """One host: its sysfs tree, topology and the devices a guest gets."""

    def __init__(self, root: str) -> None:
        self.root = root
        backend = sysfs.SysfsBackend(test_corpus.make_conf(sysfs_root=root),
                                     read_config=sysfs.read_config_direct)
        self.gpus_host = discovery.evaluate(backend.discover(),
                                            test_corpus.make_conf())
        self.topology = self.gpus_host.topology
        functions = self.topology.functions.values()
        self.gpus = sorted(f.address for f in functions if f.is_gpu)
        self.nics = sorted(f.address for f in functions if f.is_nic)

    def negotiated(self, address: str) -> tuple[str, str]:
        """A GPU's link as NVML reports it: the negotiated, lower one."""
        link = nccl_links.nccl_link(self.topology,
                                    self.topology.functions[address])
        return link['link_speed'], str(link['link_width'])

    def own(self, address: str) -> tuple[str, int]:
        function = self.topology.functions[address]
        return function.link_speed, function.link_width


class GuestEqualsHost(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def host_named(self, name: str) -> Host:
        if name in NEW_HOSTS:
            root = os.path.join(self.tmp, 'host-' + name)
            b.build(NEW_HOSTS[name], root)
            return Host(root)
        return Host(test_corpus.tree(name))

    def host_view(self, host: Host, gpus, nics, nvml=True):
        topology = nccl_paths.Topology(
            host.root, cpuid=cpuid(HOST_CPU),
            nvml_links={g: host.negotiated(g) for g in gpus} if nvml
            else None)
        return nccl_bandwidths.decide(topology, gpus,
                                      {n: NET_GBS for n in nics})

    def guest(self, host: Host, addresses, qemu=NEW_QEMU):
        """The driver's plan for a guest of ``addresses``, and its sysfs.

        :returns: (plan, guest sysfs root, host address -> guest address)
        """
        nodes = sorted({n.id for n in host.topology.numa_nodes})
        facts = tgp.facts(host_node_of_cell=tuple(nodes),
                          used_pci_indexes=frozenset({0}), phys_bits=52,
                          host_cpu=HOST_CPU, qemu_version=qemu)
        result = plan.decide(
            tgp.request(clique='auto', numa='preferred'),
            [devices.describe(a, host.topology) for a in addresses],
            host.gpus_host, facts, plan.Options())
        self.assertIsNotNone(result.guest_topology, result.notes)
        description = td.decode(result.guest_topology)
        ports = [port for bus in result.buses.buses for port in bus.ports]
        links = {}
        for index, port in enumerate(ports):
            link = result.port_links.get(port.index)
            port_link = (QEMU_DEFAULT_PORT if link is None else
                         (LINUX_SPEED[link.speed], link.width))
            links[index] = (port_link, host.own(port.device))
        root = os.path.join(self.tmp, 'guest%d' % len(os.listdir(self.tmp)))
        guest = guest_sysfs.build(root, description, links=links)
        return result, root, dict(zip([p.device for p in ports], guest))

    def agent_file(self, root: str) -> str:
        proc = os.path.join(root, 'proc')
        os.makedirs(proc)
        with open(os.path.join(proc, 'cpuinfo'), 'w') as f:
            f.write(GUEST_CPUINFO)
        output = os.path.join(root, 'virtualTopology.xml')
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(0, cli.main(['--sysfs-root', root,
                                          '--proc-root', proc,
                                          '--output', output]))
        with open(output) as f:
            return f.read()

    def guest_view(self, host: Host, gpus, nics, qemu=NEW_QEMU):
        """NCCL's decisions in the guest, keyed by host addresses.

        Devices the layout leaves on the root bus (no guest NUMA cell
        for them) are left out, on both sides.
        """
        _, root, where = self.guest(host, list(gpus) + list(nics), qemu)
        gpus = [g for g in gpus if g in where]
        nics = [n for n in nics if n in where]
        back = {guest: address for address, guest in where.items()}
        topology = nccl_paths.Topology(
            root, self.agent_file(root), cpuid=cpuid(GUEST_CPU),
            nvml_links={where[g]: host.negotiated(g) for g in gpus})
        found = nccl_bandwidths.decide(
            topology, [where[g] for g in gpus],
            {where[n]: NET_GBS for n in nics})
        return gpus, nics, {(back[a], back[b_]): pair
                            for (a, b_), pair in found.items()}

    def assertGuestIsHost(self, host: Host, gpus, nics, qemu=NEW_QEMU):
        gpus, nics, found = self.guest_view(host, gpus, nics, qemu)
        expected = self.host_view(host, gpus, nics)
        self.assertEqual(expected, found)
        return expected


@hosts.add_host_tests
class TestCorpusHosts(GuestEqualsHost):
    """Every GPU and NIC port of each corpus host in one guest."""

    def check_host(self, name):
        host = self.host_named(name)
        if hosts.EXPECTED[name].routed_links is None:
            self.assertGuestIsHost(host, host.gpus, host.nics)
            return
        # ACS Request Redirect sends a pair's traffic through the root
        # complex, which NCCL on the host cannot see; the guest is told
        # the routed class on purpose (no P2P where it would not be
        # direct). Bandwidths are still the host's.
        gpus, nics, found = self.guest_view(host, host.gpus, host.nics)
        expected = self.host_view(host, gpus, nics)
        self.assertEqual({k: p.bw for k, p in expected.items()},
                         {k: p.bw for k, p in found.items()})


class TestNewHosts(GuestEqualsHost):

    def test_gen5_cards_in_gen4_slots(self):
        host = self.host_named('gen5-cards-in-gen4-slots')
        found = self.assertGuestIsHost(host, host.gpus, host.nics)
        gpus = host.gpus
        # Gen4 x16: 24 GB/s, not the cards' 48; SRP between sockets: 22.
        self.assertEqual(nccl_bandwidths.Pair('PHB', 24.0, 'SHM'),
                         found[gpus[0], gpus[1]])
        self.assertEqual(nccl_bandwidths.Pair('SYS', 22.0, 'SHM'),
                         found[gpus[0], gpus[2]])

    def test_gen4_switches_with_gen5_nics(self):
        host = self.host_named('gen4-switches-gen5-nics')
        found = self.assertGuestIsHost(host, host.gpus, host.nics)
        # Two GPUs of one socket under two switches: the host's NCCL
        # keeps them on shared memory (24 GB/s each way, NICs no faster).
        a, c = host.gpus[0], host.gpus[2]
        self.assertEqual(nccl_bandwidths.Pair('PHB', 24.0, 'SHM'),
                         found[a, c])
        self.assertEqual(nccl_bandwidths.Pair('PIX', 24.0, 'GDR'),
                         found[a, host.nics[0]])

    def test_old_qemu_with_the_agent(self):
        host = self.host_named('gen4-switches-gen5-nics')
        self.assertGuestIsHost(host, host.gpus, host.nics, qemu=OLD_QEMU)

    def test_dual_port_nic(self):
        host = self.host_named('dual-port-nic')
        self.assertEqual(2, len([n for n in host.nics
                                 if n.startswith('0000:05:00.')]),
                         host.nics)
        self.assertGuestIsHost(host, host.gpus, host.nics)

    def test_a_subset_of_the_devices(self):
        host = self.host_named('gen4-switches-gen5-nics')
        self.assertGuestIsHost(host, host.gpus[1:4], host.nics[:1])


class TestWithoutTheAgent(GuestEqualsHost):
    """Without the agent's file the guest's sysfs is all NCCL reads.

    Path types then differ (every device hangs off a guest root port),
    but each device's link is the host's: on QEMU 9.2 and later exactly,
    on older QEMU the nearest speed QEMU accepts.
    """

    def links(self, host, qemu):
        addresses = host.gpus + host.nics
        _, root, where = self.guest(host, addresses, qemu)
        on_host = nccl_paths.Topology(host.root)
        in_guest = nccl_paths.Topology(root)
        for address in host.gpus:
            on_host.add_gpu(address)
            in_guest.add_gpu(where[address])
        for address in host.nics:
            on_host.add_nic(address)
            in_guest.add_nic(where[address])
        return (nccl_bandwidths.device_links(on_host, addresses),
                {address: link for address, link in zip(
                    addresses, nccl_bandwidths.device_links(
                        in_guest, [where[a] for a in addresses]).values())})

    def test_sysfs_links_are_the_hosts(self):
        for name in NEW_HOSTS:
            on_host, in_guest = self.links(self.host_named(name), NEW_QEMU)
            self.assertEqual(on_host, in_guest, name)

    def test_gen5_host_links_on_old_qemu_read_gen4(self):
        host = self.host_named('dual-port-nic')
        on_host, in_guest = self.links(host, OLD_QEMU)
        self.assertEqual({('32.0 GT/s PCIe', '16')}, set(on_host.values()))
        self.assertEqual({('16.0 GT/s PCIe', '16')}, set(in_guest.values()))


class TestRootPortLinks(GuestEqualsHost):

    def plan(self, name, **facts):
        host = self.host_named(name)
        nodes = sorted({n.id for n in host.topology.numa_nodes})
        return plan.decide(
            tgp.request(clique='auto', numa='preferred'),
            [devices.describe(a, host.topology) for a in host.gpus],
            host.gpus_host, tgp.facts(host_node_of_cell=tuple(nodes),
                                      used_pci_indexes=frozenset({0}),
                                      phys_bits=52, **facts),
            plan.Options())

    def test_each_port_at_its_devices_host_link(self):
        result = self.plan('gen5-cards-in-gen4-slots',
                           qemu_version=NEW_QEMU)
        ports = [p.index for bus in result.buses.buses for p in bus.ports]
        self.assertEqual(4, len(ports))
        self.assertEqual({i: root_port_links.PortLink('16', '16')
                          for i in ports}, result.port_links)
        self.assertEqual((), result.info)

    def test_old_qemu_says_what_it_cannot_show(self):
        result = self.plan('dual-port-nic', qemu_version=OLD_QEMU)
        self.assertEqual({'16'}, {link.speed for link
                                  in result.port_links.values()})
        self.assertEqual(1, len(result.info), result.info)
        self.assertIn('32.0 GT/s PCIe x16', result.info[0])
        self.assertIn('need QEMU 9.2.0', result.info[0])

    def test_none_without_qemu_override(self):
        result = self.plan('gen5-cards-in-gen4-slots',
                           libvirt_version=(8, 1, 0))
        self.assertTrue(result.buses.buses)
        self.assertEqual({}, result.port_links)

    def test_values_qemu_accepts(self):
        link = root_port_links.port_link
        gen5 = {'link_speed': '32.0 GT/s PCIe', 'link_width': 16}
        self.assertEqual(root_port_links.PortLink('32', '16'),
                         link(gen5, NEW_QEMU))
        self.assertEqual(root_port_links.PortLink('16', '16', exact=False),
                         link(gen5, OLD_QEMU))
        self.assertEqual(root_port_links.PortLink('2_5', '1'), link(
            {'link_speed': '2.5 GT/s PCIe', 'link_width': 1}, OLD_QEMU))
        # Between two widths, the narrower: never more than the host's.
        self.assertEqual(root_port_links.PortLink('8', '4', exact=False),
                         link({'link_speed': '8.0 GT/s PCIe',
                               'link_width': 6}, OLD_QEMU))
        self.assertIsNone(link({'link_speed': None, 'link_width': None},
                               NEW_QEMU))
