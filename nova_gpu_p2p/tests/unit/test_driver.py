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

import fixtures
from nova import conf as nova_conf
from nova.tests import fixtures as nova_fixtures
from nova.virt import driver as virt_driver
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import fixture as config_fixture
import testtools

from nova_gpu_p2p import conf
from nova_gpu_p2p import driver


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
