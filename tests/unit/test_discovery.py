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
from oslo_config import cfg

from nova_gpu_p2p import conf
from nova_gpu_p2p import exception
from nova_gpu_p2p import nova_signatures
from nova_gpu_p2p.topology import discovery
from tests.unit import base


class TestNovaHooks(base.TestCase):

    def test_installed_nova_has_them(self):
        nova_signatures.check()

    def test_missing_method_refused(self):
        class Old:
            pass
        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_signatures.check, Old)
        self.assertIn('Old.get_available_resource is missing', str(exc))

    def test_changed_signature_refused(self):
        class Moved:
            def get_available_resource(self, node, refresh):
                pass
        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_signatures.check, Moved)
        self.assertIn('takes (node, refresh), expected (nodename)',
                      str(exc))


class TestDiscoverNeverRaises(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        conf.register_opts(self.conf)
        self.conf([], default_config_files=[])
        self.log = self.useFixture(fixtures.FakeLogger())

    def test_unknown_backend(self):
        self.conf.set_override('topology_backend', 'nosuch',
                               group='gpu_p2p')
        result = discovery.discover(self.conf)
        self.assertEqual({}, result.topology.functions)
        self.assertEqual({}, result.cliques.ids)
        self.assertIn('nosuch: no such backend', result.error)
        self.assertIn('sysfs', result.error)
        self.assertEqual(1, self.log.output.count('discovery with'))

    def test_missing_sysfs_logged_once_across_updates(self):
        self.conf.set_override('sysfs_root', '/nonexistent',
                               group='gpu_p2p')
        first = discovery.discover(self.conf)
        self.assertIn('/nonexistent/bus/pci/devices', first.error)
        second = discovery.discover(self.conf, first)
        self.assertIs(first, second)
        self.assertEqual(1, self.log.output.count('discovery with'))


class TestLinkCache(base.TestCase):
    """Guest builds between two discoveries reuse the pairs' classes."""

    def test_each_pair_and_policy_computed_once(self):
        from nova_gpu_p2p.topology import link_class
        from tests.unit import test_guest_plan as tgp

        host = tgp.host_gpus()
        real = link_class.effective_class
        spy = self.useFixture(fixtures.MockPatchObject(
            link_class, 'effective_class', side_effect=real)).mock
        route, ignore = link_class.AcsPolicy.ROUTE, link_class.AcsPolicy.IGNORE
        for _ in range(3):
            self.assertEqual(link_class.LinkClass.PIX,
                             host.link(tgp.GPU_A, tgp.GPU_B, route))
            self.assertEqual(link_class.LinkClass.PIX,
                             host.link(tgp.GPU_B, tgp.GPU_A, route))
            self.assertEqual(link_class.LinkClass.SYS,
                             host.link(tgp.GPU_A, tgp.GPU_C, ignore))
        self.assertEqual(2, spy.call_count)
        # A new discovery starts with an empty cache.
        self.assertEqual({}, tgp.host_gpus()._links)
