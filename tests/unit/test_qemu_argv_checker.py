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

"""The e2e checker itself: each deliberately broken case is caught.

A checker that passes everything would make the e2e tests green for any
XML, so every assertion of :mod:`tests.fixtures.qemu_argv` is
shown failing here on a document or command line broken on purpose.
The good pair below is the shape libvirt 9.0 printed for our XML.
"""

import json
import shlex

from lxml import etree

from tests.fixtures import libvirt_rules
from tests.fixtures import qemu_argv
from tests.unit import base

# Two host nodes: GPUs 03/04 (P2P under one switch) on node 0, root
# complex pci0000:00, beside NIC 05, whose node firmware does not report
# (so it stays on the root bus); GPU 83 on node 1, root complex
# pci0000:80.
XML = """<domain type="kvm">
  <numatune>
    <memory mode="strict" nodeset="0-1"/>
    <memnode cellid="0" mode="strict" nodeset="0"/>
    <memnode cellid="1" mode="strict" nodeset="1"/>
  </numatune>
  <devices>
    <controller type="pci" model="pcie-root" index="0"/>
    <hostdev mode="subsystem" type="pci" managed="yes">
      <source><address domain="0x0000" bus="0x03" slot="0x00"
        function="0x0"/></source>
      <driver name="vfio"/>
      <alias name="ua-gpu-p2p-0000-03-00-0"/>
      <address type="pci" domain="0x0000" bus="0x02" slot="0x00"
        function="0x0"/>
    </hostdev>
    <hostdev mode="subsystem" type="pci" managed="yes">
      <source><address domain="0x0000" bus="0x04" slot="0x00"
        function="0x0"/></source>
      <driver name="vfio"/>
      <alias name="ua-gpu-p2p-0000-04-00-0"/>
      <address type="pci" domain="0x0000" bus="0x03" slot="0x00"
        function="0x0"/>
    </hostdev>
    <hostdev mode="subsystem" type="pci" managed="yes">
      <source><address domain="0x0000" bus="0x05" slot="0x00"
        function="0x0"/></source>
    </hostdev>
    <hostdev mode="subsystem" type="pci" managed="yes">
      <source><address domain="0x0000" bus="0x83" slot="0x00"
        function="0x0"/></source>
      <driver name="vfio"/>
      <alias name="ua-gpu-p2p-0000-83-00-0"/>
      <address type="pci" domain="0x0000" bus="0x05" slot="0x00"
        function="0x0"/>
    </hostdev>
    <controller type="pci" index="1" model="pcie-expander-bus">
      <model name="pxb-pcie"/>
      <target busNr="252"><node>0</node></target>
    </controller>
    <controller type="pci" index="2" model="pcie-root-port">
      <address type="pci" domain="0x0000" bus="0x01" slot="0x00"
        function="0x0"/>
    </controller>
    <controller type="pci" index="3" model="pcie-root-port">
      <address type="pci" domain="0x0000" bus="0x01" slot="0x01"
        function="0x0"/>
    </controller>
    <controller type="pci" index="4" model="pcie-expander-bus">
      <model name="pxb-pcie"/>
      <target busNr="249"><node>1</node></target>
    </controller>
    <controller type="pci" index="5" model="pcie-root-port">
      <address type="pci" domain="0x0000" bus="0x04" slot="0x00"
        function="0x0"/>
    </controller>
  </devices>
  <qemu:override xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
    <qemu:device alias="ua-gpu-p2p-0000-03-00-0"><qemu:frontend>
      <qemu:property name="x-nv-gpudirect-clique" type="unsigned"
        value="0"/>
    </qemu:frontend></qemu:device>
    <qemu:device alias="ua-gpu-p2p-0000-04-00-0"><qemu:frontend>
      <qemu:property name="x-nv-gpudirect-clique" type="unsigned"
        value="0"/>
    </qemu:frontend></qemu:device>
  </qemu:override>
</domain>
"""

DEVICES = [
    {'driver': 'pxb-pcie', 'bus_nr': 252, 'id': 'pci.1', 'numa_node': 0,
     'bus': 'pcie.0', 'addr': '0x2'},
    {'driver': 'pcie-root-port', 'port': 0, 'chassis': 2, 'id': 'pci.2',
     'bus': 'pci.1', 'addr': '0x0'},
    {'driver': 'pcie-root-port', 'port': 8, 'chassis': 3, 'id': 'pci.3',
     'bus': 'pci.1', 'addr': '0x1'},
    {'driver': 'pxb-pcie', 'bus_nr': 249, 'id': 'pci.4', 'numa_node': 1,
     'bus': 'pcie.0', 'addr': '0x3'},
    {'driver': 'pcie-root-port', 'port': 0, 'chassis': 5, 'id': 'pci.5',
     'bus': 'pci.4', 'addr': '0x0'},
    {'driver': 'pcie-root-port', 'port': 16, 'chassis': 6, 'id': 'pci.6',
     'bus': 'pcie.0', 'addr': '0x4'},
    {'driver': 'vfio-pci', 'host': '0000:03:00.0',
     'id': 'ua-gpu-p2p-0000-03-00-0', 'bus': 'pci.2', 'addr': '0x0',
     'x-nv-gpudirect-clique': 0},
    {'driver': 'vfio-pci', 'host': '0000:04:00.0',
     'id': 'ua-gpu-p2p-0000-04-00-0', 'bus': 'pci.3', 'addr': '0x0',
     'x-nv-gpudirect-clique': 0},
    {'driver': 'vfio-pci', 'host': '0000:05:00.0', 'id': 'hostdev0',
     'bus': 'pci.6', 'addr': '0x0'},
    {'driver': 'vfio-pci', 'host': '0000:83:00.0',
     'id': 'ua-gpu-p2p-0000-83-00-0', 'bus': 'pci.5', 'addr': '0x0'},
]

HOST_NODE = {'0000:03:00.0': 0, '0000:04:00.0': 0, '0000:05:00.0': None,
             '0000:83:00.0': 1}
ROOT_COMPLEX = {'0000:03:00.0': 'pci0000:00', '0000:04:00.0': 'pci0000:00',
                '0000:05:00.0': 'pci0000:00', '0000:83:00.0': 'pci0000:80'}
GPUS = ('0000:03:00.0', '0000:04:00.0', '0000:83:00.0')
LINKS = {frozenset(('0000:03:00.0', '0000:04:00.0')): 'PIX'}


def link(a: str, b: str) -> str:
    return LINKS.get(frozenset((a, b)), 'SYS')


def argv(devices: list[dict]) -> str:
    """A qemu-argv line as libvirt prints it, shell quoting and all."""
    words = ['LC_ALL=C', '/usr/bin/qemu-system-x86_64', '-name',
             'guest=instance-00000001,debug-threads=on', '-machine',
             'pc-q35-7.2,usb=off']
    for device in devices:
        words += ['-device', json.dumps(device, separators=(',', ':'))]
    return ' '.join(shlex.quote(w) for w in words)


def changed(devices: list[dict], device_id: str, **values) -> list[dict]:
    return [dict(d, **values) if d.get('id') == device_id else d
            for d in devices]


def edit(xml: str, old: str, new: str) -> str:
    if xml.count(old) != 1:
        raise ValueError('%r occurs %d times' % (old, xml.count(old)))
    return xml.replace(old, new)


class TestArgvChecker(base.TestCase):
    """XML against the -device list libvirt made of it."""

    def problems(self, devices: list[dict], xml: str = XML) -> list[str]:
        expected = qemu_argv.expectations(xml)
        return expected.problems + qemu_argv.argv_problems(
            expected, qemu_argv.parse_devices(argv(devices)))

    def assertCaught(self, fragment: str, problems: list[str]) -> None:
        self.assertTrue(problems, 'the broken case passed')
        self.assertIn(fragment, '\n'.join(problems))

    def test_good_pair_passes(self):
        self.assertEqual([], self.problems(DEVICES))

    def test_parse_devices(self):
        devices = qemu_argv.parse_devices(argv(DEVICES))
        self.assertEqual(DEVICES, devices)

    def test_parse_legacy_device_syntax(self):
        self.assertEqual(
            {'driver': 'vfio-pci', 'host': '0000:03:00.0', 'bus': 'pci.2',
             'addr': 0, 'x-nv-gpudirect-clique': 3, 'rombar': False},
            qemu_argv.parse_device(
                'vfio-pci,host=0000:03:00.0,bus=pci.2,addr=0x0,'
                'x-nv-gpudirect-clique=3,rombar=off'))

    def test_root_port_link(self):
        xml = edit(XML, '  </qemu:override>', (
            '<qemu:device alias="pci.2"><qemu:frontend>'
            '<qemu:property name="x-speed" type="string" value="32"/>'
            '<qemu:property name="x-width" type="string" value="16"/>'
            '</qemu:frontend></qemu:device></qemu:override>'))
        good = changed(DEVICES, 'pci.2', **{'x-speed': '32',
                                            'x-width': 16})
        self.assertEqual([], self.problems(good, xml))
        self.assertCaught('vfio-pci 0000:03:00.0: root port pci.2 has '
                          'x-speed=None, the XML sets 32',
                          self.problems(DEVICES, xml))
        self.assertCaught('x-speed/x-width for alias pci.1, which names no '
                          'pcie-root-port', self.problems(
                              good, edit(xml, 'alias="pci.2"',
                                         'alias="pci.1"')))

    def test_wrong_clique(self):
        self.assertCaught(
            'vfio-pci 0000:04:00.0: x-nv-gpudirect-clique=1, the XML asks 0',
            self.problems(changed(DEVICES, 'ua-gpu-p2p-0000-04-00-0',
                                  **{'x-nv-gpudirect-clique': 1})))

    def test_clique_lost(self):
        devices = [dict(d) for d in DEVICES]
        del devices[6]['x-nv-gpudirect-clique']
        self.assertCaught('0000:03:00.0: x-nv-gpudirect-clique=None',
                          self.problems(devices))

    def test_clique_where_none_asked(self):
        self.assertCaught(
            'vfio-pci 0000:83:00.0: x-nv-gpudirect-clique=2, the XML asks '
            'None', self.problems(changed(
                DEVICES, 'ua-gpu-p2p-0000-83-00-0',
                **{'x-nv-gpudirect-clique': 2})))

    def test_wrong_bus_nr(self):
        problems = self.problems(changed(DEVICES, 'pci.4', bus_nr=250))
        self.assertCaught('expander bus 4 (busNr 249): 0 pxb-pcie', problems)
        self.assertCaught('pxb-pcie pci.4 with bus_nr 250: no such',
                          problems)
        self.assertCaught('0000:83:00.0: root port pci.5 sits on pxb-pcie '
                          'bus_nr 250', problems)

    def test_wrong_numa_node(self):
        self.assertCaught(
            'pxb-pcie bus_nr 252: numa_node 1, the XML says <node>0',
            self.problems(changed(DEVICES, 'pci.1', numa_node=1)))

    def test_numa_node_lost(self):
        devices = [dict(d) for d in DEVICES]
        del devices[0]['numa_node']
        self.assertCaught('numa_node None', self.problems(devices))

    def test_device_on_other_root_port_of_same_expander(self):
        self.assertCaught(
            '0000:03:00.0: on the root port in slot 1, the XML puts it on '
            'the one in slot 0',
            self.problems(changed(DEVICES, 'ua-gpu-p2p-0000-03-00-0',
                                  bus='pci.3')))

    def test_device_under_other_expander(self):
        self.assertCaught(
            '0000:83:00.0: root port pci.2 sits on pxb-pcie bus_nr 252, '
            'the XML puts it under the pxb-pcie with bus_nr 249',
            self.problems(changed(DEVICES, 'ua-gpu-p2p-0000-83-00-0',
                                  bus='pci.2')))

    def test_device_on_root_bus(self):
        self.assertCaught(
            '0000:03:00.0: root port pci.6 sits on pcie.0',
            self.problems(changed(DEVICES, 'ua-gpu-p2p-0000-03-00-0',
                                  bus='pci.6')))

    def test_unplaced_device_under_expander(self):
        self.assertCaught(
            'vfio-pci 0000:05:00.0: under pxb-pcie bus_nr 252, the XML puts '
            'it on no expander bus',
            self.problems(changed(DEVICES, 'hostdev0', bus='pci.2')))

    def test_device_on_bus_that_is_no_root_port(self):
        self.assertCaught(
            '0000:03:00.0: bus pci.1 is pxb-pcie, not a pcie-root-port',
            self.problems(changed(DEVICES, 'ua-gpu-p2p-0000-03-00-0',
                                  bus='pci.1')))

    def test_missing_gpu(self):
        devices = [d for d in DEVICES if d.get('host') != '0000:83:00.0']
        self.assertCaught('hostdev 0000:83:00.0: 0 vfio-pci',
                          self.problems(devices))

    def test_missing_expander(self):
        devices = [d for d in DEVICES if d.get('id') != 'pci.4']
        self.assertCaught('expander bus 4 (busNr 249): 0 pxb-pcie',
                          self.problems(devices))

    def test_extra_device(self):
        devices = DEVICES + [{'driver': 'vfio-pci', 'host': '0000:84:00.0',
                              'id': 'hostdev9', 'bus': 'pci.6'}]
        self.assertCaught('vfio-pci host=0000:84:00.0 (1): no such hostdev',
                          self.problems(devices))

    def test_clique_alias_names_no_hostdev(self):
        xml = edit(XML, '<qemu:device alias="ua-gpu-p2p-0000-04-00-0">',
                   '<qemu:device alias="ua-gpu-p2p-0000-99-00-0">')
        self.assertCaught(
            'clique for alias ua-gpu-p2p-0000-99-00-0, which names no PCI '
            'hostdev', self.problems(DEVICES, xml))


class TestTopologyChecker(base.TestCase):
    """XML that QEMU would honour faithfully, but that is wrong."""

    def problems(self, xml: str = XML, affinity: str = 'required'
                 ) -> list[str]:
        return qemu_argv.topology_problems(
            qemu_argv.expectations(xml), HOST_NODE, ROOT_COMPLEX, affinity)

    def test_good_xml_passes(self):
        self.assertEqual([], self.problems())

    def test_expanders_on_swapped_guest_nodes(self):
        # Consistent XML: QEMU would show these very nodes, so only the
        # host's own locality tells it is wrong.
        xml = edit(XML, '<node>0</node>', '<node>X</node>')
        xml = edit(xml, '<node>1</node>', '<node>0</node>')
        xml = edit(xml, '<node>X</node>', '<node>1</node>')
        problems = self.problems(xml)
        self.assertIn('0000:03:00.0 is on host node 0, placed under guest '
                      'node 1, whose memory Nova bound to host nodes [1]',
                      problems)
        self.assertIn('0000:83:00.0 is on host node 1, placed under guest '
                      'node 0, whose memory Nova bound to host nodes [0]',
                      problems)

    def test_device_left_on_root_bus_though_its_cell_exists(self):
        xml = edit(XML, '''<alias name="ua-gpu-p2p-0000-83-00-0"/>
      <address type="pci" domain="0x0000" bus="0x05" slot="0x00"
        function="0x0"/>''', '<alias name="ua-gpu-p2p-0000-83-00-0"/>')
        self.assertIn('0000:83:00.0 (host node 1) stays off the expander '
                      'buses, yet guest cell 1 is bound to its node',
                      self.problems(xml))

    def test_root_complexes_mixed_on_one_expander(self):
        root_complex = dict(ROOT_COMPLEX, **{'0000:04:00.0': 'pci0000:40'})
        self.assertIn(
            "expander bus 1 holds devices of root complexes ['pci0000:00', "
            "'pci0000:40']", qemu_argv.topology_problems(
                qemu_argv.expectations(XML), HOST_NODE, root_complex,
                'required'))

    def test_expanders_without_affinity(self):
        self.assertIn('hw:gpu_numa_affinity none, yet expander buses [1, 4]',
                      self.problems(affinity='none'))


class TestCliqueChecker(base.TestCase):
    """Cliques against the flavor and the host's P2P links."""

    def problems(self, clique: str, xml: str = XML) -> list[str]:
        return qemu_argv.clique_problems(
            qemu_argv.expectations(xml), clique, GPUS, link)

    def test_auto_passes(self):
        self.assertEqual([], self.problems('auto'))

    def test_fixed_value_not_applied(self):
        self.assertIn('clique 0 on 0000:03:00.0, the flavor asks 15',
                      self.problems('15'))
        self.assertIn('clique None on 0000:83:00.0, the flavor asks 15',
                      self.problems('15'))

    def test_clique_where_flavor_asks_none(self):
        self.assertIn('clique 0 on 0000:03:00.0, the flavor asks none',
                      self.problems('none'))

    def test_any_clique_on_consumer_gpus(self):
        problems = qemu_argv.clique_problems(
            qemu_argv.expectations(XML), 'auto', GPUS, link, consumer=True)
        self.assertIn('clique 0 on 0000:03:00.0, a consumer GPU', problems)
        self.assertNotIn('0000:83:00.0', ' '.join(problems))

    def test_far_gpus_share_a_clique(self):
        xml = edit(XML, '</qemu:override>', '''
    <qemu:device alias="ua-gpu-p2p-0000-83-00-0"><qemu:frontend>
      <qemu:property name="x-nv-gpudirect-clique" type="unsigned"
        value="0"/>
    </qemu:frontend></qemu:device></qemu:override>''')
        problems = self.problems('auto', xml)
        self.assertIn('clique 0 on 0000:83:00.0, which has no P2P peer in '
                      'the guest', problems)
        self.assertIn('0000:03:00.0 and 0000:83:00.0 are SYS, yet share '
                      'clique 0', problems)

    def test_near_gpus_split(self):
        xml = edit(XML, '''alias="ua-gpu-p2p-0000-04-00-0"><qemu:frontend>
      <qemu:property name="x-nv-gpudirect-clique" type="unsigned"
        value="0"/>''', '''alias="ua-gpu-p2p-0000-04-00-0"><qemu:frontend>
      <qemu:property name="x-nv-gpudirect-clique" type="unsigned"
        value="1"/>''')
        self.assertIn('0000:03:00.0 and 0000:04:00.0 are PIX, yet cliques '
                      '0 and 1', self.problems('auto', xml))

    def test_clique_on_a_nic(self):
        # The NIC is the one hostdev with nothing after its source.
        xml = edit(XML, '</source>\n    </hostdev>',
                   '</source><alias name="ua-nic"/></hostdev>')
        xml = edit(xml, '</qemu:override>', '''
    <qemu:device alias="ua-nic"><qemu:frontend>
      <qemu:property name="x-nv-gpudirect-clique" type="unsigned"
        value="0"/>
    </qemu:frontend></qemu:device></qemu:override>''')
        self.assertIn('clique 0 on 0000:05:00.0, not an NVIDIA GPU',
                      self.problems('auto', xml))


class TestAdaptForThisHost(base.TestCase):
    """Exactly the two adaptations, nothing the checks read."""

    def test_adaptations(self):
        adapted = qemu_argv.adapt_for_this_host(XML)
        root = etree.fromstring(adapted)
        self.assertEqual(
            ['0', '0', '0'],
            [e.get('nodeset') for e in root.iterfind('./numatune/*')])
        self.assertEqual(
            ['vfio'] * 4,
            [h.find('./driver').get('name')
             for h in root.iterfind('./devices/hostdev')])
        before = qemu_argv.expectations(XML)
        after = qemu_argv.expectations(adapted)
        self.assertEqual(before.hostdevs, after.hostdevs)
        self.assertEqual(before.expanders, after.expanders)
        self.assertEqual({0: frozenset({0}), 1: frozenset({0})},
                         after.cell_host_nodes)
        self.assertEqual({0: frozenset({0}), 1: frozenset({1})},
                         before.cell_host_nodes)

    def test_no_driver_where_the_host_shows_vfio(self):
        # libvirt 12.8 on a host that shows VFIO picks vfio itself.
        def drivers(xml):
            return [etree.tostring(h.find('./driver'))
                    if h.find('./driver') is not None else None
                    for h in etree.fromstring(xml).iterfind(
                        './devices/hostdev')]

        adapted = qemu_argv.adapt_for_this_host(XML, vfio_driver=False)
        self.assertEqual(drivers(XML), drivers(adapted))
        self.assertIn(None, drivers(adapted))
        root = etree.fromstring(adapted)
        self.assertEqual(
            ['0', '0', '0'],
            [e.get('nodeset') for e in root.iterfind('./numatune/*')])

    def test_adaptations_name_the_stack_refusal(self):
        self.assertEqual([qemu_argv.NUMATUNE_ADAPTATION],
                         qemu_argv.adaptations(None))
        (numatune, driver) = qemu_argv.adaptations(
            libvirt_rules.for_libvirt((11, 3)))
        self.assertEqual(qemu_argv.NUMATUNE_ADAPTATION, numatune)
        self.assertIn('libvirt 11.3 says "host doesn\'t support passthrough '
                      'of host PCI devices"', driver)


class TestLibvirtRules(base.TestCase):
    """Each measured libvirt release's rules, and those between."""

    def test_measured_releases(self):
        self.assertEqual("invalid PCI passthrough type 'default'",
                         libvirt_rules.for_libvirt((9, 0)).no_driver_refusal)
        self.assertFalse(libvirt_rules.for_libvirt((11, 3)).needs_vfio_host())
        self.assertTrue(libvirt_rules.for_libvirt((12, 8)).needs_vfio_host())

    def test_between_and_after(self):
        self.assertEqual((9, 0), libvirt_rules.for_libvirt((10, 0)).since)
        self.assertEqual((12, 8), libvirt_rules.for_libvirt((13, 1)).since)

    def test_older_than_measured(self):
        self.assertRaises(ValueError, libvirt_rules.for_libvirt, (8, 0))
