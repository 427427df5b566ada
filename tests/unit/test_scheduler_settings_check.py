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

"""check's scheduler row: settings that measure slow at cloud size."""

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.checks import scheduler_settings as ss
from tests.unit import base

FIRST = ('ComputeFilter', 'GPUP2PCliqueFilter', 'PciPassthroughFilter',
         'NUMATopologyFilter')


def row(filters=FIRST, keep=2, results=100):
    return ss.check_scheduler(ss.SchedulerSettings(tuple(filters), keep,
                                                   results))


class TestSchedulerRow(base.TestCase):

    def test_not_a_scheduler_no_row(self):
        self.assertEqual([], row(('ComputeFilter', 'PciPassthroughFilter')))

    def test_the_recommended_settings(self):
        [found] = row()
        self.assertEqual(result.Code.SUCCESS, found.code)
        [found] = row(keep=1)
        self.assertEqual('GPUP2PCliqueFilter before Nova\'s candidate '
                         'filters, 1 candidate per host, at most 100 from '
                         'placement', found.message)
        # Nova's default, and two per host of a 500-host cloud.
        [found] = row(results=1000)
        self.assertEqual(result.Code.SUCCESS, found.code)

    def test_ours_after_novas(self):
        [found] = row(('NUMATopologyFilter', 'GPUP2PCliqueFilter',
                       'PciPassthroughFilter'))
        self.assertEqual(result.Code.WARNING, found.code)
        self.assertIn('NUMATopologyFilter runs before GPUP2PCliqueFilter',
                      found.message)
        self.assertIn('list GPUP2PCliqueFilter before PciPassthroughFilter, '
                      'NUMATopologyFilter', found.fix)

    def test_too_many_candidates(self):
        for keep, said in ((0, 'all'), (10, 'up to 10')):
            [found] = row(keep=keep)
            self.assertEqual(result.Code.WARNING, found.code)
            self.assertIn('%s of each host\'s candidates' % said,
                          found.message)
            self.assertIn('set it to 2', found.fix)

    def test_many_placement_results(self):
        [found] = row(results=10000)
        self.assertEqual(result.Code.WARNING, found.code)
        self.assertIn('[scheduler] max_placement_results = 10000: placement '
                      'builds up to that many', found.message)
        self.assertIn('twice the compute nodes (at most 1000)', found.fix)
