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

from unittest import mock

from nova.api.validation.extra_specs import base
from nova.api.validation.extra_specs import hw
from nova.api.validation.extra_specs import validators
from nova import exception as nova_exception

from nova_gpu_p2p.api import extra_spec_validators
from nova_gpu_p2p import extra_specs
from tests.unit import base as test_base


OURS = {'hw:gpu_p2p_clique', 'hw:gpu_numa_affinity'}
MAXPHYSADDR = {'hw:maxphysaddr_mode', 'hw:maxphysaddr_bits'}


def nova_validator(name: str) -> base.ExtraSpecValidator:
    return base.ExtraSpecValidator(
        name=name, description='Nova\'s own', value={'type': str})


class TestRegister(test_base.TestCase):

    def test_registers_our_keys_and_nova_gaps_with_descriptions(self):
        registered = {v.name: v for v in extra_spec_validators.register()}
        # Nova 33 and 34 have no validators for hw:maxphysaddr_*.
        self.assertEqual(OURS | MAXPHYSADDR, set(registered))
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
        for name in OURS | MAXPHYSADDR:
            self.assertIsInstance(validators.VALIDATORS[name],
                                  extra_spec_validators._ParsedValidator)

    def test_nova_validators_are_novas_own_plugins_only(self):
        found = {v.name for v in extra_spec_validators.nova_validators()}
        self.assertIn('hw:cpu_policy', found)
        self.assertTrue(found.isdisjoint(OURS | MAXPHYSADDR))

    def test_a_nova_with_maxphysaddr_validators_keeps_its_own(self):
        # Fake a Nova whose hw plugin validates both keys: we leave them
        # out, so Nova's stay whatever order the plugins load in.
        novas = [nova_validator(name) for name in sorted(MAXPHYSADDR)]
        with mock.patch.object(hw, 'register',
                               return_value=hw.register() + novas), \
                mock.patch.dict(validators.VALIDATORS, clear=True):
            self.assertEqual(OURS, {v.name for v in
                                    extra_spec_validators.register()})
            validators.load_validators()
            for validator in novas:
                self.assertIs(validator, validators.VALIDATORS[validator.name])
            for name in OURS:
                self.assertIsInstance(validators.VALIDATORS[name],
                                      extra_spec_validators._ParsedValidator)

    def test_a_nova_pattern_claiming_a_key_counts(self):
        # A parameterised Nova validator, e.g. 'hw:maxphysaddr_{x}'.
        pattern = base.ExtraSpecValidator(
            name='hw:maxphysaddr_{x}', description='Nova\'s own',
            value={'type': str},
            parameters=[{'name': 'x', 'pattern': '[a-z]+',
                         'description': 'anything'}])
        self.assertEqual(
            [], extra_spec_validators.unclaimed(
                extra_spec_validators.NOVA_GAP_VALIDATORS, [pattern]))
        self.assertEqual(
            extra_spec_validators.NOVA_GAP_VALIDATORS,
            extra_spec_validators.unclaimed(
                extra_spec_validators.NOVA_GAP_VALIDATORS,
                [nova_validator('hw:maxphysaddr')]))


class TestValidate(test_base.TestCase):

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
            exc = self.assertRaises(nova_exception.ValidationError,
                                    validators.validate, key, value)
            self.assertIn(key, str(exc))
            self.assertIn("'%s'" % value, str(exc))
            self.assertIn(allowed, str(exc))


class TestMaxPhysAddr(test_base.TestCase):

    def test_valid_values(self):
        # The modes Nova's libvirt driver writes; QEMU's phys-bits range.
        for value in ('passthrough', 'emulate'):
            validators.validate('hw:maxphysaddr_mode', value)
        for value in ('32', '42', '46', '52'):
            validators.validate('hw:maxphysaddr_bits', value)

    def test_invalid_values_name_key_and_allowed(self):
        for key, value, allowed in (
                ('hw:maxphysaddr_mode', 'host', 'passthrough or emulate'),
                ('hw:maxphysaddr_mode', 'Emulate', 'passthrough or emulate'),
                ('hw:maxphysaddr_mode', '', 'passthrough or emulate'),
                ('hw:maxphysaddr_bits', '31', 'integers from 32 to 52'),
                ('hw:maxphysaddr_bits', '53', 'integers from 32 to 52'),
                ('hw:maxphysaddr_bits', '-46', 'integers from 32 to 52'),
                ('hw:maxphysaddr_bits', '4 6', 'integers from 32 to 52'),
                ('hw:maxphysaddr_bits', '\u0664\u0666',
                 'integers from 32 to 52'),
                ('hw:maxphysaddr_bits', 'max', 'integers from 32 to 52')):
            exc = self.assertRaises(nova_exception.ValidationError,
                                    validators.validate, key, value)
            self.assertIn(key, str(exc))
            self.assertIn("'%s'" % value, str(exc))
            self.assertIn(allowed, str(exc))
