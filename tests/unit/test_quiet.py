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

"""A passing unit test prints nothing but the runner's lines.

A newcomer who sees ``ERROR ... Traceback`` in a green run thinks it
broke. Logs are captured per test (:mod:`tests.unit.base`) and shown only
with a failure.
"""

import ast
import os
import pathlib
import subprocess
import sys

from oslo_log import log as logging

# Nova's import-time notices (eventlet, monkey patching) come with it.
from nova_gpu_p2p.compute import driver
from tests.unit import base

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: Makes LoudTest's second test fail, to show that what a failing test
#: logged is kept for its failure.
FAIL = 'NOVA_GPU_P2P_TEST_QUIET_FAIL'


class LoudTest(base.TestCase):
    """Logs as the driver does when a test breaks something on purpose."""

    def log(self, test: str) -> None:
        log = logging.getLogger(driver.__name__)
        try:
            raise RuntimeError('broken')
        except RuntimeError:
            log.exception('%s: reporting PCI devices failed', test)
        log.warning('%s: a warning a test provoked', test)

    def test_a_passing_test(self):
        self.log('passing')

    def test_a_failing_test(self):
        self.log('failing')
        if os.environ.get(FAIL):
            self.fail('failing on purpose')


class TestQuietRun(base.TestCase):

    def test_only_a_failure_shows_what_was_logged(self):
        result = subprocess.run(
            [sys.executable, '-m', 'testtools.run',
             '%s.LoudTest' % __name__], cwd=ROOT,
            env=dict(os.environ, **{FAIL: '1'}), capture_output=True,
            text=True, timeout=300)
        output = result.stdout + result.stderr
        self.assertEqual(1, result.returncode, output)
        self.assertIn('FAILED (failures=1)', output)
        self.assertIn('ERROR %s failing: reporting PCI devices failed'
                      % driver.__name__, output)
        self.assertIn('RuntimeError: broken', output)
        self.assertIn('WARNING %s failing: a warning a test provoked'
                      % driver.__name__, output)
        # Nothing from the passing test, nor from importing Nova.
        self.assertNotIn('passing:', output)
        self.assertNotIn('Eventlet', output)
        self.assertNotIn('monkey patching', output)

    def test_every_unit_test_class_captures_logs(self):
        """None derives from testtools' or unittest's TestCase directly."""
        bare = []
        for path in sorted(HERE.glob('*.py')):
            if path.name == 'base.py':
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(b, ast.Attribute) and b.attr == 'TestCase'
                        and isinstance(b.value, ast.Name)
                        and b.value.id in ('testtools', 'unittest')
                        for b in node.bases):
                    bare.append('%s:%d: %s' % (path.name, node.lineno,
                                               node.name))
        self.assertEqual([], bare, 'derive from tests.unit.base.TestCase')
