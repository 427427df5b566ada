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

"""The functional tests wait for events up to a time bound, not 5 s.

On a clock that advances only when the waits poll, so nothing here
sleeps.
"""

import importlib
import inspect
import pkgutil

import fixtures
from nova.tests.functional import integrated_helpers
import testtools

from tests.fixtures import waits
import tests.functional

#: Nova's own helpers give up after this many polls (5 s).
NOVA_TRIES = 10


class FakeClock(testtools.TestCase):
    """``time`` in :mod:`waits` moves by a poll's interval per sleep."""

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        fake_time = self.useFixture(fixtures.MockPatchObject(
            waits, 'time', wraps=waits.time)).mock
        fake_time.monotonic.side_effect = lambda: self.now
        fake_time.sleep.side_effect = self.advance

    def advance(self, seconds: float) -> None:
        self.now += seconds


class UntilTest(FakeClock):

    def test_returns_the_first_true_value(self):
        answers = iter([None, 0, '', 'found'])
        self.assertEqual('found', waits.until(lambda: next(answers), str))
        self.assertAlmostEqual(3 * waits.POLL_S, self.now - 1000.0)

    def test_fails_after_the_bound_naming_what_it_waited_for(self):
        exc = self.assertRaises(AssertionError, waits.until,
                                lambda: None, lambda: 'the thing')
        self.assertIn('the thing', str(exc))
        self.assertIn('%d s' % waits.WAIT_S, str(exc))
        self.assertGreater(self.now - 1000.0, waits.WAIT_S)
        self.assertLess(self.now - 1000.0, waits.WAIT_S + 1)


class _FakeAPI:
    """A server that stays in BUILD for ``polls`` reads, then ERROR."""

    def __init__(self, polls: int):
        self.polls = polls
        self.reads = 0

    def get_server(self, server_id: str) -> dict:
        self.reads += 1
        if self.reads <= self.polls:
            return {'id': server_id, 'status': 'BUILD'}
        if self.reads == self.polls + 1:
            # ERROR is shown before the fault is recorded.
            return {'id': server_id, 'status': 'ERROR'}
        return {'id': server_id, 'status': 'ERROR',
                'fault': {'message': 'refused'}}


class _Helpers(waits.PatientWaits, integrated_helpers.InstanceHelperMixin):

    def __init__(self, api: _FakeAPI):
        self.api = api


class PatientServerWaitTest(FakeClock):

    def test_a_build_longer_than_nova_tries_is_waited_for(self):
        api = _FakeAPI(polls=6 * NOVA_TRIES)
        server = _Helpers(api)._wait_for_state_change({'id': 'x'}, 'ERROR')
        self.assertEqual('refused', server['fault']['message'])
        self.assertEqual(6 * NOVA_TRIES + 2, api.reads)

    def test_a_build_that_never_ends_fails_at_the_bound(self):
        api = _FakeAPI(polls=10 ** 6)
        exc = self.assertRaises(AssertionError, _Helpers(api)
                                ._wait_for_state_change, {'id': 'x'},
                                'ERROR')
        self.assertIn("'status': 'BUILD'", str(exc))
        self.assertGreater(self.now - 1000.0, waits.WAIT_S)


class _FakeNotifier:
    """Nova's notifier fixture, recording how long it is asked to wait."""

    def __init__(self):
        self.timeouts: list[float] = []

    def wait_for_versioned_notifications(self, event_type: str,
                                         n_events: int = 1,
                                         timeout: float = 10.0) -> list:
        self.timeouts.append(timeout)
        return []


class _NotifiedBase:
    """Nova's test base as far as :class:`waits.PatientWaits` sees it."""

    def __init__(self, test: testtools.TestCase, notifier: _FakeNotifier):
        self.test = test
        self.fake_notifier = notifier

    def setUp(self):
        self.notifier = self.fake_notifier

    def useFixture(self, fixture):
        return self.test.useFixture(fixture)


class _Notified(waits.PatientWaits, _NotifiedBase):
    pass


class PatientNotificationWaitTest(testtools.TestCase):

    def test_nova_default_and_shorter_timeouts_become_the_bound(self):
        notifier = _FakeNotifier()
        _Notified(self, notifier).setUp()
        notifier.wait_for_versioned_notifications('instance.resize.end')
        notifier.wait_for_versioned_notifications('instance.reboot.end',
                                                  1, 2.0)
        notifier.wait_for_versioned_notifications('x', 1, 1000.0)
        self.assertEqual([waits.WAIT_S, waits.WAIT_S, 1000.0],
                         notifier.timeouts)


class EveryFunctionalTestWaitsPatientlyTest(testtools.TestCase):

    WAITS = ('_wait_for_server_parameter', '_wait_for_instance_action_event',
             '_wait_for_migration_status', '_wait_until_deleted')

    def test_every_test_class_with_nova_helpers_has_patient_waits(self):
        checked = []
        for module_info in pkgutil.iter_modules(tests.functional.__path__):
            module = importlib.import_module(
                'tests.functional.' + module_info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if (cls.__module__ != module.__name__
                        or not issubclass(
                            cls, integrated_helpers.InstanceHelperMixin)):
                    continue
                checked.append(cls)
                for name in self.WAITS:
                    self.assertIs(getattr(waits.PatientWaits, name),
                                  getattr(cls, name),
                                  '%s.%s' % (cls.__qualname__, name))
        # The scan found the test classes (the Nova servers tests).
        self.assertGreater(len(checked), 20)
