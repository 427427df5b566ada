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

"""A fitting candidate from a returned one: like for like, nothing lost."""

from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.scheduler import candidate_exchange as ex
from nova_gpu_p2p.scheduler import partition_fit
from tests.unit import base

REQUEST = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
ROOT = 'compute-rp'
RC = 'CUSTOM_PCI_10DE_2330'
GROUPS = {'%s-%d' % (REQUEST, i): ex.Group({RC: 1}) for i in range(4)}
GROUPS[''] = ex.Group({'PCPU': 2, 'MEMORY_MB': 2048})


def pools(*cliques, used=(), product='2330', ordered=False):
    """g0.. with these cliques; the first half on NUMA node 0.

    ``ordered``: each with the order tags of its place.
    """
    found = {}
    for i, clique in enumerate(cliques):
        nova = {'vendor_id': '10de', 'product_id': product,
                'dev_type': 'type-PCI', 'numa_node': i * 2 // len(cliques),
                'count': 0 if i in used else 1, 'rp_uuid': 'g%d' % i,
                'address': '0000:%02x:00.0' % i,
                **(device_spec_tags.order_tags(i) if ordered else {})}
        if clique is not None:
            nova['gpu_p2p_clique'] = str(clique)
        found['g%d' % i] = ex.Pool.from_nova(nova, clique)
    return found


def candidate(*gpus):
    mappings = {'': [ROOT]}
    allocations = {ROOT: {'resources': {'PCPU': 2, 'MEMORY_MB': 2048}}}
    for i, gpu in enumerate(gpus):
        mappings['%s-%d' % (REQUEST, i)] = ['g%d' % gpu]
        allocations['g%d' % gpu] = {'resources': {RC: 1}}
    return {'allocations': allocations, 'mappings': mappings}


TWO_CLIQUES = (0, 0, 0, 0, 1, 1, 1, 1)


class TestTarget(base.TestCase):

    def test_the_best_fit_clique_its_free_gpus(self):
        self.assertEqual(['g0', 'g1'], ex.target(
            list(pools(*TWO_CLIQUES).values()), 2))
        # Clique 1 has two free: the tighter fit.
        self.assertEqual(['g6', 'g7'], ex.target(
            list(pools(*TWO_CLIQUES, used=(4, 5)).values()), 2))

    def test_never_a_gpu_in_use(self):
        found = ex.target(list(pools(*TWO_CLIQUES, used=(0, 2)).values()), 2)
        self.assertEqual(['g1', 'g3'], found)

    def test_the_node_with_most_of_the_clique_first(self):
        # Clique 0 spans both nodes: g2, g3 on node 0, g4.. on node 1.
        found = pools(0, 0, 0, 0, 0, 0, 0, 0, used=(0, 1))
        self.assertEqual(['g4', 'g5', 'g6', 'g7'],
                         ex.target(list(found.values()), 4))

    def test_not_required_any_free_gpus_where_no_clique_holds_it(self):
        # Pairs: no clique of four. One node has four free.
        found = pools(0, 0, 1, 1, 2, 2, 3, 3, used=(0,))
        self.assertIsNone(ex.target(list(found.values()), 4))
        self.assertEqual(['g4', 'g5', 'g6', 'g7'],
                         ex.target(list(found.values()), 4, required=False))
        self.assertIsNone(ex.target(list(found.values()), 8,
                                    required=False))

    def test_none_without_a_free_clique(self):
        self.assertIsNone(ex.target(
            list(pools(0, 0, 1, 1, used=(0, 2)).values()), 2))
        self.assertIsNone(ex.target(list(pools(None, None).values()), 2))


class TestExchange(base.TestCase):

    def test_mappings_and_allocations_follow(self):
        host = pools(*TWO_CLIQUES)
        built = ex.exchange(candidate(0, 4), host, GROUPS, ['g0', 'g1'])
        self.assertEqual({'': [ROOT], '%s-0' % REQUEST: ['g0'],
                          '%s-1' % REQUEST: ['g1']}, built['mappings'])
        self.assertEqual({ROOT: {'resources': {'PCPU': 2,
                                               'MEMORY_MB': 2048}},
                          'g0': {'resources': {RC: 1}},
                          'g1': {'resources': {RC: 1}}},
                         built['allocations'])

    def test_the_returned_candidate_is_left_alone(self):
        original = candidate(0, 4)
        ex.exchange(original, pools(*TWO_CLIQUES), GROUPS, ['g0', 'g1'])
        self.assertEqual(candidate(0, 4), original)

    def test_never_a_gpu_in_use(self):
        host = pools(*TWO_CLIQUES, used=(1,))
        self.assertIsNone(ex.exchange(candidate(0, 4), host, GROUPS,
                                      ['g0', 'g1']))

    def test_order_tags_are_no_kind(self):
        """Each GPU has its own number of them; all are one kind."""
        host = pools(*TWO_CLIQUES, ordered=True)
        self.assertEqual(
            ex.exchange(candidate(0, 4), pools(*TWO_CLIQUES), GROUPS,
                        ['g0', 'g1']),
            ex.exchange(candidate(0, 4), host, GROUPS, ['g0', 'g1']))
        self.assertEqual(1, len({pool.kind for pool in host.values()}))

    def test_never_another_kind_of_device(self):
        host = pools(*TWO_CLIQUES)
        other = pools(*TWO_CLIQUES, product='2331')
        host['g1'] = other['g1']
        self.assertIsNone(ex.exchange(candidate(0, 4), host, GROUPS,
                                      ['g0', 'g1']))

    def test_never_another_resource_class(self):
        # A device_spec resource_class tag: the pools cannot tell it.
        groups = dict(GROUPS, **{'%s-1' % REQUEST: ex.Group({'CUSTOM_X': 1})})
        self.assertIsNone(ex.exchange(candidate(0, 4), pools(*TWO_CLIQUES),
                                      groups, ['g0', 'g1']))

    def test_never_drops_a_required_trait(self):
        host = pools(*TWO_CLIQUES)
        clique1 = dict(GROUPS, **{'%s-1' % REQUEST: ex.Group(
            {RC: 1}, frozenset({'CUSTOM_GPU_P2P_CLIQUE_ID_1'}))})
        self.assertIsNone(ex.exchange(candidate(0, 4), host, clique1,
                                      ['g0', 'g1']))
        unknown = dict(GROUPS, **{'%s-1' % REQUEST: ex.Group(
            {RC: 1}, frozenset({'CUSTOM_RACK_7'}))})
        self.assertIsNone(ex.exchange(candidate(0, 4), host, unknown,
                                      ['g0', 'g1']))
        # As Nova asks, with its own traits.
        clique0 = dict(GROUPS, **{'%s-1' % REQUEST: ex.Group(
            {RC: 1}, frozenset({'CUSTOM_GPU_P2P_CLIQUE_ID_0', 'OWNER_NOVA',
                                'COMPUTE_MANAGED_PCI_DEVICE'}))})
        self.assertIsNotNone(ex.exchange(candidate(0, 4), host, clique0,
                                         ['g0', 'g1']))

    def test_never_a_provider_another_group_takes(self):
        found = candidate(0, 4)
        found['mappings']['nic-group'] = ['g1']
        self.assertIsNone(ex.exchange(found, pools(*TWO_CLIQUES), GROUPS,
                                      ['g0', 'g1']))

    def test_counts_must_match_and_groups_be_known(self):
        host = pools(*TWO_CLIQUES)
        self.assertIsNone(ex.exchange(candidate(0, 4), host, GROUPS,
                                      ['g0', 'g1', 'g2']))
        self.assertIsNone(ex.exchange(candidate(0, 4), host, {},
                                      ['g0', 'g1']))


#: An H100 board's partitions of two or more GPUs, as providers g0..g7
#: carry them (board 0; halves 1, 2; pairs 3 to 6).
H100 = ({0: 8, 1: 4, 3: 2}, {0: 8, 1: 4, 4: 2}, {0: 8, 1: 4, 3: 2},
        {0: 8, 1: 4, 4: 2}, {0: 8, 2: 4, 5: 2}, {0: 8, 2: 4, 6: 2},
        {0: 8, 2: 4, 5: 2}, {0: 8, 2: 4, 6: 2})


def board(used=()):
    return {'g%d' % i: partition_fit.Gpu('g%d' % i, tags,
                                         0 if i in used else 1)
            for i, tags in enumerate(H100)}


class TestTargetPartition(base.TestCase):
    """Pair {g0, g2} in use: what each size should take."""

    def test_a_pair_fills_the_half_in_use(self):
        self.assertEqual(['g1', 'g3'],
                         ex.target_partition(board(used=(0, 2)), 2))

    def test_four_take_the_free_half(self):
        self.assertEqual(['g4', 'g5', 'g6', 'g7'],
                         ex.target_partition(board(used=(0, 2)), 4))

    def test_one_gpu_where_least_is_left_free(self):
        self.assertEqual(['g1'], ex.target_partition(board(used=(0, 2)), 1))

    def test_none_where_no_partition_of_that_size_is_free(self):
        self.assertIsNone(ex.target_partition(board(used=(0, 2)), 8))
        self.assertIsNone(ex.target_partition(board(used=(0, 4)), 4))
        self.assertIsNone(ex.target_partition(board(), 3))
