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

"""The benchmark's decision-quality metrics, on hand-written domain XML.

The metrics judge four strategies, ours included, so they are checked
here against documents written by hand: each case breaks one thing the
guest would see and expects exactly that metric to drop.
"""

import testtools

from nova_gpu_p2p.tests.fixtures import hosts
from nova_gpu_p2p.tests.functional import decision_quality as dq

GPU_A, GPU_B, GPU_C = '0000:03:00.0', '0000:04:00.0', '0000:83:00.0'
NIC_0, NIC_1 = '0000:05:00.0', '0000:85:00.0'
#: A and B share a switch (PIX) on node 0; C is on node 1 (SYS).
EXPECTED = hosts.Expected(
    gpus=(hosts.Gpu(GPU_A, 0, 'pci0000:00'), hosts.Gpu(GPU_B, 0, 'pci0000:00'),
          hosts.Gpu(GPU_C, 1, 'pci0000:80')),
    links={frozenset((GPU_A, GPU_B)): 'PIX',
           frozenset((GPU_A, GPU_C)): 'SYS',
           frozenset((GPU_B, GPU_C)): 'SYS'},
    nics=(NIC_0, NIC_1))
NICS = {NIC_0: (0, 'pci0000:00'), NIC_1: (1, 'pci0000:80')}
TRUTH = dq.host_truth(EXPECTED, NICS)
QEMU = 'xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"'


def _source(address: str) -> str:
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return ("<address domain='0x%s' bus='0x%s' slot='0x%s' "
            "function='0x%s'/>" % (domain, bus, slot, function))


def hostdev(address: str, bus: int | None = None,
            alias: str | None = None) -> str:
    parts = ["<hostdev mode='subsystem' type='pci' managed='yes'>",
             '<source>%s</source>' % _source(address)]
    if alias:
        parts.append("<alias name='%s'/>" % alias)
    if bus is not None:
        parts.append("<address type='pci' domain='0x0000' bus='0x%02x' "
                     "slot='0x00' function='0x0'/>" % bus)
    return ''.join(parts) + '</hostdev>'


def interface(address: str, bus: int | None = None) -> str:
    source = _source(address).replace('<address ', "<address type='pci' ")
    guest = ("<address type='pci' domain='0x0000' bus='0x%02x' slot='0x00' "
             "function='0x0'/>" % bus if bus is not None else '')
    return ("<interface type='hostdev' managed='yes'><source>%s</source>%s"
            "</interface>" % (source, guest))


def pxb(index: int, node: int | None) -> str:
    target = "<target busNr='%d'>%s</target>" % (
        250 - index, '<node>%d</node>' % node if node is not None else '')
    return ("<controller type='pci' index='%d' model='pcie-expander-bus'>"
            "<model name='pxb-pcie'/>%s</controller>" % (index, target))


def port(index: int, bus: int, model: str = 'pcie-root-port') -> str:
    return ("<controller type='pci' index='%d' model='%s'><address "
            "type='pci' domain='0x0000' bus='0x%02x' slot='0x00' "
            "function='0x0'/></controller>" % (index, model, bus))


def override(cliques: dict[str, int]) -> str:
    devices = ''.join(
        "<qemu:device alias='%s'><qemu:frontend><qemu:property "
        "name='x-nv-gpudirect-clique' type='unsigned' value='%d'/>"
        "</qemu:frontend></qemu:device>" % item
        for item in sorted(cliques.items()))
    return '<qemu:override>%s</qemu:override>' % devices if devices else ''


def domain(devices: list[str], cliques: dict[str, int] | None = None,
           cells: dict[int, str] | None = None) -> str:
    """A domain; by default guest cell 0 is on host node 1 and 1 on 0."""
    cells = {0: '1', 1: '0'} if cells is None else cells
    memnodes = ''.join("<memnode cellid='%d' mode='strict' nodeset='%s'/>"
                       % item for item in sorted(cells.items()))
    return ("<domain type='kvm' %s><name>x</name><numatune>%s</numatune>"
            "<devices><controller type='pci' index='0' model='pcie-root'/>"
            "%s</devices>%s</domain>" % (
                QEMU, memnodes, ''.join(devices), override(cliques or {})))


#: Ours, done right: a pxb per host root complex on the guest cell of its
#: host node (host node 0 is guest cell 1), every device below its own.
GOOD = domain(
    [pxb(1, 1), port(2, 1), port(3, 1), port(4, 1),
     pxb(5, 0), port(6, 5), port(7, 5),
     hostdev(GPU_A, 2, 'ua-a'), hostdev(GPU_B, 3, 'ua-b'),
     hostdev(GPU_C, 6, 'ua-c'), interface(NIC_0, 4), hostdev(NIC_1, 7)],
    cliques={'ua-a': 0, 'ua-b': 0, 'ua-c': 1})
#: Nova's stock XML: no guest addresses, no cliques.
STOCK = domain([hostdev(GPU_A), hostdev(GPU_B), hostdev(GPU_C),
                interface(NIC_0), hostdev(NIC_1)])


def shares(xml: str, truth: dq.HostTruth = TRUTH) -> dict[str, tuple]:
    return {name: (share.hits, share.total)
            for name, share in dq.evaluate(xml, truth).items()}


class TestHostTruth(testtools.TestCase):

    def test_p2p_capable_is_pxb_or_closer(self):
        self.assertEqual({frozenset((GPU_A, GPU_B))}, set(TRUTH.p2p_pairs))

    def test_routed_links_decide_under_acs(self):
        # Under ACS redirect the first two GPUs are PHB, not PIX.
        expected = hosts.EXPECTED['acs-redirect-switch']
        truth = dq.host_truth(expected, {})
        a, b, c, d = expected.addresses
        self.assertNotIn(frozenset((a, b)), truth.p2p_pairs)
        self.assertEqual({frozenset((c, d))}, set(truth.p2p_pairs))

    def test_nvlink_pairs_are_capable(self):
        truth = dq.host_truth(EXPECTED, NICS,
                              nvlink_pairs=[frozenset((GPU_A, GPU_C))])
        self.assertIn(frozenset((GPU_A, GPU_C)), truth.p2p_pairs)


class TestMetrics(testtools.TestCase):

    def test_good_layout_meets_every_goal(self):
        self.assertEqual({'p2p_enabled': (1, 1), 'p2p_false': (0, 2),
                          'numa_match': (5, 5), 'gpu_nic_bus': (3, 3)},
                         shares(GOOD))

    def test_stock_layout_meets_none(self):
        self.assertEqual({'p2p_enabled': (0, 1), 'p2p_false': (0, 2),
                          'numa_match': (0, 5), 'gpu_nic_bus': (0, 3)},
                         shares(STOCK))

    def test_one_clique_for_all_claims_false_p2p(self):
        xml = GOOD.replace("alias='ua-c'><qemu:frontend><qemu:property "
                           "name='x-nv-gpudirect-clique' type='unsigned' "
                           "value='1'",
                           "alias='ua-c'><qemu:frontend><qemu:property "
                           "name='x-nv-gpudirect-clique' type='unsigned' "
                           "value='0'")
        self.assertEqual((2, 2), shares(xml)['p2p_false'])
        self.assertEqual((1, 1), shares(xml)['p2p_enabled'])

    def test_override_naming_no_hostdev_enables_nothing(self):
        xml = GOOD.replace("alias='ua-b'", "alias='ua-typo'", 1)
        self.assertEqual((0, 1), shares(xml)['p2p_enabled'])

    def test_sidecar_host_node_numbers_break_numa_match(self):
        # <node> = host node number, while guest cell 0 is on host node 1.
        xml = domain(
            [pxb(1, 0), port(2, 1), port(3, 1), port(4, 1),
             pxb(5, 1), port(6, 5), port(7, 5),
             hostdev(GPU_A, 2), hostdev(GPU_B, 3), hostdev(GPU_C, 6),
             interface(NIC_0, 4), hostdev(NIC_1, 7)])
        found = shares(xml)
        self.assertEqual((0, 5), found['numa_match'])
        self.assertEqual((3, 3), found['gpu_nic_bus'])
        self.assertEqual((0, 1), found['p2p_enabled'])

    def test_node_of_no_guest_cell_matches_nothing(self):
        xml = GOOD.replace('<node>0</node>', '<node>7</node>')
        self.assertEqual((3, 5), shares(xml)['numa_match'])

    def test_expander_bus_without_node_matches_nothing(self):
        xml = GOOD.replace('<node>0</node>', '')
        self.assertEqual((3, 5), shares(xml)['numa_match'])

    def test_device_moved_to_root_bus_drops_locality(self):
        xml = GOOD.replace("<interface type='hostdev' managed='yes'>"
                           "<source>%s</source><address type='pci' "
                           "domain='0x0000' bus='0x04'"
                           % _source(NIC_0).replace(
                               '<address ', "<address type='pci' "),
                           "<interface type='hostdev' managed='yes'>"
                           "<source>%s</source><address type='pci' "
                           "domain='0x0000' bus='0x00'"
                           % _source(NIC_0).replace(
                               '<address ', "<address type='pci' "))
        found = shares(xml)
        self.assertEqual((1, 3), found['gpu_nic_bus'])
        self.assertEqual((4, 5), found['numa_match'])

    def test_both_on_root_bus_is_not_shared(self):
        xml = domain([hostdev(GPU_A, 0), hostdev(NIC_0, 0)])
        self.assertEqual((0, 1), shares(xml)['gpu_nic_bus'])

    def test_device_behind_a_switch_below_the_expander_bus(self):
        xml = domain([pxb(1, 1), port(2, 1),
                      port(3, 2, 'pcie-switch-upstream-port'),
                      port(4, 3, 'pcie-switch-downstream-port'),
                      port(5, 3, 'pcie-switch-downstream-port'),
                      hostdev(GPU_A, 4), hostdev(NIC_0, 5)])
        view = dq.parse(dq.etree.fromstring(xml.encode()))
        self.assertEqual({1}, {d.expander_bus for d in view.devices})
        self.assertEqual({'numa_match': (2, 2), 'gpu_nic_bus': (1, 1)},
                         {k: v for k, v in shares(xml).items()
                          if k in ('numa_match', 'gpu_nic_bus')})

    def test_zero_denominator_is_not_applicable(self):
        no_nics = dq.host_truth(hosts.Expected(
            gpus=EXPECTED.gpus, links=EXPECTED.links), {})
        found = dq.evaluate(GOOD, no_nics)
        self.assertIsNone(found['gpu_nic_bus'].value)
        self.assertEqual('n/a', str(found['gpu_nic_bus']))
        self.assertEqual('100% (3/3)', str(found['numa_match']))

    def test_unknown_host_node_left_out_of_numa_match(self):
        truth = dq.host_truth(EXPECTED, {NIC_0: (None, 'pci0000:00'),
                                         NIC_1: NICS[NIC_1]})
        self.assertEqual((4, 4), shares(GOOD, truth)['numa_match'])

    def test_other_hostdevs_are_ignored(self):
        xml = GOOD.replace('</devices>',
                           hostdev('0000:99:00.0', 0, 'ua-x') + '</devices>')
        self.assertEqual(shares(GOOD), shares(xml))

    def test_share_as_dict(self):
        self.assertEqual({'hits': 1, 'total': 4, 'share': 0.25},
                         dq.Share(1, 4).as_dict())
        self.assertEqual(' 25% (1/4)', str(dq.Share(1, 4)))
