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

from nova_gpu_p2p.compute import outage
from tests.unit import base


class TestOutages(base.TestCase):

    def setUp(self):
        super().setUp()
        self.outages = outage.Outages()

    def test_outside_an_outage_every_report(self):
        self.assertTrue(self.outages.first_report('a'))
        self.assertTrue(self.outages.first_report('a'))
        self.outages.answered()
        self.assertTrue(self.outages.first_report('a'))

    def test_once_per_server_per_outage(self):
        self.outages.failed()
        self.assertTrue(self.outages.first_report('a'))
        self.assertTrue(self.outages.first_report('b'))
        self.outages.failed()  # the same outage goes on
        self.assertFalse(self.outages.first_report('a'))
        self.assertFalse(self.outages.first_report('b'))

    def test_next_outage_reports_again(self):
        self.outages.failed()
        self.assertTrue(self.outages.first_report('a'))
        self.outages.answered()
        self.outages.failed()
        self.assertTrue(self.outages.first_report('a'))
        self.assertFalse(self.outages.first_report('a'))

    def test_failing_before_any_success_is_an_outage(self):
        self.outages.failed()
        self.outages.first_report('a')
        self.assertFalse(self.outages.first_report('a'))


class TestRetry(base.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 100.0
        self.retry = outage.Retry(5.0, clock=lambda: self.now)

    def test_first_try_due(self):
        self.assertTrue(self.retry.due())

    def test_once_per_interval(self):
        self.assertTrue(self.retry.due())
        self.now += 4.9
        self.assertFalse(self.retry.due())
        self.now += 0.1
        self.assertTrue(self.retry.due())
        self.assertFalse(self.retry.due())

    def test_refused_tries_do_not_push_the_next(self):
        self.assertTrue(self.retry.due())
        self.now += 3
        self.assertFalse(self.retry.due())
        self.now += 2
        self.assertTrue(self.retry.due())
