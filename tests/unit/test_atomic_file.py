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

"""The one rule for the files the agent and ``capture`` write."""

import contextlib
import errno
import io
import os
import stat
from unittest import mock

import fixtures

from nova_gpu_p2p_guest import atomic_file
from tests.fixtures import deadline
from tests.unit import base


def full_disk() -> mock.MagicMock:
    """Writes fail as on a full disk (ENOSPC)."""
    broken = mock.mock_open()
    broken.return_value.write.side_effect = OSError(
        errno.ENOSPC, 'No space left on device')
    return mock.patch.object(atomic_file, 'open', broken, create=True)


class TestWriteOutput(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.output = os.path.join(self.dir, 'out.xml')

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def read(self, path):
        with open(path) as f:
            return f.read()

    def assertRefused(self, text, path):
        exc = self.assertRaises(OSError, atomic_file.write_output, path,
                                'new')
        self.assertEqual('refusing %s' % text, exc.strerror)

    def test_new_file_and_directories_whatever_the_umask(self):
        for umask in (0o000, 0o077):
            old = os.umask(umask)
            self.addCleanup(os.umask, old)
            top = self.path('u%o' % umask)
            path = os.path.join(top, 'a', 'b', 'out.xml')
            atomic_file.write_output(path, 'new')
            self.assertEqual('new', self.read(path))
            self.assertEqual(0o644, stat.S_IMODE(os.stat(path).st_mode))
            for directory in (top, os.path.dirname(os.path.dirname(path)),
                              os.path.dirname(path)):
                self.assertEqual(0o755, stat.S_IMODE(
                    os.lstat(directory).st_mode), directory)

    def test_temp_file_swapped_for_a_link_changes_no_mode(self):
        """A name swapped before the chmod: the victim keeps its mode."""
        victim = self.path('victim')
        with open(victim, 'w') as f:
            f.write('secret')
        os.chmod(victim, 0o600)
        fsync = os.fsync

        def swap_then_fsync(fd):
            for name in os.listdir(self.dir):
                if name.startswith('.out.xml.'):
                    os.unlink(self.path(name))
                    os.symlink(victim, self.path(name))
            fsync(fd)

        with mock.patch.object(atomic_file.os, 'fsync',
                               side_effect=swap_then_fsync):
            self.assertRaises(OSError, atomic_file.write_output,
                              self.output, 'new')
        self.assertEqual(0o600, stat.S_IMODE(os.stat(victim).st_mode))
        self.assertEqual('secret', self.read(victim))
        self.assertEqual(['victim'], os.listdir(self.dir))

    def test_full_disk_keeps_the_old_file(self):
        with open(self.output, 'w') as f:
            f.write('old')
        with full_disk():
            exc = self.assertRaises(OSError, atomic_file.write_output,
                                    self.output, 'new')
        self.assertEqual(errno.ENOSPC, exc.errno)
        self.assertEqual('old', self.read(self.output))
        self.assertEqual(['out.xml'], os.listdir(self.dir))

    def test_replaces_a_regular_file(self):
        with open(self.output, 'w') as f:
            f.write('old and longer')
        atomic_file.write_output(self.output, 'new')
        self.assertEqual('new', self.read(self.output))
        self.assertEqual(['out.xml'], os.listdir(self.dir))

    def test_symlinked_directory_refused(self):
        os.mkdir(self.path('real'))
        os.symlink(self.path('real'), self.path('link'))
        self.assertRefused('%s: a symbolic link, not a directory'
                           % self.path('link'),
                           self.path('link', 'out.xml'))
        self.assertEqual([], os.listdir(self.path('real')))

    def test_directory_of_another_user_refused(self):
        if os.geteuid() == 0:
            os.chown(self.dir, 4242, -1)
            uid = 0
        else:
            uid = os.geteuid() + 1
            self.useFixture(fixtures.MockPatch('os.geteuid',
                                               return_value=uid))
        self.assertRefused('%s: a directory owned by uid %d, not by this '
                           'user (uid %d) or root'
                           % (self.dir, os.stat(self.dir).st_uid, uid),
                           self.output)
        self.assertEqual([], os.listdir(self.dir))

    def test_world_writable_directory_only_if_sticky(self):
        os.chmod(self.dir, 0o777)
        self.assertRefused('%s: a directory every user can write to, and '
                           'not sticky' % self.dir, self.output)
        self.assertEqual([], os.listdir(self.dir))
        os.chmod(self.dir, 0o1777)
        atomic_file.write_output(self.output, 'new')
        self.assertEqual('new', self.read(self.output))

    def test_link_to_a_regular_file_another_user_made_refused(self):
        with open(self.path('real'), 'w') as f:
            f.write('old')
        os.symlink(self.path('real'), self.output)
        if os.geteuid() == 0:
            os.lchown(self.output, 4242, -1)
            uid = 0
        else:
            uid = os.geteuid() + 1
            self.useFixture(fixtures.MockPatch('os.geteuid',
                                               return_value=uid))
        self.assertRefused('%s: a symbolic link, not followed: owned by uid '
                           '%d, not by this user (uid %d) or root' % (
                               self.output, os.lstat(self.output).st_uid,
                               uid), self.output)
        self.assertTrue(os.path.islink(self.output))
        self.assertEqual('old', self.read(self.path('real')))

    def test_link_only_root_could_have_made_written_through(self):
        """Issue 42 item 1: /etc/nccl.conf kept elsewhere, link and all."""
        os.mkdir(self.path('managed'))
        with open(self.path('managed', 'real'), 'w') as f:
            f.write('old')
        os.symlink(os.path.join('managed', 'real'), self.path('hop'))
        os.symlink('hop', self.output)
        self.assertTrue(atomic_file.write_output(self.output, b'new \xe9'))
        self.assertTrue(os.path.islink(self.output))
        self.assertEqual('new \xe9', open(self.path('managed', 'real'),
                                          encoding='latin-1').read())

    def test_link_in_a_directory_others_can_swap_names_in_refused(self):
        with open(self.path('real'), 'w') as f:
            f.write('old')
        os.mkdir(self.path('open'))
        os.chmod(self.path('open'), 0o777)
        link = self.path('open', 'out.xml')
        os.symlink(self.path('real'), link)
        self.assertRefused('%s: a symbolic link, not followed: a directory '
                           'every user can write to, and not sticky' % link,
                           link)
        self.assertEqual('old', self.read(self.path('real')))

    def test_links_that_loop_refused(self):
        os.symlink('out.xml', self.output)
        exc = self.assertRaises(OSError, atomic_file.write_output,
                                self.output, 'new')
        self.assertIn('symbolic links', exc.strerror)

    def test_fifo_written_in_place(self):
        os.mkfifo(self.output)
        # The reading end, open first so that the writer's open returns.
        reader = os.open(self.output, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, reader)
        atomic_file.write_output(self.output, 'new')
        self.assertEqual(b'new', os.read(reader, 100))
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.output).st_mode))
        self.assertEqual(['out.xml'], os.listdir(self.dir))

    def test_link_to_a_character_device_written_in_place(self):
        """/dev/stdout is such a link: the link and the device stay."""
        os.symlink('/dev/null', self.output)
        atomic_file.write_output(self.output, 'new')
        self.assertTrue(os.path.islink(self.output))
        self.assertTrue(stat.S_ISCHR(os.stat('/dev/null').st_mode))
        self.assertEqual(['out.xml'], os.listdir(self.dir))

    def test_character_device_written_in_place(self):
        try:
            os.mknod(self.output, 0o666 | stat.S_IFCHR,
                     os.stat('/dev/null').st_rdev)
        except PermissionError:
            self.skipTest('mknod needs privileges this run lacks')
        atomic_file.write_output(self.output, 'new')
        self.assertTrue(stat.S_ISCHR(os.lstat(self.output).st_mode))

    def test_dash_is_standard_output(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            atomic_file.write_output('-', 'new')
        self.assertEqual('new', out.getvalue())
        self.assertEqual([], os.listdir(self.dir))


class TestPlantedStreams(base.TestCase):
    """Issue 35 item 2: streams another user planted at the output path."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.dir, 0o1777)  # as /tmp
        self.output = os.path.join(self.dir, 'out.xml')

    def other_user(self, path: str) -> int:
        """Make ``path`` (not followed) another user's; that user's uid."""
        if os.geteuid() == 0:
            os.lchown(path, 4242, -1)
            return 4242
        self.useFixture(fixtures.MockPatch(
            'os.geteuid', return_value=os.geteuid() + 1))
        return os.lstat(path).st_uid

    def reader(self) -> int:
        fd = os.open(self.output, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, fd)
        return fd

    def assertRefused(self, why):
        exc = self.assertRaises(OSError, deadline.run_briefly,
                                atomic_file.write_output, self.output, 'new')
        self.assertEqual('refusing %s: %s' % (self.output, why),
                         exc.strerror)

    def test_fifo_nobody_reads_refused_not_waited_on(self):
        os.mkfifo(self.output)
        self.assertRefused('a FIFO nobody reads')

    def test_another_users_fifo_refused(self):
        os.mkfifo(self.output)
        self.reader()
        uid = self.other_user(self.output)
        self.assertRefused(
            'a FIFO owned by uid %d, not by this user (uid %d) or root, in '
            'a sticky directory others can write to' % (uid, os.geteuid()))

    def test_another_users_link_to_a_device_refused(self):
        os.symlink('/dev/null', self.output)
        uid = self.other_user(self.output)
        self.assertRefused(
            'a symbolic link owned by uid %d, not by this user (uid %d) or '
            'root, in a sticky directory others can write to'
            % (uid, os.geteuid()))

    def test_another_users_fifo_in_a_directory_not_sticky_refused(self):
        """Issue 42 item 10: 0777 and not sticky is no safer than /tmp."""
        os.chmod(self.dir, 0o777)
        os.mkfifo(self.output)
        self.reader()
        uid = self.other_user(self.output)
        self.assertRefused(
            'a FIFO owned by uid %d, not by this user (uid %d) or root, in '
            'a directory others can write to' % (uid, os.geteuid()))

    def test_another_users_link_in_a_directory_not_sticky_refused(self):
        os.chmod(self.dir, 0o777)
        os.symlink('/dev/null', self.output)
        uid = self.other_user(self.output)
        self.assertRefused(
            'a symbolic link owned by uid %d, not by this user (uid %d) or '
            'root, in a directory others can write to' % (uid, os.geteuid()))

    def test_own_fifo_in_sticky_directory_written(self):
        os.mkfifo(self.output)
        reader = self.reader()
        self.assertFalse(atomic_file.write_output(self.output, 'new'))
        self.assertEqual(b'new', os.read(reader, 100))

    def test_another_users_fifo_in_a_private_directory_written(self):
        # Not sticky, not writable by others: whoever owns the directory
        # chose it; the directory rules of replaced files apply there.
        os.chmod(self.dir, 0o755)
        os.mkfifo(self.output)
        reader = self.reader()
        self.other_user(self.output)
        self.assertFalse(atomic_file.write_output(self.output, 'new'))
        self.assertEqual(b'new', os.read(reader, 100))

    def test_says_whether_a_file_was_written(self):
        self.assertTrue(atomic_file.write_output(self.output, 'new'))
        link = os.path.join(self.dir, 'null')
        os.symlink('/dev/null', link)
        self.assertFalse(atomic_file.write_output(link, 'new'))
