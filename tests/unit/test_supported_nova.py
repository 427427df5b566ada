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

"""The Nova releases the install docs name are those tox.ini tests.

And those requirements.txt lets pip install beside the package.
"""

import configparser
import os
import re

from packaging import requirements

import tests
from tests.unit import base

#: Where an operator reads which Nova releases are supported.
DOCS = ('README.md', os.path.join('doc', 'source', 'install.rst'),
        os.path.join('doc', 'source', 'operator-guide.rst'))
STATEMENT = re.compile(
    r'Supported Nova releases: ((?:\d+ \(\d{4}\.\d\)(?:, | and )?)+)')
RELEASE = re.compile(r'(\d+) \((\d{4}\.[12])\)')
#: Nova majors this test looks for in a version range.
MAJORS = range(20, 60)


def series(major: int) -> str:
    """OpenStack's release of a Nova major: 27 was 2023.1, one a half-year."""
    return '%d.%d' % (2023 + (major - 27) // 2, (major - 27) % 2 + 1)


def majors(requirement: str) -> set[int]:
    """The Nova majors a requirement line such as ``nova>=33,<34`` allows."""
    specifier = requirements.Requirement(requirement).specifier
    return {major for major in MAJORS
            if any(specifier.contains('%d.%d.0' % (major, minor))
                   for minor in range(10))}


def read(*path: str) -> str:
    with open(os.path.join(tests.ROOT, *path)) as f:
        return f.read()


def tested_majors() -> set[int]:
    """The Nova majors of every tox env's ``nova`` requirement."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(read('tox.ini'))
    found = set()
    for section in parser.sections():
        for line in parser[section].get('deps', '').splitlines():
            if re.match(r'nova\s*[=<>~!]', line.strip()):
                found |= majors(line.strip())
    return found


class SupportedNovaTest(base.TestCase):

    def test_series(self):
        self.assertEqual(['2023.1', '2026.1', '2026.2'],
                         [series(27), series(33), series(34)])

    def test_majors_of_a_requirement(self):
        self.assertEqual({34}, majors('nova==34.0.0'))
        self.assertEqual({33}, majors('nova>=33.0.0,<34.0.0'))
        self.assertEqual({33, 34}, majors('nova>=33.0.0,<35.0.0'))

    def test_tox_tests_what_requirements_allow(self):
        tested = tested_majors()
        self.assertEqual({33, 34}, tested)
        nova = [line for line in read('requirements.txt').splitlines()
                if re.match(r'nova\s*[=<>~!]', line)]
        self.assertEqual(1, len(nova), nova)
        self.assertEqual(tested, majors(nova[0].split('#')[0]))

    def test_docs_name_the_tested_releases(self):
        tested = tested_majors()
        for path in DOCS:
            text = ' '.join(read(path).split())
            statements = STATEMENT.findall(text)
            self.assertEqual(1, len(statements), path)
            releases = RELEASE.findall(statements[0])
            self.assertEqual(sorted(tested),
                             [int(major) for major, _ in releases], path)
            for major, name in releases:
                self.assertEqual(series(int(major)), name, path)
