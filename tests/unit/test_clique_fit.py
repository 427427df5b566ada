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

"""The best-fit rule of clique-aware scheduling, without Nova."""

import itertools

from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p.scheduler.clique_fit import Group
from tests.unit import base


def _host(*cliques, used=()):
    """GPU providers g0, g1, ... with these clique IDs; ``used`` taken."""
    return {'g%d' % i: clique_fit.Gpu('g%d' % i, clique,
                                      0 if 'g%d' % i in used else 1)
            for i, clique in enumerate(cliques)}


def _free(host):
    return [p for p, gpu in host.items() if gpu.free]


def _candidates(host, count):
    """What placement offers: every ordered set of free providers."""
    return [list(c) for c in itertools.permutations(_free(host), count)]


class TestGroups(base.TestCase):

    def test_same_clique_is_one_group(self):
        host = _host(0, 0, 1, None, None)
        self.assertEqual(Group(0), host['g0'].group)
        self.assertEqual(host['g0'].group, host['g1'].group)
        self.assertNotEqual(host['g1'].group, host['g2'].group)

    def test_gpu_without_clique_is_its_own_group(self):
        host = _host(None, None)
        self.assertEqual(Group(None, 'g0'), host['g0'].group)
        self.assertNotEqual(host['g0'].group, host['g1'].group)

    def test_free_per_group(self):
        host = _host(0, 0, 0, 0, 1, 1, None, used=('g0', 'g5'))
        self.assertEqual({Group(0): 3, Group(1): 1, Group(None, 'g6'): 1},
                         clique_fit.free_per_group(host.values()))

    def test_free_counts_devices_per_provider(self):
        self.assertEqual({Group(2): 5}, clique_fit.free_per_group(
            [clique_fit.Gpu('a', 2, 3), clique_fit.Gpu('b', 2, 2)]))


class TestFittingGroup(base.TestCase):

    def test_one_clique(self):
        host = _host(0, 0, 1, 1)
        self.assertEqual(Group(0), clique_fit.fitting_group(['g1', 'g0'],
                                                            host))
        self.assertEqual(Group(1), clique_fit.fitting_group(['g2', 'g3'],
                                                            host))

    def test_two_cliques_do_not_fit(self):
        host = _host(0, 0, 1, 1)
        self.assertIsNone(clique_fit.fitting_group(['g0', 'g2'], host))
        self.assertIsNone(clique_fit.fitting_group(['g0', 'g1', 'g2'],
                                                   host))

    def test_a_single_gpu_always_fits(self):
        host = _host(0, None)
        self.assertEqual(Group(0), clique_fit.fitting_group(['g0'], host))
        self.assertEqual(Group(None, 'g1'),
                         clique_fit.fitting_group(['g1'], host))

    def test_gpus_without_clique_never_fit_together(self):
        host = _host(None, None, 0)
        self.assertIsNone(clique_fit.fitting_group(['g0', 'g1'], host))
        self.assertIsNone(clique_fit.fitting_group(['g0', 'g2'], host))

    def test_two_devices_of_one_provider_need_a_clique(self):
        # A provider with two devices (not a passthrough GPU, but the
        # rule must not call two devices without a clique one clique).
        gpus = {'p': clique_fit.Gpu('p', None, 2),
                'q': clique_fit.Gpu('q', 3, 2)}
        self.assertIsNone(clique_fit.fitting_group(['p', 'p'], gpus))
        self.assertEqual(Group(3), clique_fit.fitting_group(['q', 'q'],
                                                            gpus))


class TestBestFirst(base.TestCase):

    def test_issue_example_free_one_of_a_and_both_of_b(self):
        # Clique A = g0-g3 with only g3 free, clique B = g4, g5 free.
        host = _host(0, 0, 0, 0, 1, 1, used=('g0', 'g1', 'g2'))
        fits = clique_fit.best_first(_candidates(host, 2), host)
        self.assertEqual({('g4', 'g5'), ('g5', 'g4')},
                         {tuple(_candidates(host, 2)[f.index])
                          for f in fits})
        self.assertEqual({Group(1)}, {f.group for f in fits})
        self.assertEqual({0}, {f.leftover for f in fits})

    def test_pair_before_a_free_four_clique(self):
        host = _host(0, 0, 0, 0, 1, 1)
        fits = clique_fit.best_first(_candidates(host, 2), host)
        self.assertEqual(Group(1), fits[0].group)
        self.assertEqual(0, fits[0].leftover)
        # The 4-clique's sets are still offered, after the pair's.
        self.assertEqual(Group(0), fits[-1].group)
        self.assertEqual(2, fits[-1].leftover)
        self.assertEqual(2 + 12, len(fits))

    def test_fewest_free_not_smallest_clique(self):
        # Clique 0 has 8 GPUs but only 3 free; clique 1 has 4 free.
        host = _host(*[0] * 8, 1, 1, 1, 1,
                     used=('g0', 'g1', 'g2', 'g3', 'g4'))
        fits = clique_fit.best_first(_candidates(host, 3), host)
        self.assertEqual(Group(0), fits[0].group)
        self.assertEqual(0, fits[0].leftover)

    def test_ties_go_to_the_lowest_clique_id(self):
        host = _host(5, 5, 2, 2, 9, 9)
        fits = clique_fit.best_first(_candidates(host, 2), host)
        self.assertEqual([Group(2)] * 2 + [Group(5)] * 2 + [Group(9)] * 2,
                         [f.group for f in fits])

    def test_one_gpu_takes_a_lone_gpu_first(self):
        host = _host(0, 0, None, 1, 1, 1)
        fits = clique_fit.best_first(_candidates(host, 1), host)
        self.assertEqual(['g2', 'g0', 'g1', 'g3', 'g4', 'g5'],
                         [_candidates(host, 1)[f.index][0] for f in fits])

    def test_one_gpu_takes_the_last_free_of_a_broken_clique(self):
        host = _host(0, 0, 1, 1, 1, 1, used=('g0',))
        fits = clique_fit.best_first(_candidates(host, 1), host)
        self.assertEqual(('g1', 0), (_candidates(host, 1)[fits[0].index][0],
                                     fits[0].leftover))

    def test_given_order_kept_within_a_group(self):
        host = _host(0, 0, 0)
        candidates = [['g2', 'g1'], ['g0', 'g1'], ['g1', 'g2']]
        self.assertEqual([0, 1, 2], [f.index for f in
                                     clique_fit.best_first(candidates, host)])

    def test_nothing_fits(self):
        host = _host(0, 1, 2, None)
        self.assertEqual([], clique_fit.best_first(_candidates(host, 2),
                                                   host))
        self.assertEqual([], clique_fit.best_first([], host))

    def test_best_first_agrees_with_choose(self):
        """Every host shape of 5 GPUs in up to 3 cliques."""
        for cliques in itertools.product((None, 0, 1, 2), repeat=5):
            for used in ((), ('g0',), ('g1', 'g4'), ('g0', 'g2', 'g3')):
                host = _host(*cliques, used=used)
                free = clique_fit.free_per_group(host.values())
                for count in (1, 2, 3):
                    fits = clique_fit.best_first(_candidates(host, count),
                                                 host)
                    chosen = clique_fit.choose(free, count)
                    self.assertEqual(chosen, fits[0].group if fits else None,
                                     (cliques, used, count))
                    for fit in fits:
                        self.assertEqual(free[fit.group] - count,
                                         fit.leftover)


class TestChoose(base.TestCase):

    def test_fewest_free_that_fits(self):
        free = {Group(0): 4, Group(1): 2, Group(2): 1}
        self.assertEqual(Group(1), clique_fit.choose(free, 2))
        self.assertEqual(Group(0), clique_fit.choose(free, 3))
        self.assertIsNone(clique_fit.choose(free, 5))

    def test_one_gpu(self):
        free = {Group(0): 1, Group(None, 'z'): 1, Group(1): 3}
        self.assertEqual(Group(None, 'z'), clique_fit.choose(free, 1))

    def test_lone_gpus_never_serve_two(self):
        self.assertIsNone(clique_fit.choose({Group(None, 'a'): 1,
                                             Group(None, 'b'): 1}, 2))

    def test_empty(self):
        self.assertIsNone(clique_fit.choose({}, 1))
