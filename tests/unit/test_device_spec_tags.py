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

from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.fabric import partitions as partitions_mod
from tests.unit import base

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


class TestEntry(base.TestCase):

    def test_line(self):
        self.assertEqual(_entry(C, 3), device_spec_tags.entry(C, 3))

    def test_value_is_json_nova_reads(self):
        line = device_spec_tags.entry('0000:8a:00.0', 15)
        prefix = 'device_spec = '
        self.assertTrue(line.startswith(prefix), line)
        self.assertEqual({'address': '0000:8a:00.0',
                          'traits': 'CUSTOM_GPU_P2P_CLIQUE_ID_15',
                          'gpu_p2p_clique': '15'},
                         json.loads(line[len(prefix):]))

    def test_clique_zero(self):
        value = json.loads(device_spec_tags.entry(A, 0).split(' = ', 1)[1])
        self.assertEqual('CUSTOM_GPU_P2P_CLIQUE_ID_0', value['traits'])
        self.assertEqual('0', value['gpu_p2p_clique'])
        self.assertEqual(0, device_spec_tags.tag_clique(value))


class TestOrderTags(base.TestCase):
    """The claim order, as the number of a GPU's order tags."""

    def test_as_many_as_the_rank(self):
        self.assertEqual({}, device_spec_tags.order_tags(0))
        self.assertEqual({'gpu_p2p_order_1': '2', 'gpu_p2p_order_2': '2'},
                         device_spec_tags.order_tags(2))
        self.assertTrue(all(map(device_spec_tags.is_order_tag,
                                device_spec_tags.order_tags(5))))
        self.assertFalse(device_spec_tags.is_order_tag('gpu_p2p_clique'))

    def test_entries_of_a_host(self):
        """Node 0's cliques first, each clique's GPUs together."""
        ids = {A: 1, B: 0, C: 0, D: None, '0000:05:00.0': 1}
        numa = {A: 0, B: 0, C: 0, D: 0, '0000:05:00.0': 0}
        entries = [json.loads(line.split(' = ', 1)[1])
                   for line in device_spec_tags.entries(ids, numa)]
        # Address order; D is in no clique, so no entry.
        self.assertEqual([A, B, '0000:05:00.0', C],
                         [e['address'] for e in entries])
        # Clique 1 (A, 05) was met first in address order.
        self.assertEqual(
            [0, 2, 1, 3],
            [sum(map(device_spec_tags.is_order_tag, e)) for e in entries])
        ranks = device_spec_tags.claim_ranks(ids, numa)
        self.assertEqual({A: 0, '0000:05:00.0': 1, B: 2, C: 3}, ranks)

    def test_partitions_order_a_fabric_host(self):
        found = (partitions_mod.FabricPartition(0, (A, B, C, D)),
                 partitions_mod.FabricPartition(1, (A, C)),
                 partitions_mod.FabricPartition(2, (B, D)),
                 partitions_mod.FabricPartition(3, (A,)))
        self.assertEqual(
            {A: 0, C: 1, B: 2, D: 3},
            device_spec_tags.claim_ranks(dict.fromkeys((A, B, C, D), 0),
                                         dict.fromkeys((A, B, C, D), 0),
                                         found))

    def test_misordered(self):
        ranks = {A: 0, B: 1, C: 2}
        tags = {A: {}, B: device_spec_tags.order_tags(1),
                C: device_spec_tags.order_tags(1)}
        self.assertEqual([C], device_spec_tags.misordered(tags, ranks))
        # A GPU no entry offers is not Nova's to claim.
        del tags[C]
        self.assertEqual([], device_spec_tags.misordered(tags, ranks))


class TestEntryTraits(base.TestCase):

    def test_read_as_nova_reads_them(self):
        self.assertEqual(
            {'CUSTOM_GPU_P2P_CLIQUE_ID_3', 'CUSTOM_OTHER', 'HW_CPU_X86_AVX'},
            device_spec_tags.entry_traits(
                {'traits': 'gpu_p2p_clique_id_3,CUSTOM_OTHER,HW_CPU_X86_AVX'}))

    def test_none(self):
        self.assertEqual(set(), device_spec_tags.entry_traits({}))


class TestProviderName(base.TestCase):

    def test_upper_case_address(self):
        self.assertEqual(
            'cmp1_0000:AF:00.0',
            device_spec_tags.provider_name('cmp1', '0000:af:00.0'))


class TestTagClique(base.TestCase):

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
            self.assertEqual(expected, device_spec_tags.tag_clique(tags), tags)


class TestProblems(base.TestCase):

    def test_right_trait_and_tag(self):
        self.assertEqual([], device_spec_tags.problems(
            {A: 0, B: 0},
            {A: {ID % 0}, B: {ID % 0, 'CUSTOM_OPERATOR_X',
                              'HW_GPU_API_CUDA_V12_0'}},
            {A: _tags(0), B: dict(_tags(0), physical_network='x')}))

    def test_missing_trait(self):
        self.assertEqual([_missing(A, 0)],
                         device_spec_tags.problems({A: 0}, {A: set()}, {}))

    def test_missing_tag(self):
        self.assertEqual(
            [_missing(A, 0, 'its [pci] device_spec entry has no '
                            'gpu_p2p_clique tag')],
            device_spec_tags.problems({A: 0}, {A: {ID % 0}},
                                      {A: {'traits': ID % 0}}))

    def test_missing_both_is_one_problem(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has no clique trait '
                            'and its [pci] device_spec entry has no '
                            'gpu_p2p_clique tag')],
            device_spec_tags.problems({A: 0}, {A: set()}, {A: {}}))

    def test_wrong_tag(self):
        self.assertEqual(
            [_missing(A, 0, 'its [pci] device_spec entry has '
                            'gpu_p2p_clique \'1\'')],
            device_spec_tags.problems({A: 0}, {}, {A: _tags(1)}))

    def test_unreadable_tag(self):
        self.assertEqual(
            [_missing(A, 0, 'its [pci] device_spec entry has '
                            'gpu_p2p_clique \'zero\'')],
            device_spec_tags.problems({A: 0}, {},
                                      {A: {'gpu_p2p_clique': 'zero'}}))

    def test_other_traits_are_not_a_clique_trait(self):
        # The clique-size traits of the compute node share the prefix
        # CUSTOM_GPU_P2P_CLIQUE_ but are not per-GPU clique IDs.
        self.assertEqual(
            [_missing(A, 2)],
            device_spec_tags.problems(
                {A: 2}, {A: {'CUSTOM_GPU_P2P_CLIQUE_2', 'CUSTOM_OTHER'}},
                {}))

    def test_wrong_id(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_1')],
            device_spec_tags.problems({A: 0}, {A: {ID % 1}}, {}))

    def test_right_and_wrong_id(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_0, '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_12')],
            device_spec_tags.problems({A: 0}, {A: {ID % 12, ID % 0}}, {}))

    def test_extra_on_gpu_without_clique(self):
        self.assertEqual(
            ['GPU 0000:81:00.0 is in no clique but its placement provider '
             'has CUSTOM_GPU_P2P_CLIQUE_ID_2 and its [pci] device_spec '
             'entry has gpu_p2p_clique \'2\': remove the clique trait and tag '
             'from its [pci] device_spec entry'],
            device_spec_tags.problems({C: None}, {C: {ID % 2, 'CUSTOM_X'}},
                                      {C: _tags(2)}))

    def test_unreadable_tag_on_gpu_without_clique(self):
        self.assertEqual(
            ['GPU 0000:81:00.0 is in no clique but its [pci] device_spec '
             'entry has gpu_p2p_clique \'x\': remove the clique trait and tag '
             'from its [pci] device_spec entry'],
            device_spec_tags.problems({C: None}, {},
                                      {C: {'gpu_p2p_clique': 'x'}}))

    def test_gpu_without_clique_trait_or_tag(self):
        self.assertEqual([], device_spec_tags.problems(
            {C: None}, {C: {'CUSTOM_X'}}, {C: {'traits': 'CUSTOM_X'}}))

    def test_gpu_without_provider_or_entry_ignored(self):
        self.assertEqual([], device_spec_tags.problems(
            {A: 0, B: 0, C: None}, {}, {}))
        self.assertEqual([_missing(B, 0)], device_spec_tags.problems(
            {A: 0, B: 0, C: None}, {B: frozenset()}, {}))

    def test_provider_or_entry_of_unknown_address_ignored(self):
        self.assertEqual([], device_spec_tags.problems(
            {A: 0}, {A: {ID % 0}, D: {ID % 9}},
            {A: _tags(0), D: _tags(9)}))

    def test_no_gpus(self):
        self.assertEqual([], device_spec_tags.problems({}, {}, {}))

    def test_sorted_by_address(self):
        problems = device_spec_tags.problems(
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


#: GPU A of an H100 board: module 1, in the board, the first half and
#: the pair {1, 3}.
HELD = {0: 8, 1: 4, 3: 2}
PART = 'CUSTOM_GPU_P2P_PARTITION_%d'
HELD_TRAITS = {ID % 0, PART % 0, PART % 1, PART % 3}


def _held_tags(value='0:8,1:4,3:2'):
    return dict(_tags(0), traits=','.join(sorted(HELD_TRAITS)),
                gpu_p2p_partitions=value)


def _held_missing(why):
    return 'GPU %s is in clique 0 but %s: set %s' % (
        A, why, device_spec_tags.entry(A, 0, HELD))


class TestPartitions(base.TestCase):
    """Fabric Manager partitions in a GPU's entry, and their checks."""

    def test_sizes_of_partitions_of_two_or_more(self):
        self.assertEqual(
            {A: {0: 3, 2: 2}, B: {0: 3, 2: 2}, C: {0: 3}},
            device_spec_tags.partition_sizes((
                partitions_mod.FabricPartition(0, (A, B, C)),
                partitions_mod.FabricPartition(2, (A, B)),
                partitions_mod.FabricPartition(7, (C,)))))

    def test_no_partitions(self):
        self.assertEqual({}, device_spec_tags.partition_sizes(()))

    def test_entry(self):
        line = device_spec_tags.entry(A, 0, {3: 2, 1: 4, 0: 8})
        self.assertEqual(
            {'address': A,
             'traits': 'CUSTOM_GPU_P2P_CLIQUE_ID_0,'
                       'CUSTOM_GPU_P2P_PARTITION_0,'
                       'CUSTOM_GPU_P2P_PARTITION_1,'
                       'CUSTOM_GPU_P2P_PARTITION_3',
             'gpu_p2p_clique': '0', 'gpu_p2p_partitions': '0:8,1:4,3:2'},
            json.loads(line.split(' = ', 1)[1]))

    def test_entry_without_partitions_unchanged(self):
        self.assertEqual(_entry(A, 2), device_spec_tags.entry(A, 2, {}))

    def test_entry_traits_as_nova_reads_them(self):
        value = json.loads(
            device_spec_tags.entry(A, 0, HELD).split(' = ', 1)[1])
        self.assertEqual(HELD_TRAITS, device_spec_tags.entry_traits(value))

    def test_tag_read_back(self):
        value = json.loads(
            device_spec_tags.entry(A, 0, HELD).split(' = ', 1)[1])
        self.assertEqual(HELD, device_spec_tags.tag_partitions(value))

    def test_tag_values(self):
        for value, expected in ((None, None), ('0:8', {0: 8}),
                                ('3:2,1:4', {1: 4, 3: 2}),
                                ('', {}), ('3', {}), ('3:1', {}),
                                ('3:2,x:4', {}), ('-1:2', {}),
                                ('3:2,', {}), ('3:two', {})):
            tags = {} if value is None else {'gpu_p2p_partitions': value}
            self.assertEqual(expected, device_spec_tags.tag_partitions(tags),
                             value)

    def test_right_traits_and_tags(self):
        self.assertEqual([], device_spec_tags.problems(
            {A: 0}, {A: HELD_TRAITS | {'CUSTOM_X'}}, {A: _held_tags()},
            {A: HELD}))

    def test_provider_missing_a_partition(self):
        self.assertEqual(
            [_held_missing('its placement provider has '
                           'CUSTOM_GPU_P2P_CLIQUE_ID_0, '
                           'CUSTOM_GPU_P2P_PARTITION_0')],
            device_spec_tags.problems({A: 0}, {A: {ID % 0, PART % 0}}, {},
                                      {A: HELD}))

    def test_entry_without_partitions_tag(self):
        self.assertEqual(
            [_held_missing('its [pci] device_spec entry has no '
                           'gpu_p2p_partitions tag')],
            device_spec_tags.problems({A: 0}, {}, {A: _tags(0)}, {A: HELD}))

    def test_entry_with_wrong_partitions(self):
        self.assertEqual(
            [_held_missing('its [pci] device_spec entry has '
                           "gpu_p2p_clique '1', gpu_p2p_partitions '0:8'")],
            device_spec_tags.problems(
                {A: 0}, {}, {A: dict(_tags(1), gpu_p2p_partitions='0:8')},
                {A: HELD}))

    def test_partitions_on_a_host_without_them(self):
        self.assertEqual(
            [_missing(A, 0, 'its placement provider has '
                            'CUSTOM_GPU_P2P_CLIQUE_ID_0, '
                            'CUSTOM_GPU_P2P_PARTITION_0, '
                            'CUSTOM_GPU_P2P_PARTITION_1, '
                            'CUSTOM_GPU_P2P_PARTITION_3 and its [pci] '
                            'device_spec entry has gpu_p2p_partitions '
                            "'0:8,1:4,3:2'")],
            device_spec_tags.problems({A: 0}, {A: HELD_TRAITS},
                                      {A: _held_tags()}))


class TestConfiguredTags(base.TestCase):
    """Nova's own device_spec matching decides which entry is a GPU's."""

    def setUp(self):
        super().setUp()
        # Nova asks sysfs whether an address-based entry names a PF.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    def test_first_matching_entry_wins(self):
        specs = [device_spec_tags.entry(A, 0).split(' = ', 1)[1],
                 json.dumps({'vendor_id': '10de', 'traits': 'CUSTOM_X'})]
        self.assertEqual(
            {A: _tags(0), B: {'traits': 'CUSTOM_X'}},
            device_spec_tags.configured_tags(
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
            device_spec_tags.configured_tags(
                specs, [(A, 0x10de, 0x2330), (B, 0x10de, 0x2330),
                        (C, 0x10de, 0x2330), (D, 0x10de, 0x2330)]))

    def test_partitions_tag_kept(self):
        specs = [device_spec_tags.entry(A, 0, HELD).split(' = ', 1)[1]]
        self.assertEqual({A: _held_tags()}, device_spec_tags.configured_tags(
            specs, [(A, 0x10de, 0x2330)]))

    def test_no_entries(self):
        self.assertEqual({}, device_spec_tags.configured_tags(
            [], [(A, 0x10de, 0x2330)]))
