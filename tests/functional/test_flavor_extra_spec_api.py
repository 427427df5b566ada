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

"""The flavor extra spec API accepts our keys only through our validators."""

from unittest import mock

from nova.api.validation.extra_specs import validators
from nova.tests.functional.api import client

from nova_gpu_p2p.api import extra_spec_validators
from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs
from tests.cloud import nova_cloud as base
from tests.fixtures import waits

MODE_ALLOWED = extra_spec_validators.MAXPHYSADDR_MODE_ALLOWED
BITS_ALLOWED = extra_spec_validators.MAXPHYSADDR_BITS_ALLOWED


class FlavorExtraSpecAPITest(waits.PatientWaits, base.APITestBase):

    def setUp(self):
        super().setUp()
        self.flavor_id = self._create_flavor(name='p2p')

    def set_spec(self, key, value):
        return self.admin_api.post_extra_spec(
            self.flavor_id, {'extra_specs': {key: value}})

    def assertRejected(self, key, value):
        exc = self.assertRaises(client.OpenStackApiException,
                                self.set_spec, key, value)
        self.assertEqual(400, exc.response.status_code)
        return exc.response.text

    def test_valid_values_accepted(self):
        for value in extra_specs.CLIQUE_VALUES:
            self.set_spec('hw:gpu_p2p_clique', value)
            self.assertEqual(
                value,
                self.admin_api.get_extra_specs(self.flavor_id)[
                    'hw:gpu_p2p_clique'])
        for key, values in (
                ('hw:gpu_numa_affinity', ('none', 'preferred', 'required')),
                ('hw:maxphysaddr_mode', ('passthrough', 'emulate')),
                ('hw:maxphysaddr_bits', ('32', '46', '52'))):
            for value in values:
                self.set_spec(key, value)
                self.assertEqual(
                    value,
                    self.admin_api.get_extra_specs(self.flavor_id)[key])

    def test_bad_values_rejected_naming_key_and_allowed_values(self):
        for key, value, allowed in (
                ('hw:gpu_p2p_clique', '16', extra_specs.CLIQUE_ALLOWED),
                ('hw:gpu_p2p_clique', 'foo', extra_specs.CLIQUE_ALLOWED),
                ('hw:gpu_numa_affinity', 'strict',
                 extra_specs.NUMA_AFFINITY_ALLOWED),
                ('hw:maxphysaddr_mode', 'host', MODE_ALLOWED),
                ('hw:maxphysaddr_bits', '31', BITS_ALLOWED),
                ('hw:maxphysaddr_bits', '64', BITS_ALLOWED),
                ('hw:maxphysaddr_bits', 'host', BITS_ALLOWED)):
            text = self.assertRejected(key, value)
            self.assertIn(key, text)
            self.assertIn("'%s'" % value, text)
            self.assertIn(allowed, text)
        self.assertEqual({}, self.admin_api.get_extra_specs(self.flavor_id))

    def test_old_microversion_does_not_validate(self):
        # Before 2.86 Nova stores any extra spec: the driver's parser is the
        # only check, which is why it shares the validators' rules.
        self.admin_api.microversion = '2.85'
        self.set_spec('hw:gpu_p2p_clique', 'foo')
        value = self.admin_api.get_extra_specs(self.flavor_id)[
            'hw:gpu_p2p_clique']
        self.assertRaises(exception.InvalidExtraSpec,
                          extra_specs.parse_clique, value)

    def test_without_our_entry_point_nova_rejects_valid_values(self):
        real_manager = validators.extension.ExtensionManager
        seen = []

        def manager_without_ours(*args, **kwargs):
            mgr = real_manager(*args, **kwargs)
            seen.extend(ext.name for ext in mgr.extensions)
            mgr.extensions = [ext for ext in mgr.extensions
                              if ext.name != 'gpu_p2p']
            return mgr

        with mock.patch.dict(validators.VALIDATORS, clear=True), \
                mock.patch.object(validators.extension, 'ExtensionManager',
                                  manager_without_ours):
            validators.load_validators()
            self.assertIn('gpu_p2p', seen)
            for key, value in (('hw:gpu_p2p_clique', 'auto'),
                               ('hw:gpu_numa_affinity', 'preferred'),
                               ('hw:maxphysaddr_mode', 'emulate'),
                               ('hw:maxphysaddr_bits', '46')):
                text = self.assertRejected(key, value)
                self.assertIn(
                    "extra spec '%s' does not appear to be a valid" % key,
                    text)
        # And with it back, the same requests succeed.
        self.set_spec('hw:gpu_p2p_clique', 'auto')
        self.set_spec('hw:maxphysaddr_bits', '46')
