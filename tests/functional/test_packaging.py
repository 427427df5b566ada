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

"""Installing and removing the package never changes Nova's own files.

The shim nova/virt/gpu_p2p.py is installed into Nova's package directory;
this test builds our wheel, installs it next to a real Nova in a fresh
virtualenv and compares Nova's package files before, during and after.
"""

import hashlib
import importlib.metadata
import os
import subprocess
import sys

import fixtures
import testtools

import tests

SOURCE = tests.ROOT


def _digest_tree(root: str) -> dict[str, str]:
    digests = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != '__pycache__']
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, 'rb') as f:
                digests[os.path.relpath(path, root)] = hashlib.sha256(
                    f.read()).hexdigest()
    return digests


class PackagingTest(testtools.TestCase):

    def run_cmd(self, *args: str) -> str:
        result = subprocess.run(args, capture_output=True, text=True,
                                env=dict(os.environ, PIP_NO_INPUT='1',
                                         PIP_DISABLE_PIP_VERSION_CHECK='1'))
        self.assertEqual(0, result.returncode,
                         '%s failed:\n%s\n%s' % (' '.join(args),
                                                 result.stdout,
                                                 result.stderr))
        return result.stdout

    def test_install_and_uninstall_leave_nova_untouched(self):
        if not os.path.exists(os.path.join(SOURCE, 'setup.cfg')):
            self.skipTest('not running from a source checkout')
        tmp = self.useFixture(fixtures.TempDir()).path
        venv = os.path.join(tmp, 'venv')
        self.run_cmd(sys.executable, '-m', 'venv', venv)
        python = os.path.join(venv, 'bin', 'python')
        pip = [python, '-m', 'pip', 'install', '--quiet', '--no-deps']

        nova_version = importlib.metadata.version('nova')
        self.run_cmd(*pip, 'nova==%s' % nova_version)
        self.run_cmd(python, '-m', 'pip', 'wheel', '--quiet',
                     '--no-deps', '--wheel-dir', tmp, SOURCE)
        [wheel] = [f for f in os.listdir(tmp) if f.endswith('.whl')]

        nova_dir = self.run_cmd(
            python, '-c',
            'import importlib.util, os; print(os.path.dirname('
            'importlib.util.find_spec("nova").origin))').strip()
        before = _digest_tree(nova_dir)
        self.assertIn('__init__.py', before)
        self.assertIn(os.path.join('virt', '__init__.py'), before)
        shim = os.path.join('virt', 'gpu_p2p.py')
        self.assertNotIn(shim, before)

        self.run_cmd(*pip, os.path.join(tmp, wheel))
        during = _digest_tree(nova_dir)
        self.assertIn(shim, during)
        del during[shim]
        self.assertEqual(before, during)

        self.run_cmd(python, '-m', 'pip', 'uninstall', '--yes', '--quiet',
                     'nova-gpu-p2p')
        self.assertEqual(before, _digest_tree(nova_dir))
        self.assertTrue(os.path.isfile(os.path.join(nova_dir, '__init__.py')))
