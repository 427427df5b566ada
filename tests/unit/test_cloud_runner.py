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

"""The lab tools patch with eventlet before anything imports Nova.

Imported unpatched, oslo.db's per-context transactions are shared by
every greenthread of an in-process cloud, and its steps fail at random
("Can't upgrade a READER transaction to a WRITER"): tox -e bench died so,
or its boots were rescheduled until none was left. Each check runs in a
fresh interpreter, as the tools do.
"""

import subprocess
import sys

import tests
from tests.unit import base


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], cwd=tests.ROOT,
                          capture_output=True, text=True, timeout=300)


class PatchFirstTest(base.TestCase):

    def test_tools_import_nova_after_patching(self):
        for tool in ('lab/bench.py', 'lab/demo.py'):
            proc = run(
                'import runpy, sys; sys.argv = [%r, "--help"]\n'
                'try:\n'
                '    runpy.run_path(%r, run_name="__main__")\n'
                'except SystemExit:\n'
                '    pass\n'
                'import eventlet.patcher\n'
                '# demo.py patches in main, after --help: Nova unloaded.\n'
                'assert eventlet.patcher.is_monkey_patched("thread") or (\n'
                '    "oslo_db.sqlalchemy.enginefacade" not in sys.modules\n'
                '    and "nova.tests.functional" not in sys.modules)\n'
                % (tool, tool))
            self.assertEqual(0, proc.returncode, proc.stderr[-2000:])

    def test_refused_after_nova(self):
        proc = run('from lab import cloud_filters\n'
                   'from lab import cloud_runner\n'
                   'cloud_runner.patch_first()\n')
        self.assertNotEqual(0, proc.returncode)
        self.assertIn('oslo.db was imported before '
                      'cloud_runner.patch_first()', proc.stderr)


class ProgressTest(base.TestCase):
    """A tool's progress lines reach the terminal while Nova's are kept."""

    def test_terminal_beside_quiet(self):
        proc = run('from tests.fixtures import output\n'
                   'with output.terminal() as screen, output.quiet() as log:'
                   '\n'
                   '    print("nova says")\n'
                   '    print("step 1", file=screen)\n'
                   'log.seek(0)\n'
                   'assert log.read() == "nova says\\n"\n')
        self.assertEqual((0, 'step 1\n'), (proc.returncode, proc.stdout),
                         proc.stderr)
