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

"""The partition rule of scheduling on Fabric Manager hosts, without Nova.

GPU providers are named by module ID (``m1`` .. ``m8``); as in Nova's
pools, a used GPU is not there at all.
"""

import itertools

from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.scheduler import partition_fit
from tests.fixtures import fake_fm
from tests.unit import base

H100 = fake_fm.H100_PARTITIONS
B200 = fake_fm.B200_PARTITIONS


def _board(partitions=H100, used=()):
    """The free GPUs' providers, tagged as their device_spec entries say."""
    tags = device_spec_tags.partition_sizes(
        partitions_mod.FabricPartition(
            pid, tuple('m%d' % m for m in sorted(gpus)))
        for pid, gpus in partitions.items())
    return {'m%d' % m: partition_fit.Gpu('m%d' % m, tags['m%d' % m])
            for m in range(1, 9) if m not in used}


def _modules(providers):
    return frozenset(int(p[1:]) for p in providers)


def _best(gpus, count):
    """The modules of the best fit for ``count`` GPUs, and its leftover."""
    candidates = [list(c) for c in itertools.combinations(gpus, count)]
    fits = partition_fit.best_first(candidates, gpus)
    if not fits:
        return None, None
    return _modules(candidates[fits[0].index]), fits[0].leftover


class TestFit(base.TestCase):

    def test_exactly_the_partitions_fit_whatever_is_used(self):
        """Every used set, every request size, every set of free GPUs."""
        for board in (H100, B200):
            partitions = set(board.values())
            for used_count in range(9):
                for used in itertools.combinations(range(1, 9), used_count):
                    gpus = _board(board, used)
                    free = partition_fit.free_per_partition(gpus.values())
                    for count in range(1, len(gpus) + 1):
                        for taken in itertools.combinations(gpus, count):
                            found = partition_fit.fit(0, taken, gpus, free)
                            self.assertEqual(
                                _modules(taken) in partitions,
                                found is not None, (used, taken))

    def test_order_of_the_candidate_does_not_matter(self):
        gpus = _board()
        fits = partition_fit.best_first(
            [list(c) for c in itertools.permutations(gpus, 2)], gpus)
        self.assertEqual(8, len(fits))

    def test_pair_is_named_by_its_partition(self):
        gpus = _board()
        free = partition_fit.free_per_partition(gpus.values())
        self.assertEqual(partition_fit.Fit(7, 4, 2, (4, 8)),
                         partition_fit.fit(7, ['m4', 'm2'], gpus, free))
        self.assertEqual(partition_fit.Fit(0, 0, 0, ()),
                         partition_fit.fit(0, sorted(gpus), gpus, free))

    def test_b200_partitions_are_named_by_their_ids(self):
        """B200's IDs start at 1: the whole board is 1, pair {1,2} is 4."""
        gpus = _board(B200)
        free = partition_fit.free_per_partition(gpus.values())
        self.assertEqual(partition_fit.Fit(0, 4, 2, (4, 8)),
                         partition_fit.fit(0, ['m2', 'm1'], gpus, free))
        self.assertEqual(partition_fit.Fit(0, 1, 0, ()),
                         partition_fit.fit(0, sorted(gpus), gpus, free))
        self.assertIsNone(partition_fit.fit(0, ['m1', 'm3'], gpus, free))

    def test_single_gpu_is_its_own_partition(self):
        gpus = _board()
        free = partition_fit.free_per_partition(gpus.values())
        self.assertEqual(partition_fit.Fit(0, None, 1, (2, 4, 8)),
                         partition_fit.fit(0, ['m6'], gpus, free))

    def test_gpu_without_partition_serves_one_gpu_only(self):
        gpus = dict(_board(), lone=partition_fit.Gpu('lone', {}))
        free = partition_fit.free_per_partition(gpus.values())
        self.assertEqual(partition_fit.Fit(0, None, 0, ()),
                         partition_fit.fit(0, ['lone'], gpus, free))
        self.assertIsNone(partition_fit.fit(0, ['lone', 'm1'], gpus, free))

    def test_gpus_disagreeing_on_the_count_do_not_fit(self):
        gpus = _board()
        gpus['m3'] = partition_fit.Gpu('m3', {0: 8, 1: 4, 3: 4})
        free = partition_fit.free_per_partition(gpus.values())
        self.assertIsNone(partition_fit.fit(0, ['m1', 'm3'], gpus, free))

    def test_same_gpu_twice_or_none_is_no_fit(self):
        gpus = _board()
        free = partition_fit.free_per_partition(gpus.values())
        self.assertIsNone(partition_fit.fit(0, ['m1', 'm1'], gpus, free))
        self.assertIsNone(partition_fit.fit(0, [], gpus, free))

    def test_free_counts_devices_per_provider(self):
        gpus = _board(used=(2,))
        gpus['m1'] = partition_fit.Gpu('m1', gpus['m1'].partitions, 0)
        self.assertEqual({0: 6, 1: 2, 2: 4, 3: 1, 4: 1, 5: 2, 6: 2},
                         partition_fit.free_per_partition(gpus.values()))


class TestBestFit(base.TestCase):

    def test_pairs_fill_a_half_before_breaking_the_other(self):
        used = ()
        for expected, leftover in (({1, 3}, 2), ({2, 4}, 0), ({5, 7}, 2),
                                   ({6, 8}, 0), (None, None)):
            self.assertEqual((expected and frozenset(expected), leftover),
                             _best(_board(used=used), 2))
            used += tuple(expected or ())

    def test_b200_pairs_too(self):
        self.assertEqual((frozenset({3, 4}), 0),
                         _best(_board(B200, used=(1, 2)), 2))

    def test_pair_from_the_half_in_use_whichever_it_is(self):
        self.assertEqual((frozenset({6, 8}), 0),
                         _best(_board(used=(5, 7)), 2))

    def test_half_then_board(self):
        self.assertEqual((frozenset({1, 2, 3, 4}), 4), _best(_board(), 4))
        self.assertEqual((frozenset({5, 6, 7, 8}), 3),
                         _best(_board(used=(3,)), 4))
        self.assertEqual((frozenset(range(1, 9)), 0), _best(_board(), 8))
        self.assertEqual((None, None), _best(_board(used=(1, 8)), 4))

    def test_single_gpu_from_a_broken_pair_first(self):
        self.assertEqual((frozenset({3}), 0), _best(_board(used=(1,)), 1))

    def test_single_gpu_from_the_fuller_half_on_a_tie_of_pairs(self):
        # m4 and m7 each have a used partner; m7's half has less free.
        self.assertEqual((frozenset({7}), 0),
                         _best(_board(used=(2, 5, 6)), 1))

    def test_single_gpu_without_partition_first(self):
        gpus = dict(_board(used=(1,)), lone=partition_fit.Gpu('lone', {}))
        fits = partition_fit.best_first([['m3'], ['lone']], gpus)
        self.assertEqual([1, 0], [f.index for f in fits])

    def test_ties_go_to_the_lowest_partition_then_the_given_order(self):
        gpus = _board()
        candidates = [['m6', 'm8'], ['m5', 'm7'], ['m2', 'm4'],
                      ['m1', 'm3'], ['m3', 'm1']]
        self.assertEqual([3, 4, 2, 1, 0], [
            f.index for f in partition_fit.best_first(candidates, gpus)])
        self.assertEqual([0, 1], [f.index for f in partition_fit.best_first(
            [['m2'], ['m1']], gpus)])

    def test_leftover_across_hosts_prefers_the_half_in_use(self):
        in_use = _best(_board(used=(1, 3)), 2)[1]
        free = _best(_board(), 2)[1]
        self.assertLess(in_use, free)
