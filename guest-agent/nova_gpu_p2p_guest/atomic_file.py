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

"""The one rule for every file the product writes.

NCCL reads the topology file whenever a job starts: a boot that stops
half-way, or a full disk, must leave the old file or none, never half of
one. The agent runs as root in a tenant's VM, so no other user may steer
what it writes or where. ``nova-gpu-p2p capture`` writes through the same
code: it lives here because the agent's distribution must stand alone, and
the driver's distribution requires this one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import sys
from typing import Optional, Union

#: The mode of every file written, whatever the umask.
FILE_MODE = 0o644
#: The mode of every directory made, whatever the umask.
DIRECTORY_MODE = 0o755


#: How many symbolic links a written path may pass through (Linux: 40).
MAX_LINKS = 8


def write_output(path: str, text: Union[str, bytes]) -> bool:
    """Write ``text`` (ASCII, or bytes as they are) to ``path``.

    OSError's strerror says why not. Returns whether a file now holds the
    text: False for a stream (standard output, a pipe, a device), where
    the caller must not say it wrote one.

    ``-`` is standard output. A FIFO or a character device, or a symbolic
    link to one (``/dev/stdout``), is written in place: replacing it would
    swap a pipe or /dev/null for a plain file. Such a stream is opened
    without blocking (a FIFO nobody reads is refused, not waited on), and
    refused where another user planted it (:func:`planted`). Anything
    else must be a regular file or nothing, and is replaced whole with a
    temp file made next to it, so a failure leaves the old file as it was.
    A symbolic link to a regular file is followed only where no other
    user could have made it (:func:`_through_links`: an administrator's
    ``/etc/nccl.conf`` kept elsewhere); any other is refused, neither
    followed nor replaced: following it would let whoever made the link
    choose which file root overwrites, replacing it would silently undo
    the link.
    """
    data = text if isinstance(text, bytes) else text.encode('ascii')
    if path == '-':
        sys.stdout.flush()
        binary = getattr(sys.stdout, 'buffer', None)
        if binary is None:  # a text stream only (tests, embedding)
            sys.stdout.write(data.decode('ascii', 'backslashreplace'))
        else:
            binary.write(data)
        sys.stdout.flush()
        return False
    try:
        target: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:  # nothing there, or a dangling link
        target = None
    if target is not None and _is_stream(target.st_mode):
        _write_in_place(path, data, target)
        return False
    _replace(_through_links(path), data)
    return True


def _is_stream(mode: int) -> bool:
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _kind(mode: int) -> str:
    return ('a symbolic link' if stat.S_ISLNK(mode) else
            'a FIFO' if stat.S_ISFIFO(mode) else
            'a character device' if stat.S_ISCHR(mode) else
            'a regular file' if stat.S_ISREG(mode) else 'a special file')


def _planted_here(path: str, st: os.stat_result) -> Optional[str]:
    """Why ``st``, found at ``path``, is another user's plant, or None.

    A name in a directory that others may write to (group or world,
    sticky or not: protected_fifos=2 counts group-writable ones too) may
    have been made by any of them: unless it belongs to this user or
    root, it is not ours to write through.
    """
    uid = os.geteuid()
    if st.st_uid in (uid, 0):
        return None
    directory = os.stat(os.path.dirname(os.path.abspath(path)))
    if not directory.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
        return None
    return ('%s owned by uid %d, not by this user (uid %d) or root, in a '
            '%sdirectory others can write to' % (
                _kind(st.st_mode), st.st_uid, uid,
                'sticky ' if directory.st_mode & stat.S_ISVTX else ''))


def planted(path: str) -> Optional[str]:
    """Why another user may have chosen what writing ``path`` reaches.

    The rule for every name written in place (a stream, the console):
    the name itself, and where its links lead, must each pass
    :func:`_planted_here`. None where they do, or where nothing is there.
    """
    try:
        names = [(path, os.lstat(path))]
        real = os.path.realpath(path)
        if real != os.path.abspath(path):
            names.append((real, os.stat(path)))
        for name, st in names:
            why = _planted_here(name, st)
            if why:
                return why
    except FileNotFoundError:
        return None
    return None


def _through_links(path: str) -> str:
    """Where ``path`` leads through links no other user could have made.

    A link is followed where it belongs to this user or root and lies in
    a directory no other user can swap names in (:func:`_unsafe`); the
    first name that is no link is returned. Any other link is refused.
    """
    for _ in range(MAX_LINKS):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return path
        if not stat.S_ISLNK(st.st_mode):
            return path
        uid = os.geteuid()
        directory = os.path.dirname(os.path.abspath(path))
        why = (_unsafe(os.stat(directory)) if st.st_uid in (uid, 0) else
               'owned by uid %d, not by this user (uid %d) or root' % (
                   st.st_uid, uid))
        if why:
            raise _refused(path, 'a symbolic link, not followed: %s' % why)
        path = os.path.join(directory, os.readlink(path))
    raise _refused(path, 'more than %d symbolic links' % MAX_LINKS)


def _refused(path: str, why: str) -> OSError:
    return OSError(errno.EPERM, 'refusing %s: %s' % (path, why))


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data``, through a buffered file that retries short writes.

    Not os.write: under eventlet (nova-compute, the tests) it polls the
    descriptor first, which /dev/null refuses.
    """
    with open(fd, 'wb', closefd=False) as f:
        f.write(data)


def _write_in_place(path: str, data: bytes,
                    target: os.stat_result) -> None:
    """Write into the pipe or device ``path`` names; never make a file.

    ``target`` is what ``path`` led to when checked; the link itself and
    the stream it leads to must both pass :func:`planted`.
    """
    why = planted(path)
    if why:
        raise _refused(path, why)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC
                     | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _refused(path, 'a FIFO nobody reads')
        raise
    try:
        now = os.fstat(fd)
        if (not _is_stream(now.st_mode)
                or (now.st_dev, now.st_ino) != (target.st_dev,
                                                target.st_ino)):
            raise _refused(path, 'it changed while being opened')
        # Opening was the wait to avoid; the reader, ours, sets the pace.
        fcntl.fcntl(fd, fcntl.F_SETFL,
                    fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        _write_all(fd, data)
    finally:
        os.close(fd)


def _replace(path: str, data: bytes) -> None:
    """Temp file in ``path``'s directory, fchmod, fsync, os.replace.

    Everything goes through the directory's descriptor, the one checked,
    and the temp file's mode is set on its descriptor: a name swapped for
    a symbolic link in between cannot redirect the write or the chmod.
    """
    directory, name = os.path.split(os.path.abspath(path))
    dir_fd = _open_directory(directory, follow=False)
    try:
        try:
            old: Optional[os.stat_result] = os.stat(
                name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise _refused(path, 'a symbolic link, not followed')
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise _refused(path, 'not a regular file, a FIFO or a '
                                 'character device')
        tmp = '.%s.%s.tmp' % (name, secrets.token_hex(8))
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY
                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        replaced = False
        try:
            _write_all(fd, data)
            os.fsync(fd)
            os.fchmod(fd, FILE_MODE)
            mine = os.fstat(fd)
            now = os.stat(tmp, dir_fd=dir_fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
                raise _refused(path, 'its temporary file %s was replaced'
                               % os.path.join(directory, tmp))
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            replaced = True
        finally:
            os.close(fd)
            if not replaced:
                _discard(tmp, dir_fd)
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _discard(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass  # the error that got us here is the one to report


def _open_directory(directory: str, follow: bool) -> int:
    """A descriptor of ``directory``, made (0755) if missing, and checked.

    A directory a name is made in must be one where no other user can
    rename or swap names: a directory owned by this user or by root, not
    writable by every user unless sticky. The file's own directory must
    not be a symbolic link either (``follow`` False); the ones above it
    may (``/var/run`` is a link to ``/run``).
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if not follow:
        flags |= os.O_NOFOLLOW
    made = False
    try:
        try:
            fd = os.open(directory, flags)
        except FileNotFoundError:
            parent, name = os.path.split(directory)
            parent_fd = _open_directory(parent, follow=True)
            try:
                try:
                    os.mkdir(name, DIRECTORY_MODE, dir_fd=parent_fd)
                    made = True
                except FileExistsError:
                    pass  # made meanwhile: checked below like any other
                fd = os.open(name, flags, dir_fd=parent_fd)
            finally:
                os.close(parent_fd)
    except OSError as exc:
        if (not follow and exc.errno in (errno.ENOTDIR, errno.ELOOP)
                and os.path.islink(directory)):
            raise _refused(directory, 'a symbolic link, not a directory')
        raise
    try:
        why = _unsafe(os.fstat(fd))
        if why:
            raise _refused(directory, why)
        if made:  # the umask may have taken bits off
            os.fchmod(fd, DIRECTORY_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unsafe(st: os.stat_result) -> Optional[str]:
    """Why another user could swap names in this directory, or None."""
    uid = os.geteuid()
    if st.st_uid not in (uid, 0):
        return ('a directory owned by uid %d, not by this user (uid %d) '
                'or root' % (st.st_uid, uid))
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return 'a directory every user can write to, and not sticky'
    return None
