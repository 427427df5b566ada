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

"""NCCL's pair classification, on hand-made sysfs trees and XML texts.

The helper judges our guests by NCCL's rules, so it is checked here on
trees small enough to classify by reading NCCL's source, and on the
corpus hosts against our own (independently written) link classes.
"""

import itertools
import os

import fixtures

from lab import nccl_paths
from nova_gpu_p2p.topology import link_class as lc
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_corpus

GPU_CLASS, NIC_CLASS, BRIDGE = '0x030200', '0x020000', '0x060400'


def write_tree(root: str, devices: dict[str, str],
               numa: dict[str, int] | None = None) -> None:
    """A minimal sysfs tree: ``{'pci0000:00/0000:00:01.0/...': class}``.

    Every component of a path below its host bridge is a function; those
    not listed are PCI bridges (root or switch ports). ``numa`` gives a
    host bridge's ``numa_node`` (-1 where not given). Each bus gets its
    ``class/pci_bus`` link, which is how NCCL finds a device.
    """
    numa = numa or {}
    for path, class_code in devices.items():
        parts = path.split('/')
        for depth in range(1, len(parts)):
            directory = os.path.join(root, 'devices', *parts[:depth + 1])
            os.makedirs(directory, exist_ok=True)
            for name, value in (
                    ('class', class_code if depth == len(parts) - 1
                     else BRIDGE),
                    ('numa_node', str(numa.get(parts[0], -1)))):
                if not os.path.exists(os.path.join(directory, name)):
                    with open(os.path.join(directory, name), 'w') as f:
                        f.write(value + '\n')
            bus = parts[depth][:7]
            above = os.path.join(root, 'devices', *parts[:depth], 'pci_bus',
                                 bus)
            link = os.path.join(root, 'class', 'pci_bus', bus)
            if not os.path.lexists(link):
                os.makedirs(above, exist_ok=True)
                os.makedirs(os.path.dirname(link), exist_ok=True)
                os.symlink(os.path.relpath(above, os.path.dirname(link)),
                           link)


def pair(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


# Two switches on two root ports of host bridge 00 (node 0); below the
# first, a second-level switch; a GPU and a NIC on root ports; a GPU on the
# root bus itself; host bridge 80 on node 1, host bridge 40 on node 0 too.
RC0 = 'pci0000:00/0000:00:01.0/0000:01:00.0'
LEAF = RC0 + '/0000:02:00.0/0000:03:00.0'
TREE = {
    LEAF + '/0000:04:00.0/0000:05:00.0': GPU_CLASS,   # A, leaf switch
    LEAF + '/0000:04:01.0/0000:06:00.0': GPU_CLASS,   # B, leaf switch
    LEAF + '/0000:04:02.0/0000:07:00.0': NIC_CLASS,   # N, leaf switch
    RC0 + '/0000:02:01.0/0000:08:00.0': GPU_CLASS,    # C, top switch
    'pci0000:00/0000:00:02.0/0000:09:00.0/0000:0a:00.0/0000:0b:00.0':
        GPU_CLASS,                                    # D, other switch
    'pci0000:00/0000:00:03.0/0000:0c:00.0': GPU_CLASS,  # E, root port
    'pci0000:00/0000:00:04.0/0000:0d:00.0': NIC_CLASS,  # M, root port
    'pci0000:00/0000:00:05.0': GPU_CLASS,               # R, root bus
    'pci0000:40/0000:40:01.0/0000:41:00.0': GPU_CLASS,  # F, node 0
    'pci0000:80/0000:80:01.0/0000:81:00.0': GPU_CLASS,  # G, node 1
}
A, B, N, C, D = ('0000:05:00.0', '0000:06:00.0', '0000:07:00.0',
                 '0000:08:00.0', '0000:0b:00.0')
E, M, R, F, G = ('0000:0c:00.0', '0000:0d:00.0', '0000:00:05.0',
                 '0000:41:00.0', '0000:81:00.0')
NUMA = {'pci0000:00': 0, 'pci0000:40': 0, 'pci0000:80': 1}


class TestSysfs(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        write_tree(self.root, TREE, NUMA)

    def types(self, gpus, nics=()):
        return nccl_paths.pair_types(gpus, nics, sysfs_root=self.root)

    def test_one_switch_is_pix(self):
        self.assertEqual({pair(A, B): 'PIX', pair(A, N): 'PIX',
                          pair(B, N): 'PIX'}, self.types([A, B], [N]))

    def test_several_switches_without_host_bridge_are_pxb(self):
        self.assertEqual({pair(A, C): 'PXB', pair(C, N): 'PXB',
                          pair(A, N): 'PIX'}, self.types([A, C], [N]))

    def test_switches_on_two_root_ports_are_phb(self):
        self.assertEqual('PHB', self.types([A, D])[pair(A, D)])

    def test_device_on_a_root_port_hangs_off_the_cpu(self):
        found = self.types([A, E, D], [M])
        self.assertEqual({'PHB'}, set(found.values()))
        self.assertIn('<cpu numaid="0"><pci busid="0000:0c:00.0"',
                      self._dump([E]))

    def test_device_on_the_root_bus_hangs_off_the_cpu(self):
        self.assertEqual({pair(R, E): 'PHB'}, self.types([R, E]))

    def test_two_host_bridges_of_one_node_are_phb(self):
        # nvidia-smi says NODE; NCCL has one CPU node per NUMA node.
        self.assertEqual({pair(E, F): 'PHB'}, self.types([E, F]))

    def test_two_nodes_are_sys(self):
        self.assertEqual({pair(A, G): 'SYS', pair(F, G): 'SYS'},
                         {k: v for k, v in self.types([A, F, G]).items()
                          if G in k})

    def test_unknown_numa_node_is_cpu_minus_one(self):
        root = self.useFixture(fixtures.TempDir()).path
        write_tree(root, {'pci0000:00/0000:00:01.0/0000:01:00.0': GPU_CLASS,
                          'pci0000:80/0000:80:01.0/0000:81:00.0': GPU_CLASS},
                   {'pci0000:00': 0})
        topology = nccl_paths.Topology(root)
        topology.add_gpu('0000:81:00.0')
        self.assertIn('<cpu numaid="-1">', topology.to_xml())
        self.assertEqual({pair('0000:01:00.0', '0000:81:00.0'): 'SYS'},
                         nccl_paths.pair_types(
                             ['0000:01:00.0', '0000:81:00.0'],
                             sysfs_root=root))

    def test_two_root_ports_of_one_expander_bus_are_phb(self):
        # As a guest sees pxb-pcie busNr 0xfc with two root ports.
        root = self.useFixture(fixtures.TempDir()).path
        write_tree(root, {'pci0000:fc/0000:fc:00.0/0000:fd:00.0': GPU_CLASS,
                          'pci0000:fc/0000:fc:01.0/0000:fe:00.0': NIC_CLASS},
                   {'pci0000:fc': 0})
        self.assertEqual({pair('0000:fd:00.0', '0000:fe:00.0'): 'PHB'},
                         nccl_paths.pair_types(['0000:fd:00.0'],
                                               ['0000:fe:00.0'],
                                               sysfs_root=root))

    def test_device_not_in_sysfs_hangs_off_an_unknown_cpu(self):
        topology = nccl_paths.Topology(self.root)
        topology.add_gpu('0000:99:00.0')
        # No sysfs path and no NVML: NCCL sets empty links (xml.cc
        # 691-697, 720-726), read later as 60 per lane and x16.
        self.assertEqual('<system version="1"><cpu numaid="-1">'
                         '<pci busid="0000:99:00.0" class="0x03" '
                         'link_speed="" link_width=""><gpu />'
                         '</pci></cpu></system>', topology.to_xml())

    def _dump(self, gpus):
        topology = nccl_paths.Topology(self.root)
        for gpu in gpus:
            topology.add_gpu(gpu)
        return topology.to_xml()


class TestLinks(base.TestCase):
    """Links, bandwidths and NIC ports as NCCL v2.30.7 reads them."""

    def test_link_is_the_lower_of_device_and_port(self):
        root = self.useFixture(fixtures.TempDir()).path
        write_tree(root, {'pci0000:00/0000:00:01.0/0000:01:00.0': NIC_CLASS},
                   {'pci0000:00': 0})
        port = os.path.join(root, 'devices', 'pci0000:00', '0000:00:01.0')
        for directory, speed, width in (
                (port, '16.0 GT/s PCIe', '16'),
                (os.path.join(port, '0000:01:00.0'), '32.0 GT/s PCIe', '8')):
            for name, value in (('max_link_speed', speed),
                                ('max_link_width', width)):
                with open(os.path.join(directory, name), 'w') as f:
                    f.write(value + '\n')
        topology = nccl_paths.Topology(root)
        topology.add_nic('0000:01:00.0')
        self.assertIn('link_speed="16.0 GT/s PCIe" link_width="8"',
                      topology.to_xml())

    def test_link_bandwidths(self):
        self.assertEqual(
            [48.0, 24.0, 12.0, 3.0, 96.0, 0.75, 24.0, 12.0],
            [nccl_paths.link_bw(speed, width) for speed, width in (
                ('32.0 GT/s PCIe', '16'), ('16.0 GT/s PCIe', '16'),
                ('8.0 GT/s PCIe', '16'), ('2.5 GT/s PCIe', '16'),
                ('64.0 GT/s PCIe', '16'), ('5 GT/s', '0x2'),
                ('16 GT/s', ''), ('', '16'))])

    def test_socket_to_socket_bandwidth_by_cpu(self):
        def cpu(vendor, model, family='6', arch='x86_64'):
            return nccl_paths.ElementTree.Element(
                'cpu', arch=arch, vendor=vendor, familyid=family,
                modelid=str(model))
        self.assertEqual(
            [6.0, 10.0, 22.0, 40.0, 16.0, 6.0],
            [nccl_paths.inter_cpu_bw(c) for c in (
                cpu('GenuineIntel', 0x4f), cpu('GenuineIntel', 0x55),
                cpu('GenuineIntel', 0x8f), cpu('GenuineIntel', 0xcf),
                cpu('AuthenticAMD', 1, '175'),
                cpu('', 0, arch='arm64'))])

    def test_ports_of_one_nic_are_one_node(self):
        text = system((0, switch('0000:f0:00.0', device('0000:05:00.0'),
                                 device('0000:06:00.0', NIC_CLASS),
                                 device('0000:06:00.1', NIC_CLASS))))
        topology = nccl_paths.Topology(topo_xml=text)
        topology.add_gpu('0000:05:00.0')
        topology.add_nic('0000:06:00.0', 50.0)
        topology.add_nic('0000:06:00.1', 50.0)
        kinds, links = topology.graph()
        self.assertEqual([('NIC', '0000:06:00.0')],
                         [k for k in kinds if kinds[k] == 'NIC'])
        self.assertEqual({('NET', '0000:06:00.0'), ('NET', '0000:06:00.1')},
                         {k for k in kinds if kinds[k] == 'NET'})


SWITCH = ('<pci busid="%s" class="0x060400" link_speed="32.0 GT/s PCIe" '
          'link_width="16"%s>%s</pci>')


def switch(busid: str, *subs: str, ids: str = '') -> str:
    return SWITCH % (busid, ids, ''.join(subs))


def device(busid: str, class_code: str = GPU_CLASS) -> str:
    return '<pci busid="%s" class="%s"/>' % (busid, class_code)


def system(*cpus: tuple[int, str]) -> str:
    return '<system version="1">%s</system>' % ''.join(
        '<cpu numaid="%d">%s</cpu>' % cpu for cpu in cpus)


class TestXml(base.TestCase):

    def test_classes_from_the_file(self):
        text = system(
            (0, switch('0000:f0:00.0',
                       switch('0000:f1:00.0', device('0000:05:00.0'),
                              device('0000:06:00.0'),
                              device('0000:07:00.0', NIC_CLASS)),
                       device('0000:08:00.0')) + device('0000:09:00.0')),
            (1, device('0000:81:00.0')))
        found = nccl_paths.pair_types(
            ['0000:05:00.0', '0000:06:00.0', '0000:08:00.0', '0000:09:00.0',
             '0000:81:00.0'], ['0000:07:00.0'], topo_xml=text)
        self.assertEqual('PIX', found[pair('0000:05:00.0', '0000:06:00.0')])
        self.assertEqual('PIX', found[pair('0000:05:00.0', '0000:07:00.0')])
        self.assertEqual('PXB', found[pair('0000:05:00.0', '0000:08:00.0')])
        self.assertEqual('PXB', found[pair('0000:08:00.0', '0000:07:00.0')])
        self.assertEqual('PHB', found[pair('0000:05:00.0', '0000:09:00.0')])
        self.assertEqual('SYS', found[pair('0000:09:00.0', '0000:81:00.0')])

    def test_file_wins_over_sysfs(self):
        # In sysfs, E and M are on two root ports (PHB); the file puts
        # them below one switch, and NCCL keeps the file's parents.
        root = self.useFixture(fixtures.TempDir()).path
        write_tree(root, TREE, NUMA)
        text = system((0, switch('0000:f0:00.0', device(E),
                                 device(M, NIC_CLASS))))
        self.assertEqual({pair(E, M): 'PIX', pair(E, A): 'PHB',
                          pair(A, M): 'PHB'},
                         nccl_paths.pair_types([E, A], [M], sysfs_root=root,
                                               topo_xml=text))

    def test_device_missing_from_the_file_comes_from_sysfs(self):
        # A is not in the file: NCCL walks sysfs for it and reuses the
        # file's <cpu numaid="0">.
        root = self.useFixture(fixtures.TempDir()).path
        write_tree(root, TREE, NUMA)
        text = system((0, switch('0000:f0:00.0', device(E))))
        topology = nccl_paths.Topology(root, text)
        topology.add_gpu(E)
        topology.add_gpu(A)
        self.assertEqual(1, topology.to_xml().count('<cpu '))
        self.assertEqual('PHB', topology.path_type(('GPU', E), ('GPU', A)))

    def test_broadcom_base_mode_switches_are_flattened(self):
        # A PEX Gen5 switch in base mode shows as a top switch with
        # sub-switches; NCCL merges them: PIX, not PXB.
        top = ' vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" '
        sub = top + 'subsystem_device="0x1000"'
        top += 'subsystem_device="0x0000"'
        text = system((0, switch(
            '0000:f0:00.0', switch('0000:f1:00.0', device('0000:05:00.0'),
                                   ids=sub),
            switch('0000:f2:00.0', device('0000:06:00.0'), ids=sub),
            ids=top)))
        gpus = ['0000:05:00.0', '0000:06:00.0']
        self.assertEqual({pair(*gpus): 'PIX'},
                         nccl_paths.pair_types(gpus, topo_xml=text))
        self.assertEqual({pair(*gpus): 'PXB'}, nccl_paths.pair_types(
            gpus, topo_xml=text.replace('0x1000"/', '0x2000"/').replace(
                'subsystem_device="0x1000"', 'subsystem_device="0x2000"')))

    def test_pci_of_gpu_class_that_is_no_rank_is_left_out(self):
        # Only ranks' GPUs become nodes; a GPU-class <pci> with children is
        # no switch either, so the GPU below it is unreachable.
        text = system((0, '<pci busid="0000:01:00.0" class="0x030000">%s'
                       '</pci>%s' % (device('0000:02:00.0'),
                                     device('0000:03:00.0'))))
        self.assertEqual(
            {pair('0000:02:00.0', '0000:03:00.0'): 'DIS'},
            nccl_paths.pair_types(['0000:02:00.0', '0000:03:00.0'],
                                  topo_xml=text))

    def test_switch_without_class_is_refused(self):
        text = system((0, '<pci busid="0000:f0:00.0">%s</pci>'
                       % device('0000:05:00.0')))
        self.assertRaisesRegex(ValueError, 'without a class',
                               nccl_paths.pair_types, ['0000:05:00.0'],
                               topo_xml=text)

    def test_wrong_version_is_refused(self):
        self.assertRaisesRegex(
            ValueError, 'version', nccl_paths.pair_types, [],
            topo_xml='<system version="2"/>')

    def test_nvidia_smi_node_is_phb(self):
        self.assertEqual(
            {'NV': 'NVL', 'PIX': 'PIX', 'PXB': 'PXB', 'PHB': 'PHB',
             'NODE': 'PHB', 'SYS': 'SYS'},
            {c.name: nccl_paths.nccl_class(c.name) for c in lc.LinkClass})


@hosts.add_host_tests
class TestCorpusHosts(base.TestCase):
    """On every corpus host's tree, NCCL's classes are ours, NODE as PHB.

    ACS is out of NCCL's view, so ours without ACS (``acs_policy =
    ignore``): hosts.EXPECTED's ``links`` for GPU pairs, link_class's
    tree rule for GPU-NIC pairs.
    """

    def check_host(self, name):
        expected = hosts.EXPECTED[name]
        topology = test_corpus.discover(name)
        found = nccl_paths.pair_types(expected.addresses, expected.nics,
                                      sysfs_root=test_corpus.tree(name))
        ours = nccl_paths.host_classes(expected.links)
        ours.update(
            (pair(g, n), nccl_paths.nccl_class(
                lc.pcie_class(topology, g, n).name))
            for g, n in itertools.product(expected.addresses, expected.nics))
        self.assertEqual(ours, found)
