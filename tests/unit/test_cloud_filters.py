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

"""lab.cloud_filters.whole_cloud: Nova's filter handler, stock and ours."""

from lab import cloud_filters
from lab import placement_cases as model
from tests.unit import base


class WholeCloudTest(base.TestCase):

    def test_ours_hands_nova_a_bounded_few_it_passes(self):
        # Two cliques of four a host, four GPUs: one candidate a host from
        # placement; stock Nova's NUMA check refuses those across sockets.
        found = cloud_filters.whole_cloud(cloud_filters.Case(
            model.Layout((4, 4)), 4, 12))
        # One server, [scheduler] max_attempts - 1 = 2, 5 spare.
        self.assertEqual(8, found['ours_kept'])
        self.assertLess(found['stock_kept'], 12)
        self.assertGreater(found['stock_seconds'], 0)
        self.assertGreater(found['ours_seconds'], 0)
