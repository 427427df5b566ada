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

"""The guest's topology description: content, privacy, size, gates."""

import base64
import json

import fixtures
from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_gpu_p2p.guest import devices
from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.guest import plan
from nova_gpu_p2p.guest import topology_description as td
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import discovery
from tests.unit import base
from tests.unit import test_corpus
from tests.unit import test_driver
from tests.unit import test_guest_plan as tgp

GPU_A, GPU_B, GPU_C, NIC = tgp.GPU_A, tgp.GPU_B, tgp.GPU_C, tgp.NIC
AFFINITY = tgp.request(clique='auto', numa='required')


class TestDescribe(tgp.DecideBase):
    """On the hand-made host of test_guest_plan."""

    def described(self, addresses=(GPU_A, GPU_B, GPU_C, NIC), **options):
        result = self.decide(AFFINITY, addresses,
                             options=plan.Options(**options))
        self.assertIsNotNone(result.guest_topology, result.notes)
        return result, td.decode(result.guest_topology)

    def test_devices_where_the_guest_finds_them(self):
        result, described = self.described()
        self.assertEqual(1, described['version'])
        placed = [(bus.bus_nr, port.slot, port.device)
                  for bus in result.buses.buses for port in bus.ports]
        self.assertEqual([(b, s) for b, s, _ in placed],
                         [(d['bus_nr'], d['slot'])
                          for d in described['devices']])
        self.assertEqual([GPU_A, GPU_B, GPU_C, NIC],
                         [address for _, _, address in placed])
        self.assertEqual(['gpu', 'gpu', 'gpu', 'nic'],
                         [d['role'] for d in described['devices']])
        self.assertEqual(['0x10de', '0x10de', '0x10de', '0x15b3'],
                         [d['vendor'] for d in described['devices']])
        self.assertEqual(['0x030200'] * 3 + ['0x020000'],
                         [d['class'] for d in described['devices']])
        self.assertEqual([0, 0, None, None],
                         [d['clique'] for d in described['devices']])
        self.assertEqual([0, 0, 1, 1],
                         [d['numa_node'] for d in described['devices']])

    def test_switches_are_opaque_and_shared(self):
        _, described = self.described()
        self.assertEqual([['s0'], ['s0'], [], []],
                         [d['switches'] for d in described['devices']])
        # The hand-made host reports no link speeds: null, not made up.
        self.assertEqual({'s0': {'link_speed': None, 'link_width': None}},
                         described['switches'])

    def test_host_cpu_when_known(self):
        cpu = {'vendor': 'GenuineIntel', 'familyid': 6, 'modelid': 143}
        result = self.decide(AFFINITY, (GPU_A, GPU_B),
                             guest=tgp.facts(host_cpu=cpu))
        self.assertEqual(cpu, td.decode(result.guest_topology)['cpu'])
        _, described = self.described()
        self.assertNotIn('cpu', described)

    def test_pairs_in_host_classes(self):
        _, described = self.described()
        self.assertEqual(
            [[0, 1, 'PIX'], [0, 2, 'SYS'], [0, 3, 'SYS'], [1, 2, 'SYS'],
             [1, 3, 'SYS'], [2, 3, 'PHB']], described['pairs'])

    def test_acs_policy_decides_the_class(self):
        host = tgp.host_gpus()
        switch_port = '0000:02:00.0'
        functions = dict(host.topology.functions)
        functions[switch_port] = tgp.model.PCIFunction(
            **dict(vars(functions[switch_port]), acs_known=False))
        self.host = discovery.evaluate(
            tgp.model.HostTopology(functions=functions,
                                   numa_nodes=host.topology.numa_nodes),
            test_corpus.make_conf())
        _, routed = self.described(addresses=(GPU_A, GPU_B))
        self.assertEqual([[0, 1, 'PHB']], routed['pairs'])
        _, ignored = self.described(addresses=(GPU_A, GPU_B),
                                    acs_policy='ignore')
        self.assertEqual([[0, 1, 'PIX']], ignored['pairs'])

    def test_no_host_address_in_it(self):
        result, _ = self.described()
        text = base64.b64decode(result.guest_topology).decode()
        for address in (GPU_A, GPU_B, GPU_C, NIC, '0000:01:00.0',
                        '0000:02:00.0', 'pci0000'):
            self.assertNotIn(address, text)

    def test_entry_text_has_no_comma(self):
        """libvirt does not escape commas for QEMU's -fw_cfg string=."""
        result, _ = self.described()
        self.assertNotIn(',', result.guest_topology)

    def test_option_off(self):
        result = self.decide(AFFINITY, (GPU_A, GPU_B),
                             options=plan.Options(guest_topology=False))
        self.assertIsNone(result.guest_topology)
        self.assertEqual(1, len(result.buses.buses))

    def test_none_without_placed_devices(self):
        result = self.decide(tgp.request(clique='auto'), (GPU_A, GPU_B))
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)
        self.assertIsNone(result.guest_topology)

    def test_old_libvirt_or_qemu_noted(self):
        needs = 'fw_cfg entries need libvirt %s and QEMU %s' % (
            '.'.join(map(str, min_versions.LIBVIRT_FWCFG)),
            '.'.join(map(str, min_versions.QEMU_FWCFG)))
        for facts in (
                tgp.facts(libvirt_version=test_driver.just_below(
                    min_versions.LIBVIRT_FWCFG)),
                tgp.facts(qemu_version=test_driver.just_below(
                    min_versions.QEMU_FWCFG))):
            result = self.decide(AFFINITY, (GPU_A, GPU_B), guest=facts)
            self.assertIsNone(result.guest_topology)
            self.assertEqual(1, len(result.buses.buses))
            self.assertNoteContains(needs, result)
        at_minimum = self.decide(AFFINITY, (GPU_A, GPU_B), guest=tgp.facts(
            libvirt_version=min_versions.LIBVIRT_FWCFG,
            qemu_version=min_versions.QEMU_FWCFG))
        self.assertIsNotNone(at_minimum.guest_topology)

    def test_too_large_noted(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.guest.topology_description.MAX_ENTRY_SIZE', 100))
        result = self.decide(AFFINITY, (GPU_A, GPU_B))
        self.assertIsNone(result.guest_topology)
        self.assertEqual(1, len(result.buses.buses))
        self.assertNoteContains('more than 100', result)

    def test_encode_is_base64_of_json(self):
        text = td.encode({'version': 1, 'devices': [], 'switches': {},
                          'pairs': []})
        self.assertEqual(
            {'version': 1, 'devices': [], 'switches': {}, 'pairs': []},
            json.loads(base64.b64decode(text)))


class TestLargeCorpusHost(base.TestCase):
    """16 GPUs and 8 NICs of a real generated sysfs tree fit the bound."""

    def test_sixteen_gpus_eight_nics(self):
        host = discovery.evaluate(test_corpus.discover('large-16gpu-8numa'),
                                  test_corpus.make_conf())
        functions = host.topology.functions.values()
        gpus = sorted(f.address for f in functions if f.is_gpu)
        nics = sorted(f.address for f in functions
                      if f.is_nic and f.address.endswith('.0'))
        self.assertEqual((16, 8), (len(gpus), len(nics)))
        # 16 x 128 GiB BARs: a 4 TiB hole, which needs 43 address bits.
        guest = tgp.facts(host_node_of_cell=tuple(range(8)),
                          used_pci_indexes=frozenset({0}), phys_bits=46)
        result = plan.decide(
            AFFINITY, [devices.describe(a, host.topology)
                       for a in gpus + nics], host, guest, plan.Options())
        self.assertIsNone(result.refusal)
        self.assertIsNotNone(result.guest_topology, result.notes)
        self.assertLess(len(result.guest_topology), td.MAX_ENTRY_SIZE / 2)
        described = td.decode(result.guest_topology)
        self.assertEqual(24, len(described['devices']))
        self.assertEqual(24 * 23 // 2, len(described['pairs']))
        # The host's own links, as its sysfs says: H100 on PCIe 5 x16.
        self.assertEqual(
            {('32.0 GT/s PCIe', 16)},
            {(d['link_speed'], d['link_width'])
             for d in described['devices'] if d['role'] == 'gpu'})
        self.assertEqual(8, len(described['switches']))
        # A GPU pair and its NIC share their node's switch.
        first = [d for d in described['devices'] if d['switches'] == ['s0']]
        self.assertEqual(['gpu', 'gpu', 'nic'],
                         sorted(d['role'] for d in first))


class TestSysinfoFwCfg(base.TestCase):

    def test_xml(self):
        entry = libvirt_config.SysinfoFwCfg({td.ENTRY_NAME: 'eyJ2Ijox'})
        self.assertEqual(
            b'<sysinfo type="fwcfg"><entry name="opt/org.openstack.'
            b'nova-gpu-p2p/topology">eyJ2Ijox</entry></sysinfo>',
            etree.tostring(entry.format_dom()))

    def test_beside_novas_smbios_sysinfo(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.virt_type, guest.name, guest.uuid = 'kvm', 'i', 'u'
        guest.memory, guest.vcpus, guest.os_type = 1024, 1, 'hvm'
        guest.sysinfo = vconfig.LibvirtConfigGuestSysinfo()
        guest.sysinfo.system_manufacturer = 'OpenStack Foundation'
        ours = libvirt_config.Guest.from_nova(
            guest, fw_cfg=libvirt_config.SysinfoFwCfg({td.ENTRY_NAME: 'e'}))
        sysinfo = ours.format_dom().findall('sysinfo')
        self.assertEqual(['smbios', 'fwcfg'],
                         [s.get('type') for s in sysinfo])
        self.assertIs(sysinfo[0].getnext(), sysinfo[1])
