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

"""The one rule for every file the product reads, so that none can hang it.

Every file read from configuration, a capture, sysfs, procfs or fw_cfg,
by the driver or by the agent, follows it: a regular file only, opened
without blocking so that a FIFO in its place is refused rather than waited
on (and a device such as ``/dev/zero`` refused rather than read forever);
and at most a bound of bytes, counted as read, since sysfs attributes
report ``st_size`` 4096 or 0 whatever they hold. It lives in the agent's
distribution, which must stand alone, and the driver's requires it, like
:mod:`.atomic_file`.
"""

from __future__ import annotations

import errno
import os
import stat

#: Captures, static topology files, Fabric Manager's config, pci.ids
#: (about 1.4 MiB): far more than any real one.
MAX_DOCUMENT = 16 * 1024 * 1024
#: A sysfs attribute: one page, 64 KiB on the largest pages Linux uses.
MAX_ATTRIBUTE = 64 * 1024


class Refused(OSError):
    """The file breaks the rule: not a regular file, or over its bound."""


def read_head(path: str, size: int) -> bytes:
    """At most ``size`` bytes from the start of the regular file ``path``.

    :raises Refused: it is not a regular file.
    :raises OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, 'rb') as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(errno.EINVAL, 'not a regular file', path)
        return handle.read(size)


def read_bytes(path: str, limit: int = MAX_DOCUMENT) -> bytes:
    """The whole regular file; :class:`Refused` where it holds more."""
    data = read_head(path, limit + 1)
    if len(data) > limit:
        raise Refused(errno.EFBIG, 'more than %d bytes' % limit, path)
    return data


def read_text(path: str, limit: int = MAX_DOCUMENT,
              errors: str = 'strict') -> str:
    """:func:`read_bytes` as UTF-8; UnicodeDecodeError where it is not."""
    return read_bytes(path, limit).decode('utf-8', errors)
