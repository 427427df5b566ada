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

"""The scheduling simulation behind the benchmark.

On clouds small enough that each policy's outcome can be worked out by
hand, and its seeded sequence on the corpus cloud.
"""

from lab import scheduling_sim as sim
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p import traits
from tests.fixtures import hosts as corpus
from tests.unit import base

NOVA, FILTER, BEST_FIT = sim.Policy
SPREAD, STACK = sim.HostOrder
A0, A1, B0, B1 = '0000:01:00.0', '0000:02:00.0', '0000:03:00.0', '0000:04:00.0'
C = ('0000:01:00.0', '0000:02:00.0', '0000:03:00.0', '0000:04:00.0')
P = ('0000:05:00.0', '0000:06:00.0')
LONE = '0000:00:01.0'


def pairs(name: str = 'pairs') -> sim.Host:
    """Clique 0 = A0, A1; clique 1 = B0, B1."""
    return sim.make_host(name, {A0: 0, A1: 0, B0: 1, B1: 1})


def quad_and_pair(name: str = 'quad') -> sim.Host:
    """A 4-clique at the lowest addresses and a pair above it."""
    return sim.make_host(name, {**{a: 0 for a in C}, **{a: 1 for a in P}})


def lone_then_pair(name: str) -> sim.Host:
    """Empty, its two lowest GPUs are not one clique; a pair is free."""
    return sim.make_host(name, {LONE: None, B0: 1, B1: 1})


def outcomes(hosts, ops, policy, order=SPREAD, **kwargs):
    return sim.replay(hosts, ops, policy, order, **kwargs)


class TestPolicies(base.TestCase):

    def test_the_issue_example(self):
        """Free: one GPU of clique A, both of B; a 2-GPU boot comes."""
        ops = [sim.Boot(0, 1), sim.Boot(1, 2)]
        for policy in sim.Policy:
            first, second = outcomes([pairs()], ops, policy)
            self.assertEqual((A0,), first.addresses, policy)
            self.assertTrue(second.fit_free, policy)
            self.assertEqual((1, 1), (second.idle_broken, second.stranded))
        nova = outcomes([pairs()], ops, NOVA)[1]
        self.assertIsNone(nova.host)
        self.assertEqual(('pairs',), nova.refused)
        self.assertEqual(1, sim.metrics(
            outcomes([pairs()], ops, NOVA)).rejected_fit_free)
        for policy in (FILTER, BEST_FIT):
            second = outcomes([pairs()], ops, policy)[1]
            self.assertEqual(('pairs', (B0, B1), ()),
                             (second.host, second.addresses, second.refused))

    def test_nova_reschedules_to_the_next_host(self):
        ops = [sim.Boot(0, 1), sim.Boot(1, 2)]
        cloud = [pairs('h1'), pairs('h2')]
        # Stacked, the fragmented h1 comes first and refuses.
        second = outcomes(cloud, ops, NOVA, STACK)[1]
        self.assertEqual(('h2', (A0, A1), ('h1',)),
                         (second.host, second.addresses, second.refused))
        found = sim.metrics(outcomes(cloud, ops, NOVA, STACK))
        self.assertEqual((1, 1, 0, 1), (found.placed_first,
                                        found.placed_rescheduled,
                                        found.rejected_fit_free,
                                        found.refusals))
        # Spread, the empty h2 comes first.
        self.assertEqual(((A0, A1), ()), (
            outcomes(cloud, ops, NOVA, SPREAD)[1].addresses,
            outcomes(cloud, ops, NOVA, SPREAD)[1].refused))

    def test_nova_gives_up_after_max_attempts(self):
        cloud = [lone_then_pair('h%d' % n) for n in (1, 2, 3)] + [
            sim.make_host('h4', {A0: 0, A1: 0})]
        ops = [sim.Boot(0, 2)]
        found = outcomes(cloud, ops, NOVA)[0]
        self.assertEqual((None, ('h1', 'h2', 'h3'), True),
                         (found.host, found.refused, found.fit_free))
        found = outcomes(cloud, ops, NOVA, max_attempts=4)[0]
        self.assertEqual(('h4', ('h1', 'h2', 'h3')),
                         (found.host, found.refused))
        for policy in (FILTER, BEST_FIT):
            found = outcomes(cloud, ops, policy)[0]
            self.assertEqual(('h1', (B0, B1), ()),
                             (found.host, found.addresses, found.refused))

    def test_best_fit_keeps_the_4_clique_whole(self):
        ops = [sim.Boot(0, 2), sim.Boot(1, 4)]
        host = quad_and_pair()
        for policy in (NOVA, FILTER):
            first, second = outcomes([host], ops, policy)
            self.assertEqual(C[:2], first.addresses, policy)
            self.assertEqual((None, False, 2), (second.host, second.fit_free,
                                                second.idle_broken), policy)
        self.assertEqual(1, sim.metrics(
            outcomes([host], ops, FILTER)).rejected_no_fit)
        nova = sim.metrics(outcomes([host], ops, NOVA))
        self.assertEqual((1, 1, 0), (nova.refusals, nova.rejected_no_fit,
                                     nova.rejected_fit_free))
        first, second = outcomes([host], ops, BEST_FIT)
        self.assertEqual((P, C, 0), (first.addresses, second.addresses,
                                     second.idle_broken))

    def test_across_hosts_the_tightest_fit_wins(self):
        cloud = [sim.make_host('big', {a: 0 for a in C}),
                 sim.make_host('small', {a: 0 for a in P})]
        ops = [sim.Boot(0, 2)]
        for order in sim.HostOrder:
            self.assertEqual('small',
                             outcomes(cloud, ops, BEST_FIT, order)[0].host)
        self.assertEqual('big', outcomes(cloud, ops, FILTER, SPREAD)[0].host)
        self.assertEqual('small', outcomes(cloud, ops, FILTER, STACK)[0].host)
        # Equal leftovers: the host order decides.
        twins = [sim.make_host(name, {a: 0 for a in P})
                 for name in ('first', 'second')]
        self.assertEqual('first', outcomes(twins, ops, BEST_FIT)[0].host)

    def test_the_clique_size_trait(self):
        lone = sim.make_host('lone', {A0: None, A1: None})
        self.assertEqual(frozenset(), lone.traits)
        self.assertEqual(
            {traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2],
             traits.GPU_P2P_CLIQUE[4]}, quad_and_pair().traits)
        for policy in sim.Policy:
            # No host has a clique of 8 (or of 2, for the lone one): no
            # host passes, nothing is tried, nothing fitted.
            for cloud, gpus in (([quad_and_pair()], 8), ([lone], 2)):
                found = outcomes(cloud, [sim.Boot(0, gpus)], policy)[0]
                self.assertEqual((None, (), False), (
                    found.host, found.refused, found.fit_free), policy)
            # A 1-GPU flavor asks for no trait.
            self.assertEqual((A0,), outcomes(
                [lone], [sim.Boot(0, 1)], policy)[0].addresses, policy)

    def test_deletes_free_gpus_and_skip_failed_boots(self):
        host = sim.make_host('pair', {A0: 0, A1: 0})
        ops = [sim.Boot(0, 2), sim.Boot(1, 2), sim.Delete(1),
               sim.Boot(3, 1), sim.Delete(0), sim.Boot(5, 2)]
        for policy in sim.Policy:
            self.assertEqual(
                ['pair', None, None, 'pair'],
                [o.host for o in outcomes([host], ops, policy)], policy)

    def test_metrics_count_each_boot_once(self):
        ops = [sim.Boot(0, 1), sim.Boot(1, 2), sim.Boot(2, 2),
               sim.Boot(3, 8)]
        found = sim.metrics(outcomes([pairs('h1'), pairs('h2')], ops, NOVA,
                                     STACK))
        # h1 takes A0; A1+B0 refused on h1, A0+A1 on h2; h2, now the
        # fuller, first: its B pair; 8 GPUs fit nowhere.
        self.assertEqual((4, 2, 1, 0, 1, 1), (
            found.boots, found.placed_first, found.placed_rescheduled,
            found.rejected_fit_free, found.rejected_no_fit, found.refusals))
        self.assertEqual((8 + 7 + 5 + 3) / 4, found.mean_free)


class TestSeededSequence(base.TestCase):

    def test_random_ops_are_deterministic(self):
        ops = sim.random_ops(500, 14, 32)
        self.assertEqual(ops, sim.random_ops(500, 14, 32))
        self.assertNotEqual(ops, sim.random_ops(500, 15, 32))
        self.assertEqual(500, len(ops))
        live = set()
        for index, op in enumerate(ops):
            if isinstance(op, sim.Boot):
                self.assertEqual(index, op.id)
                self.assertIn(op.gpus, sim.SIZES)
                live.add(op.id)
            else:
                live.remove(op.id)
        self.assertEqual({1, 2, 4, 8}, {op.gpus for op in ops
                                        if isinstance(op, sim.Boot)})

    def test_corpus_hosts_come_from_discovery(self):
        hgx = sim.corpus_host('hgx-8gpu-nvswitch-2numa')
        self.assertEqual([g.address for g in corpus.EXPECTED[
            'hgx-8gpu-nvswitch-2numa'].gpus], [g.provider for g in hgx.gpus])
        self.assertEqual([0, 0, 1, 1, 2, 2, 3, 3],
                         [g.clique for g in hgx.gpus])
        self.assertNotIn(traits.GPU_P2P_CLIQUE[4], hgx.traits)
        phb = sim.corpus_host('pcie-8gpu-4switch-2socket', 'PHB', 'x#1')
        self.assertEqual('x#1', phb.name)
        self.assertEqual([4, 4], sorted(clique_fit.free_per_group(
            phb.gpus).values()))
        self.assertIn(traits.GPU_P2P_CLIQUE[4], phb.traits)

    def test_corpus_cloud_replay(self):
        """No GPU twice, every claim one clique, every boot counted.

        With the filter: no refusal, no rejection while a clique fits.
        """
        cloud = sim.corpus_cloud()
        self.assertEqual(len(cloud), len({h.name for h in cloud}))
        self.assertIn(16, [len(h.gpus) for h in cloud])
        by_name = {h.name: {g.provider: g for g in h.gpus} for h in cloud}
        ops = sim.random_ops(600, 14, sum(len(h.gpus) for h in cloud))
        for order in sim.HostOrder:
            for policy in sim.Policy:
                found = sim.replay(cloud, ops, policy, order)
                self.assertEqual(found, sim.replay(cloud, ops, policy, order))
                placed = {o.boot.id: o for o in found if o.host}
                live: set[tuple[str, str]] = set()
                for op in ops:
                    if op.id not in placed:
                        continue
                    held = {(placed[op.id].host, a)
                            for a in placed[op.id].addresses}
                    if isinstance(op, sim.Delete):
                        live -= held
                        continue
                    self.assertFalse(live & held)
                    live |= held
                    self.assertIsNotNone(clique_fit.fitting_group(
                        placed[op.id].addresses,
                        by_name[placed[op.id].host]))
                counts = sim.metrics(found)
                self.assertEqual(counts.boots, counts.placed_first
                                 + counts.placed_rescheduled
                                 + counts.rejected_fit_free
                                 + counts.rejected_no_fit)
                if policy is not NOVA:
                    self.assertEqual((0, 0, 0), (
                        counts.refusals, counts.placed_rescheduled,
                        counts.rejected_fit_free), (policy, order))
            nova = sim.metrics(sim.replay(cloud, ops, NOVA, order))
            self.assertGreater(nova.rejected_fit_free, 0, order)
