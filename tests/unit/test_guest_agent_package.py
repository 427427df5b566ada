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

"""The guest agent's distribution stands alone, and its shipped files agree.

A guest image installs the wheel of ``nova-gpu-p2p-guest`` (built from
``guest-agent/``) and runs the agent on its own Python, 3.8 or later:
every module of the package imports the standard library and the
package's own modules only. ``tox -e pkg`` checks the built wheel.
"""

import argparse
import ast
import configparser
import importlib
import json
import os
import re
import subprocess
import sys

import fixtures
import yaml

from nova_gpu_p2p.guest import topology_description as td
from nova_gpu_p2p_guest import cli
from nova_gpu_p2p_guest import description as agent_description
from nova_gpu_p2p_guest import fw_cfg
import tests
from tests.fixtures import fake_cuda
from tests.fixtures import guest_sysfs
from tests.unit import base
from tests.unit import test_guest_agent

PYTHON38 = '/root/.pyenv/versions/3.8.18/bin/python3.8'
PACKAGE = 'nova_gpu_p2p_guest'
#: The agent's own directory, guest-agent/ in a checkout.
SOURCE_ROOT = test_guest_agent.AGENT_SOURCE
PACKAGE_DIR = os.path.join(SOURCE_ROOT, PACKAGE)


def _parse_modules():
    modules = {}
    for name in os.listdir(PACKAGE_DIR):
        if name.endswith('.py'):
            with open(os.path.join(PACKAGE_DIR, name),
                      encoding='utf-8') as f:
                modules[name[:-3]] = ast.parse(f.read(), name)
    return modules


#: Every module of the package, by name, parsed.
MODULES = _parse_modules()


def imports(tree):
    """``[(module, level)]`` that ``tree`` imports."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((a.name, 0) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module.startswith(
                'nova_gpu_p2p'):
            # "from nova_gpu_p2p.x import y": y is a module (hacking H302).
            found.extend(('%s.%s' % (node.module, a.name), node.level)
                         for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module, node.level))
    return found


def has_annotations(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) or (
                isinstance(node, ast.arg) and node.annotation) or (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.returns):
            return True
    return False


class TestStandalone(base.TestCase):
    """Standard library only, Python 3.8: what a guest image has."""

    def test_imports_standard_library_and_its_own_modules_only(self):
        """Nothing of nova_gpu_p2p outside the package, no third party."""
        outside, own = [], set()
        for name, tree in MODULES.items():
            for module, level in imports(tree):
                self.assertEqual(0, level, name)
                if module.startswith(PACKAGE + '.'):
                    own.add(module)
                elif module.split('.')[0] not in (
                        set(sys.stdlib_module_names) | {'__future__'}):
                    outside.append('%s: %s' % (name, module))
        self.assertEqual([], outside)
        # The walk sees the package's own imports: each module but the
        # entry points is imported by another.
        self.assertIn(PACKAGE + '.cli', own)
        self.assertEqual({PACKAGE + '.' + name for name in MODULES
                          if name not in ('__init__', '__main__')}, own)

    def test_annotations_need_no_newer_python(self):
        """Annotations stay strings on 3.8 (PEP 563): List, not list."""
        missing = [name for name, tree in MODULES.items()
                   if has_annotations(tree) and ('__future__', 0)
                   not in imports(tree)]
        self.assertEqual([], missing)
        self.assertIn('cli', [name for name, tree in MODULES.items()
                              if has_annotations(tree)])

    def python38(self, *argv, env=None, **kwargs):
        if not os.path.exists(PYTHON38):
            self.skipTest('no Python 3.8 at %s' % PYTHON38)
        return subprocess.run(
            [PYTHON38] + list(argv),
            cwd=SOURCE_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=60,
            env=env or {'PATH': os.environ.get('PATH', ''),
                        'PYTHONDONTWRITEBYTECODE': '1'}, **kwargs)

    def test_help_under_python38(self):
        result = self.python38('-m', PACKAGE, '--help')
        self.assertEqual(0, result.returncode, result.stderr)
        for option in ('--sysfs-root', '--fw-cfg', '--output', '--env',
                       '--proc-root'):
            self.assertIn(option, result.stdout)

    def test_real_run_under_python38(self):
        root = self.useFixture(fixtures.TempDir()).path
        description = test_guest_agent.corpus_description(
            'pcie-2level-switch-pxb')
        guest_sysfs.build(os.path.join(root, 'sys'), description)
        output = os.path.join(root, 'run', 'virtualTopology.xml')
        result = self.python38('-m', PACKAGE,
                               '--sysfs-root', os.path.join(root, 'sys'),
                               '--output', output)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual('', result.stderr)
        with open(output) as f:
            self.assertIn('<pci busid="ffff:00:01.0" class="0x060400"',
                          f.read())
        bad = self.python38('-m', PACKAGE, '--fw-cfg', '/nonexistent')
        self.assertEqual((2, 'nova-gpu-p2p-guest: cannot read /nonexistent: '
                          'no such file\n'), (bad.returncode, bad.stderr))

    def test_verify_p2p_under_python38(self):
        """The check, its child process and the ctypes binding on 3.8."""
        root = self.useFixture(fixtures.TempDir()).path
        result = os.path.join(root, 'p2p-verification.json')
        done = self.python38(
            '-m', PACKAGE, 'verify-p2p', '--library', fake_cuda.library(),
            '--result', result, '--nccl-conf', os.path.join(root, 'conf'),
            '--console', os.path.join(root, 'console'), '--mib', '1',
            env={'PATH': os.environ.get('PATH', ''),
                 'PYTHONDONTWRITEBYTECODE': '1',
                 **fake_cuda.environment(gpus=2, mode='mirror', pair='0:1')})
        self.assertEqual(1, done.returncode, done.stderr)
        self.assertIn('GPU P2P FAILED: GPU 0 (0000:18:00.0) -> GPU 1 '
                      '(0000:28:00.0): copy engine failed: nothing arrived',
                      done.stderr)
        with open(result) as f:
            self.assertEqual('failed', json.load(f)['status'])

    def test_every_module_imports_under_python38(self):
        """On 3.8 every module imports, and loads nothing of the driver."""
        names = ['%s.%s' % (PACKAGE, name) for name in sorted(MODULES)
                 if name not in ('__init__', '__main__')]
        result = self.python38('-c', 'import sys\n' + ''.join(
            'import %s\n' % name for name in names) + (
            'print(" ".join(sorted(m for m in sys.modules '
            'if m.startswith("nova"))))'))
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([PACKAGE] + names,
                         result.stdout.split())

    def test_console_script_is_the_command_line(self):
        setup = configparser.ConfigParser()
        setup.read(os.path.join(SOURCE_ROOT, 'setup.cfg'))
        scripts = dict(
            line.replace(' ', '').split('=', 1) for line in
            setup['options.entry_points']['console_scripts'].splitlines()
            if line.strip())
        module, _, function = scripts['nova-gpu-p2p-guest'].partition(':')
        self.assertIs(cli.main,
                      getattr(importlib.import_module(module), function))


class TestShippedFiles(base.TestCase):
    """The systemd unit, the cloud-init snippet and the docs agree."""

    def setUp(self):
        super().setUp()
        if not os.path.isdir(os.path.join(SOURCE_ROOT, 'etc')):
            self.skipTest('no etc/ next to the package (installed without '
                          'its source tree)')

    def read(self, *path):
        with open(os.path.join(SOURCE_ROOT, *path), encoding='utf-8') as f:
            return f.read()

    def unit(self, name):
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.optionxform = str
        unit.read_string(self.read('etc', name))
        return unit

    def test_unit(self):
        unit = self.unit('nova-gpu-p2p-guest.service')
        self.assertEqual('oneshot', unit['Service']['Type'])
        self.assertEqual('/usr/bin/python3 -m nova_gpu_p2p_guest',
                         unit['Service']['ExecStart'])
        self.assertIn('systemd-modules-load.service', unit['Unit']['After'])
        self.assertIn('multi-user.target', unit['Unit']['Before'])
        self.assertEqual('multi-user.target', unit['Install']['WantedBy'])

    def test_verify_unit_runs_once_per_boot_before_the_topology(self):
        unit = self.unit('nova-gpu-p2p-verify.service')
        service = unit['Service']
        self.assertEqual(('oneshot', 'yes'), (service['Type'],
                                              service['RemainAfterExit']))
        self.assertEqual('/usr/bin/python3 -m nova_gpu_p2p_guest verify-p2p',
                         unit['Service']['ExecStart'])
        before = unit['Unit']['Before'].split()
        self.assertIn('nova-gpu-p2p-guest.service', before)
        self.assertIn('multi-user.target', before)
        # Ordering only: a failed check must not stop the topology writer.
        self.assertNotIn('nova-gpu-p2p-verify.service', ' '.join(
            self.unit('nova-gpu-p2p-guest.service')['Unit'].values()))
        self.assertEqual('multi-user.target', unit['Install']['WantedBy'])

    def test_cloud_init_installs_the_same_units(self):
        config = yaml.safe_load(self.read('etc', 'cloud-init.yaml'))
        for name in ('nova-gpu-p2p-guest.service',
                     'nova-gpu-p2p-verify.service'):
            self.assertEqual(
                [self.read('etc', name)],
                [f['content'] for f in config['write_files']
                 if f['path'] == '/etc/systemd/system/' + name])
        self.assertEqual(['systemctl', 'enable', '--now',
                          'nova-gpu-p2p-verify.service'],
                         config['runcmd'][-2])
        install = config['runcmd'][0]
        self.assertEqual(['python3', '-m', 'pip', 'install', '--no-deps'],
                         install[:5])
        # The package is not on PyPI: the operator's wheel, and the
        # header says where to put its URL.
        self.assertEqual('WHEEL_URL', install[-1])
        self.assertIn('Replace WHEEL_URL', self.read('etc',
                                                     'cloud-init.yaml'))
        self.assertEqual(['systemctl', 'enable', '--now',
                          'nova-gpu-p2p-guest.service'], config['runcmd'][-1])

    def test_documented_options_exist(self):
        parser = cli.build_parser()
        options = set(parser._option_string_actions)
        commands = [a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)][0].choices
        found = []
        for name in ('cli-guest-agent.rst', 'tenant-guide.rst',
                     'install.rst'):
            with open(os.path.join(tests.ROOT, 'doc', 'source', name),
                      encoding='utf-8') as f:
                text = f.read()
            for number, line in enumerate(text.splitlines(), 1):
                if 'nova-gpu-p2p-guest ' not in line:
                    continue
                rest = line.split('nova-gpu-p2p-guest ', 1)[1]
                known = options
                if rest.split()[0] in commands:
                    known = commands[rest.split()[0]]._option_string_actions
                found.extend('%s:%d: %s' % (name, number, flag)
                             for flag in re.findall(r'--[a-z][a-z-]*', rest)
                             if flag not in known)
        self.assertEqual([], found)


class TestContract(base.TestCase):
    """The agent keeps its own copy of the driver's names (stdlib only)."""

    def test_same_entry_and_version_as_the_driver(self):
        self.assertEqual(td.ENTRY_NAME, fw_cfg.ENTRY_NAME)
        self.assertEqual(td.FORMAT_VERSION,
                         agent_description.FORMAT_VERSION)
        self.assertEqual(td.MAX_ENTRY_SIZE, fw_cfg.MAX_ENTRY_SIZE)
