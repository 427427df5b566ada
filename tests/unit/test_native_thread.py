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

"""Discovery off the eventlet hub: nova-compute's greenthreads carry on.

The whole case runs in a child interpreter, patched the way nova-compute
patches itself, with nothing else of the test runner in it (which Nova's
test fixtures patch too).
"""

import json
import logging
import os
import subprocess
import sys
import threading
import time

import fixtures
from nova import conf as nova_conf
from nova.tests import fixtures as nova_fixtures
from oslo_config import fixture as config_fixture

from nova_gpu_p2p.compute import driver
from nova_gpu_p2p import native_thread
from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import model
import tests
from tests.unit import base

#: Runs in a child interpreter: under eventlet, a job busy for BUSY_S in
#: run()'s native thread, calls handed back to the hub, and the longest
#: a ticker greenthread waited meanwhile; then the same job on the hub.
UNDER_EVENTLET = r'''
import eventlet
eventlet.monkey_patch()
import json, sys, time
from eventlet import patcher
from nova import monkey_patch
monkey_patch.MONKEY_PATCHED = True
from nova_gpu_p2p import native_thread

BUSY_S = %(busy)r
ident = patcher.original('threading').get_ident
gaps = []

def ticker():
    last = time.perf_counter()
    while True:
        eventlet.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now

def busy():
    end = time.perf_counter() + BUSY_S
    while time.perf_counter() < end:
        pass

def job():
    found = {'worker': ident(), 'on_hub': native_thread.on_hub(ident)}
    busy()
    try:
        native_thread.on_hub(int, 'not a number')
    except ValueError as exc:
        found['on_hub_error'] = str(exc)
    return found

def longest(call):
    eventlet.sleep(0.01)
    del gaps[:]
    result = call()
    eventlet.sleep(0.005)
    return result, max(gaps)

eventlet.spawn(ticker)
found, found['native_gap'] = longest(lambda: native_thread.run(job))
found['hub_gap'] = longest(busy)[1]
found['hub'] = ident()
found['on_hub_from_hub'] = native_thread.on_hub(ident)
try:
    native_thread.run(int, 'nor this')
except ValueError as exc:
    found['run_error'] = str(exc)
print(json.dumps(found))
'''


class TestNativeThread(base.TestCase):

    def test_without_eventlet_both_just_call(self):
        self.useFixture(fixtures.MockPatchObject(
            native_thread, '_eventlet_patched', return_value=False))
        here = threading.get_ident()
        self.assertEqual(here, native_thread.run(threading.get_ident))
        self.assertEqual(here, native_thread.on_hub(threading.get_ident))
        self.assertEqual(3, native_thread.run(len, 'abc'))
        self.assertRaises(ValueError, native_thread.run, int, 'x')

    def test_under_eventlet_the_hub_runs_on(self):
        busy = 0.5
        checkout = tests.ROOT
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [checkout] + sys.path))
        proc = subprocess.run(
            [sys.executable, '-W', 'ignore', '-c',
             UNDER_EVENTLET % {'busy': busy}],
            capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        found = json.loads(proc.stdout.splitlines()[-1])
        self.assertNotEqual(found['hub'], found['worker'])
        self.assertEqual(found['hub'], found['on_hub'])
        self.assertEqual(found['hub'], found['on_hub_from_hub'])
        self.assertIn('not a number', found['on_hub_error'])
        self.assertIn('nor this', found['run_error'])
        # On the hub the job stalls every greenthread for all its time;
        # in the native thread the ticker waits a few GIL switches at most.
        self.assertGreaterEqual(found['hub_gap'], busy)
        self.assertLess(found['native_gap'], busy / 2)


class TestRefreshHostGpus(base.TestCase):
    """The driver's periodic discovery, through :mod:`native_thread`."""

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config(nova_conf.CONF))
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.driver = driver.GPUP2PLibvirtDriver(None)
        self.found = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}))
        self.discover = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.discovery.discover',
            return_value=self.found)).mock
        self.run = self.useFixture(fixtures.MockPatchObject(
            native_thread, 'run', side_effect=native_thread.run)).mock
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.WARNING))

    def test_discovery_runs_through_native_thread(self):
        self.assertIs(self.found, self.driver.refresh_host_gpus())
        self.assertIs(self.found, self.driver.refresh_host_gpus())
        self.assertEqual(
            [((self.discover, nova_conf.CONF, None),),
             ((self.discover, nova_conf.CONF, self.found),)],
            [call[:1] for call in self.run.call_args_list])
        self.assertEqual('', self.log.output)

    def test_over_budget_warns(self):
        self.discover.side_effect = lambda *args: (time.sleep(0.03),
                                                   self.found)[1]
        self.driver.DISCOVERY_BUDGET_S = 0.01
        self.assertIs(self.found, self.driver.refresh_host_gpus())
        self.assertIn('GPU topology discovery took 0.0', self.log.output)
        self.assertIn('more than its budget of 0.0 s', self.log.output)

    def test_no_thread_keeps_the_previous_topology(self):
        self.run.side_effect = RuntimeError('no threads')
        # None yet: discovered here, on the calling thread.
        self.assertIs(self.found, self.driver.refresh_host_gpus())
        self.discover.assert_called_once_with(nova_conf.CONF)
        previous = self.driver._host_gpus
        self.discover.return_value = host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques.Cliques(groups=(), ids={}), error='new')
        self.assertIs(previous, self.driver.refresh_host_gpus())
        self.assertEqual(1, self.discover.call_count)
        self.assertEqual(2, self.log.output.count(
            'could not run in a native thread; keeping the previous'))
