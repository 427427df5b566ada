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

The metrics judge the strategies, ours included, so they are checked
here against documents written by hand: each case breaks one thing the
guest would see and expects exactly that metric to drop.
"""

import itertools
import json
import os
import shlex

import fixtures
from lxml import etree

from lab.baselines import sidecar
from lab.baselines import wrapper
from lab import decision_quality as dq
from nova_gpu_p2p.guest import topology_description
from tests.fixtures import guest_sysfs
from tests.fixtures import hosts
from tests.unit import base

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


class TestHostTruth(base.TestCase):

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


class TestMetrics(base.TestCase):

    def test_good_layout_meets_every_goal(self):
        # But NCCL sees A-B as PHB, not PIX: root ports of one bus.
        self.assertEqual({'p2p_enabled': (1, 1), 'p2p_false': (0, 2),
                          'numa_match': (5, 5), 'gpu_nic_bus': (3, 3),
                          'nccl_host_class': (2, 3)},
                         shares(GOOD))

    def test_stock_layout_meets_none(self):
        self.assertEqual({'p2p_enabled': (0, 1), 'p2p_false': (0, 2),
                          'numa_match': (0, 5), 'gpu_nic_bus': (0, 3),
                          'nccl_host_class': (0, 3)},
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


#: The host's GPU-NIC classes: A and B share NIC_0's switch; C is NIC_1's.
NIC_LINKS = {
    frozenset((GPU_A, NIC_0)): 'PIX', frozenset((GPU_B, NIC_0)): 'PIX',
    frozenset((GPU_C, NIC_0)): 'SYS', frozenset((GPU_A, NIC_1)): 'SYS',
    frozenset((GPU_B, NIC_1)): 'SYS', frozenset((GPU_C, NIC_1)): 'PHB'}
WITH_NICS = dq.host_truth(EXPECTED, NICS, gpu_nic_links=NIC_LINKS)
#: GOOD with distinct root port slots and busNr, as our driver writes it:
#: pxb busNr 250 (node 1) with ports 0, 1, 2; busNr 246 (node 0) with 0, 1.
OURS = domain(
    [pxb(1, 1).replace("busNr='249'", "busNr='250'"),
     port(2, 1), port(3, 1).replace("slot='0x00'", "slot='0x01'"),
     port(4, 1).replace("slot='0x00'", "slot='0x02'"),
     pxb(5, 0).replace("busNr='245'", "busNr='246'"), port(6, 5),
     port(7, 5).replace("slot='0x00'", "slot='0x01'"),
     hostdev(GPU_A, 2, 'ua-a'), hostdev(GPU_B, 3, 'ua-b'),
     hostdev(GPU_C, 6, 'ua-c'), interface(NIC_0, 4), hostdev(NIC_1, 7)],
    cliques={'ua-a': 0, 'ua-b': 0, 'ua-c': 1})


def description() -> dict:
    """What our driver would describe for OURS (host switches s0, s1)."""
    def dev(bus_nr, slot, role, node, switches):
        return {'bus_nr': bus_nr, 'slot': slot, 'role': role,
                'vendor': '0x10de' if role == 'gpu' else '0x15b3',
                'class': dq.GUEST_CLASSES[role], 'clique': None,
                'numa_node': node, 'switches': switches,
                'link_speed': '32.0 GT/s PCIe', 'link_width': 16}
    order = (GPU_C, NIC_1, GPU_A, GPU_B, NIC_0)
    links = {**EXPECTED.links, **NIC_LINKS,
             frozenset((NIC_0, NIC_1)): 'SYS'}
    return {'version': 1, 'devices': [
        dev(246, 0, 'gpu', 0, ['s1']), dev(246, 1, 'nic', 0, ['s1']),
        dev(250, 0, 'gpu', 1, ['s0']), dev(250, 1, 'gpu', 1, ['s0']),
        dev(250, 2, 'nic', 1, ['s0'])],
        'switches': {'s0': {'link_speed': '32.0 GT/s PCIe',
                            'link_width': 16},
                     's1': {'link_speed': '32.0 GT/s PCIe',
                            'link_width': 16}},
        'pairs': [[i, j, links[frozenset((order[i], order[j]))]]
                  for i, j in itertools.combinations(range(5), 2)]}


def with_fw_cfg(xml: str, entry: dict) -> str:
    return xml.replace('</devices>', '</devices><sysinfo type="fwcfg">'
                       '<entry name="%s">%s</entry></sysinfo>' % (
                           topology_description.ENTRY_NAME,
                           topology_description.encode(entry)))


#: What a right agent writes for OURS, by guest address: A, B and NIC_0
#: under one switch on node 1; C beside NIC_1's root port on node 0.
RIGHT_AGENT_XML = (
    '<system version="1"><cpu numaid="1"><pci busid="0000:f0:00.0" '
    'class="0x060400" link_speed="" link_width="16">'
    '<pci busid="0000:fb:00.0" class="0x030200"/>'
    '<pci busid="0000:fc:00.0" class="0x030200"/>'
    '<pci busid="0000:fd:00.0" class="0x020000"/></pci></cpu>'
    '<cpu numaid="0"><pci busid="0000:f7:00.0" class="0x030200"/>'
    '<pci busid="0000:f8:00.0" class="0x020000"/></cpu></system>')


class TestNcclHostClass(base.TestCase):
    """The guest's pairs as NCCL classifies them, against the host's."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path

    def tree(self, xml: str) -> dict:
        return dq.guest_tree(dq.etree.fromstring(xml.encode()), self.root,
                             {GPU_A: 'gpu', GPU_B: 'gpu', GPU_C: 'gpu',
                              NIC_0: 'nic', NIC_1: 'nic'})

    def test_host_truth_in_nccl_terms(self):
        self.assertEqual('PIX', WITH_NICS.nccl_links[frozenset((GPU_A,
                                                               NIC_0))])
        self.assertEqual(9, len(WITH_NICS.nccl_links))
        node = dq.host_truth(hosts.EXPECTED['epyc-4gpu-per-root-complex'],
                             {})
        self.assertEqual({'PHB'}, set(node.nccl_links.values()))

    def test_guest_tree_numbers_buses_as_firmware(self):
        self.assertEqual(
            {GPU_A: dq.GuestFunction('0000:fb:00.0', 250, 0),
             GPU_B: dq.GuestFunction('0000:fc:00.0', 250, 1),
             NIC_0: dq.GuestFunction('0000:fd:00.0', 250, 2),
             GPU_C: dq.GuestFunction('0000:f7:00.0', 246, 0),
             NIC_1: dq.GuestFunction('0000:f8:00.0', 246, 1)},
            self.tree(OURS))
        device = os.path.join(self.root, 'bus/pci/devices/0000:fb:00.0')
        self.assertEqual(
            os.path.join(self.root, 'devices/pci0000:fa/0000:fa:00.0/'
                         '0000:fb:00.0'), os.path.realpath(device))
        with open(os.path.join(device, 'numa_node')) as f:
            self.assertEqual('1\n', f.read())

    def test_guest_tree_numbers_as_the_description_fixture(self):
        found = self.tree(OURS)
        addresses = guest_sysfs.build(
            self.useFixture(fixtures.TempDir()).path, description())
        self.assertEqual(
            [found[a].address for a in (GPU_C, NIC_1, GPU_A, GPU_B, NIC_0)],
            addresses)

    def test_devices_without_address_get_root_ports_of_their_own(self):
        found = self.tree(STOCK)
        self.assertEqual(5, len({f.address for f in found.values()}))
        self.assertEqual({(None, None)},
                         {(f.bus_nr, f.port_slot) for f in found.values()})
        self.assertEqual(
            os.path.join(self.root, 'devices/pci0000:00/0000:00:01.0/'
                         '0000:01:00.0'),
            os.path.realpath(os.path.join(
                self.root, 'bus/pci/devices', found[GPU_A].address)))

    def test_plain_guest_tree_sees_phb_for_the_host_pix(self):
        # Guest cell 1 holds A, B, NIC_0; cell 0 holds C and NIC_1: the
        # SYS pairs and C-NIC_1's PHB come out right, the PIX ones do not.
        self.assertEqual((6, 9), shares(OURS, WITH_NICS)['nccl_host_class'])
        # Stock: all on the root bus, all PHB; only C-NIC_1 is PHB on the
        # host too.
        self.assertEqual((1, 9), shares(STOCK, WITH_NICS)['nccl_host_class'])

    def test_a_right_agent_gives_every_host_class(self):
        xml = with_fw_cfg(OURS, description())
        seen = []

        def agent(root):
            seen.append(root)
            self.assertTrue(os.path.exists(os.path.join(
                root, guest_sysfs.FW_CFG_RAW)))
            return RIGHT_AGENT_XML
        self.assertEqual('100% (9/9)',
                         str(dq.nccl_with_agent(xml, WITH_NICS, agent)))
        self.assertEqual(1, len(seen))

    def test_the_guest_agent_gives_every_host_class(self):
        self.assertEqual('100% (9/9)', str(dq.nccl_with_agent(
            with_fw_cfg(OURS, description()), WITH_NICS,
            dq.run_guest_agent)))

    def test_a_failing_agent_is_reported(self):
        entry = description()
        entry['version'] = 99
        self.assertRaisesRegex(RuntimeError, 'guest agent: exit 2',
                               dq.nccl_with_agent,
                               with_fw_cfg(OURS, entry), WITH_NICS,
                               dq.run_guest_agent)

    def test_a_flat_agent_file_keeps_phb(self):
        flat = RIGHT_AGENT_XML.replace(
            '<pci busid="0000:f0:00.0" class="0x060400" link_speed="" '
            'link_width="16">', '').replace('</pci></cpu>', '</cpu>', 1)
        self.assertEqual((6, 9), (lambda s: (s.hits, s.total))(
            dq.nccl_with_agent(with_fw_cfg(OURS, description()), WITH_NICS,
                               lambda root: flat)))

    def test_devices_the_agent_leaves_out_come_from_sysfs(self):
        # The file has A, B and NIC_0 only: C and NIC_1 from the tree.
        partial = RIGHT_AGENT_XML[:RIGHT_AGENT_XML.index('<cpu numaid="0">')]
        self.assertEqual(
            (9, 9), (lambda s: (s.hits, s.total))(dq.nccl_with_agent(
                with_fw_cfg(OURS, description()), WITH_NICS,
                lambda root: partial + '</system>')))

    def test_no_description_no_agent(self):
        def agent(root):
            raise AssertionError('no agent without a description')
        self.assertEqual((6, 9), (lambda s: (s.hits, s.total))(
            dq.nccl_with_agent(OURS, WITH_NICS, agent)))


def vfio(address: str, clique: int | None = None) -> str:
    """One ``-device`` value as libvirt writes it (JSON, no spaces)."""
    extra = (',"x-nv-gpudirect-clique":%d' % clique
             if clique is not None else '')
    return ('{"driver":"vfio-pci","host":"%s","id":"hostdev0",'
            '"bus":"pci.1","addr":"0x0"%s}' % (address, extra))


def argv(*devices: str) -> str:
    return shlex.join(['/usr/bin/qemu-system-x86_64', '-name', 'x']
                      + [w for d in devices for w in ('-device', d)])


class TestLibvirtVerdict(base.TestCase):

    def test_refused_xml_scores_zero(self):
        found = {name: (share.hits, share.total) for name, share in
                 dq.evaluate(GOOD, TRUTH, accepted=False).items()}
        # The totals stay those of the instance; a goal-none metric has
        # nothing to count (a zero there would read as perfect).
        self.assertEqual({'p2p_enabled': (0, 1), 'p2p_false': (0, 0),
                          'numa_match': (0, 5), 'gpu_nic_bus': (0, 3),
                          'nccl_host_class': (0, 3)}, found)

    def test_cliques_from_qemu_command_line_win(self):
        # The XML asks A-B together; QEMU is told A, B and C in clique 0.
        cliques = dq.argv_cliques(argv(vfio(GPU_A, 0), vfio(GPU_B, 0),
                                       vfio('83:00.0', 0), vfio(NIC_0)))
        self.assertEqual({GPU_A: 0, GPU_B: 0, GPU_C: 0}, cliques)
        found = dq.evaluate(GOOD, TRUTH, cliques)
        self.assertEqual((2, 2), (found['p2p_false'].hits,
                                  found['p2p_false'].total))

    def test_command_line_without_cliques_enables_nothing(self):
        found = dq.evaluate(GOOD, TRUTH, dq.argv_cliques(argv(
            vfio(GPU_A), vfio(GPU_B))))
        self.assertEqual((0, 1), (found['p2p_enabled'].hits,
                                  found['p2p_enabled'].total))


class TestWrapper(base.TestCase):

    def test_default_map_puts_every_gpu_in_clique_0(self):
        wrapped = wrapper.wrap(
            shlex.split(argv(vfio(GPU_A), vfio(GPU_C), vfio(NIC_0))),
            wrapper.default_map([GPU_A, GPU_C]))
        self.assertEqual({GPU_A: 0, GPU_C: 0},
                         dq.argv_cliques(shlex.join(wrapped)))
        # Still JSON QEMU can read, the rest untouched.
        self.assertEqual(
            {'driver': 'vfio-pci', 'host': GPU_A, 'id': 'hostdev0',
             'bus': 'pci.1', 'addr': '0x0', 'x-nv-gpudirect-clique': 0},
            json.loads(wrapped[wrapped.index('-device') + 1]))
        self.assertEqual(vfio(NIC_0), wrapped[-1])

    def test_map_keys_are_full_addresses(self):
        wrapped = wrapper.wrap(['-device', vfio('03:00.0')], {GPU_A: 3})
        self.assertEqual('3', wrapped[1][-2])

    def test_what_the_script_leaves_alone(self):
        words = ['-device', vfio(GPU_A, 7),            # already set
                 '-device', 'vfio-pci,host=%s' % GPU_B,  # not JSON
                 '-device', vfio(GPU_C),                # not in the map
                 '-device']                             # dangling
        self.assertEqual(words, wrapper.wrap(words, {GPU_A: 0, GPU_B: 0}))


class TestSidecar(base.TestCase):

    def test_expander_bus_per_host_node_with_host_numbers(self):
        # Guest cell 0 is on host node 1 (domain()'s default): the recipe
        # still says <node>0</node> for host node 0's devices.
        xml = sidecar.apply(STOCK, TRUTH.node)
        view = dq.parse(etree.fromstring(xml.encode()))
        self.assertEqual({GPU_A: 0, GPU_B: 0, NIC_0: 0, GPU_C: 1, NIC_1: 1},
                         {d.address: d.guest_node for d in view.devices})
        self.assertEqual((0, 5), shares(xml)['numa_match'])
        self.assertEqual((3, 3), shares(xml)['gpu_nic_bus'])
        # Node 0 (three devices) owns buses 251-254, node 1 248-250.
        root = etree.fromstring(xml.encode())
        self.assertEqual(
            [('251', '0'), ('248', '1')],
            [(t.get('busNr'), t.findtext('node')) for t in root.iterfind(
                "./devices/controller[@model='pcie-expander-bus']/target")])

    def test_right_where_guest_node_is_host_node(self):
        xml = sidecar.apply(STOCK.replace("nodeset='1'", "nodeset='X'")
                            .replace("nodeset='0'", "nodeset='1'")
                            .replace("nodeset='X'", "nodeset='0'"),
                            TRUTH.node)
        self.assertEqual((5, 5), shares(xml)['numa_match'])
        self.assertEqual((0, 1), shares(xml)['p2p_enabled'])

    def test_unknown_node_stays_put(self):
        xml = sidecar.apply(STOCK, {GPU_A: 0})
        self.assertEqual(
            [GPU_A], [d.address for d in dq.parse(etree.fromstring(
                xml.encode())).devices if d.expander_bus is not None])


class TestScore(base.TestCase):
    """bench_cloud.score: libvirt's verdict first, then the metrics."""

    def test_refused_strategy_scores_zero_and_says_why(self):
        from lab import bench_cloud
        from lab import libvirt_check

        def check(xml):
            if 'pcie-expander-bus' in xml:
                return libvirt_check.Verdict(False, 'NUMA node 1 missing')
            return libvirt_check.Verdict(True, argv=argv(
                vfio(GPU_A), vfio(GPU_B), vfio(GPU_C)))

        found = bench_cloud.score(
            {'stock': STOCK, 'wrapper': STOCK, 'sidecar': GOOD},
            {'wrapper': {GPU_A: 0, GPU_B: 0}}, TRUTH, check)
        self.assertEqual({'accepted': False, 'reason': 'NUMA node 1 missing'},
                         found['sidecar']['libvirt'])
        self.assertEqual({'hits': 0, 'total': 5, 'share': 0.0},
                         found['sidecar']['metrics']['numa_match'])
        # The wrapper's cliques come from the command line it rewrote.
        self.assertEqual(1, found['wrapper']['metrics']['p2p_enabled'][
            'hits'])
        self.assertEqual(0, found['stock']['metrics']['p2p_enabled'][
            'hits'])

    def test_without_libvirt_the_wrapper_is_not_scored(self):
        from lab import bench_cloud
        from lab import libvirt_check

        found = bench_cloud.score(
            {'stock': STOCK, 'wrapper': STOCK}, {'wrapper': {GPU_A: 0}},
            TRUTH, lambda xml: libvirt_check.Verdict(None, 'no libvirtd'))
        self.assertIn('not_scored', found['wrapper'])
        self.assertEqual({'accepted': None, 'reason': 'no libvirtd'},
                         found['stock']['libvirt'])
        self.assertIn('metrics', found['stock'])
