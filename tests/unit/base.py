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

"""The class every unit test derives from: a passing test prints nothing.

What the code logs during a test (the driver's ERROR with its traceback
when a test makes libvirt fail on purpose, WARNINGs a test provokes) is
captured, as Nova's ``StandardLogging`` fixture does, and shown with the
test's result only when the test fails (stestr prints the
``pythonlogging`` detail). ``OS_DEBUG=1`` captures DEBUG lines too.
"""

import logging
import os

import fixtures
import testtools

#: Nova's test log format (nova/tests/fixtures/nova.py).
LOG_FORMAT = '%(asctime)s %(levelname)s %(name)s %(message)s'


class TestCase(testtools.TestCase):
    """testtools' TestCase, with logs captured rather than printed."""

    def setUp(self) -> None:
        super().setUp()
        debug = os.environ.get('OS_DEBUG', '').lower() in (
            '1', 'true', 'yes')
        self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG if debug else logging.INFO,
            format=LOG_FORMAT))
