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

"""The domain XML Nova defines through our driver, on corpus GPU hosts.

Every assertion reads the XML Nova passed to libvirt and checks it
against Nova's own decisions in the same document (``<numatune>``,
``<cputune>``, ``<cpu><numa>``) and against the host topology, so the
layout is tested where the guest sees it, not in our plan objects.
"""

import json
import re

from lxml import etree
from nova.virt import hardware

from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.guest import topology_description
from tests.cloud import nova_cloud as base
from tests.fixtures import qemu_override
from tests.fixtures import waits

NS = {'qemu': libvirt_config.QEMU_NS, 'gpu_p2p': libvirt_config.GPU_P2P_NS}
CLIQUE_KEY = 'hw:gpu_p2p_clique'
AFFINITY_KEY = 'hw:gpu_numa_affinity'
#: pcie-8gpu-4switch-2socket: GPU pairs behind one switch each.
NODE0_GPUS = ('0000:03:00.0', '0000:04:00.0', '0000:07:00.0',
              '0000:08:00.0')
NODE1_GPUS = ('0000:83:00.0', '0000:84:00.0', '0000:87:00.0',
              '0000:88:00.0')
PAIRS = (NODE0_GPUS[:2], NODE0_GPUS[2:], NODE1_GPUS[:2], NODE1_GPUS[2:])
NICS = ('0000:09:00.0', '0000:09:00.1')
EIGHT_GPU_HOST = 'pcie-8gpu-4switch-2socket'


def _int(value: str) -> int:
    """A libvirt number attribute, hex (``0x02``) or decimal."""
    return int(value, 0)


def pci_controllers(xml: etree._Element) -> dict[int, etree._Element]:
    controllers: dict[int, etree._Element] = {}
    for controller in xml.findall('./devices/controller[@type="pci"]'):
        index = int(controller.get('index'))
        if index in controllers:
            raise AssertionError('PCI controller index %d twice' % index)
        controllers[index] = controller
    return controllers


def expander_buses(xml: etree._Element) -> dict[int, etree._Element]:
    return {index: c for index, c in pci_controllers(xml).items()
            if c.get('model') == 'pcie-expander-bus'}


def clique_ids(xml: etree._Element) -> dict[str, int]:
    """``x-nv-gpudirect-clique`` by device alias."""
    return qemu_override.cliques_by_alias(xml)


def root_port_aliases(xml: etree._Element) -> set[str]:
    """libvirt's aliases (``pci.N``) of the pcie-root-ports we add."""
    return {'pci.%d' % index for index, c in pci_controllers(xml).items()
            if c.get('model') == 'pcie-root-port'
            and c.find('./address') is not None
            and int(c.find('./address').get('bus'), 16)
            in expander_buses(xml)}


def gpu_cliques(xml: etree._Element) -> dict[str, int]:
    """Clique ID by host GPU address, through each hostdev's alias."""
    ids = clique_ids(xml)
    result = {}
    for address, dev in base.hostdevs(xml).items():
        alias = dev.find('./alias')
        if alias is not None and alias.get('name') in ids:
            result[address] = ids[alias.get('name')]
    return result


def guest_cell_of_host_node(xml: etree._Element) -> dict[int, int]:
    """Nova's own mapping, from ``<numatune><memnode>``."""
    return {int(memnode.get('nodeset')): int(memnode.get('cellid'))
            for memnode in xml.findall('./numatune/memnode')}


def guest_place(xml: etree._Element, address: str) -> tuple[int, int]:
    """(busNr of its expander, slot of its root port) of a host device."""
    controllers = pci_controllers(xml)
    port = controllers[_int(
        base.hostdevs(xml)[address].find('./address').get('bus'))]
    pxb = controllers[_int(port.find('./address').get('bus'))]
    return (int(pxb.find('./target').get('busNr')),
            _int(port.find('./address').get('slot')))


def decision(xml: etree._Element) -> etree._Element | None:
    return xml.find('./metadata/gpu_p2p:decision', NS)


class LayoutAssertions:
    """Checks of our additions against Nova's choices in the same XML.

    Mixed into test cases on :class:`base.GPUHostsTestBase`.
    """

    def host_node(self, hostname: str, address: str) -> int:
        return self.topologies[hostname].functions[address].numa_node

    def expander_of(self, xml: etree._Element,
                    address: str) -> etree._Element:
        """The pxb-pcie the device sits under, checking each hop."""
        controllers = pci_controllers(xml)
        dev = base.hostdevs(xml)[address]
        guest = dev.find('./address[@type="pci"]')
        self.assertIsNotNone(guest, '%s has no guest address' % address)
        self.assertEqual(0, _int(guest.get('slot')))
        port = controllers.get(_int(guest.get('bus')))
        self.assertIsNotNone(port, '%s: no controller %s' % (
            address, guest.get('bus')))
        self.assertEqual('pcie-root-port', port.get('model'))
        port_address = port.find('./address')
        pxb = controllers.get(_int(port_address.get('bus')))
        self.assertIsNotNone(pxb)
        self.assertEqual('pcie-expander-bus', pxb.get('model'))
        self.assertEqual('pxb-pcie', pxb.find('./model').get('name'))
        return pxb

    def assert_controllers_sane(self, xml: etree._Element) -> None:
        """Indexes contiguous (libvirt fills gaps), slots distinct, busNr."""
        controllers = pci_controllers(xml)
        self.assertEqual(list(range(len(controllers))), sorted(controllers))
        self.assertEqual('pcie-root', controllers[0].get('model'))
        slots: dict[int, list[int]] = {}
        for controller in controllers.values():
            if controller.get('model') != 'pcie-root-port':
                continue
            address = controller.find('./address')
            if address is None:
                continue
            slots.setdefault(_int(address.get('bus')), []).append(
                _int(address.get('slot')))
        for bus, used in slots.items():
            self.assertEqual(len(used), len(set(used)),
                             'slot used twice on bus %d: %s' % (bus, used))
        # busNr counts down from 254: each expander owns its own number
        # and one per root port below it.
        top = 256
        for index, pxb in sorted(expander_buses(xml).items()):
            ports = len(slots.get(index, ()))
            self.assertGreater(ports, 0)
            bus_nr = int(pxb.find('./target').get('busNr'))
            self.assertEqual(top - 1 - ports, bus_nr)
            top = bus_nr

    def assert_devices_on_their_cells(self, xml: etree._Element,
                                      hostname: str,
                                      addresses) -> dict[str, int]:
        """Each device's expander is on the cell Nova mapped to its node.

        Returns the expander index of every device.
        """
        cell_of = guest_cell_of_host_node(xml)
        result = {}
        for address in addresses:
            pxb = self.expander_of(xml, address)
            node = self.host_node(hostname, address)
            self.assertIn(node, cell_of, 'Nova mapped no guest cell to '
                          'host node %d of %s' % (node, address))
            self.assertEqual(cell_of[node],
                             int(pxb.find('./target/node').text),
                             '%s on host node %d' % (address, node))
            result[address] = int(pxb.get('index'))
        return result

    def assert_pinning_follows_gpus(self, xml: etree._Element,
                                    hostname: str) -> None:
        """The vCPUs of a GPU's guest cell run on the GPU's host node.

        The host's CPUs per node come from Nova's host NUMA topology (the
        fake libvirt's capabilities), as Nova pinned with them.
        """
        caps = self.computes[hostname].driver._host.get_capabilities()
        host_cpus = {cell.id: {cpu.id for cpu in cell.cpus}
                     for cell in caps.host.topology.cells}
        cell_cpus = {int(cell.get('id')): hardware.parse_cpu_spec(
            cell.get('cpus')) for cell in xml.findall('./cpu/numa/cell')}
        pins = {int(pin.get('vcpu')): hardware.parse_cpu_spec(
            pin.get('cpuset')) for pin in xml.findall('./cputune/vcpupin')}
        checked = 0
        for address in base.hostdevs(xml):
            function = self.topologies[hostname].functions.get(address)
            if function is None or not function.is_nvidia_gpu:
                continue
            cell = int(self.expander_of(xml, address).find(
                './target/node').text)
            for vcpu in cell_cpus[cell]:
                self.assertTrue(
                    pins[vcpu] <= host_cpus[function.numa_node],
                    'vCPU %d of guest cell %d (with %s) is pinned to %s, '
                    'not to host node %d\'s CPUs %s' % (
                        vcpu, cell, address, sorted(pins[vcpu]),
                        function.numa_node,
                        sorted(host_cpus[function.numa_node])))
            checked += 1
        self.assertGreater(checked, 0)

    def assert_distances_copied(self, xml: etree._Element,
                                hostname: str) -> None:
        """Guest cell distances are the host's between the mapped nodes."""
        host = {node.id: node for node in self.topologies[hostname]
                .numa_nodes}
        position = {node.id: i for i, node in enumerate(
            self.topologies[hostname].numa_nodes)}
        node_of_cell = {cell: node for node, cell in
                        guest_cell_of_host_node(xml).items()}
        cells = xml.findall('./cpu/numa/cell')
        self.assertEqual(len(node_of_cell), len(cells))
        for cell in cells:
            node = node_of_cell[int(cell.get('id'))]
            siblings = {
                int(s.get('id')): int(s.get('value'))
                for s in cell.findall('./distances/sibling')}
            self.assertEqual(
                {other: host[node].distances[position[other_node]]
                 for other, other_node in node_of_cell.items()},
                siblings)

    def assert_no_additions(self, xml: etree._Element) -> None:
        self.assertIsNone(xml.find('./qemu:override', NS))
        self.assertEqual({}, expander_buses(xml))
        self.assertIsNone(decision(xml))
        self.assertEqual([], xml.findall('./devices/hostdev/alias'))
        self.assertIsNone(xml.find('./devices/controller/pcihole64'))
        self.assertEqual([], xml.findall('./cpu/numa/cell/distances'))

    def assert_auto_cliques(self, xml: etree._Element, gpus) -> None:
        """Pairs behind one switch share an ID, numbered by address."""
        expected = {}
        next_id = 0
        for pair in PAIRS:
            if set(pair) <= set(gpus):
                expected.update((address, next_id) for address in pair)
                next_id += 1
        self.assertEqual(expected, gpu_cliques(xml))
        self.assert_clique_devices(xml)

    def assert_clique_devices(self, xml: etree._Element) -> None:
        """Each overridden alias names a vfio NVIDIA hostdev, ua- alias."""
        aliases = {}
        for dev in base.hostdevs(xml).values():
            alias = dev.find('./alias')
            if alias is not None:
                aliases[alias.get('name')] = dev
        for alias in clique_ids(xml):
            self.assertTrue(alias.startswith('ua-'), alias)
            self.assertIn(alias, aliases)
            self.assertEqual('vfio',
                             aliases[alias].find('./driver').get('name'))

    def assert_full_layout(self, server: dict, gpus: int) -> etree._Element:
        """What a P2P flavor with affinity gets on the 8-GPU host.

        Every passthrough device (GPUs and NIC: ``align_device_types``
        defaults to both) sits on the expander of its guest cell.
        """
        hostname = server['OS-EXT-SRV-ATTR:host']
        xml = self.domain_xml(server)
        devices = base.hostdevs(xml)
        self.assertEqual(gpus, len([
            a for a in devices if a in NODE0_GPUS + NODE1_GPUS]))
        self.assert_devices_on_their_cells(xml, hostname, devices)
        self.assert_controllers_sane(xml)
        self.assert_pinning_follows_gpus(xml, hostname)
        self.assertIsNotNone(xml.find(
            './devices/controller[@model="pcie-root"]/pcihole64'))
        self.assertIsNotNone(decision(xml))
        return xml


class GuestConfigTest(waits.PatientWaits, LayoutAssertions,
                      base.GPUHostsTestBase):
    """One boot per flavor kind on the 8-GPU, two-socket PCIe host."""

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('host1', EIGHT_GPU_HOST)

    def test_auto_clique_required_affinity_eight_gpus_and_nic(self):
        """The whole host in one guest: every rule visible at once."""
        flavor = self.gpu_flavor(8, numa_nodes=2, nics=1, extra_specs={
            CLIQUE_KEY: 'auto', AFFINITY_KEY: 'required'})
        server = self.boot(flavor)
        xml = self.assert_full_layout(server, gpus=8)

        self.assert_auto_cliques(xml, NODE0_GPUS + NODE1_GPUS)
        self.assertEqual({0, 1, 2, 3}, set(gpu_cliques(xml).values()))
        # No clique property on the NIC (QEMU refuses it there).
        nic = [a for a in base.hostdevs(xml) if a in NICS]
        self.assertEqual(1, len(nic))
        self.assertIsNone(base.hostdevs(xml)[nic[0]].find('./alias'))

        # Two expanders, one per root complex; Nova put guest cell 0 on
        # host node 0 and cell 1 on node 1 here.
        self.assertEqual({0: 0, 1: 1}, guest_cell_of_host_node(xml))
        index = self.assert_devices_on_their_cells(
            xml, 'host1', NODE0_GPUS + NODE1_GPUS + tuple(nic))
        buses = expander_buses(xml)
        self.assertEqual(2, len(buses))
        # Node 0: four GPUs and the NIC under one expander.
        self.assertEqual({index[a] for a in NODE0_GPUS}, {index[nic[0]]})
        self.assertEqual(1, len({index[a] for a in NODE1_GPUS}))
        self.assertEqual(
            [(1, 250, 0), (7, 245, 1)],
            [(i, int(pxb.find('./target').get('busNr')),
              int(pxb.find('./target/node').text))
             for i, pxb in sorted(buses.items())])

        # Eight 128 GiB BAR1s and their small BARs: a 2 TiB hole.
        self.assertEqual(str(2 << 30), xml.find(
            './devices/controller[@model="pcie-root"]/pcihole64').text)

        self.assert_distances_copied(xml, 'host1')
        self.assertEqual(
            [[('0', '10'), ('1', '21')], [('0', '21'), ('1', '10')]],
            [[(s.get('id'), s.get('value'))
              for s in cell.findall('./distances/sibling')]
             for cell in xml.findall('./cpu/numa/cell')])

        record = decision(xml)
        self.assertEqual('auto', record.find(
            './gpu_p2p:request', NS).get('clique'))
        self.assertEqual(
            {a: str(gpu_cliques(xml)[a]) for a in NODE0_GPUS + NODE1_GPUS},
            {d.get('address'): d.get('clique')
             for d in record.findall('./gpu_p2p:device', NS)
             if d.get('kind') == 'gpu'})

        # The guest's topology description finds each device where the
        # XML put it, with the host's switch pairs (and no address).
        (entry,) = xml.findall(
            './sysinfo[@type="fwcfg"]/entry[@name="%s"]'
            % topology_description.ENTRY_NAME)
        described = topology_description.decode(entry.text)
        self.assertEqual(
            {guest_place(xml, a): 'gpu' for a in NODE0_GPUS + NODE1_GPUS}
            | {guest_place(xml, nic[0]): 'nic'},
            {(d['bus_nr'], d['slot']): d['role']
             for d in described['devices']})
        self.assertEqual(
            {'PIX': 4, 'PHB': 12, 'SYS': 20},
            {cls: sum(1 for *_, c in described['pairs'] if c == cls)
             for cls in ('PIX', 'PHB', 'SYS')})
        self.assertNotIn('0000:', json.dumps(described))

    def test_fixed_clique_preferred_affinity(self):
        """The operator's clique ID wins over the topology, with a warning."""
        flavor = self.gpu_flavor(8, numa_nodes=2, extra_specs={
            CLIQUE_KEY: '7', AFFINITY_KEY: 'preferred'})
        server = self.boot(flavor)
        xml = self.assert_full_layout(server, gpus=8)
        self.assertEqual(dict.fromkeys(NODE0_GPUS + NODE1_GPUS, 7),
                         gpu_cliques(xml))
        self.assert_clique_devices(xml)
        self.assertEqual('7', decision(xml).find(
            './gpu_p2p:request', NS).get('clique'))
        # The operator's assertion disagrees with the topology: said so.
        self.assertIn('hw:gpu_p2p_clique=7 puts', self.stdlog.logger.output)

    def test_no_clique_required_affinity(self):
        """Affinity alone: buses and distances, nothing QEMU-specific."""
        flavor = self.gpu_flavor(8, numa_nodes=2, extra_specs={
            CLIQUE_KEY: 'none', AFFINITY_KEY: 'required'})
        server = self.boot(flavor)
        xml = self.assert_full_layout(server, gpus=8)
        # Nothing QEMU-specific but the root ports' host links.
        self.assertEqual({}, clique_ids(xml))
        links = qemu_override.root_port_links(xml)
        self.assertEqual(root_port_aliases(xml), set(links))
        self.assertEqual(len(xml.findall('./qemu:override/qemu:device',
                                         NS)), len(links))
        self.assertEqual([], xml.findall('./devices/hostdev/alias'))
        self.assertEqual(2, len(expander_buses(xml)))
        self.assert_distances_copied(xml, 'host1')

    def test_auto_clique_without_affinity_keeps_nova_placement(self):
        """Cliques alone leave every device where Nova put it."""
        flavor = self.gpu_flavor(8, numa_nodes=2, extra_specs={
            CLIQUE_KEY: 'auto'})
        server = self.boot(flavor)
        xml = self.domain_xml(server)
        self.assert_auto_cliques(xml, NODE0_GPUS + NODE1_GPUS)
        self.assertEqual({}, expander_buses(xml))
        self.assertEqual(
            [], xml.findall('./devices/hostdev/address[@type="pci"]'))
        self.assertIsNone(xml.find('./devices/controller/pcihole64'))
        # Distances follow the guest NUMA cells, not the affinity key.
        self.assert_distances_copied(xml, 'host1')
        self.assertIsNotNone(decision(xml))

    def test_required_clique_on_one_switch_pair(self):
        """Two GPUs behind one switch honour ``required``.

        Nova claims the lowest addresses of a pool first, a switch pair
        here; any other pair would be refused (PHB or SYS).
        """
        flavor = self.gpu_flavor(2, extra_specs={
            CLIQUE_KEY: 'required', AFFINITY_KEY: 'required'})
        server = self.boot(flavor)
        xml = self.assert_full_layout(server, gpus=2)
        cliques = gpu_cliques(xml)
        # Nova claimed a pair behind one switch: one clique, ID 0.
        self.assertIn(tuple(sorted(cliques)), PAIRS)
        self.assertEqual({0}, set(cliques.values()))
        self.assertEqual(1, len(expander_buses(xml)))
        self.assertEqual(['253'], [
            pxb.find('./target').get('busNr')
            for pxb in expander_buses(xml).values()])
        # One guest cell: no distances to copy.
        self.assertEqual([], xml.findall('./cpu/numa/cell/distances'))

    def test_guest_cell_zero_on_host_node_one(self):
        """The guest cell comes from Nova's mapping, not the host node.

        Two one-cell servers of four GPUs fill both host nodes: the one
        on host node 1 has its GPUs on guest cell 0's expander.
        """
        flavor = self.gpu_flavor(4, extra_specs={
            CLIQUE_KEY: 'auto', AFFINITY_KEY: 'required'})
        nodes = set()
        for server in (self.boot(flavor), self.boot(flavor)):
            xml = self.assert_full_layout(server, gpus=4)
            (node,) = guest_cell_of_host_node(xml)
            nodes.add(node)
            gpus = NODE0_GPUS if node == 0 else NODE1_GPUS
            self.assertEqual(set(gpus), set(base.hostdevs(xml)))
            (pxb,) = expander_buses(xml).values()
            self.assertEqual('0', pxb.find('./target/node').text)
            self.assert_auto_cliques(xml, gpus)
        self.assertEqual({0, 1}, nodes)

    def test_plain_flavor_gets_no_additions(self):
        """Without our keys the domain is exactly Nova's."""
        flavor = self.gpu_flavor(8, numa_nodes=2, nics=1)
        xml = self.domain_xml(self.boot(flavor))
        self.assertEqual(9, len(base.hostdevs(xml)))
        self.assert_no_additions(xml)


class RefusalTest(waits.PatientWaits, LayoutAssertions,
                  base.GPUHostsTestBase):
    """What the tenant and the operator are told, and where."""

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('host1', EIGHT_GPU_HOST)

    def assert_build_fault(self, flavor: str, *fragments: str,
                           image: str | None = None) -> str:
        """The build fails at once, its fault saying what to change.

        The fault is all a tenant sees, and Nova keeps 255 characters of
        it: the driver's whole refusal, remedy included, must be there.
        """
        server = self.boot(flavor, image=image, expected_state='ERROR')
        message = server['fault']['message']
        self.assertIn('Build of instance %s aborted' % server['id'],
                      message)
        for fragment in fragments:
            self.assertIn(fragment, message)
        logged = re.search(r' ERROR \[nova_gpu_p2p\.compute\.driver\] .*'
                           r'GPU P2P: (.*)$', self.stdlog.logger.output,
                           re.MULTILINE)
        self.assertIsNotNone(logged)
        self.assertTrue(message.endswith(logged.group(1)),
                        'fault %r lacks the end of the refusal %r' % (
                            message, logged.group(1)))
        return message

    def assert_warned(self, *fragments: str) -> None:
        lines = [line for line in self.stdlog.logger.output.splitlines()
                 if ' WARNING ' in line and 'GPU P2P: ' in line]
        self.assertTrue(
            any(all(f in line for f in fragments) for line in lines),
            'no WARNING with %s in:\n%s' % (fragments, '\n'.join(lines)))

    def test_required_without_gpu_aborts_the_build(self):
        flavor = self.gpu_flavor(0, extra_specs={
            CLIQUE_KEY: 'required', AFFINITY_KEY: 'required'})
        self.assert_build_fault(
            flavor, 'hw:gpu_p2p_clique and hw:gpu_numa_affinity',
            'no passthrough GPU')

    def test_auto_without_gpu_boots_with_a_warning(self):
        flavor = self.gpu_flavor(0, extra_specs={
            CLIQUE_KEY: 'auto', AFFINITY_KEY: 'preferred'})
        server = self.boot(flavor)
        self.assert_warned('no passthrough GPU', 'pci_passthrough:alias')
        self.assertIsNone(self.domain_xml(server).find(
            './qemu:override', NS))

    def test_required_clique_with_hidden_hypervisor_aborts(self):
        flavor = self.gpu_flavor(2, extra_specs={
            CLIQUE_KEY: 'required', 'hw:hide_hypervisor_id': 'true'})
        self.assert_build_fault(flavor, 'hypervisor is hidden',
                                'hw:hide_hypervisor_id')

    def test_auto_clique_with_hidden_hypervisor_warns(self):
        flavor = self.gpu_flavor(2, extra_specs={
            CLIQUE_KEY: 'auto', 'hw:hide_hypervisor_id': 'true'})
        server = self.boot(flavor)
        self.assert_warned('hypervisor is hidden', 'hw:hide_hypervisor_id')
        xml = self.domain_xml(server)
        self.assertIsNotNone(xml.find('./features/kvm/hidden'))

    def test_required_affinity_on_pc_machine_type_aborts(self):
        flavor = self.gpu_flavor(2, extra_specs={AFFINITY_KEY: 'required'})
        self.assert_build_fault(flavor, 'q35', 'hw_machine_type=q35',
                                image=self.glance.image1['id'])

    def test_preferred_affinity_on_pc_machine_type_warns(self):
        flavor = self.gpu_flavor(2, extra_specs={AFFINITY_KEY: 'preferred'})
        server = self.boot(flavor, image=self.glance.image1['id'])
        self.assert_warned('hw_machine_type=q35')
        self.assertEqual({}, expander_buses(self.domain_xml(server)))

    def _no_numa_flavor(self, affinity: str) -> str:
        # No hw:cpu_policy, no hw:numa_nodes: the instance asks for shared
        # VCPUs, so give the host some.
        self.flags(cpu_dedicated_set='0-3', cpu_shared_set='4-7',
                   group='compute')
        self._run_periodics()
        return self._create_flavor(vcpu=2, extra_spec={
            'pci_passthrough:alias': '%s:2' % base.GPU_ALIAS,
            AFFINITY_KEY: affinity})

    def test_required_affinity_without_numa_topology_aborts(self):
        flavor = self._no_numa_flavor('required')
        self.assert_build_fault(flavor, 'NUMA topology',
                                'hw:cpu_policy=dedicated')

    def test_preferred_affinity_without_numa_topology_warns(self):
        flavor = self._no_numa_flavor('preferred')
        server = self.boot(flavor)
        self.assert_warned('needs an instance NUMA topology')
        self.assertEqual({}, expander_buses(self.domain_xml(server)))


class OldLibvirtTest(waits.PatientWaits, LayoutAssertions,
                     base.GPUHostsTestBase):
    """libvirt 8.1 has no ``<qemu:override>``."""

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('host1', EIGHT_GPU_HOST,
                               libvirt_version=8001000)

    def test_required_clique_exhausts_the_retries(self):
        flavor = self.gpu_flavor(2, extra_specs={CLIQUE_KEY: 'required'})
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('Exceeded maximum number of retries',
                      server['fault']['message'])
        self.assertRegex(
            self.stdlog.logger.output,
            r'Error from last host: host1 .*hw:gpu_p2p_clique=required '
            r'needs libvirt 8\.2\.0 or later.*upgrade libvirt')

    def test_auto_clique_boots_without_override_and_warns(self):
        flavor = self.gpu_flavor(2, extra_specs={CLIQUE_KEY: 'auto'})
        xml = self.domain_xml(self.boot(flavor))
        self.assertIsNone(xml.find('./qemu:override', NS))
        self.assertTrue(re.search(
            r' WARNING .*GPU P2P: hw:gpu_p2p_clique=auto needs libvirt '
            r'8\.2\.0 or later.*upgrade libvirt',
            self.stdlog.logger.output))
