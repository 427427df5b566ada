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

"""The Fabric Manager test fixture itself: its build and its state file."""

import os
import shutil
from unittest import mock

import fixtures

from tests.fixtures import fake_fm
from tests.unit import base


class LibraryTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def source(self, extra: str) -> str:
        """A copy of the stand-in's source with ``extra`` at its end."""
        path = os.path.join(self.tmp, 'fake_nvfm.c')
        shutil.copy(fake_fm.SOURCE, path)
        with open(path, 'a') as f:
            f.write(extra)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fixtures.fake_fm.SOURCE', path))
        return path

    def test_built_once(self):
        path = fake_fm.library()
        built = os.stat(path).st_mtime_ns
        self.assertEqual(path, fake_fm.library())
        self.assertEqual(built, os.stat(path).st_mtime_ns)
        self.assertTrue(path.endswith('.so.1'))

    def test_connect_v1_only_is_its_own_build(self):
        path = fake_fm.library(connect_v1_only=True)
        self.assertNotEqual(fake_fm.library(), path)
        self.assertEqual(path, fake_fm.library(connect_v1_only=True))

    def test_rebuilt_when_the_source_changes(self):
        before = fake_fm.library()
        self.source('/* %s */\n' % self.id())
        after = fake_fm.library()
        self.addCleanup(os.remove, after)
        self.assertNotEqual(before, after)
        self.assertTrue(os.path.exists(after))

    def test_without_gcc(self):
        source = self.source('/* %s */\n' % self.id())
        with mock.patch('shutil.which', return_value=None):
            e = self.assertRaises(RuntimeError, fake_fm.library)
        self.assertEqual(
            'gcc not found: the stand-in %s is built with gcc '
            '(tools/install-ci-deps.sh installs gcc and libc6-dev)'
            % source, str(e))

    def test_compile_error(self):
        source = self.source('not C\n')
        e = self.assertRaises(RuntimeError, fake_fm.library)
        self.assertIn('gcc could not build %s:' % source, str(e))
        self.assertIn('error', str(e))


class FakeFMTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_new(self):
        fm = fake_fm.FakeFM(self.tmp, 'b200')
        self.assertEqual(os.path.join(self.tmp, 'fm.state'), fm.address)
        self.assertEqual(('up', set(), []),
                         (fm.mode(), fm.active(), fm.calls()))
        self.assertEqual(fake_fm.B200_PARTITIONS, fm.partitions)
        with open(fm.address) as f:
            self.assertEqual('board b200\nmode up\nactive\n', f.read())

    def test_unknown_board(self):
        e = self.assertRaises(ValueError, fake_fm.FakeFM, self.tmp, 'a100')
        self.assertEqual("board 'a100' is not one of b200, h100", str(e))

    def test_modes(self):
        fm = fake_fm.FakeFM(self.tmp)
        fm.force_active(3, 6)
        fm.down()
        self.assertEqual(('down', {3, 6}), (fm.mode(), fm.active()))
        fm.up()
        self.assertEqual(('up', {3, 6}), (fm.mode(), fm.active()))
        # Restart mode keeps the routes.
        fm.restart()
        self.assertEqual(('restarted', {3, 6}), (fm.mode(), fm.active()))
        fm.force_active(1)
        self.assertEqual(('restarted', {1, 3, 6}), (fm.mode(), fm.active()))

    def test_boards(self):
        """Board, halves, pairs, singles: H100 from ID 0, B200 from 1."""
        self.assertEqual(['b200', 'h100'], sorted(fake_fm.BOARDS))
        for board, first in (('h100', 0), ('b200', 1)):
            partitions = fake_fm.BOARDS[board]
            self.assertEqual(list(range(first, first + 15)),
                             sorted(partitions), board)
            self.assertEqual([8] + [4] * 2 + [2] * 4 + [1] * 8,
                             [len(partitions[i]) for i in sorted(partitions)],
                             board)
            self.assertEqual(frozenset(range(1, 9)), partitions[first])
            self.assertEqual(
                {first + 6 + m: frozenset({m}) for m in range(1, 9)},
                {i: gpus for i, gpus in partitions.items() if len(gpus) == 1})
