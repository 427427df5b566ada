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

from nova.api.validation.extra_specs import validators
from nova import exception
import testtools

from nova_gpu_p2p import extra_spec_validators
from nova_gpu_p2p import extra_specs


class TestRegister(testtools.TestCase):

    def test_registers_both_keys_with_descriptions(self):
        registered = {v.name: v for v in extra_spec_validators.register()}
        self.assertEqual({'hw:gpu_p2p_clique', 'hw:gpu_numa_affinity'},
                         set(registered))
        for validator in registered.values():
            self.assertTrue(validator.description)
            self.assertTrue(validator.value['description'])
        self.assertEqual(list(extra_specs.CLIQUE_VALUES),
                         registered['hw:gpu_p2p_clique'].value['enum'])
        self.assertEqual(['none', 'preferred', 'required'],
                         registered['hw:gpu_numa_affinity'].value['enum'])

    def test_nova_loaded_them_through_the_entry_point(self):
        # Nova's validators module loads every nova.api.extra_spec_validators
        # entry point at import: ours must be among them.
        for name in ('hw:gpu_p2p_clique', 'hw:gpu_numa_affinity'):
            self.assertIsInstance(validators.VALIDATORS[name],
                                  extra_spec_validators._ParsedValidator)


class TestValidate(testtools.TestCase):

    def test_valid_values(self):
        for value in extra_specs.CLIQUE_VALUES:
            validators.validate('hw:gpu_p2p_clique', value)
        for value in ('none', 'preferred', 'required'):
            validators.validate('hw:gpu_numa_affinity', value)

    def test_invalid_values_name_key_and_allowed(self):
        for key, value, allowed in (
                ('hw:gpu_p2p_clique', '16', extra_specs.CLIQUE_ALLOWED),
                ('hw:gpu_p2p_clique', 'foo', extra_specs.CLIQUE_ALLOWED),
                ('hw:gpu_numa_affinity', 'strict',
                 extra_specs.NUMA_AFFINITY_ALLOWED)):
            exc = self.assertRaises(exception.ValidationError,
                                    validators.validate, key, value)
            self.assertIn(key, str(exc))
            self.assertIn("'%s'" % value, str(exc))
            self.assertIn(allowed, str(exc))
