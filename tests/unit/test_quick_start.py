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

"""The README's commands come first and install what tox.ini requires;
the install guide says where ``tox -e pkg`` leaves what it builds.

A tox lacking a plugin tox.ini ``requires`` provisions one of its own
first, and says so at length on every run.
"""

import configparser
import os
import re
import shlex

from packaging import requirements

import tests
from tests.unit import base

#: The lines that install tox: the README's and CI's.
INSTALLERS = ('README.md', os.path.join('.ci', 'run'))


def read(*path: str) -> str:
    with open(os.path.join(tests.ROOT, *path)) as f:
        return f.read()


def tox_ini() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(read('tox.ini'))
    return parser


def pip_installs(text: str) -> list[list[str]]:
    """The requirements of each ``.venv/bin/pip install`` in ``text``."""
    found = []
    for line in text.splitlines():
        if '.venv/bin/pip install' not in line:
            continue
        for command in line.split('&&'):
            words = shlex.split(command)
            if words[:2] == ['.venv/bin/pip', 'install']:
                found.append([w for w in words[2:]
                              if not w.startswith('-')])
    return found


class QuickStartTest(base.TestCase):

    def test_tox_is_installed_with_what_tox_ini_requires(self):
        tox = tox_ini()['tox']
        wanted = {requirements.Requirement(line).name: line for line in
                  tox['requires'].split() if line}
        wanted['tox'] = 'tox>=%s' % tox['minversion']
        self.assertIn('tox-uv', wanted)
        for path in INSTALLERS:
            installs = pip_installs(read(path))
            self.assertTrue(installs, path)
            for install in installs:
                given = {requirements.Requirement(r).name: r
                         for r in install}
                self.assertEqual(wanted, given, path)

    def test_install_guide_names_where_pkg_builds(self):
        command = tox_ini()['testenv:pkg']['commands']
        dist = re.search(r'--dist (\S+)', command).group(1)
        self.assertEqual('{envdir}/dist', dist)
        self.assertIn('``.tox/pkg/dist/``',
                      read('doc', 'source', 'install.rst'))

    def test_readme_commands_on_the_first_screen(self):
        """Set-up, demo and unit tests within 40 lines, each on its own."""
        first = read('README.md').splitlines()[:40]
        commands = [line.strip() for line in first
                    if line.startswith('    .venv/bin/tox ')]
        self.assertIn('.venv/bin/tox -e demo', commands)
        self.assertIn('.venv/bin/tox -e py3', commands)
        self.assertTrue(pip_installs('\n'.join(first)))
