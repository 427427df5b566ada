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

import dataclasses
import functools
import json
import logging
import os
import types
from unittest import mock

import fixtures
from nova.compute import pci_placement_translator
from nova.compute import provider_tree
from nova import conf as nova_conf
from nova import exception as nova_exception
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt import driver as virt_driver
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova_gpu_p2p.compute import action_events
from nova_gpu_p2p.compute import driver
from nova_gpu_p2p.compute import outage
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p import min_versions
from nova_gpu_p2p import nova_signatures
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import module_ids
from nova_gpu_p2p import traits as traits_mod
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_corpus
from tests.unit import test_traits as t


class TestLoadThroughNova(base.TestCase):
    """Nova's own loader, with Nova's libvirt test double as libvirtd."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.conf.config(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')

    def test_loads_our_subclass(self):
        loaded = virt_driver.load_compute_driver(None)
        self.assertIs(driver.GPUP2PLibvirtDriver, type(loaded))
        self.assertIsInstance(loaded, libvirt_driver.LibvirtDriver)

    def test_shim_is_the_only_name_it_adds(self):
        from nova.virt import gpu_p2p
        self.assertEqual(['GPUP2PLibvirtDriver'], gpu_p2p.__all__)
        self.assertIs(driver.GPUP2PLibvirtDriver,
                      gpu_p2p.GPUP2PLibvirtDriver)

    def test_bad_option_refuses_to_start(self):
        self.conf.load_raw_values(group='gpu_p2p', p2p_level='FOO')
        exit_ = self.useFixture(fixtures.MockPatch('sys.exit')).mock
        exc = self.assertRaises(exception.InvalidConfig,
                                virt_driver.load_compute_driver, None)
        self.assertIn('p2p_level', str(exc))
        self.assertIn("'FOO'", str(exc))
        # Not swallowed by Nova's loader as "not a ComputeDriver".
        exit_.assert_not_called()


GPU_A = '0000:03:00.0'
GPU_B = '0000:04:00.0'
GPU_C = '0000:81:00.0'
#: The stand-in Fabric Manager's H100 board on the HGX corpus host.
PARTITIONS, _ = partitions.to_addresses(fake_fm.H100_PARTITIONS.items(),
                                        hosts.HGX_MODULES)
REQUIRED = {'hw:gpu_p2p_clique': 'required'}


def hgx(*modules: int) -> tuple[str, ...]:
    """The HGX corpus host's GPUs of these modules."""
    return tuple(hosts.HGX_MODULES[m] for m in modules)


def _gpu(address, numa, rc):
    return model.PCIFunction(address=address, vendor=0x10de, device=0x2330,
                             class_code=0x030200, parent=None,
                             root_complex=rc, numa_node=numa)


def _host_gpus():
    """GPU_A and GPU_B in host clique 0; GPU_C alone on node 1."""
    functions = {f.address: f for f in (
        _gpu(GPU_A, 0, 'pci0000:00'), _gpu(GPU_B, 0, 'pci0000:00'),
        _gpu(GPU_C, 1, 'pci0000:80'))}
    return host_gpus.HostGPUs(
        topology=model.HostTopology(functions=functions),
        cliques=cliques.Cliques(groups=((GPU_A, GPU_B), (GPU_C,)),
                                ids={GPU_A: 0, GPU_B: 0, GPU_C: None}))


def _domain_xml(addresses) -> str:
    """A domain XML with these PCI hostdevs, as libvirt returns it."""
    return '<domain type="kvm"><devices>%s</devices></domain>' % ''.join(
        _hostdev(address).to_xml() for address in addresses)


def _hostdev(address):
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    dev = vconfig.LibvirtConfigGuestHostdevPCI()
    dev.domain, dev.bus, dev.slot, dev.function = (domain, bus, slot,
                                                   function)
    return dev


class TestGetGuestConfig(base.TestCase):
    """_get_guest_config's glue, with Nova's own method mocked."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.conf.config(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')
        self.driver = virt_driver.load_compute_driver(None)
        self.driver._host_gpus = _host_gpus()
        self.useFixture(fixtures.MockPatchObject(
            self.driver, '_libvirt_version', return_value=(9, 0, 0)))
        self.useFixture(fixtures.MockPatchObject(
            self.driver, '_host_phys_bits', return_value=46))
        self.guest = vconfig.LibvirtConfigGuest()
        self.guest.os_mach_type = 'q35'
        self.guest.features = [vconfig.LibvirtConfigGuestFeatureACPI()]
        self.nova = self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, '_get_guest_config',
            return_value=self.guest)).mock
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.compute.driver', level=logging.INFO))

    def instance(self, gpus=(GPU_A, GPU_B), vm_state='building',
                 **extra_specs):
        for address in gpus:
            self.guest.add_device(_hostdev(address))
        return types.SimpleNamespace(
            uuid='f6b06bb4-9d6a-4ff5-b7c5-12a3a8a1c7f4',
            flavor=types.SimpleNamespace(extra_specs=extra_specs),
            numa_topology=None, vm_state=vm_state)

    def call(self, instance, context=None):
        return self.driver._get_guest_config(
            instance, 'network_info', 'image_meta', 'disk_info',
            rescue='rescue', block_device_info='bdi', context=context)

    def test_nova_called_with_everything(self):
        instance = self.instance()
        self.driver._get_guest_config(
            instance, 'network_info', 'image_meta', 'disk_info', 'rescue',
            'bdi', 'context', 'mdevs', 'accel_info', 'share_info',
            old_guest='old_guest')
        self.nova.assert_called_once_with(
            instance, 'network_info', 'image_meta', 'disk_info', 'rescue',
            'bdi', 'context', 'mdevs', 'accel_info', 'share_info',
            old_guest='old_guest')

    def test_without_our_keys_returns_nova_guest(self):
        instance = self.instance(**{'hw:cpu_policy': 'dedicated'})
        self.assertIs(self.guest, self.call(instance))
        self.assertEqual('', self.log.output)

    def test_none_values_return_nova_guest(self):
        instance = self.instance(**{'hw:gpu_p2p_clique': 'none',
                                    'hw:gpu_numa_affinity': 'none'})
        self.assertIs(self.guest, self.call(instance))

    def test_auto_applies_plan(self):
        result = self.call(self.instance(**{'hw:gpu_p2p_clique': 'auto'}))
        self.assertIsInstance(result, libvirt_config.Guest)
        self.assertEqual(
            ['ua-gpu-p2p-0000-03-00-0', 'ua-gpu-p2p-0000-04-00-0'],
            [d.alias for d in result.qemu_override.devices])

    def test_host_cpu_read_for_the_plan(self):
        cpu = {'vendor': 'GenuineIntel', 'familyid': 6, 'modelid': 143}
        read = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.host_cpu.read', return_value=cpu)).mock
        decide = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.guest.plan.decide', wraps=plan_mod.decide)).mock
        self.call(self.instance(**{'hw:gpu_p2p_clique': 'auto'}))
        read.assert_called_once_with()
        self.assertEqual(cpu, decide.call_args[0][3].host_cpu)

    def test_one_info_line_per_call(self):
        instance = self.instance(**{'hw:gpu_p2p_clique': 'auto'})
        self.call(instance)
        self.assertEqual(1, self.log.output.count('GPU P2P layout:'))
        self.assertEqual(1, len(self.log.output.strip().splitlines()))
        self.assertIn('0000:03:00.0 clique 0', self.log.output)
        self.call(instance)
        self.assertEqual(2, self.log.output.count('GPU P2P layout:'))

    def test_notes_logged_as_warnings(self):
        self.guest.features.append(
            vconfig.LibvirtConfigGuestFeatureKvmHidden())
        self.call(self.instance(**{'hw:gpu_p2p_clique': 'auto'}))
        self.assertIn('GPU P2P: hw:gpu_p2p_clique=auto: remove '
                      'hw:hide_hypervisor_id', self.log.output)
        self.assertEqual(1, self.log.output.count('GPU P2P layout:'))

    def test_refusal_with_reschedule(self):
        instance = self.instance(gpus=(GPU_A, GPU_C),
                                 **{'hw:gpu_p2p_clique': 'required'})
        exc = self.assertRaises(driver.HostCannotHonour, self.call,
                                instance)
        self.assertIsInstance(exc, nova_exception.ComputeResourcesUnavailable)
        self.assertIn('GPU P2P: hw:gpu_p2p_clique=required', str(exc))
        self.assertIn('0000:03:00.0, 0000:81:00.0', str(exc))
        self.assertIn('GPU P2P: hw:gpu_p2p_clique=required',
                      self.log.output)
        self.assertNotIn('GPU P2P layout', self.log.output)

    def test_refusal_without_reschedule(self):
        self.guest.features.append(
            vconfig.LibvirtConfigGuestFeatureKvmHidden())
        instance = self.instance(**{'hw:gpu_p2p_clique': 'required'})
        exc = self.assertRaises(driver.FlavorCannotBeHonoured, self.call,
                                instance)
        self.assertIsInstance(exc, nova_exception.InvalidInput)
        self.assertNotIsInstance(
            exc, nova_exception.ComputeResourcesUnavailable)
        self.assertIn('hw:hide_hypervisor_id', str(exc))
        # The instance fault keeps 255 characters after Nova's 64-character
        # "Build of instance UUID aborted: ": no prefix of InvalidInput's.
        self.assertTrue(str(exc).startswith('hw:gpu_p2p_clique=required: '),
                        str(exc))
        self.assertIn('GPU P2P: hw:gpu_p2p_clique=required', self.log.output)

    def test_image_phys_bits_refused_naming_the_property(self):
        # Issue 35 item 1: hw_maxphysaddr_mode=emulate with
        # hw_maxphysaddr_bits=-1 on the tenant's image.
        self.guest.cpu = vconfig.LibvirtConfigGuestCPU()
        self.guest.cpu.maxphysaddr = vconfig.LibvirtConfigGuestCPUMaxPhysAddr()
        self.guest.cpu.maxphysaddr.mode = 'emulate'
        self.guest.cpu.maxphysaddr.bits = -1
        exc = self.assertRaises(
            driver.FlavorCannotBeHonoured, self.call,
            self.instance(**{'hw:gpu_p2p_clique': 'auto'}))
        self.assertTrue(str(exc).startswith(
            'hw_maxphysaddr_bits (image property) is -1; allowed: integers '
            'from 32 to 52'), str(exc))
        # A server that exists keeps its layout, with a warning.
        self.guest.devices = []
        result = self.call(self.instance(vm_state='active',
                                         **{'hw:gpu_p2p_clique': 'auto'}))
        self.assertIsInstance(result, libvirt_config.Guest)
        self.assertIn('hw_maxphysaddr_bits (image property) is -1',
                      self.log.output)

    def test_numa_required_without_numa_topology(self):
        instance = self.instance(**{'hw:gpu_numa_affinity': 'required'})
        exc = self.assertRaises(driver.FlavorCannotBeHonoured, self.call,
                                instance)
        self.assertIn('hw:numa_nodes', str(exc))

    def test_invalid_extra_spec(self):
        instance = self.instance(**{'hw:gpu_p2p_clique': 'sometimes'})
        exc = self.assertRaises(driver.FlavorCannotBeHonoured, self.call,
                                instance)
        self.assertIn('hw:gpu_p2p_clique', str(exc))
        self.assertIn("'sometimes'", str(exc))
        self.assertIsInstance(exc.__cause__, ValueError)

    def test_invalid_numa_extra_spec(self):
        instance = self.instance(**{'hw:gpu_numa_affinity': '16'})
        exc = self.assertRaises(driver.FlavorCannotBeHonoured, self.call,
                                instance)
        self.assertIn('hw:gpu_numa_affinity', str(exc))

    def test_clique_id_out_of_range(self):
        instance = self.instance(**{'hw:gpu_p2p_clique': '16'})
        exc = self.assertRaises(driver.FlavorCannotBeHonoured, self.call,
                                instance)
        self.assertIn('hw:gpu_p2p_clique', str(exc))

    def test_old_libvirt_reschedules(self):
        self.driver._libvirt_version.return_value = (8, 0, 0)
        instance = self.instance(**{'hw:gpu_p2p_clique': 'required'})
        exc = self.assertRaises(driver.HostCannotHonour, self.call,
                                instance)
        self.assertIn('upgrade libvirt', str(exc))

    def events(self):
        """Nova's instance action event API, as the driver calls it."""
        event = 'nova.objects.InstanceActionEvent.'
        return tuple(
            self.useFixture(fixtures.MockPatch(event + name)).mock
            for name in ('event_start', 'event_finish_with_failure'))

    def test_existing_server_degrades_instead_of_refusing(self):
        start, finish = self.events()
        instance = self.instance(gpus=(GPU_A, GPU_B, GPU_C),
                                 vm_state='active',
                                 **{'hw:gpu_p2p_clique': 'required'})
        result = self.call(instance, context='ctx')
        # The pair that can still talk keeps its clique.
        self.assertEqual(['ua-gpu-p2p-0000-03-00-0',
                          'ua-gpu-p2p-0000-04-00-0'],
                         [d.alias for d in result.qemu_override.devices])
        warnings = [line for line in self.log.output.splitlines()
                    if 'keeps running without' in line]
        self.assertEqual(1, len(warnings), self.log.output)
        self.assertIn('0000:03:00.0, 0000:04:00.0, 0000:81:00.0',
                      warnings[0])
        start.assert_called_once_with('ctx', instance.uuid,
                                      action_events.LOST, want_result=False,
                                      host=nova_conf.CONF.host)
        (args, kwargs), = finish.call_args_list
        self.assertEqual(('ctx', instance.uuid, action_events.LOST), args)
        self.assertIn('0000:81:00.0', kwargs['exc_val'])
        # The decision record says it too.
        self.assertIn('0000:81:00.0', ''.join(
            e.text for e in result.metadata[-1].format_dom().iter(
                '{%s}lost' % libvirt_config.GPU_P2P_NS)))

    def test_existing_server_keeps_refusal_free_paths(self):
        """Every refusal without reschedule degrades too."""
        start, finish = self.events()
        self.guest.features.append(
            vconfig.LibvirtConfigGuestFeatureKvmHidden())
        instance = self.instance(vm_state='stopped',
                                 **{'hw:gpu_p2p_clique': 'required'})
        self.call(instance, context='ctx')
        self.assertIn('hw:hide_hypervisor_id', self.log.output)
        self.assertEqual(1, finish.call_count)

    def test_existing_server_with_invalid_extra_spec(self):
        start, finish = self.events()
        instance = self.instance(vm_state='active',
                                 **{'hw:gpu_p2p_clique': 'sometimes'})
        self.assertIs(self.guest, self.call(instance, context='ctx'))
        self.assertIn("'sometimes'", self.log.output)
        self.assertEqual(1, finish.call_count)

    def test_event_failure_does_not_stop_the_operation(self):
        start, finish = self.events()
        start.side_effect = nova_exception.InstanceActionNotFound(
            request_id='req', instance_uuid='uuid')
        events_log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.compute.action_events', level=logging.INFO))
        instance = self.instance(gpus=(GPU_A, GPU_C), vm_state='active',
                                 **{'hw:gpu_p2p_clique': 'required'})
        self.call(instance, context='ctx')
        self.assertIn('could not record instance action event',
                      events_log.output)
        finish.assert_not_called()

    def test_without_context_only_the_log(self):
        start, finish = self.events()
        instance = self.instance(gpus=(GPU_A, GPU_C), vm_state='active',
                                 **{'hw:gpu_p2p_clique': 'required'})
        self.call(instance)
        self.assertIn('keeps running without', self.log.output)
        start.assert_not_called()

    def test_new_build_records_no_event(self):
        start, finish = self.events()
        self.call(self.instance(**{'hw:gpu_p2p_clique': 'required'}),
                  context='ctx')
        start.assert_not_called()
        self.assertNotIn('keeps running without', self.log.output)

    def test_discovery_not_rerun_per_call(self):
        discover = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.discovery.discover')).mock
        self.call(self.instance(**{'hw:gpu_p2p_clique': 'auto'}))
        discover.assert_not_called()


class TestLiveMigration(base.TestCase):
    """Live migration would carry the source host's layout: refused."""

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.driver = driver.GPUP2PLibvirtDriver(None)
        self.nova = self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'check_can_live_migrate_source',
            return_value='migrate data')).mock

    @staticmethod
    def instance(pci_devices=('dev',), **extra_specs):
        return types.SimpleNamespace(
            uuid=uuids.instance, pci_devices=list(pci_devices),
            flavor=types.SimpleNamespace(extra_specs=extra_specs))

    def test_refused_with_our_keys_and_devices(self):
        for specs in ({'hw:gpu_p2p_clique': 'auto'},
                      {'hw:gpu_numa_affinity': 'preferred'},
                      {'hw:gpu_p2p_clique': 'sometimes'}):
            exc = self.assertRaises(
                nova_exception.MigrationPreCheckError,
                self.driver.check_can_live_migrate_source, 'ctx',
                self.instance(**specs), 'dest')
            self.assertIn('live migration of a server with PCI devices',
                          str(exc))
            self.assertIn('cold-migrate it', str(exc))
        self.nova.assert_not_called()

    def test_allowed_otherwise(self):
        for instance in (self.instance(),
                         self.instance(**{'hw:gpu_p2p_clique': 'none'}),
                         self.instance(pci_devices=(),
                                       **{'hw:gpu_p2p_clique': 'auto'})):
            self.assertEqual('migrate data',
                             self.driver.check_can_live_migrate_source(
                                 'ctx', instance, 'dest', 'bdi'))
        self.nova.assert_called_with('ctx', instance, 'dest',
                                     block_device_info='bdi')


class TestHostFacts(base.TestCase):
    """The two host facts the driver reads from libvirt."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.conf.config(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')
        self.driver = virt_driver.load_compute_driver(None)

    def version(self, method: str, getter: str, value: int):
        connection = mock.Mock(**{getter + '.return_value': value})
        with mock.patch.object(self.driver._host, 'get_connection',
                               return_value=connection):
            return getattr(self.driver, method)()

    def test_libvirt_version(self):
        self.assertEqual((11, 3, 0), self.version(
            '_libvirt_version', 'getLibVersion', 11003000))
        self.assertEqual((9, 0, 2), self.version(
            '_libvirt_version', 'getLibVersion', 9000002))

    def test_host_phys_bits(self):
        caps = vconfig.LibvirtConfigCaps()
        caps.host = vconfig.LibvirtConfigCapsHost()
        caps.host.cpu = vconfig.LibvirtConfigCPU()
        caps.host.cpu.maxphysaddr = vconfig.LibvirtConfigCPUMaxPhysAddr()
        caps.host.cpu.maxphysaddr.mode = 'emulate'
        caps.host.cpu.maxphysaddr.bits = 46
        with mock.patch.object(self.driver._host, 'get_capabilities',
                               return_value=caps):
            self.assertEqual(46, self.driver._host_phys_bits())

    def test_host_phys_bits_unknown(self):
        caps = vconfig.LibvirtConfigCaps()
        caps.host = vconfig.LibvirtConfigCapsHost()
        caps.host.cpu = vconfig.LibvirtConfigCPU()
        with mock.patch.object(self.driver._host, 'get_capabilities',
                               return_value=caps):
            self.assertIsNone(self.driver._host_phys_bits())

    def test_qemu_version(self):
        self.assertEqual((7, 2, 0), self.version(
            '_qemu_version', 'getVersion', 7002000))
        self.assertEqual((10, 0, 0), self.version(
            '_qemu_version', 'getVersion', 10000000))


NOVA_TRAITS = {'COMPUTE_NET_VIF_MODEL_VIRTIO', 'HW_CPU_X86_AVX2'}
OPERATOR = 'CUSTOM_OPERATOR_X'
NODE = 'host1'


def _sixteen_with_nvlink():
    """16 GPUs in one clique, two of them joined by NVLink."""
    addresses = ['0000:%02x:00.0' % (0x10 + i) for i in range(16)]
    return host_gpus.HostGPUs(
        topology=model.HostTopology(
            functions={a: _gpu(a, 0, 'pci0000:00') for a in addresses},
            nvlink_pairs=frozenset([frozenset(addresses[:2])])),
        cliques=cliques.Cliques(groups=(tuple(addresses),),
                                ids={a: 0 for a in addresses}))


def _no_numa_pair():
    functions = {a: _gpu(a, None, 'pci0000:00') for a in (GPU_A, GPU_B)}
    return host_gpus.HostGPUs(
        topology=model.HostTopology(functions=functions),
        cliques=cliques.Cliques(groups=((GPU_A, GPU_B),),
                                ids={GPU_A: 0, GPU_B: 0}))


def just_below(version: tuple[int, int, int]) -> tuple[int, int, int]:
    """The release before ``version``, as far as a comparison goes."""
    major, minor, micro = version
    if micro:
        return major, minor, micro - 1
    if minor:
        return major, minor - 1, 999
    return major - 1, 999, 999


FREE = frozenset(traits_mod.GPU_P2P_FREE.values())


def free(*sizes: int) -> set[str]:
    return {traits_mod.GPU_P2P_FREE[size] for size in sizes}


class TestUpdateProviderTree(base.TestCase):
    """Our traits on a real ProviderTree, Nova's own method mocked."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.conf.config(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')
        self.conf.config(report_in_placement=False, group='pci')
        self.driver = virt_driver.load_compute_driver(None)
        self.driver._host_gpus = _host_gpus()
        self.nova = self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'update_provider_tree',
            side_effect=self._nova_update)).mock
        self.libvirt = self.useFixture(fixtures.MockPatchObject(
            self.driver, '_libvirt_version', return_value=(9, 0, 0))).mock
        self.qemu = self.useFixture(fixtures.MockPatchObject(
            self.driver, '_qemu_version', return_value=(7, 2, 0))).mock
        self.discover = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.discovery.discover')).mock
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root(NODE, uuids.host1)
        self.tree.add_traits(NODE, OPERATOR)

    @staticmethod
    def _nova_update(tree, nodename, allocations=None):
        tree.add_traits(nodename, *NOVA_TRAITS)

    def update(self, allocations=None):
        """The node's traits but CUSTOM_GPU_P2P_FREE_<n> (TestFreeTraits)."""
        self.driver.update_provider_tree(self.tree, NODE,
                                         allocations=allocations)
        return self.tree.data(NODE).traits - FREE

    def test_adds_our_traits(self):
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.NUMA},
                         self.update())
        self.nova.assert_called_once_with(self.tree, NODE, allocations=None)

    def test_allocations_passed_to_nova(self):
        allocations = {uuids.consumer: {'allocations': {}}}
        self.update(allocations)
        self.nova.assert_called_once_with(self.tree, NODE,
                                          allocations=allocations)

    def test_positional_call_as_the_resource_tracker_makes_it(self):
        self.driver.update_provider_tree(self.tree, NODE)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.NUMA},
                         self.tree.data(NODE).traits - FREE)

    def test_uses_cached_topology(self):
        self.update()
        self.update()
        self.discover.assert_not_called()

    def test_corpus_host_at_sys(self):
        self.driver._host_gpus = discovery.evaluate(
            test_corpus.discover('pcie-8gpu-4switch-2socket'),
            nova_conf.CONF, link_class.LinkClass.SYS)
        self.assertEqual(
            NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.C4, t.C8, t.NUMA},
            self.update())

    def test_corpus_host_at_configured_level(self):
        # PXB (the default): four pairs, one per switch.
        self.driver._host_gpus = discovery.evaluate(
            test_corpus.discover('pcie-8gpu-4switch-2socket'),
            nova_conf.CONF)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.NUMA},
                         self.update())

    def test_sixteen_with_nvlink(self):
        self.driver._host_gpus = _sixteen_with_nvlink()
        self.assertEqual(NOVA_TRAITS | {OPERATOR} | t.ALL_OURS, self.update())

    def test_no_gpus(self):
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}))
        self.assertEqual(NOVA_TRAITS | {OPERATOR}, self.update())

    def test_other_traits_untouched_across_updates(self):
        # Not ours: a per-GPU clique trait and a standard trait put on the
        # compute node by someone else.
        self.tree.add_traits(NODE, 'CUSTOM_GPU_P2P_CLIQUE_ID_0',
                             'HW_GPU_API_CUDA_V12_0')
        others = NOVA_TRAITS | {OPERATOR, 'CUSTOM_GPU_P2P_CLIQUE_ID_0',
                                'HW_GPU_API_CUDA_V12_0'}
        self.assertEqual(others | {t.P2P, t.C2, t.NUMA}, self.update())
        self.driver._host_gpus = _sixteen_with_nvlink()
        self.assertEqual(others | t.ALL_OURS, self.update())
        self.conf.config(report_traits=False, group='gpu_p2p')
        self.assertEqual(others, self.update())

    def test_stale_removed_when_topology_changes(self):
        self.driver._host_gpus = _sixteen_with_nvlink()
        self.assertEqual(NOVA_TRAITS | {OPERATOR} | t.ALL_OURS, self.update())
        self.driver._host_gpus = _host_gpus()
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.NUMA},
                         self.update())
        self.driver._host_gpus = _no_numa_pair()
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2}, self.update())

    def test_owned_trait_set_by_hand_is_removed(self):
        # Only the driver decides CUSTOM_GPU_P2P* on the compute node.
        self.tree.add_traits(NODE, t.C16, t.NVLINK)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.NUMA},
                         self.update())

    def test_report_traits_false_removes_all_ours_and_only_ours(self):
        self.driver._host_gpus = _sixteen_with_nvlink()
        self.update()
        self.conf.config(report_traits=False, group='gpu_p2p')
        self.assertEqual(NOVA_TRAITS | {OPERATOR}, self.update())
        self.assertEqual(set(), self.driver.p2p_traits())

    def test_report_traits_false_on_a_fresh_tree(self):
        self.conf.config(report_traits=False, group='gpu_p2p')
        self.assertEqual(NOVA_TRAITS | {OPERATOR}, self.update())

    def test_discovery_error_reports_none(self):
        self.update()
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}),
            error='no such file: /sys/bus/pci/devices')
        self.assertEqual(NOVA_TRAITS | {OPERATOR}, self.update())

    def test_error_wins_over_a_topology(self):
        good = _sixteen_with_nvlink()
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=good.topology, cliques=good.cliques, error='boom')
        self.assertEqual(NOVA_TRAITS | {OPERATOR}, self.update())

    def test_numa_trait_needs_its_libvirt(self):
        self.libvirt.return_value = just_below(
            min_versions.LIBVIRT_NUMA_AFFINITY)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2}, self.update())

    def test_numa_trait_needs_its_qemu(self):
        self.qemu.return_value = just_below(min_versions.QEMU_NUMA_AFFINITY)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2}, self.update())

    def test_numa_trait_with_backports(self):
        self.libvirt.return_value = (11, 3, 0)
        self.qemu.return_value = (10, 0, 0)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2, t.NUMA},
                         self.update())

    def test_numa_trait_follows_versions(self):
        self.libvirt.return_value = just_below(
            min_versions.LIBVIRT_NUMA_AFFINITY)
        self.assertNotIn(t.NUMA, self.update())
        self.libvirt.return_value = min_versions.LIBVIRT_NUMA_AFFINITY
        self.assertIn(t.NUMA, self.update())
        self.qemu.return_value = just_below(min_versions.QEMU_NUMA_AFFINITY)
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2}, self.update())

    def test_numa_trait_needs_a_gpu_numa_node(self):
        self.driver._host_gpus = _no_numa_pair()
        self.assertEqual(NOVA_TRAITS | {OPERATOR, t.P2P, t.C2}, self.update())

    def test_nova_traits_removed_by_nova_are_not_readded(self):
        # What Nova itself removes stays removed: we only touch ours.
        self.tree.add_traits(NODE, 'COMPUTE_TRUSTED_CERTS')
        self.nova.side_effect = lambda tree, node, allocations=None: (
            tree.remove_traits(node, 'COMPUTE_TRUSTED_CERTS'))
        self.assertEqual({OPERATOR, t.P2P, t.C2, t.NUMA}, self.update())

    def test_device_traits_not_checked_without_report_in_placement(self):
        check = self.useFixture(fixtures.MockPatchObject(
            self.driver, '_check_device_traits')).mock
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.compute.driver', level=logging.WARNING))
        self.add_device(GPU_A)
        self.add_device(GPU_C, 'CUSTOM_GPU_P2P_CLIQUE_ID_4')
        self.update()
        check.assert_not_called()
        self.assertEqual('', log.output)

    def add_device(self, address, *device_traits):
        """A GPU's provider, named the way Nova's PCI translator names it."""
        name = pci_placement_translator.PlacementView(
            NODE, [])._get_rp_name_for_address(address)
        self.tree.new_child(name, NODE, uuid=getattr(uuids, name))
        if device_traits:
            self.tree.add_traits(name, *device_traits)
        return name


def _warning(address, clique_id, rank):
    """The line to set has the GPU's order tags (its place ``rank``)."""
    return ('GPU P2P: GPU %s is in clique %d but its placement provider has '
            'no clique trait: set device_spec = {"address": "%s", "traits": '
            '"CUSTOM_GPU_P2P_CLIQUE_ID_%d", "gpu_p2p_clique": "%d"%s}'
            % (address, clique_id, address, clique_id, clique_id, ''.join(
                ', "gpu_p2p_order_%d": "%d"' % (n, rank)
                for n in range(1, rank + 1))))


class TestFreeTraits(TestUpdateProviderTree):
    """CUSTOM_GPU_P2P_FREE_<n>: what the host's domains leave free."""

    def setUp(self):
        super().setUp()
        self.conf.config(report_free_traits=True, group='gpu_p2p')
        #: Each domain's GPUs, as libvirt lists the domains.
        self.held: dict[str, tuple[str, ...]] = {}
        self.guests = self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'list_guests',
            side_effect=self._guests)).mock

    def _guests(self, only_running=True):
        return [types.SimpleNamespace(
            uuid=uuid, get_xml_desc=functools.partial(_domain_xml, gpus))
            for uuid, gpus in self.held.items()]

    def free_now(self) -> set[str]:
        self.driver.update_provider_tree(self.tree, NODE)
        return self.tree.data(NODE).traits & FREE

    def test_follow_what_domains_hold(self):
        self.assertEqual(free(2), self.free_now())
        self.held = {uuids.server: (GPU_A,)}
        self.assertEqual(set(), self.free_now())
        # Every domain counts, running or not: a stopped server keeps its
        # GPUs.
        self.guests.assert_called_with(only_running=False)
        self.held = {uuids.server: (GPU_C,)}
        self.assertEqual(free(2), self.free_now())

    def test_sizes_up_to_the_free_gpus_of_a_clique(self):
        self.driver._host_gpus = _sixteen_with_nvlink()
        self.assertEqual(free(*range(2, 17)), self.free_now())
        addresses = sorted(self.driver._host_gpus.cliques.ids)
        self.held = {uuids.one: tuple(addresses[:2]),
                     uuids.two: (addresses[9],)}
        self.assertEqual(free(*range(2, 14)), self.free_now())
        self.held = {uuids.one: tuple(addresses[1:])}
        self.assertEqual(set(), self.free_now())

    def test_whole_partitions_on_a_fabric_manager_host(self):
        self.driver._host_gpus = _sixteen_with_nvlink()
        gpus = sorted(self.driver._host_gpus.cliques.ids)
        self.useFixture(fixtures.MockPatchObject(
            self.driver, '_fabric_partitions', return_value=(
                partitions.FabricPartition(1, tuple(gpus[:8])),
                partitions.FabricPartition(2, tuple(gpus[:4])),
                partitions.FabricPartition(3, tuple(gpus[4:8])),
                partitions.FabricPartition(4, tuple(gpus[6:8])),
                partitions.FabricPartition(5, (gpus[0],)))))
        self.assertEqual(free(2, 4, 8), self.free_now())
        self.held = {uuids.server: (gpus[0],)}
        # Three free GPUs of partition 2 are no partition of three.
        self.assertEqual(free(2, 4), self.free_now())
        self.held = {uuids.server: (gpus[7],)}
        self.assertEqual(free(4), self.free_now())

    def test_none_without_reporting_or_topology(self):
        self.assertEqual(free(2), self.free_now())
        self.conf.config(report_traits=False, group='gpu_p2p')
        self.assertEqual(set(), self.free_now())
        self.conf.config(report_traits=True, report_free_traits=False,
                         group='gpu_p2p')
        self.assertEqual(set(), self.free_now())
        # Not even asked: nothing to read from libvirt.
        self.guests.reset_mock()
        self.free_now()
        self.guests.assert_not_called()
        self.conf.config(report_free_traits=True, group='gpu_p2p')
        good = _sixteen_with_nvlink()
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=good.topology, cliques=good.cliques, error='boom')
        self.assertEqual(set(), self.free_now())

    def test_a_domain_gone_while_read_keeps_the_last_sizes(self):
        # A delete racing the update inside another server's claim: the
        # claim goes on, the sizes stay as last read.
        self.held = {uuids.server: (GPU_A,)}
        self.assertEqual(set(), self.free_now())
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.compute.free_sizes', level=logging.WARNING))
        self.guests.side_effect = [[types.SimpleNamespace(
            uuid=uuids.server, get_xml_desc=mock.Mock(
                side_effect=fakelibvirt.make_libvirtError(
                    fakelibvirt.libvirtError, 'Domain not found',
                    error_code=fakelibvirt.VIR_ERR_NO_DOMAIN)))]]
        self.assertEqual(set(), self.free_now())
        self.assertIn('CUSTOM_GPU_P2P_FREE_<n> stay as last reported',
                      log.output)
        self.guests.side_effect = self._guests
        self.held = {}
        self.assertEqual(free(2), self.free_now())
        self.guests.side_effect = RuntimeError('libvirt went away')
        self.assertEqual(free(2), self.free_now())

    def test_barred_gpus_count_for_none(self):
        good = _sixteen_with_nvlink()
        addresses = sorted(good.cliques.ids)
        self.driver._host_gpus = dataclasses.replace(
            good, cliques=dataclasses.replace(
                good.cliques,
                barred={a: 'a consumer GPU' for a in addresses[4:]}))
        self.assertEqual(free(2, 3, 4), self.free_now())


class TestCheckDeviceTraits(TestUpdateProviderTree):
    """With [pci] report_in_placement, each GPU's provider is checked."""

    # The TestUpdateProviderTree tests run here too, with the check on.

    def setUp(self):
        super().setUp()
        self.conf.config(report_in_placement=True, group='pci')
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.compute.driver', level=logging.WARNING))

    def test_device_traits_not_checked_without_report_in_placement(self):
        self.conf.config(report_in_placement=False, group='pci')
        super().test_device_traits_not_checked_without_report_in_placement()

    def test_all_right(self):
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_B, 'CUSTOM_GPU_P2P_CLIQUE_ID_0', OPERATOR)
        self.add_device(GPU_C)
        self.update()
        self.assertEqual('', self.log.output)

    def test_no_device_providers(self):
        self.update()
        self.assertEqual('', self.log.output)

    def test_fabric_manager_partitions_checked(self):
        # On an HGX host a provider needs its partition traits as well.
        host = _host_gpus()
        self.driver._host_gpus = dataclasses.replace(
            host, topology=dataclasses.replace(
                host.topology, fabric_partitions=(
                    partitions.FabricPartition(0, (GPU_A, GPU_B)),)))
        part = 'CUSTOM_GPU_P2P_PARTITION_0'
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0', part)
        self.add_device(GPU_B, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_C)
        self.update()
        (warning,) = self.log.output.splitlines()
        self.assertIn('GPU %s' % GPU_B, warning)
        self.assertIn(part, warning)

    def test_missing_trait_logged_once_per_new_problem(self):
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        b = self.add_device(GPU_B)
        self.update()
        self.assertEqual(_warning(GPU_B, 0, 1) + '\n', self.log.output)
        # Unchanged on the next periodic update: not logged again.
        self.update()
        self.assertEqual(1, self.log.output.count('GPU P2P:'))
        # Fixed: nothing new.
        self.tree.add_traits(b, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.update()
        self.assertEqual(1, self.log.output.count('GPU P2P:'))
        # Broken again: logged again.
        self.tree.remove_traits(b, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.update()
        self.assertEqual(2, self.log.output.count(_warning(GPU_B, 0, 1)))
        self.assertEqual(2, self.log.output.count('GPU P2P:'))

    def test_each_problem_its_own_warning(self):
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_1')
        self.add_device(GPU_B)
        self.add_device(GPU_C, 'CUSTOM_GPU_P2P_CLIQUE_ID_2')
        self.update()
        self.assertEqual(
            ['GPU P2P: GPU 0000:03:00.0 is in clique 0 but its placement '
             'provider has CUSTOM_GPU_P2P_CLIQUE_ID_1: set device_spec = '
             '{"address": "0000:03:00.0", "traits": '
             '"CUSTOM_GPU_P2P_CLIQUE_ID_0", "gpu_p2p_clique": "0"}',
             _warning(GPU_B, 0, 1),
             'GPU P2P: GPU 0000:81:00.0 is in no clique but its placement '
             'provider has CUSTOM_GPU_P2P_CLIQUE_ID_2: remove the clique '
             'trait and tag from its [pci] device_spec entry'],
            self.log.output.splitlines())

    def test_new_problem_logged_old_one_not(self):
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_B)
        self.update()
        c = self.add_device(GPU_C, 'CUSTOM_GPU_P2P_CLIQUE_ID_2')
        self.update()
        self.assertEqual(1, self.log.output.count(_warning(GPU_B, 0, 1)))
        self.assertEqual(1, self.log.output.count('GPU 0000:81:00.0'))
        self.tree.remove_traits(c, 'CUSTOM_GPU_P2P_CLIQUE_ID_2')
        self.update()
        self.assertEqual(2, len(self.log.output.splitlines()))

    def test_problem_after_topology_change(self):
        # GPU_C joins clique 1: its provider now lacks a trait.
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_B, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_C)
        self.update()
        self.assertEqual('', self.log.output)
        host = _host_gpus()
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=host.topology,
            cliques=cliques.Cliques(groups=((GPU_A, GPU_B, GPU_C),),
                                    ids={GPU_A: 0, GPU_B: 0, GPU_C: 0}))
        self.update()
        self.assertEqual(_warning(GPU_C, 0, 2) + '\n', self.log.output)

    def test_nova_names_providers_in_upper_case(self):
        # Nova's PCI translator names a device's provider
        # <nodename>_<ADDRESS IN UPPER CASE>: hex digits a-f come out
        # upper case, and the check must still find it.
        functions = {a: _gpu(a, 1, 'pci0000:80')
                     for a in ('0000:8a:00.0', '0000:8b:00.0')}
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=model.HostTopology(functions=functions),
            cliques=cliques.Cliques(
                groups=(('0000:8a:00.0', '0000:8b:00.0'),),
                ids={'0000:8a:00.0': 0, '0000:8b:00.0': 0}))
        self.assertEqual('host1_0000:8A:00.0', self.add_device(
            '0000:8a:00.0', 'CUSTOM_GPU_P2P_CLIQUE_ID_0'))
        self.add_device('0000:8b:00.0')
        self.update()
        self.assertEqual(_warning('0000:8b:00.0', 0, 1) + '\n',
                         self.log.output)

    def test_device_spec_tag_checked(self):
        """The scheduler's source, the device_spec tag, is checked too."""
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        self.conf.config(group='pci', device_spec=[
            device_spec_tags.entry(GPU_A, 0).split(' = ', 1)[1],
            json.dumps({'address': GPU_B, 'gpu_p2p_clique': '1',
                        'traits': 'CUSTOM_GPU_P2P_CLIQUE_ID_0'}),
            json.dumps({'address': GPU_C})])
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_B, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.add_device(GPU_C)
        self.update()
        self.assertEqual(
            ['GPU P2P: GPU 0000:04:00.0 is in clique 0 but its [pci] '
             "device_spec entry has gpu_p2p_clique '1': set %s"
             % device_spec_tags.entry(GPU_B, 0, rank=1)],
            self.log.output.splitlines())

    def test_unicode_digit_tag_is_a_warning_not_an_error(self):
        # Issue 35 item 5: '\u00b2'.isdigit() is true and int() refuses
        # it; every periodic update raised, and placement went stale.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        self.conf.config(group='pci', device_spec=[json.dumps(
            {'address': GPU_A, 'gpu_p2p_clique': '\u00b2',
             'traits': 'CUSTOM_GPU_P2P_CLIQUE_ID_0'})])
        self.add_device(GPU_A, 'CUSTOM_GPU_P2P_CLIQUE_ID_0')
        self.assertIn(t.P2P, self.update())
        self.assertIn('GPU P2P: GPU %s is in clique 0' % GPU_A,
                      self.log.output)


class TestNovaHooksWithProviderTree(base.TestCase):

    def test_real_libvirt_driver_accepted(self):
        nova_signatures.check(libvirt_driver.LibvirtDriver)
        nova_signatures.check(driver.GPUP2PLibvirtDriver)

    def test_update_provider_tree_is_a_hook(self):
        self.assertEqual(('provider_tree', 'nodename', 'allocations'),
                         nova_signatures.HOOKS['update_provider_tree'])

    def test_update_provider_tree_without_allocations_refused(self):
        class Old(libvirt_driver.LibvirtDriver):
            def update_provider_tree(self, provider_tree, nodename):
                pass

        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_signatures.check, Old)
        self.assertEqual(
            'nova-gpu-p2p does not support this Nova release: '
            'Old.update_provider_tree takes (provider_tree, nodename), '
            'expected (provider_tree, nodename, allocations). Install a '
            'nova-gpu-p2p release made for it.', str(exc))

    def test_update_provider_tree_missing_refused(self):
        class Older:
            def get_available_resource(self, nodename):
                pass

            def _get_guest_config(self, instance, network_info, image_meta,
                                  disk_info):
                pass

        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_signatures.check, Older)
        self.assertIn('Older.update_provider_tree is missing', str(exc))
        self.assertNotIn('get_available_resource', str(exc))

    def test_driver_refuses_to_start_on_such_a_nova(self):
        self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())

        def old(self, provider_tree, nodename):
            pass

        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'update_provider_tree', old))
        exc = self.assertRaises(exception.IncompatibleNova,
                                driver.GPUP2PLibvirtDriver, None)
        self.assertIn('update_provider_tree takes (provider_tree, nodename)',
                      str(exc))


def domain_xml(*addresses: str) -> str:
    """A libvirt domain XML with these PCI hostdevs, as Nova writes them."""
    hostdevs = ''.join(
        "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
        "<address domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/>"
        "</source></hostdev>" % tuple(address.replace('.', ':').split(':'))
        for address in addresses)
    return "<domain type='kvm'><devices>%s</devices></domain>" % hostdevs


class _FabricManagerBase(base.TestCase):
    """The driver on the HGX board with the stand-in Fabric Manager."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.conf.config(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')
        directory = self.useFixture(fixtures.TempDir()).path
        self.fm = fake_fm.FakeFM(directory)
        self.module_file = os.path.join(directory, 'module_ids.json')
        self.conf.config(fabric_manager_address=self.fm.address,
                         fabric_manager_library=fake_fm.library(),
                         module_id_file=self.module_file,
                         group='gpu_p2p')
        self.driver = virt_driver.load_compute_driver(None)
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={},
                                        fabric_partitions=PARTITIONS),
            cliques=cliques.Cliques(groups=(), ids={}))
        self.running = {}
        self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'list_guests', lambda only_running: [
                types.SimpleNamespace(uuid=uuid,
                                      get_xml_desc=functools.partial(
                                          domain_xml, *addresses))
                for uuid, addresses in self.running.items()]))
        self.active_at_start = []
        self.nova = self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, '_create_guest',
            side_effect=lambda *args: self.active_at_start.append(
                self.fm.active()) or 'guest')).mock
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p', level=logging.INFO))

    def instance(self, *modules, vm_state='building', uuid=uuids.instance,
                 **extra_specs):
        return types.SimpleNamespace(
            uuid=uuid, vm_state=vm_state, numa_topology=None,
            flavor=types.SimpleNamespace(extra_specs=extra_specs),
            pci_devices=[types.SimpleNamespace(address=a, vendor_id='10de')
                         for a in hgx(*modules)])

    def create(self, *modules, vm_state='building', power_on=True,
               **extra_specs):
        return self.driver._create_guest(
            None, domain_xml(*hgx(*modules)),
            self.instance(*modules, vm_state=vm_state, **extra_specs),
            power_on=power_on)

    def warnings(self, text):
        return [line for line in self.log.output.splitlines()
                if text in line]


class TestFabricManagerLifecycle(_FabricManagerBase):
    """Partitions follow the domains, with the stand-in Fabric Manager."""

    def test_partition_active_before_the_domain_starts(self):
        self.assertEqual('guest', self.create(1, 3, **REQUIRED))
        self.assertEqual([{3}], self.active_at_start)
        self.nova.assert_called_once_with(
            None, domain_xml(*hgx(1, 3)), mock.ANY, True, False, None)

    def test_one_gpu_gets_its_partition(self):
        self.create(5, **REQUIRED)
        self.assertEqual([{11}], self.active_at_start)

    def test_not_powered_on_activates_nothing(self):
        self.create(1, 3, power_on=False)
        self.assertEqual([], self.fm.calls())

    def test_host_without_partitions_untouched(self):
        self.driver._host_gpus = _host_gpus()
        self.create(1, 3, **REQUIRED)
        self.assertEqual([], self.fm.calls())
        self.nova.assert_called_once()

    def test_new_build_rescheduled_when_fm_down(self):
        self.fm.down()
        exc = self.assertRaises(driver.HostCannotHonour, self.create,
                                1, 3, **REQUIRED)
        self.assertIn('Fabric Manager partition(s) 3 (GPUs %s, %s) not '
                      'activated' % hgx(3, 1), str(exc))
        self.assertIn('FM_ST_CONNECTION_NOT_VALID', str(exc))
        self.nova.assert_not_called()

    def test_new_build_rescheduled_on_stale_partition(self):
        self.fm.force_active(1)
        exc = self.assertRaises(driver.HostCannotHonour, self.create, 1, 3)
        self.assertIn('FM_ST_IN_USE', str(exc))
        self.nova.assert_not_called()

    def test_required_new_build_not_one_partition_rescheduled(self):
        exc = self.assertRaises(driver.HostCannotHonour, self.create,
                                2, 3, **REQUIRED)
        self.assertIn('are not one Fabric Manager partition', str(exc))
        self.assertEqual([], self.fm.calls())

    def test_existing_server_starts_with_one_warning(self):
        self.fm.down()
        self.assertEqual('guest', self.create(1, 3, vm_state='active',
                                              **REQUIRED))
        lost = self.warnings('keeps running without')
        self.assertEqual(1, len(lost), self.log.output)
        self.assertIn('no NVLink, and maybe no CUDA: Fabric Manager '
                      'partition(s) 3', lost[0])

    def test_existing_required_server_not_one_partition(self):
        self.create(2, 3, vm_state='stopped', **REQUIRED)
        self.assertEqual([{8, 9}], self.active_at_start)
        self.assertEqual(1, len(self.warnings('keeps running without')))

    def test_other_flavor_not_one_partition_gets_one_gpu_partitions(self):
        self.create(2, 3)
        self.assertEqual([{8, 9}], self.active_at_start)
        self.assertEqual(1, len(self.warnings(
            'are not one Fabric Manager partition: each got its 1-GPU '
            'partition, so CUDA works without NVLink between them')))

    def test_last_known_partitions_while_discovery_fails(self):
        self.create(5)
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}), error='FM down')
        self.fm.down()
        self.assertRaises(driver.HostCannotHonour, self.create, 1, 3)

    def partitions_never_known(self):
        self.conf.config(topology_backend='fabricmanager', group='gpu_p2p')
        self.driver._host_gpus = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}),
            error='Fabric Manager unreachable')
        # Still: the new build's try at discovery finds it so again.
        self.discover = self.useFixture(fixtures.MockPatchObject(
            discovery, 'discover',
            return_value=self.driver._host_gpus)).mock

    def test_new_build_refused_while_partitions_never_known(self):
        # A compute started while Fabric Manager was down: unknowns fail
        # closed, as a GPU without a partition cannot run CUDA.
        self.partitions_never_known()
        exc = self.assertRaises(driver.HostCannotHonour, self.create, 5)
        self.assertIn('no Fabric Manager partition is known on this host '
                      '(Fabric Manager unreachable), so GPUs %s get none'
                      % hgx(5), str(exc))
        self.nova.assert_not_called()
        self.discover.assert_called_once()

    def test_existing_server_starts_while_partitions_never_known(self):
        # Nor kept in [gpu_p2p] module_id_file: no discovery ever found any.
        self.partitions_never_known()
        self.assertEqual('guest', self.create(5, vm_state='active'))
        self.assertEqual(1, len(self.warnings('keeps running without')))
        self.assertEqual([], self.fm.calls())

    def keep_partitions(self):
        """The board's table as discovery kept it, for a new driver."""
        module_ids.save(self.module_file,
                        {a: m for m, a in hosts.HGX_MODULES.items()},
                        fake_fm.H100_PARTITIONS)
        self.conf.config(topology_backend='fabricmanager', group='gpu_p2p')

    def test_kept_partitions_while_discovery_fails(self):
        self.keep_partitions()
        self.partitions_never_known()
        self.assertEqual('guest', self.create(5, vm_state='active'))
        self.assertEqual([{11}], self.active_at_start)
        self.assertEqual([], self.warnings('keeps running without'))

    def new_driver(self):
        """A nova-compute just started: no discovery has run."""
        self.driver._host_gpus = None
        return self.useFixture(fixtures.MockPatchObject(
            self.driver, 'refresh_host_gpus')).mock

    def test_new_driver_takes_the_kept_partitions_without_asking(self):
        self.keep_partitions()
        discover = self.new_driver()
        self.fm.down()
        self.assertEqual(PARTITIONS, self.driver._fabric_partitions())
        discover.assert_not_called()
        self.assertEqual([], self.fm.calls())

    def test_new_driver_without_kept_partitions_discovers(self):
        discover = self.new_driver()
        discover.side_effect = lambda: setattr(
            self.driver, '_host_gpus', host_gpus.HostGPUs(
                topology=model.HostTopology(functions={},
                                            fabric_partitions=PARTITIONS),
                cliques=cliques.Cliques(groups=(), ids={})))
        self.assertEqual(PARTITIONS, self.driver._fabric_partitions())
        discover.assert_called_once_with()

    def test_other_backends_never_ask_for_partitions(self):
        self.partitions_never_known()
        self.conf.config(topology_backend='sysfs', group='gpu_p2p')
        self.assertEqual('guest', self.create(5))

    def test_destroy_releases_what_no_domain_holds(self):
        self.running = {'a': hgx(5, 7)}
        self.fm.force_active(3, 5)
        with mock.patch.object(libvirt_driver.LibvirtDriver,
                               '_destroy') as nova_destroy:
            self.driver._destroy('instance')
        nova_destroy.assert_called_once_with('instance')
        self.assertEqual({5}, self.fm.active())

    def test_init_host_reconciles_from_the_kept_partitions(self):
        # Fabric Manager and nova-compute both restarted: what runs is
        # told from the file alone, before any discovery.
        self.keep_partitions()
        discover = self.new_driver()
        self.running = {'a': hgx(1, 3)}
        self.fm.restart()
        with mock.patch.object(libvirt_driver.LibvirtDriver,
                               'init_host') as nova_init:
            self.driver.init_host('host1')
        nova_init.assert_called_once_with('host1')
        self.assertEqual({3}, self.fm.active())
        discover.assert_not_called()

    def test_periodic_update_reconciles_before_discovery(self):
        # Discovery after a Fabric Manager restart succeeds only once it
        # was told what runs.
        self.fm.force_active(0)
        active_at_discovery = []
        self.useFixture(fixtures.MockPatchObject(
            self.driver, 'refresh_host_gpus', side_effect=lambda:
                active_at_discovery.append(self.fm.active())))
        with mock.patch.object(libvirt_driver.LibvirtDriver,
                               'get_available_resource',
                               return_value={'vcpus': 8}):
            self.assertEqual({'vcpus': 8, 'stats': {'gpu_p2p_driver': '1'}},
                             self.driver.get_available_resource('node'))
        self.assertEqual([set()], active_at_discovery)

    def test_reconcile_never_raises(self):
        def broken(only_running):
            raise RuntimeError('libvirt went away')

        self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'list_guests', broken))
        with mock.patch.object(libvirt_driver.LibvirtDriver, 'init_host'):
            self.driver.init_host('host1')
        self.assertIn('Fabric Manager partitions not reconciled',
                      self.log.output)
        # And a start still goes ahead, for an existing server.
        self.assertEqual('guest', self.create(1, 3, vm_state='active'))


class TestClaimOrder(_FabricManagerBase):
    """The PCI devices reported with each node's partitions adjacent."""

    NIC = {'address': '0000:05:00.0', 'vendor_id': '15b3', 'numa_node': 0}

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            self.driver, 'refresh_host_gpus'))
        self.nova_order = json.dumps(
            [{'address': a, 'vendor_id': '10de', 'numa_node': int(a[5] > '7')}
             for a in sorted(hosts.HGX_MODULES.values())] + [self.NIC])

    def reported(self) -> str:
        with mock.patch.object(
                libvirt_driver.LibvirtDriver, 'get_available_resource',
                return_value={'pci_passthrough_devices': self.nova_order}):
            found = self.driver.get_available_resource('node')
        return found['pci_passthrough_devices']

    def test_gpus_by_partition_as_a_json_string(self):
        found = json.loads(self.reported())
        self.assertEqual(list(hgx(2, 4, 3, 1, 6, 8, 7, 5))
                         + [self.NIC['address']],
                         [device['address'] for device in found])

    def test_unknown_topology_keeps_novas_order(self):
        self.driver._host_gpus = dataclasses.replace(
            self.driver._host_gpus, error='Fabric Manager is down')
        self.assertEqual(self.nova_order, self.reported())

    def test_any_error_keeps_novas_order_logged_once(self):
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.claim_order.ordered',
            side_effect=RuntimeError('broken')))
        self.assertEqual(self.nova_order, self.reported())
        self.assertEqual(self.nova_order, self.reported())
        self.assertEqual(1, len(self.warnings('reported in Nova')))


class TestFabricManagerOutage(_FabricManagerBase):
    """Issue 25: an outage reported once per server, and left promptly."""

    def setUp(self):
        super().setUp()
        self.conf.config(topology_backend='fabricmanager', group='gpu_p2p')
        board = discovery.evaluate(
            dataclasses.replace(
                test_corpus.discover('hgx-8gpu-nvswitch-2numa'),
                fabric_partitions=PARTITIONS),
            nova_conf.CONF, link_class.LinkClass.SYS)
        self.down = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}),
            error='cannot read the partitions of NVIDIA Fabric Manager')
        # Discovery asks the stand-in, as the fabricmanager backend would.
        self.discover = self.useFixture(fixtures.MockPatchObject(
            discovery, 'discover', side_effect=lambda conf, previous=None:
            self.down if self.fm.mode() == 'down' else board)).mock
        self.driver._host_gpus = board
        self.now = 0.0
        self.driver._rediscovery = outage.Retry(
            self.driver.REDISCOVERY_INTERVAL_S, clock=lambda: self.now)
        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, '_get_guest_config',
            side_effect=self.nova_guest))
        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'get_available_resource'))
        self.useFixture(fixtures.MockPatchObject(
            self.driver, '_libvirt_version', return_value=(9, 0, 0)))
        self.useFixture(fixtures.MockPatchObject(
            self.driver, '_host_phys_bits', return_value=46))
        self.event = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_finish_with_failure'))
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_start'))

    @staticmethod
    def nova_guest(instance, *args, **kwargs):
        guest = vconfig.LibvirtConfigGuest()
        guest.os_mach_type = 'q35'
        guest.features = [vconfig.LibvirtConfigGuestFeatureACPI()]
        for device in instance.pci_devices:
            guest.add_device(_hostdev(device.address))
        return guest

    def start(self, *modules, vm_state='active', uuid=uuids.instance):
        """What Nova calls to boot, or hard-reboot, a required server."""
        instance = self.instance(*modules, vm_state=vm_state, uuid=uuid,
                                 **REQUIRED)
        self.driver._get_guest_config(instance, 'network_info', 'image_meta',
                                      'disk_info', context='ctx')
        return self.driver._create_guest(
            'ctx', domain_xml(*hgx(*modules)), instance)

    def outage(self):
        """Fabric Manager goes down, and a periodic update runs."""
        self.fm.down()
        self.driver.get_available_resource('node')

    def reported(self) -> tuple[int, int]:
        """WARNING lines and lost-layout events so far."""
        return (len(self.warnings('keeps running without')),
                self.event.mock.call_count)

    def test_hard_reboot_reported_once(self):
        self.start(1, 3, vm_state='building')
        self.outage()
        self.assertEqual('guest', self.start(1, 3))
        self.assertEqual((1, 1), self.reported(), self.log.output)
        self.assertIn('GPU topology discovery failed on this host',
                      self.warnings('keeps running without')[0])
        self.assertEqual(
            action_events.LOST, self.event.mock.call_args.args[2])

    def test_hard_reboot_before_any_periodic_reported_once(self):
        # The cached discovery still has the partitions: only the
        # activation fails, and it starts the outage.
        self.fm.down()
        self.start(1, 3)
        self.start(1, 3)
        self.assertEqual((1, 1), self.reported(), self.log.output)

    def test_every_reboot_of_one_outage_reported_once(self):
        self.outage()
        self.start(1, 3)
        self.now += 60
        self.driver.get_available_resource('node')
        self.start(1, 3)
        self.assertEqual((1, 1), self.reported(), self.log.output)

    def test_each_server_reported(self):
        self.outage()
        self.start(1, 3)
        self.start(5, 7, uuid=uuids.other)
        self.assertEqual((2, 2), self.reported(), self.log.output)

    def test_next_outage_reported_again(self):
        self.outage()
        self.start(1, 3)
        self.fm.up()
        self.driver.get_available_resource('node')
        self.start(1, 3)
        self.assertEqual((1, 1), self.reported(), self.log.output)
        self.outage()
        self.start(1, 3)
        self.assertEqual((2, 2), self.reported(), self.log.output)

    def test_new_build_accepted_once_fm_answers(self):
        self.outage()
        self.assertRaises(driver.HostCannotHonour, self.start, 1, 3,
                          vm_state='building')
        self.fm.up()
        self.now += self.driver.REDISCOVERY_INTERVAL_S
        self.assertEqual('guest', self.start(1, 3, vm_state='building'))
        self.assertEqual([{3}], self.active_at_start)
        self.assertEqual(1, len(self.warnings('Fabric Manager answers '
                                              'again')))
        self.assertEqual((0, 0), self.reported(), self.log.output)

    def test_partitions_never_known_learnt_by_a_new_build(self):
        # nova-compute started during the outage; a flavor without our
        # keys reaches only _create_guest.
        self.driver._host_gpus = self.down
        self.assertEqual('guest', self.create(5))
        self.assertEqual([{11}], self.active_at_start)

    def test_rediscovery_rate_limited(self):
        self.outage()
        tries = self.discover.call_count
        for _ in range(3):
            self.assertRaises(driver.HostCannotHonour, self.start, 1, 3,
                              vm_state='building')
        self.assertEqual(tries + 1, self.discover.call_count)
        self.fm.up()
        self.now += self.driver.REDISCOVERY_INTERVAL_S - 0.1
        self.assertRaises(driver.HostCannotHonour, self.start, 1, 3,
                          vm_state='building')
        self.now += 0.1
        self.start(1, 3, vm_state='building')
        self.assertEqual(tries + 2, self.discover.call_count)

    def test_rediscovery_failing_keeps_the_refusal(self):
        self.outage()
        self.useFixture(fixtures.MockPatchObject(
            self.driver, 'refresh_host_gpus', side_effect=RuntimeError))
        exc = self.assertRaises(driver.HostCannotHonour, self.start, 1, 3,
                                vm_state='building')
        self.assertIn('GPU topology discovery failed', str(exc))
        self.assertIn('discovery after a Fabric Manager outage failed',
                      self.log.output)

    def test_other_backends_not_rediscovered(self):
        self.conf.config(topology_backend='sysfs', group='gpu_p2p')
        self.outage()
        tries = self.discover.call_count
        self.fm.up()
        self.assertRaises(driver.HostCannotHonour, self.start, 1, 3,
                          vm_state='building')
        self.assertEqual(tries, self.discover.call_count)
