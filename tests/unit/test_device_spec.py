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

"""The device_spec entry carrying a GPU's clique, and its checks."""

import json

import fixtures
import testtools

from nova_gpu_p2p import device_spec

A = '0000:03:00.0'
B = '0000:04:00.0'
C = '0000:81:00.0'
D = '0000:8a:00.0'
ID = 'CUSTOM_GPU_P2P_CLIQUE_ID_%d'


def _entry(address, clique_id):
    return ('device_spec = {"address": "%s", "traits": '
            '"CUSTOM_GPU_P2P_CLIQUE_ID_%d", "gpu_p2p_clique": "%d"}'
            % (address, clique_id, clique_id))


NO_TRAIT = 'its placement provider has no clique trait'


def _missing(address, clique_id, why=NO_TRAIT):
    return ('GPU %s is in clique %d but %s: set %s'
            % (address, clique_id, why, _entry(address, clique_id)))


def _tags(clique_id):
    return {'traits': ID % clique_id, 'gpu_p2p_clique': str(clique_id)}


class TestEntry(testtools.TestCase):

    def test_line(self):
        self.assertEqual(_entry(C, 3), device_spec.entry(C, 3))

    def test_value_is_json_nova_reads(self):
        line = device_spec.entry('0000:8a:00.0', 15)
        prefix = 'device_spec = '
        self.assertTrue(line.startswith(prefix), line)
        self.assertEqual({'address': '0000:8a:00.0',
                          'traits': 'CUSTOM_GPU_P2P_CLIQUE_ID_15',
                          'gpu_p2p_clique': '15'},
                         json.loads(line[len(prefix):]))

    def test_clique_zero(self):
        value = json.loads(device_spec.entry(A, 0).split(' = ', 1)[1])
        self.assertEqual('CUSTOM_GPU_P2P_CLIQUE_ID_0', value['traits'])
        self.assertEqual('0', value['gpu_p2p_clique'])
        self.assertEqual(0, device_spec.tag_clique(value))


class TestEntryTraits(testtools.TestCase):

    def test_read_as_nova_reads_them(self):
        self.assertEqual(
            {'CUSTOM_GPU_P2P_CLIQUE_ID_3', 'CUSTOM_OTHER', 'HW_CPU_X86_AVX'},
            device_spec.entry_traits(
                {'traits': 'gpu_p2p_clique_id_3,CUSTOM_OTHER,HW_CPU_X86_AVX'}))

    def test_none(self):
        self.assertEqual(set(), device_spec.entry_traits({}))


class TestProviderName(testtools.TestCase):

    def test_upper_case_address(self):
        self.assertEqual('cmp1_0000:AF:00.0',
                         device_spec.provider_name('cmp1', '0000:af:00.0'))


class TestTagClique(testtools.TestCase):

    def test_values(self):
        for tags, expected in (({'gpu_p2p_clique': '0'}, 0),
                               ({'gpu_p2p_clique': '15'}, 15),
                               ({'gpu_p2p_clique': 7}, 7),
                               ({}, None),
                               ({'gpu_p2p_clique': None}, None),
                               ({'gpu_p2p_clique': '16'}, None),
                               ({'gpu_p2p_clique': '-1'}, None),
                               ({'gpu_p2p_clique': 'one'}, None),
                               ({'gpu_p2p_clique': ''}, None),
                               ({'clique': '1'}, None)):
            self.assertEqual(expected, device_spec.tag_clique(tags), tags)


class TestProblems(testtools.TestCase):

    def test_right_trait_and_tag(self):
        self.assertEqual([], device_spec.problems(
            {A: 0, B: 0},
            {A: {ID % 0}, B: {ID % 0, 'CUSTOM_OPERATOR_X',
                              'HW_GPU_API_CUDA_V12_0'}},
            {A: _tags(0), B: dict(_tags(0), physical_network='x')}))

    def test_missing_trait(self):
        self.assertEqual([_missing(A, 0)],
                         device_spec.problems({A: 0}, {A: set()}, {}))

    def test_missing_tag(self):
        self.assertEqual(
            [_missing(A, 0, 'its [pci] device_spec entry has no '
                            'gpu_p2p_clique tag')],
            device_spec.problems({A: 0}, {A: {ID % 0}},
                                 {A: {'traits': ID % 0}}))

    def test_missing_both_is_one_problem(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has no clique trait '
                            'and its [pci] device_spec entry has no '
                            'gpu_p2p_clique tag')],
            device_spec.problems({A: 0}, {A: set()}, {A: {}}))

    def test_wrong_tag(self):
        self.assertEqual(
            [_missing(A, 0, 'its [pci] device_spec entry has '
                            'gpu_p2p_clique "1"')],
            device_spec.problems({A: 0}, {}, {A: _tags(1)}))

    def test_unreadable_tag(self):
        self.assertEqual(
            [_missing(A, 0, 'its [pci] device_spec entry has '
                            'gpu_p2p_clique "zero"')],
            device_spec.problems({A: 0}, {},
                                 {A: {'gpu_p2p_clique': 'zero'}}))

    def test_other_traits_are_not_a_clique_trait(self):
        # The clique-size traits of the compute node share the prefix
        # CUSTOM_GPU_P2P_CLIQUE_ but are not per-GPU clique IDs.
        self.assertEqual(
            [_missing(A, 2)],
            device_spec.problems(
                {A: 2}, {A: {'CUSTOM_GPU_P2P_CLIQUE_2', 'CUSTOM_OTHER'}},
                {}))

    def test_wrong_id(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_1')],
            device_spec.problems({A: 0}, {A: {ID % 1}}, {}))

    def test_right_and_wrong_id(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_0, '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_12')],
            device_spec.problems({A: 0}, {A: {ID % 12, ID % 0}}, {}))

    def test_extra_on_gpu_without_clique(self):
        self.assertEqual(
            ['GPU 0000:81:00.0 is in no clique but its placement provider '
             'has CUSTOM_GPU_P2P_CLIQUE_ID_2 and its [pci] device_spec '
             'entry has gpu_p2p_clique "2": remove the clique trait and tag '
             'from its [pci] device_spec entry'],
            device_spec.problems({C: None}, {C: {ID % 2, 'CUSTOM_X'}},
                                 {C: _tags(2)}))

    def test_unreadable_tag_on_gpu_without_clique(self):
        self.assertEqual(
            ['GPU 0000:81:00.0 is in no clique but its [pci] device_spec '
             'entry has gpu_p2p_clique "x": remove the clique trait and tag '
             'from its [pci] device_spec entry'],
            device_spec.problems({C: None}, {}, {C: {'gpu_p2p_clique': 'x'}}))

    def test_gpu_without_clique_trait_or_tag(self):
        self.assertEqual([], device_spec.problems(
            {C: None}, {C: {'CUSTOM_X'}}, {C: {'traits': 'CUSTOM_X'}}))

    def test_gpu_without_provider_or_entry_ignored(self):
        self.assertEqual([], device_spec.problems(
            {A: 0, B: 0, C: None}, {}, {}))
        self.assertEqual([_missing(B, 0)], device_spec.problems(
            {A: 0, B: 0, C: None}, {B: frozenset()}, {}))

    def test_provider_or_entry_of_unknown_address_ignored(self):
        self.assertEqual([], device_spec.problems(
            {A: 0}, {A: {ID % 0}, D: {ID % 9}},
            {A: _tags(0), D: _tags(9)}))

    def test_no_gpus(self):
        self.assertEqual([], device_spec.problems({}, {}, {}))

    def test_sorted_by_address(self):
        problems = device_spec.problems(
            {D: 1, C: None, B: 0, A: 0},
            {D: set(), C: {ID % 1}, B: set(), A: {ID % 1}}, {})
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_1'),
             _missing(B, 0),
             'GPU 0000:81:00.0 is in no clique but its placement provider '
             'has CUSTOM_GPU_P2P_CLIQUE_ID_1: remove the clique trait and '
             'tag from its [pci] device_spec entry',
             _missing(D, 1)],
            problems)


class TestConfiguredTags(testtools.TestCase):
    """Nova's own device_spec matching decides which entry is a GPU's."""

    def setUp(self):
        super().setUp()
        # Nova asks sysfs whether an address-based entry names a PF.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    def test_first_matching_entry_wins(self):
        specs = [device_spec.entry(A, 0).split(' = ', 1)[1],
                 json.dumps({'vendor_id': '10de', 'traits': 'CUSTOM_X'})]
        self.assertEqual(
            {A: _tags(0), B: {'traits': 'CUSTOM_X'}},
            device_spec.configured_tags(
                specs, [(A, 0x10de, 0x2330), (B, 0x10de, 0x2330),
                        (C, 0x1a03, 0x2000)]))

    def test_wildcards_and_lists(self):
        specs = [json.dumps([{'address': {'domain': '.*', 'bus': '0[34]',
                                          'slot': '00', 'function': '0'},
                              'gpu_p2p_clique': '3'},
                             {'address': '*:81:00.0',
                              'product_id': '2330'}])]
        self.assertEqual(
            {A: {'gpu_p2p_clique': '3'}, B: {'gpu_p2p_clique': '3'},
             C: {}},
            device_spec.configured_tags(
                specs, [(A, 0x10de, 0x2330), (B, 0x10de, 0x2330),
                        (C, 0x10de, 0x2330), (D, 0x10de, 0x2330)]))

    def test_no_entries(self):
        self.assertEqual({}, device_spec.configured_tags(
            [], [(A, 0x10de, 0x2330)]))
