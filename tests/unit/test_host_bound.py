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

"""The rule for which hosts of a ``required`` request reach Nova's filters."""

from nova_gpu_p2p.scheduler import host_bound
from tests.unit import base


class NeededTest(base.TestCase):

    def test_servers_alternates_and_spares(self):
        self.assertEqual(8, host_bound.needed(1, 3, 5))
        self.assertEqual(27, host_bound.needed(20, 3, 5))
        self.assertEqual(1, host_bound.needed(1, 1, 0))

    def test_negative_spare_is_no_bound(self):
        self.assertIsNone(host_bound.needed(1, 3, -1))

    def test_at_least_one_server_and_no_negative_alternates(self):
        # num_instances unset or 0 on an old request; max_attempts >= 1.
        self.assertEqual(1, host_bound.needed(0, 0, 0))


class RankedTest(base.TestCase):

    def test_tightest_fit_first_ties_in_given_order(self):
        self.assertEqual([1, 3, 0, 2],
                         host_bound.ranked([2, 0, 4, 0]))

    def test_unjudged_hosts_last(self):
        self.assertEqual([1, 2, 0], host_bound.ranked([None, 6, 6]))


class AcceptedTest(base.TestCase):

    def judge(self, refused):
        self.batches = []

        def judge(batch):
            self.batches.append(list(batch))
            return [index for index in batch if index not in refused]
        return judge

    def test_one_batch_when_all_pass(self):
        self.assertEqual([4, 2], host_bound.accepted(
            [4, 2, 0, 1, 3], 2, self.judge(set())))
        self.assertEqual([[4, 2]], self.batches)

    def test_refused_hosts_replaced_by_the_next_in_the_same_request(self):
        self.assertEqual([0, 3, 4], host_bound.accepted(
            [1, 0, 2, 3, 4, 5], 3, self.judge({1, 2})))
        # The first three, then the two missing, never a host twice.
        self.assertEqual([[1, 0, 2], [3, 4]], self.batches)

    def test_best_few_all_refused_still_finds_the_last_one(self):
        # Stock Nova would place on host 9: so must the bound.
        self.assertEqual([9], host_bound.accepted(
            list(range(10)), 1, self.judge(set(range(9)))))
        self.assertEqual([[n] for n in range(10)], self.batches)

    def test_fewer_where_hosts_run_out(self):
        self.assertEqual([2], host_bound.accepted(
            [0, 1, 2], 2, self.judge({0, 1})))
        self.assertEqual([], host_bound.accepted(
            [0, 1], 2, self.judge({0, 1})))
        self.assertEqual([], host_bound.accepted([], 2, self.judge(set())))
