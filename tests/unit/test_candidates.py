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

"""The candidates rule: one per claim, best fit first and spread, K."""

import itertools

from nova_gpu_p2p.scheduler import candidates
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p.scheduler import partition_fit
from tests.unit import base

GPU_REQUEST = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
NIC_REQUEST = '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0'
ROOT = 'compute-rp'


def candidate(gpus, nics=(), root=None):
    """As placement answers and Nova keeps it: allocations, mappings."""
    mappings = {'': [ROOT]}
    root = root or {'PCPU': 4, 'MEMORY_MB': 2048}
    allocations = {ROOT: {'resources': root}}
    for request, providers in ((GPU_REQUEST, gpus), (NIC_REQUEST, nics)):
        for i, provider in enumerate(providers):
            mappings['%s-%d' % (request, i)] = [provider]
            allocations[provider] = {'resources': {'CUSTOM_PCI': 1}}
    return {'allocations': allocations, 'mappings': mappings}


class TestClaimKey(base.TestCase):

    def test_orders_of_one_request_are_one_claim(self):
        keys = {candidates.claim_key(candidate(order))
                for order in itertools.permutations(('g0', 'g1', 'g2'))}
        self.assertEqual(1, len(keys))

    def test_other_sets_other_claims(self):
        self.assertNotEqual(candidates.claim_key(candidate(('g0', 'g1'))),
                            candidates.claim_key(candidate(('g0', 'g2'))))

    def test_which_request_gets_a_provider_matters(self):
        # The same providers, but the GPU request and the NIC request
        # swap one: another claim.
        one = candidate(('g0', 'x'), nics=('y',))
        other = candidate(('g0', 'y'), nics=('x',))
        self.assertEqual(one['allocations'], other['allocations'])
        self.assertNotEqual(candidates.claim_key(one),
                            candidates.claim_key(other))

    def test_other_root_resources_other_claims(self):
        self.assertNotEqual(
            candidates.claim_key(candidate(('g0',))),
            candidates.claim_key(candidate(('g0',), root={'VCPU': 4})))

    def test_suffixes_not_nova_device_groups_are_requests_of_their_own(self):
        one = {'allocations': {'g0': {}, 'g1': {}},
               'mappings': {'1': ['g0'], '2': ['g1']}}
        other = {'allocations': {'g0': {}, 'g1': {}},
                 'mappings': {'1': ['g1'], '2': ['g0']}}
        self.assertNotEqual(candidates.claim_key(one),
                            candidates.claim_key(other))

    def test_distinct_keeps_the_first_of_each(self):
        found = [candidate(('g0', 'g1')), candidate(('g1', 'g0')),
                 candidate(('g2', 'g3')), candidate(('g0', 'g1')),
                 candidate(('g3', 'g2'))]
        self.assertEqual([0, 2], candidates.distinct(found))
        self.assertEqual([], candidates.distinct([]))


def clique_fits(*groups):
    """Fits in the given order, one per (index, clique)."""
    return [clique_fit.Fit(index, clique_fit.Group(clique), 0)
            for index, clique in groups]


#: Candidates whose GPUs all sit on host NUMA node 0.
ONE_NODE = frozenset({0})


class TestChoose(base.TestCase):

    def test_spread_in_rounds_over_families(self):
        self.assertEqual([4, 2, 5, 7, 3, 9], candidates.spread(
            [(4, 1), (7, 1), (2, 0), (9, 1), (3, 0), (5, 2)]))
        self.assertEqual([], candidates.spread([]))

    def test_partition_fits_by_partition(self):
        fits = [partition_fit.Fit(3, 5, 0), partition_fit.Fit(1, 5, 0),
                partition_fit.Fit(0, 6, 0)]
        self.assertEqual([3, 0, 1], candidates.choose(
            [ONE_NODE] * 4, fits, True, 0))

    def test_fewer_numa_nodes_first_and_every_set_of_nodes_early(self):
        # One clique: GPUs of candidate 0 on both nodes, 1 and 3 on node
        # 0, 2 on node 1.
        spans = [frozenset({0, 1}), ONE_NODE, frozenset({1}), ONE_NODE]
        fits = clique_fits((0, 0), (1, 0), (2, 0), (3, 0))
        self.assertEqual([1, 2, 0, 3],
                         candidates.choose(spans, fits, True, 0))
        self.assertEqual([1, 2], candidates.choose(spans, fits, True, 2))

    def test_the_best_clique_before_any_numa_preference(self):
        spans = [frozenset({0, 1}), ONE_NODE]
        fits = clique_fits((0, 1), (1, 0))
        self.assertEqual([0, 1], candidates.choose(spans, fits, True, 0))

    def test_required_keeps_fits_only(self):
        fits = clique_fits((2, 0), (0, 0))
        spans = [ONE_NODE] * 5
        self.assertEqual([2, 0], candidates.choose(spans, fits, True, 0))
        self.assertEqual([2], candidates.choose(spans, fits, True, 1))
        self.assertEqual([], candidates.choose(spans, [], True, 3))

    def test_others_keep_the_rest_after_the_fits(self):
        fits = clique_fits((2, 0), (0, 0))
        spans = [ONE_NODE, frozenset({0, 1}), ONE_NODE, frozenset({1}),
                 ONE_NODE]
        self.assertEqual([2, 0, 3, 4, 1],
                         candidates.choose(spans, fits, False, 0))
        self.assertEqual([2, 0, 3], candidates.choose(spans, fits, False, 3))
        self.assertEqual([0, 3], candidates.choose(spans, [], False, 2))


class TestSurelyPasses(base.TestCase):
    """Rule 5: where a second candidate cannot matter to Nova's NUMA check."""

    ROOMS = {0: candidates.NodeSize(4, 8192), 1: candidates.NodeSize(0, 8192)}
    CELL = candidates.NodeSize(2, 2048)

    def test_no_guest_numa_topology(self):
        self.assertTrue(candidates.surely_passes([], None, frozenset({0})))

    def test_one_cell_with_room_on_the_gpus_node(self):
        self.assertTrue(candidates.surely_passes(
            [self.CELL], self.ROOMS, frozenset({0})))

    def test_not_sure(self):
        for cells, rooms, span in (
                ([self.CELL], self.ROOMS, frozenset({1})),  # no CPUs
                ([candidates.NodeSize(2, 9000)], self.ROOMS, frozenset({0})),
                ([self.CELL], self.ROOMS, frozenset({0, 1})),
                ([self.CELL] * 2, self.ROOMS, frozenset({0})),
                ([self.CELL], self.ROOMS, frozenset({None})),
                ([self.CELL], None, frozenset({0})),
                (None, self.ROOMS, frozenset({0}))):
            self.assertFalse(candidates.surely_passes(cells, rooms, span),
                             (cells, rooms, span))
