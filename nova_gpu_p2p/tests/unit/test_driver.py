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

import logging
import types
from unittest import mock

import fixtures
from nova import conf as nova_conf
from nova import exception
from nova.tests import fixtures as nova_fixtures
from nova.virt import driver as virt_driver
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import fixture as config_fixture
import testtools

from nova_gpu_p2p import conf
from nova_gpu_p2p import driver
from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.topology import cliques
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import model


class TestLoadThroughNova(testtools.TestCase):
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
        exc = self.assertRaises(conf.InvalidConfig,
                                virt_driver.load_compute_driver, None)
        self.assertIn('p2p_level', str(exc))
        self.assertIn("'FOO'", str(exc))
        # Not swallowed by Nova's loader as "not a ComputeDriver".
        exit_.assert_not_called()


GPU_A = '0000:03:00.0'
GPU_B = '0000:04:00.0'
GPU_C = '0000:81:00.0'


def _gpu(address, numa, rc):
    return model.PCIFunction(address=address, vendor=0x10de, device=0x2330,
                             class_code=0x030200, parent=None,
                             root_complex=rc, numa_node=numa)


def _host_gpus():
    """GPU_A and GPU_B in host clique 0; GPU_C alone on node 1."""
    functions = {f.address: f for f in (
        _gpu(GPU_A, 0, 'pci0000:00'), _gpu(GPU_B, 0, 'pci0000:00'),
        _gpu(GPU_C, 1, 'pci0000:80'))}
    return discovery.HostGPUs(
        topology=model.HostTopology(functions=functions),
        cliques=cliques.Cliques(groups=((GPU_A, GPU_B), (GPU_C,)),
                                ids={GPU_A: 0, GPU_B: 0, GPU_C: None}))


def _hostdev(address):
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    dev = vconfig.LibvirtConfigGuestHostdevPCI()
    dev.domain, dev.bus, dev.slot, dev.function = (domain, bus, slot,
                                                   function)
    return dev


class TestGetGuestConfig(testtools.TestCase):
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
            name='nova_gpu_p2p.driver', level=logging.INFO))

    def instance(self, gpus=(GPU_A, GPU_B), **extra_specs):
        for address in gpus:
            self.guest.add_device(_hostdev(address))
        return types.SimpleNamespace(
            uuid='f6b06bb4-9d6a-4ff5-b7c5-12a3a8a1c7f4',
            flavor=types.SimpleNamespace(extra_specs=extra_specs),
            numa_topology=None)

    def call(self, instance):
        return self.driver._get_guest_config(
            instance, 'network_info', 'image_meta', 'disk_info',
            rescue='rescue', block_device_info='bdi')

    def test_nova_called_with_everything(self):
        instance = self.instance()
        self.call(instance)
        self.nova.assert_called_once_with(
            instance, 'network_info', 'image_meta', 'disk_info',
            rescue='rescue', block_device_info='bdi')

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
        self.assertIsInstance(exc, exception.ComputeResourcesUnavailable)
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
        self.assertIsInstance(exc, exception.InvalidInput)
        self.assertNotIsInstance(exc, exception.ComputeResourcesUnavailable)
        self.assertIn('hw:hide_hypervisor_id', str(exc))
        # The instance fault keeps 255 characters after Nova's 64-character
        # "Build of instance UUID aborted: ": no prefix of InvalidInput's.
        self.assertTrue(str(exc).startswith('hw:gpu_p2p_clique=required: '),
                        str(exc))
        self.assertIn('GPU P2P: hw:gpu_p2p_clique=required', self.log.output)

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

    def test_discovery_not_rerun_per_call(self):
        discover = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.discovery.discover')).mock
        self.call(self.instance(**{'hw:gpu_p2p_clique': 'auto'}))
        discover.assert_not_called()


class TestHostFacts(testtools.TestCase):
    """The two host facts the driver reads from libvirt."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.conf.config(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')
        self.driver = virt_driver.load_compute_driver(None)

    def test_libvirt_version(self):
        connection = mock.Mock()
        connection.getLibVersion.return_value = 11003000
        with mock.patch.object(self.driver._host, 'get_connection',
                               return_value=connection):
            self.assertEqual((11, 3, 0), self.driver._libvirt_version())

    def test_libvirt_version_patch(self):
        connection = mock.Mock()
        connection.getLibVersion.return_value = 9000002
        with mock.patch.object(self.driver._host, 'get_connection',
                               return_value=connection):
            self.assertEqual((9, 0, 2), self.driver._libvirt_version())

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
