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

"""Moves whose claim ignores placement: which, what Nova claims, verdict."""

from nova.compute import task_states

from nova_gpu_p2p.scheduler import move_claims as mc
from tests.unit import base


class IgnoresPlacementTest(base.TestCase):

    def test_task_states_are_novas(self):
        self.assertEqual(task_states.RESIZE_PREP, mc.RESIZE_PREP)
        self.assertEqual(task_states.REBUILDING, mc.REBUILDING)
        self.assertEqual(task_states.UNSHELVING, mc.UNSHELVING)

    def test_resize_migration_and_evacuation(self):
        for state in (mc.RESIZE_PREP, mc.REBUILDING):
            self.assertTrue(mc.ignores_placement(state, ['a'], ['a']), state)

    def test_builds_and_other_operations_follow_placement(self):
        for state in (None, task_states.SCHEDULING, task_states.SPAWNING,
                      task_states.MIGRATING, task_states.REBOOTING):
            self.assertFalse(mc.ignores_placement(state, ['a'], ['b']),
                             state)

    def test_unshelve_of_a_server_never_moved_follows_placement(self):
        self.assertFalse(mc.ignores_placement(mc.UNSHELVING, ['a'],
                                              ['a', 'port']))
        self.assertFalse(mc.ignores_placement(mc.UNSHELVING, [], ['a']))

    def test_unshelve_after_a_move_ignores_placement(self):
        self.assertTrue(mc.ignores_placement(mc.UNSHELVING, ['new'], ['a']))
        self.assertTrue(mc.ignores_placement(mc.UNSHELVING, ['a', 'new'],
                                             ['a']))

    def test_unshelve_with_unknown_requests_ignores_placement(self):
        self.assertTrue(mc.ignores_placement(mc.UNSHELVING, None, ['a']))
        self.assertTrue(mc.ignores_placement(mc.UNSHELVING, ['a'], None))


class ClaimedTest(base.TestCase):

    def test_providers_whose_count_dropped(self):
        self.assertEqual(['g1', 'g2'], mc.claimed(
            {'g0': 1, 'g2': 1, 'g1': 1}, {'g0': 1, 'g2': 0, 'g1': 0}))

    def test_an_emptied_pool_nova_dropped(self):
        self.assertEqual(['g0'], mc.claimed({'g0': 1, 'g1': 1}, {'g1': 1}))

    def test_once_per_device(self):
        self.assertEqual(['vf', 'vf'], mc.claimed({'vf': 4}, {'vf': 2}))

    def test_nothing_claimed(self):
        self.assertEqual([], mc.claimed({'g0': 1, 'g1': 0}, {'g0': 1}))


class MatchingTest(base.TestCase):

    def test_exactly_the_claim_in_any_order(self):
        taken = [['g0', 'g1'], ['g1', 'g0'], ['g0', 'g2'], ['g0'],
                 ['g0', 'g1', 'g2']]
        self.assertEqual((0, 1), mc.matching(taken, ['g0', 'g1']))

    def test_counts_devices(self):
        self.assertEqual((1,), mc.matching([['vf'], ['vf', 'vf']],
                                           ['vf', 'vf']))


class JudgeTest(base.TestCase):

    claim = ['g0', 'g1']

    def test_keeps_the_candidates_taking_the_claim(self):
        for required in (True, False):
            verdict = mc.judge(self.claim, True, required, (2, 5), False)
            self.assertEqual((2, 5), verdict.keep)
            self.assertFalse(verdict.use_built)
            self.assertEqual('', verdict.refusal)
            self.assertFalse(verdict.as_before)

    def test_builds_where_none_takes_it(self):
        verdict = mc.judge(self.claim, True, True, (), True)
        self.assertTrue(verdict.use_built)
        self.assertEqual((), verdict.keep)

    def test_required_refuses_a_claim_of_two_cliques(self):
        verdict = mc.judge(self.claim, False, True, (0,), True)
        self.assertIn('not one clique (partition): g0, g1', verdict.refusal)
        self.assertEqual((), verdict.keep)

    def test_other_modes_keep_a_claim_of_two_cliques(self):
        verdict = mc.judge(self.claim, False, False, (0,), True)
        self.assertEqual((0,), verdict.keep)

    def test_required_refuses_what_cannot_be_kept_or_built(self):
        verdict = mc.judge(self.claim, True, True, (), False)
        self.assertIn('none can be built', verdict.refusal)

    def test_other_modes_leave_it_as_before(self):
        self.assertTrue(mc.judge(self.claim, True, False, (), False)
                        .as_before)

    def test_a_claim_that_fails(self):
        self.assertIn('fails there',
                      mc.judge(None, False, True, (), False).refusal)
        self.assertTrue(mc.judge(None, False, False, (), False).as_before)
