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

from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs as es
from tests.unit import base


class TestRequiresClique(base.TestCase):

    def test_only_required(self):
        key = es.CLIQUE_KEY
        self.assertTrue(es.requires_clique({key: 'required'}))
        for specs in ({}, {key: 'auto'}, {key: '3'}, {key: 'none'},
                      {key: 'nonsense'}):
            self.assertFalse(es.requires_clique(specs), specs)


class TestParseClique(base.TestCase):

    def test_absent_means_none(self):
        self.assertEqual(es.CliqueRequest(es.CliqueMode.NONE),
                         es.parse_clique(None))

    def test_keywords(self):
        for value, mode in (('none', es.CliqueMode.NONE),
                            ('auto', es.CliqueMode.AUTO),
                            ('required', es.CliqueMode.REQUIRED)):
            self.assertEqual(es.CliqueRequest(mode), es.parse_clique(value))

    def test_every_fixed_id(self):
        for clique_id in range(16):
            self.assertEqual(
                es.CliqueRequest(es.CliqueMode.FIXED, clique_id),
                es.parse_clique(str(clique_id)))

    def test_bad_values(self):
        for value in ('16', '-1', '07', ' 1', '1.0', 'foo', 'AUTO',
                      'Required', '', 'fixed', '0x1', '100'):
            exc = self.assertRaises(exception.InvalidExtraSpec,
                                    es.parse_clique, value)
            self.assertEqual('hw:gpu_p2p_clique', exc.key)
            self.assertEqual(value, exc.value)
            self.assertIn("'%s'" % value, str(exc))
            self.assertIn('hw:gpu_p2p_clique', str(exc))
            self.assertIn('none, auto, required or a clique ID from 0 to 15',
                          str(exc))


class TestParseNumaAffinity(base.TestCase):

    def test_absent_means_none(self):
        self.assertIs(es.NumaAffinity.NONE, es.parse_numa_affinity(None))

    def test_values(self):
        for value in ('none', 'preferred', 'required'):
            self.assertIs(es.NumaAffinity(value),
                          es.parse_numa_affinity(value))

    def test_bad_values(self):
        for value in ('strict', 'PREFERRED', '', 'true', '1', 'auto'):
            exc = self.assertRaises(exception.InvalidExtraSpec,
                                    es.parse_numa_affinity, value)
            self.assertEqual('hw:gpu_numa_affinity', exc.key)
            self.assertIn('hw:gpu_numa_affinity', str(exc))
            self.assertIn('none, preferred or required', str(exc))


class TestParse(base.TestCase):

    def test_empty_flavor_wants_nothing(self):
        request = es.parse({})
        self.assertEqual(es.GPUP2PRequest(), request)
        self.assertFalse(request.wanted)

    def test_other_keys_ignored(self):
        request = es.parse({'hw:numa_nodes': '2', 'hw:cpu_policy': 'x'})
        self.assertFalse(request.wanted)

    def test_both_keys(self):
        request = es.parse({'hw:gpu_p2p_clique': '3',
                            'hw:gpu_numa_affinity': 'required'})
        self.assertEqual(es.CliqueRequest(es.CliqueMode.FIXED, 3),
                         request.clique)
        self.assertIs(es.NumaAffinity.REQUIRED, request.numa_affinity)
        self.assertTrue(request.wanted)

    def test_each_key_alone_is_wanted(self):
        self.assertTrue(es.parse({'hw:gpu_p2p_clique': 'auto'}).wanted)
        self.assertTrue(
            es.parse({'hw:gpu_numa_affinity': 'preferred'}).wanted)
        self.assertFalse(es.parse({'hw:gpu_p2p_clique': 'none',
                                   'hw:gpu_numa_affinity': 'none'}).wanted)

    def test_bad_value_raises(self):
        self.assertRaises(exception.InvalidExtraSpec, es.parse,
                          {'hw:gpu_numa_affinity': 'strict'})
