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


"""plan.decide: every refusal, fallback and option, on a hand-made host.

The host (two sockets):

* node 0, root complex pci0000:00: NVIDIA GPUs 0000:03:00.0 and
  0000:04:00.0 behind one PCIe switch (PIX); an AMD GPU 0000:05:00.0 on
  its own root port.
* node 1, root complex pci0000:80: NVIDIA GPU 0000:81:00.0, a NIC
  0000:82:00.0 and an NVMe drive 0000:83:00.0, each on a root port.
* SLIT: 10 local, 21 remote.
"""

import dataclasses

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import devices
from nova_gpu_p2p.guest import expander_buses
from nova_gpu_p2p.guest import plan
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import host_cliques as host_cliques
from nova_gpu_p2p.topology import host_gpus as host_gpus_mod
from nova_gpu_p2p.topology import model
from tests.unit import base
from tests.unit import test_corpus

make_conf = test_corpus.make_conf
GiB = 1 << 30
PT = model.PortType
GPU_A = '0000:03:00.0'
GPU_B = '0000:04:00.0'
AMD = '0000:05:00.0'
GPU_C = '0000:81:00.0'
NIC = '0000:82:00.0'
NVME = '0000:83:00.0'

CM = extra_specs.CliqueMode
NA = extra_specs.NumaAffinity


def function(address, parent, rc, numa, class_code=0x030200,
             vendor=0x10de, port_type=PT.ENDPOINT, bars64=()):
    return model.PCIFunction(
        address=address, vendor=vendor, device=0x2330,
        class_code=class_code, parent=parent, root_complex=rc,
        numa_node=numa, port_type=port_type, bars64=bars64)


def topology(bars=32 * GiB, numa_nodes=None, **kwargs):
    """The host described in the module docstring."""
    bridge = 0x060400
    rc0, rc1 = 'pci0000:00', 'pci0000:80'
    functions = [
        function('0000:00:01.0', None, rc0, 0, bridge, 0x8086,
                 PT.ROOT_PORT),
        function('0000:01:00.0', '0000:00:01.0', rc0, 0, bridge, 0x10b5,
                 PT.UPSTREAM),
        function('0000:02:00.0', '0000:01:00.0', rc0, 0, bridge, 0x10b5,
                 PT.DOWNSTREAM),
        function('0000:02:01.0', '0000:01:00.0', rc0, 0, bridge, 0x10b5,
                 PT.DOWNSTREAM),
        function(GPU_A, '0000:02:00.0', rc0, 0, bars64=(bars,)),
        function(GPU_B, '0000:02:01.0', rc0, 0, bars64=(bars,)),
        function('0000:00:02.0', None, rc0, 0, bridge, 0x8086,
                 PT.ROOT_PORT),
        function(AMD, '0000:00:02.0', rc0, 0, 0x030000, 0x1002),
        function('0000:80:01.0', None, rc1, 1, bridge, 0x8086,
                 PT.ROOT_PORT),
        function(GPU_C, '0000:80:01.0', rc1, 1, bars64=(bars,)),
        function('0000:80:02.0', None, rc1, 1, bridge, 0x8086,
                 PT.ROOT_PORT),
        function(NIC, '0000:80:02.0', rc1, 1, 0x020000, 0x15b3),
        function('0000:80:03.0', None, rc1, 1, bridge, 0x8086,
                 PT.ROOT_PORT),
        function(NVME, '0000:80:03.0', rc1, 1, 0x010802, 0x144d),
    ]
    if numa_nodes is None:
        numa_nodes = (
            model.NumaNode(id=0, cpus=frozenset({0, 1}), distances=(10, 21)),
            model.NumaNode(id=1, cpus=frozenset({2, 3}), distances=(21, 10)))
    return model.HostTopology(functions={f.address: f for f in functions},
                              numa_nodes=numa_nodes, **kwargs)


def host_gpus(**kwargs):
    return discovery.evaluate(topology(**kwargs), make_conf())


def guest_devices(host, *addresses, network=()):
    return [devices.describe(a, host.topology, network=a in network)
            for a in addresses]


def request(clique='none', numa='none'):
    return extra_specs.GPUP2PRequest(
        clique=extra_specs.parse_clique(clique),
        numa_affinity=extra_specs.parse_numa_affinity(numa))


FACTS = plan.GuestFacts(host_node_of_cell=(0, 1),
                        machine_type='pc-q35-8.2', memory=16 * GiB,
                        phys_bits=40, used_pci_indexes=frozenset({0, 1, 2}))


def changes_guest(result: plan.GuestPlan) -> bool:
    """Whether the plan adds anything at all to Nova's guest config."""
    return bool(result.cliques or result.buses.buses or result.distances
                or (result.hole64 and result.hole64.size))


def facts(**changes):
    values = dict(host_node_of_cell=FACTS.host_node_of_cell,
                  machine_type=FACTS.machine_type, memory=FACTS.memory,
                  phys_bits=FACTS.phys_bits,
                  used_pci_indexes=FACTS.used_pci_indexes)
    values.update(changes)
    return plan.GuestFacts(**values)


class DecideBase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = host_gpus()

    def decide(self, req, addresses=(GPU_A, GPU_B), guest=FACTS,
               options=plan.Options(), host=None, network=()):
        host = host or self.host
        return plan.decide(req, guest_devices(host, *addresses,
                                              network=network),
                           host, guest, options)

    def assertNoteContains(self, text, result):
        self.assertTrue(any(text in note for note in result.notes),
                        '%r not in notes %r' % (text, result.notes))


class TestHostFixture(DecideBase):
    """The hand-made host reads as the docstring says."""

    def test_host_cliques(self):
        self.assertEqual(((GPU_A, GPU_B), (GPU_C,)), self.host.cliques.groups)
        self.assertIsNone(self.host.error)

    def test_device_kinds(self):
        kinds = [d.kind for d in guest_devices(
            self.host, GPU_A, AMD, NIC, NVME)]
        self.assertEqual([devices.DeviceKind.GPU, devices.DeviceKind.GPU,
                          devices.DeviceKind.NIC, devices.DeviceKind.OTHER],
                         kinds)

    def test_describe_nvidia(self):
        device = devices.describe(GPU_C, self.host.topology)
        self.assertEqual(devices.GuestDevice(
            address=GPU_C, kind=devices.DeviceKind.GPU, nvidia_gpu=True,
            numa_node=1, root_complex='pci0000:80', bars64=(32 * GiB,)),
            device)

    def test_describe_amd_is_gpu_not_nvidia(self):
        device = devices.describe(AMD, self.host.topology)
        self.assertIs(devices.DeviceKind.GPU, device.kind)
        self.assertFalse(device.nvidia_gpu)

    def test_describe_unknown(self):
        device = devices.describe('0000:99:00.0', self.host.topology)
        self.assertFalse(device.known)
        self.assertIs(devices.DeviceKind.OTHER, device.kind)
        self.assertIsNone(device.numa_node)

    def test_describe_unknown_network(self):
        device = devices.describe('0000:99:00.1', self.host.topology,
                                  network=True)
        self.assertFalse(device.known)
        self.assertIs(devices.DeviceKind.NIC, device.kind)

    def test_describe_network_overrides_class(self):
        device = devices.describe(NVME, self.host.topology, network=True)
        self.assertIs(devices.DeviceKind.NIC, device.kind)

    def test_describe_network_gpu_stays_gpu(self):
        device = devices.describe(GPU_A, self.host.topology, network=True)
        self.assertIs(devices.DeviceKind.GPU, device.kind)

    def test_aligned(self):
        nic = devices.describe(NIC, self.host.topology)
        nvme = devices.describe(NVME, self.host.topology)
        self.assertTrue(devices.aligned(nic, frozenset({'gpu', 'nic'})))
        self.assertFalse(devices.aligned(nic, frozenset({'gpu'})))
        self.assertFalse(devices.aligned(nvme, frozenset({'gpu', 'nic'})))
        self.assertTrue(devices.aligned(nvme, frozenset({'all'})))


class TestNotWanted(DecideBase):

    def test_empty_plan(self):
        result = self.decide(request())
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.notes)
        self.assertEqual({}, result.cliques)
        self.assertEqual((), result.buses.buses)
        self.assertIsNone(result.hole64)
        self.assertIsNone(result.distances)
        self.assertFalse(changes_guest(result))
        self.assertEqual((GPU_A, GPU_B),
                         tuple(d.address for d in result.devices))

    def test_not_wanted_ignores_discovery_error(self):
        broken = host_gpus_mod.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=host_cliques.Cliques(groups=(), ids={}), error='boom')
        result = self.decide(request(), host=broken)
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.notes)


class TestDiscoveryError(DecideBase):

    def setUp(self):
        super().setUp()
        self.broken = host_gpus_mod.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=host_cliques.Cliques(groups=(), ids={}),
            error='/sys/bus/pci/devices: no such directory')

    def test_required_refused_reschedule(self):
        result = self.decide(request(clique='required'), host=self.broken)
        self.assertTrue(result.refusal.reschedule)
        self.assertIn('GPU topology discovery failed on this host',
                      result.refusal.message)
        self.assertIn('/sys/bus/pci/devices: no such directory',
                      result.refusal.message)
        self.assertIn('nova-gpu-p2p topology', result.refusal.message)

    def test_numa_required_refused(self):
        result = self.decide(request(numa='required'), host=self.broken)
        self.assertTrue(result.refusal.reschedule)

    def test_auto_noted(self):
        result = self.decide(request(clique='auto', numa='preferred'),
                             host=self.broken)
        self.assertIsNone(result.refusal)
        self.assertEqual(1, len(result.notes))
        self.assertIn('discovery failed', result.notes[0])
        self.assertEqual({}, result.cliques)
        self.assertEqual((), result.buses.buses)
        self.assertIsNone(result.distances)
        self.assertFalse(changes_guest(result))


class TestNoGPU(DecideBase):

    def test_required_refused_without_reschedule(self):
        result = self.decide(request(clique='required'), addresses=(NIC,))
        self.assertFalse(result.refusal.reschedule)
        message = result.refusal.message
        self.assertIn('hw:gpu_p2p_clique: the flavor has no passthrough '
                      'GPU', message)
        self.assertIn('pci_passthrough:alias', message)
        self.assertNotIn('hw:gpu_numa_affinity', message)

    def test_numa_required_names_its_key(self):
        result = self.decide(request(numa='required'), addresses=())
        self.assertFalse(result.refusal.reschedule)
        self.assertIn('hw:gpu_numa_affinity: the flavor has no',
                      result.refusal.message)

    def test_auto_and_preferred_noted(self):
        result = self.decide(request(clique='auto', numa='preferred'),
                             addresses=(NIC, NVME))
        self.assertIsNone(result.refusal)
        self.assertEqual(1, len(result.notes))
        self.assertIn('hw:gpu_p2p_clique and hw:gpu_numa_affinity',
                      result.notes[0])
        self.assertIn('or remove the key', result.notes[0])
        self.assertEqual((), result.buses.buses)
        self.assertFalse(changes_guest(result))

    def test_unknown_device_is_no_gpu(self):
        result = self.decide(request(clique='auto'),
                             addresses=('0000:99:00.0',))
        self.assertIn('no passthrough GPU', result.notes[0])

    def test_non_nvidia_gpu_is_a_gpu(self):
        result = self.decide(request(numa='preferred'), addresses=(AMD,))
        self.assertIsNone(result.refusal)
        self.assertFalse(any('no passthrough GPU' in n
                             for n in result.notes))
        self.assertEqual(AMD, result.buses.buses[0].ports[0].device)


class TestLibvirtVersion(DecideBase):

    def test_required_refused_reschedule(self):
        result = self.decide(request(clique='required'),
                             guest=facts(libvirt_version=(8, 1, 0)))
        self.assertTrue(result.refusal.reschedule)
        message = result.refusal.message
        self.assertIn('hw:gpu_p2p_clique=required', message)
        self.assertIn('libvirt 8.2.0 or later', message)
        self.assertIn('this host has 8.1.0', message)
        self.assertIn('upgrade libvirt', message)

    def test_auto_noted_without_cliques(self):
        result = self.decide(request(clique='auto'),
                             guest=facts(libvirt_version=(7, 0, 0)))
        self.assertIsNone(result.refusal)
        self.assertEqual({}, result.cliques)
        self.assertNoteContains('upgrade libvirt', result)
        self.assertNoteContains('hw:gpu_p2p_clique=auto', result)

    def test_fixed_noted_with_its_id(self):
        result = self.decide(request(clique='3'),
                             guest=facts(libvirt_version=(8, 0, 0)))
        self.assertEqual({}, result.cliques)
        self.assertNoteContains('hw:gpu_p2p_clique=3 needs libvirt', result)

    def test_buses_unaffected(self):
        result = self.decide(request(clique='auto', numa='preferred'),
                             guest=facts(libvirt_version=(8, 1, 0)))
        self.assertEqual(1, len(result.buses.buses))

    def test_8_2_0_accepted(self):
        result = self.decide(request(clique='required'),
                             guest=facts(libvirt_version=(8, 2, 0)))
        self.assertIsNone(result.refusal)
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)
        self.assertEqual((), result.notes)


class TestHiddenHypervisor(DecideBase):

    def test_required_refused(self):
        result = self.decide(request(clique='required'),
                             guest=facts(hypervisor_hidden=True))
        self.assertFalse(result.refusal.reschedule)
        message = result.refusal.message
        self.assertIn('hypervisor is hidden', message)
        self.assertIn('hw:hide_hypervisor_id', message)
        self.assertIn('img_hide_hypervisor_id', message)

    def test_auto_noted_cliques_kept(self):
        result = self.decide(request(clique='auto'),
                             guest=facts(hypervisor_hidden=True))
        self.assertIsNone(result.refusal)
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)
        self.assertNoteContains('hw:hide_hypervisor_id', result)

    def test_fixed_noted_cliques_kept(self):
        result = self.decide(request(clique='9'),
                             guest=facts(hypervisor_hidden=True))
        self.assertEqual({GPU_A: 9, GPU_B: 9}, result.cliques)
        self.assertNoteContains('hw:gpu_p2p_clique=9: remove '
                                'hw:hide_hypervisor_id', result)

    def test_refusal_ends_the_decision(self):
        # The i440fx machine type would add a note for preferred NUMA
        # affinity, had the decision gone on past the refusal.
        result = self.decide(request(clique='required', numa='preferred'),
                             guest=facts(hypervisor_hidden=True,
                                         machine_type='pc-i440fx-8.2'))
        self.assertIn('hypervisor is hidden', result.refusal.message)
        self.assertEqual(((), {}, ()), (result.notes, result.cliques,
                                        result.buses.buses))

    def test_numa_only_does_not_care(self):
        result = self.decide(request(numa='required'),
                             guest=facts(hypervisor_hidden=True))
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.notes)


class TestNoNvidiaGPU(DecideBase):

    def test_auto_noted(self):
        result = self.decide(request(clique='auto'), addresses=(AMD,))
        self.assertIsNone(result.refusal)
        self.assertEqual({}, result.cliques)
        self.assertNoteContains('NVIDIA', result)
        self.assertNoteContains("point the flavor's PCI alias at NVIDIA",
                                result)

    def test_required_refused(self):
        result = self.decide(request(clique='required'), addresses=(AMD,))
        self.assertFalse(result.refusal.reschedule)
        self.assertIn('NVIDIA display-class', result.refusal.message)

    def test_amd_beside_nvidia_gets_no_id(self):
        result = self.decide(request(clique='auto'),
                             addresses=(GPU_A, GPU_B, AMD))
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)
        self.assertEqual((), result.notes)

    def test_fixed_skips_amd(self):
        result = self.decide(request(clique='4'),
                             addresses=(GPU_A, GPU_B, AMD))
        self.assertEqual({GPU_A: 4, GPU_B: 4}, result.cliques)


class TestCliqueDecision(DecideBase):

    def test_required_apart_refused_reschedule(self):
        result = self.decide(request(clique='required'),
                             addresses=(GPU_A, GPU_C))
        self.assertTrue(result.refusal.reschedule)
        message = result.refusal.message
        self.assertIn('hw:gpu_p2p_clique=required', message)
        self.assertIn('0000:03:00.0, 0000:81:00.0', message)
        self.assertIn('linked by SYS', message)
        self.assertIn('p2p_level = PXB', message)
        self.assertIn('hw:gpu_p2p_clique=auto', message)
        self.assertIn('another host', message)

    def test_refusal_plan_has_no_changes(self):
        result = self.decide(request(clique='required', numa='preferred'),
                             addresses=(GPU_A, GPU_C))
        self.assertEqual({}, result.cliques)
        self.assertEqual((), result.buses.buses)

    def test_level_option_named(self):
        result = self.decide(request(clique='required'),
                             addresses=(GPU_A, GPU_C),
                             options=plan.Options(p2p_level='NODE'))
        self.assertIn('p2p_level = NODE', result.refusal.message)

    def test_static_override_link_named(self):
        host = discovery.evaluate(
            topology(p2p_overrides={frozenset((GPU_A, GPU_B)): False}),
            make_conf())
        result = self.decide(request(clique='required'), host=host)
        self.assertIn('a link the static topology marks not P2P capable',
                      result.refusal.message)

    def test_acs_policy_used_for_link_name(self):
        # Redirect on the switch port above GPU_A: PHB with route.
        topo = topology()
        functions = dict(topo.functions)
        dsp = functions['0000:02:00.0']
        functions['0000:02:00.0'] = model.PCIFunction(
            address=dsp.address, vendor=dsp.vendor, device=dsp.device,
            class_code=dsp.class_code, parent=dsp.parent,
            root_complex=dsp.root_complex, numa_node=0,
            port_type=PT.DOWNSTREAM, acs=model.Acs(0x5f, 0x1d))
        host = discovery.evaluate(
            model.HostTopology(functions=functions,
                               numa_nodes=topo.numa_nodes), make_conf())
        result = self.decide(request(clique='required'), host=host)
        self.assertIn('linked by PHB', result.refusal.message)
        ignored = self.decide(request(clique='required'), host=host,
                              options=plan.Options(acs_policy='ignore'))
        # The host grouping (route) still splits them; the name follows
        # the option.
        self.assertIn('linked by PIX', ignored.refusal.message)

    def test_auto_apart_no_note(self):
        result = self.decide(request(clique='auto'),
                             addresses=(GPU_A, GPU_B, GPU_C))
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)
        self.assertEqual((), result.notes)

    def test_fixed_disagreeing_noted(self):
        result = self.decide(request(clique='1'), addresses=(GPU_A, GPU_C))
        self.assertEqual({GPU_A: 1, GPU_C: 1}, result.cliques)
        self.assertNoteContains('host topology disagrees', result)
        self.assertIsNone(result.refusal)

    def test_changes_guest_with_cliques_only(self):
        result = self.decide(request(clique='auto'))
        self.assertTrue(changes_guest(result))


class TestNumaTopology(DecideBase):

    def test_preferred_noted(self):
        result = self.decide(request(numa='preferred'),
                             guest=facts(host_node_of_cell=None))
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.buses.buses)
        self.assertNoteContains('hw:gpu_numa_affinity=preferred needs an '
                                'instance NUMA topology', result)
        self.assertNoteContains('hw:numa_nodes', result)
        self.assertNoteContains('hw:cpu_policy=dedicated', result)

    def test_required_refused(self):
        result = self.decide(request(numa='required'),
                             guest=facts(host_node_of_cell=()))
        self.assertFalse(result.refusal.reschedule)
        self.assertIn('hw:numa_nodes', result.refusal.message)

    def test_cliques_still_made(self):
        result = self.decide(request(clique='auto', numa='preferred'),
                             guest=facts(host_node_of_cell=None))
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)
        self.assertIsNone(result.distances)


class TestMachineType(DecideBase):

    def test_i440fx_noted(self):
        result = self.decide(request(numa='preferred'),
                             guest=facts(machine_type='pc-i440fx-8.2'))
        self.assertEqual((), result.buses.buses)
        self.assertNoteContains('hw_machine_type=q35', result)
        self.assertNoteContains('this guest has pc-i440fx-8.2', result)

    def test_i440fx_required_refused(self):
        result = self.decide(request(numa='required'),
                             guest=facts(machine_type='pc-i440fx-8.2'))
        self.assertFalse(result.refusal.reschedule)
        self.assertIn('hw_machine_type=q35', result.refusal.message)

    def test_none_refused(self):
        result = self.decide(request(numa='required'),
                             guest=facts(machine_type=None))
        self.assertIsNotNone(result.refusal)
        self.assertIn('q35', result.refusal.message)

    def test_versioned_q35_accepted(self):
        result = self.decide(request(numa='required'),
                             guest=facts(machine_type='pc-q35-8.2'))
        self.assertIsNone(result.refusal)
        self.assertEqual(1, len(result.buses.buses))

    def test_plain_q35_accepted(self):
        result = self.decide(request(numa='required'),
                             guest=facts(machine_type='q35'))
        self.assertIsNone(result.refusal)

    def test_machine_type_irrelevant_to_cliques(self):
        result = self.decide(request(clique='required'),
                             guest=facts(machine_type='pc-i440fx-8.2'))
        self.assertIsNone(result.refusal)
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)


class TestACPI(DecideBase):

    def test_off_noted(self):
        result = self.decide(request(numa='preferred'),
                             guest=facts(acpi=False))
        self.assertEqual((), result.buses.buses)
        self.assertNoteContains('needs guest ACPI', result)
        self.assertNoteContains('Nova enables ACPI', result)

    def test_off_required_refused(self):
        result = self.decide(request(numa='required'),
                             guest=facts(acpi=False))
        self.assertFalse(result.refusal.reschedule)
        self.assertIn('ACPI', result.refusal.message)


class TestLayout(DecideBase):

    def test_placed_on_expander_buses(self):
        result = self.decide(request(numa='required'),
                             addresses=(GPU_C, GPU_A, GPU_B, NIC))
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.notes)
        self.assertEqual(
            [(3, 253, 0, 0, 'pci0000:00', [(4, 0, GPU_A), (5, 1, GPU_B)]),
             (6, 250, 1, 1, 'pci0000:80', [(7, 0, GPU_C), (8, 1, NIC)])],
            [(b.index, b.bus_nr, b.guest_node, b.host_numa_node,
              b.host_group, [(p.index, p.slot, p.device) for p in b.ports])
             for b in result.buses.buses])

    def test_guest_cell_follows_nova_mapping(self):
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_C),
                             guest=facts(host_node_of_cell=(1, 0)))
        self.assertEqual([(GPU_C, 0), (GPU_A, 1)],
                         [(b.ports[0].device, b.guest_node)
                          for b in result.buses.buses])

    def test_numa_grouping(self):
        options = plan.Options(grouping=expander_buses.Grouping.NUMA,
                               align=frozenset({'all'}))
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, AMD, GPU_C, NVME),
                             options=options)
        self.assertEqual(['node 0', 'node 1'],
                         [b.host_group for b in result.buses.buses])
        self.assertEqual([[GPU_A, AMD], [GPU_C, NVME]],
                         [[p.device for p in b.ports]
                          for b in result.buses.buses])

    def test_root_complex_grouping_splits_node(self):
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, AMD))
        # GPU_A and AMD share root complex pci0000:00: one bus.
        self.assertEqual(1, len(result.buses.buses))

    def test_too_many_for_one_bus(self):
        functions = {}
        for bus in range(0x10, 0x31):
            address = '0000:%02x:00.0' % bus
            functions[address] = function(address, None, 'pci0000:00', 0)
        host = discovery.evaluate(
            model.HostTopology(functions=functions), make_conf())
        result = self.decide(request(numa='preferred'),
                             addresses=tuple(sorted(functions)), host=host,
                             guest=facts(host_node_of_cell=(0,)))
        self.assertEqual((), result.buses.buses)
        self.assertNoteContains('33 devices under pci0000:00', result)
        required = self.decide(request(numa='required'),
                               addresses=tuple(sorted(functions)),
                               host=host,
                               guest=facts(host_node_of_cell=(0,)))
        self.assertFalse(required.refusal.reschedule)

    def test_changes_guest_with_buses(self):
        result = self.decide(request(numa='preferred'))
        self.assertTrue(changes_guest(result))
        self.assertEqual({}, result.cliques)


class TestUnplaced(DecideBase):

    def test_required_refused_reschedule(self):
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_C),
                             guest=facts(host_node_of_cell=(0,)))
        self.assertTrue(result.refusal.reschedule)
        message = result.refusal.message
        self.assertIn('hw:gpu_numa_affinity=required', message)
        self.assertIn('0000:81:00.0 stays on the root bus', message)
        self.assertIn('host NUMA node 1', message)

    def test_required_refusal_names_the_first_unplaced(self):
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C),
                             guest=facts(host_node_of_cell=(1,)))
        self.assertIn('%s stays on the root bus' % GPU_A,
                      result.refusal.message)
        self.assertNotIn(GPU_B, result.refusal.message)
        self.assertEqual((), result.notes)

    def test_preferred_noted_others_placed(self):
        result = self.decide(request(numa='preferred'),
                             addresses=(GPU_A, GPU_B, GPU_C),
                             guest=facts(host_node_of_cell=(0,)))
        self.assertIsNone(result.refusal)
        self.assertEqual(
            [[GPU_A, GPU_B]],
            [[p.device for p in b.ports] for b in result.buses.buses])
        self.assertNoteContains(
            'hw:gpu_numa_affinity=preferred: 0000:81:00.0 stays on the '
            'root bus', result)
        self.assertIsNone(result.buses.port_of(GPU_C))

    def test_unknown_device_noted(self):
        result = self.decide(request(numa='preferred'),
                             addresses=(GPU_A, '0000:99:00.0'),
                             options=plan.Options(align=frozenset({'all'})))
        self.assertNoteContains('does not list 0000:99:00.0', result)
        self.assertEqual(1, len(result.buses.buses))

    def test_numa_none_device(self):
        topo = topology()
        functions = dict(topo.functions)
        functions[GPU_C] = function(GPU_C, '0000:80:01.0', 'pci0000:80',
                                    None)
        host = discovery.evaluate(
            model.HostTopology(functions=functions,
                               numa_nodes=topo.numa_nodes), make_conf())
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_C), host=host)
        self.assertTrue(result.refusal.reschedule)
        self.assertIn('no NUMA node for 0000:81:00.0',
                      result.refusal.message)

    def test_all_unplaced_preferred(self):
        result = self.decide(request(numa='preferred'),
                             addresses=(GPU_C,),
                             guest=facts(host_node_of_cell=(0,)))
        self.assertEqual((), result.buses.buses)
        self.assertIsNone(result.hole64)
        self.assertEqual(1, len(result.notes))


class TestHole64(DecideBase):

    def test_fits(self):
        # 3 x 32 GiB -> 128 GiB; 16 GiB RAM: 128..256 GiB, 2 ** 38.
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C))
        self.assertEqual(128 * GiB, result.hole64.size)
        self.assertEqual(128 * GiB, result.hole64.needed)
        self.assertTrue(changes_guest(result))

    def test_default_size_sets_nothing(self):
        # 2 x 16 GiB: QEMU's 32 GiB default is enough.
        result = self.decide(request(numa='required'),
                             host=host_gpus(bars=16 * GiB))
        self.assertIsNone(result.hole64.size)
        self.assertEqual(32 * GiB, result.hole64.needed)

    def test_just_above_default(self):
        result = self.decide(request(numa='required'))
        self.assertEqual(64 * GiB, result.hole64.size)

    def test_required_refused(self):
        # 3 x 256 GiB -> 1 TiB hole at 1 TiB..2 TiB: 41 bits.
        host = host_gpus(bars=256 * GiB)
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C), host=host)
        self.assertFalse(result.refusal.reschedule)
        message = result.refusal.message
        self.assertIn('hw:gpu_numa_affinity=required', message)
        self.assertIn('hw:maxphysaddr_bits=41', message)
        self.assertIn('40 physical address bits', message)

    def test_required_reschedules_when_bits_are_the_hosts(self):
        # Another host may have more physical address bits to pass through.
        host = host_gpus(bars=256 * GiB)
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C), host=host,
                             guest=facts(phys_bits_from_host=True))
        self.assertTrue(result.refusal.reschedule)
        self.assertIn('hw:maxphysaddr_bits=41', result.refusal.message)

    def test_preferred_falls_back_without_buses(self):
        host = host_gpus(bars=256 * GiB)
        result = self.decide(request(clique='auto', numa='preferred'),
                             addresses=(GPU_A, GPU_B, GPU_C), host=host)
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.buses.buses)
        self.assertIsNone(result.hole64)
        self.assertNoteContains('hw:maxphysaddr_bits=41', result)
        self.assertNoteContains('devices stay where Nova puts them', result)
        self.assertEqual({GPU_A: 0, GPU_B: 0}, result.cliques)

    def test_more_phys_bits_fit(self):
        host = host_gpus(bars=256 * GiB)
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C), host=host,
                             guest=facts(phys_bits=41))
        self.assertIsNone(result.refusal)
        self.assertEqual(1 << 40, result.hole64.size)

    def test_unknown_phys_bits_fit(self):
        host = host_gpus(bars=256 * GiB)
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C), host=host,
                             guest=facts(phys_bits=None))
        self.assertIsNone(result.refusal)

    def test_off(self):
        host = host_gpus(bars=256 * GiB)
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, GPU_B, GPU_C), host=host,
                             options=plan.Options(pcihole64='off'))
        self.assertIsNone(result.refusal)
        self.assertIsNone(result.hole64.size)
        self.assertEqual(3, len(
            [p for b in result.buses.buses for p in b.ports]))

    def test_fixed_size(self):
        result = self.decide(request(numa='required'),
                             options=plan.Options(pcihole64=256))
        self.assertEqual(256 * GiB, result.hole64.size)

    def test_no_hole_without_buses(self):
        result = self.decide(request(clique='auto'))
        self.assertIsNone(result.hole64)


class TestAlignDeviceTypes(DecideBase):

    ALL = (GPU_A, GPU_C, NIC, NVME)

    def placed(self, result):
        return sorted(p.device for b in result.buses.buses for p in b.ports)

    def test_gpu_only(self):
        result = self.decide(request(numa='preferred'), addresses=self.ALL,
                             options=plan.Options(align=frozenset({'gpu'})))
        self.assertEqual([GPU_A, GPU_C], self.placed(result))
        self.assertEqual((), result.notes)

    def test_gpu_and_nic(self):
        result = self.decide(request(numa='preferred'), addresses=self.ALL)
        self.assertEqual([GPU_A, GPU_C, NIC], self.placed(result))

    def test_all(self):
        result = self.decide(request(numa='preferred'), addresses=self.ALL,
                             options=plan.Options(align=frozenset({'all'})))
        self.assertEqual([GPU_A, GPU_C, NIC, NVME], self.placed(result))

    def test_nic_only(self):
        result = self.decide(request(numa='preferred'), addresses=self.ALL,
                             options=plan.Options(align=frozenset({'nic'})))
        self.assertEqual([NIC], self.placed(result))

    def test_network_interface_counts_as_nic(self):
        result = self.decide(request(numa='preferred'),
                             addresses=(GPU_A, NVME), network=(NVME,),
                             options=plan.Options(align=frozenset({'nic'})))
        self.assertEqual([NVME], self.placed(result))

    def test_unaligned_unknown_device_not_noted(self):
        result = self.decide(request(numa='required'),
                             addresses=(GPU_A, '0000:99:00.0'))
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.notes)


class TestDistances(DecideBase):

    def test_on(self):
        result = self.decide(request(clique='auto'))
        self.assertEqual(((10, 21), (21, 10)), result.distances)
        self.assertTrue(changes_guest(result))

    def test_follow_cell_mapping(self):
        host = host_gpus(numa_nodes=(
            model.NumaNode(id=0, cpus=frozenset(), distances=(10, 16)),
            model.NumaNode(id=1, cpus=frozenset(), distances=(32, 10))))
        result = self.decide(request(clique='auto'), host=host,
                             guest=facts(host_node_of_cell=(1, 0)))
        self.assertEqual(((10, 32), (16, 10)), result.distances)

    def test_off(self):
        result = self.decide(
            request(clique='auto'),
            options=plan.Options(numa_distances=False))
        self.assertIsNone(result.distances)

    def test_one_cell(self):
        result = self.decide(request(numa='preferred'),
                             guest=facts(host_node_of_cell=(0,)))
        self.assertIsNone(result.distances)
        self.assertEqual((), result.notes)

    def test_no_numa_topology(self):
        result = self.decide(request(clique='auto'),
                             guest=facts(host_node_of_cell=None))
        self.assertIsNone(result.distances)
        self.assertEqual((), result.notes)

    def test_host_without_distances_noted(self):
        host = host_gpus(numa_nodes=(
            model.NumaNode(id=0, cpus=frozenset(), distances=()),
            model.NumaNode(id=1, cpus=frozenset(), distances=())))
        result = self.decide(request(clique='auto'), host=host)
        self.assertIsNone(result.distances)
        self.assertNoteContains(
            'the host reports no NUMA distances for nodes 0, 1', result)

    def test_distances_alone_do_not_need_gpu_changes(self):
        result = self.decide(request(clique='auto'),
                             addresses=(GPU_A, GPU_C))
        self.assertEqual({}, result.cliques)
        self.assertTrue(changes_guest(result))


class TestOptionsFromConf(base.TestCase):

    def test_defaults(self):
        self.assertEqual(plan.Options(),
                         plan.Options.from_conf(make_conf()))

    def test_overrides(self):
        options = plan.Options.from_conf(make_conf(
            p2p_level='SYS', acs_policy='ignore',
            expander_bus_grouping='numa', align_device_types=['all'],
            guest_numa_distances=False, pcihole64='64'))
        self.assertEqual(plan.Options(
            p2p_level='SYS', acs_policy='ignore',
            grouping=expander_buses.Grouping.NUMA,
            align=frozenset({'all'}), numa_distances=False, pcihole64=64),
            options)


class TestGuestFacts(base.TestCase):

    def test_guest_cell_of(self):
        self.assertEqual({3: 0, 1: 1},
                         plan.GuestFacts(host_node_of_cell=(3, 1))
                         .guest_cell_of)

    def test_guest_cell_of_none(self):
        self.assertEqual({}, plan.GuestFacts().guest_cell_of)


class TestFaultLength(DecideBase):
    """Refusals that fail the build fit in the instance fault.

    Nova keeps 255 characters of a fault, after its own "Build of instance
    <36-character UUID> aborted: " (64 characters): what to change must
    not be cut off.
    """

    LIMIT = 255 - len('Build of instance %s aborted: ' % ('x' * 36))

    def assertFits(self, result):
        self.assertFalse(result.refusal.reschedule)
        self.assertLessEqual(len(result.refusal.message), self.LIMIT,
                             result.refusal.message)

    def test_no_gpu_with_both_keys(self):
        self.assertFits(self.decide(request(clique='15', numa='required'),
                                    addresses=(NIC,)))

    def test_hidden_hypervisor(self):
        self.assertFits(self.decide(request(clique='required'),
                                    guest=facts(hypervisor_hidden=True)))

    def test_no_nvidia_gpu(self):
        self.assertFits(self.decide(request(clique='required'),
                                    addresses=(AMD,)))

    def test_no_numa_topology(self):
        self.assertFits(self.decide(request(numa='required'),
                                    guest=facts(host_node_of_cell=None)))

    def test_machine_type(self):
        self.assertFits(self.decide(
            request(numa='required'),
            guest=facts(machine_type='pc-i440fx-rhel7.6.0')))

    def test_acpi(self):
        self.assertFits(self.decide(request(numa='required'),
                                    guest=facts(acpi=False)))

    def test_hole(self):
        self.assertFits(self.decide(
            request(numa='required'), addresses=(GPU_A, GPU_B, GPU_C),
            host=host_gpus(bars=16 * 1024 * GiB)))


def _broken_host():
    return host_gpus_mod.HostGPUs(
        topology=model.HostTopology(functions={}),
        cliques=host_cliques.Cliques(groups=(), ids={}),
        error='/sys/bus/pci/devices: no such directory')


#: Every refusal above, as (name, required request, the request that
#: degrades the same way, addresses, guest facts, host factory).
REFUSALS = (
    ('discovery error', request(clique='required'), request(clique='auto'),
     (GPU_A, GPU_B), FACTS, _broken_host),
    ('no GPU', request(clique='required', numa='required'),
     request(clique='auto', numa='preferred'), (NIC,), FACTS, host_gpus),
    ('old libvirt', request(clique='required'), request(clique='auto'),
     (GPU_A, GPU_B), facts(libvirt_version=(8, 0, 0)), host_gpus),
    ('hidden hypervisor', request(clique='required'),
     request(clique='auto'), (GPU_A, GPU_B),
     facts(hypervisor_hidden=True), host_gpus),
    ('no NVIDIA GPU', request(clique='required'), request(clique='auto'),
     (AMD,), FACTS, host_gpus),
    ('GPUs apart', request(clique='required', numa='preferred'),
     request(clique='auto', numa='preferred'), (GPU_A, GPU_B, GPU_C),
     FACTS, host_gpus),
    ('no NUMA topology', request(numa='required'), request(numa='preferred'),
     (GPU_A, GPU_B), facts(host_node_of_cell=None), host_gpus),
    ('i440fx', request(numa='required'), request(numa='preferred'),
     (GPU_A, GPU_B), facts(machine_type='pc-i440fx-8.2'), host_gpus),
    ('no ACPI', request(numa='required'), request(numa='preferred'),
     (GPU_A, GPU_B), facts(acpi=False), host_gpus),
    ('unplaced device', request(clique='auto', numa='required'),
     request(clique='auto', numa='preferred'), (GPU_A, GPU_B, GPU_C),
     facts(host_node_of_cell=(0,)), host_gpus),
    ('hole too big', request(numa='required'), request(numa='preferred'),
     (GPU_A, GPU_B, GPU_C), FACTS,
     lambda: host_gpus(bars=256 * GiB)),
)


class TestExistingServer(DecideBase):
    """``required`` refuses only a new build; a server that exists degrades.

    For each refusal: the new build is refused; the same request for an
    existing server gets exactly the layout ``auto`` / ``preferred`` give,
    and the refusal's message as what it lost.
    """

    def test_refusals_degrade(self):
        for name, req, relaxed, addresses, guest, make_host in REFUSALS:
            host = make_host()
            refused = self.decide(req, addresses, guest=guest, host=host)
            self.assertIsNotNone(refused.refusal, name)
            self.assertEqual((), refused.lost, name)
            existing = dataclasses.replace(guest, new_build=False)
            kept = self.decide(req, addresses, guest=existing, host=host)
            self.assertIsNone(kept.refusal, name)
            self.assertIn(refused.refusal.message, kept.lost, name)
            degraded = self.decide(relaxed, addresses, guest=existing,
                                   host=host)
            self.assertEqual(
                (degraded.cliques, degraded.buses, degraded.hole64,
                 degraded.distances),
                (kept.cliques, kept.buses, kept.hole64, kept.distances),
                name)
            self.assertEqual((), degraded.lost, name)

    def test_pair_that_lost_p2p_loses_its_clique(self):
        existing = facts(new_build=False)
        kept = self.decide(request(clique='required'),
                           addresses=(GPU_A, GPU_B, GPU_C), guest=existing)
        # The switch pair keeps its clique; the GPU on the other socket
        # is named in the loss and gets none.
        self.assertEqual({GPU_A: 0, GPU_B: 0}, kept.cliques)
        (lost,) = kept.lost
        self.assertIn('0000:03:00.0, 0000:04:00.0, 0000:81:00.0', lost)
        self.assertIn('linked by SYS', lost)

    def test_nothing_lost_when_the_host_can(self):
        kept = self.decide(request(clique='required', numa='required'),
                           guest=facts(new_build=False))
        self.assertEqual((), kept.lost)
        self.assertEqual({GPU_A: 0, GPU_B: 0}, kept.cliques)

    def test_same_inputs_same_plan_whatever_the_device_order(self):
        """An unchanged host gives the same layout on every operation."""
        req = request(clique='auto', numa='required')
        addresses = (GPU_A, GPU_B, GPU_C, NIC)
        first = self.decide(req, addresses)
        self.assertEqual(2, len(first.buses.buses))
        for order in (addresses[::-1], (GPU_C, GPU_A, NIC, GPU_B)):
            again = self.decide(req, order, guest=facts(new_build=False))
            self.assertEqual(
                (first.cliques, first.buses, first.hole64, first.distances),
                (again.cliques, again.buses, again.hole64, again.distances))


class TestNVSwitchLayout(DecideBase):
    """A whole HGX board (FABRIC_MODE=0): the NVSwitches go with the GPUs.

    The corpus host ``hgx-8gpu-nvswitch-2numa``: four GPUs and the four
    NVSwitches (0d-10) under root complex pci0000:00 on node 0, four GPUs
    under pci0000:80 on node 1.
    """

    GPUS = ('0000:03:00.0', '0000:04:00.0', '0000:08:00.0', '0000:09:00.0',
            '0000:83:00.0', '0000:84:00.0', '0000:88:00.0', '0000:89:00.0')
    SWITCHES = ('0000:0d:00.0', '0000:0e:00.0', '0000:0f:00.0',
                '0000:10:00.0')

    def setUp(self):
        super().setUp()
        self.hgx = discovery.evaluate(
            test_corpus.discover('hgx-8gpu-nvswitch-2numa'), make_conf())
        # Address bits for eight 128 GiB BARs.
        self.guest = facts(phys_bits=46)

    def test_switch_is_classified_with_the_gpus(self):
        switch = devices.describe(self.SWITCHES[0], self.hgx.topology)
        self.assertTrue(switch.nvswitch)
        self.assertFalse(switch.nvidia_gpu)
        # The guest agent counts only GPUs as GPUs.
        self.assertIs(devices.DeviceKind.OTHER, switch.kind)
        self.assertTrue(devices.aligned(switch, frozenset({'gpu'})))
        self.assertFalse(devices.aligned(switch, frozenset({'nic'})))
        self.assertFalse(devices.describe(self.GPUS[0],
                                          self.hgx.topology).nvswitch)

    def test_switches_on_their_gpus_expander_bus(self):
        for grouping in expander_buses.Grouping:
            result = self.decide(
                request(numa='required'), self.GPUS + self.SWITCHES,
                host=self.hgx, guest=self.guest, options=plan.Options(
                    grouping=grouping, align=frozenset({'gpu'})))
            self.assertIsNone(result.refusal)
            self.assertEqual(
                [(0, sorted(self.GPUS[:4] + self.SWITCHES)),
                 (1, list(self.GPUS[4:]))],
                [(b.host_numa_node, [p.device for p in b.ports])
                 for b in result.buses.buses], grouping)
            self.assertEqual({}, result.buses.unplaced)

    def test_never_alone_on_the_root_bus(self):
        # Even with no GPU of node 0, the switches get node 0's bus.
        result = self.decide(request(numa='required'),
                             self.GPUS[4:] + self.SWITCHES, host=self.hgx,
                             guest=self.guest)
        self.assertIsNone(result.refusal)
        self.assertEqual([list(self.SWITCHES), list(self.GPUS[4:])],
                         [[p.device for p in b.ports]
                          for b in result.buses.buses])
