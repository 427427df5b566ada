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

"""Reading a file the product is given, so that no file can hang it.

Every file read from configuration, a capture or sysfs follows one rule:
a regular file only, opened without blocking so that a FIFO in its place
is refused rather than waited on (and a device such as ``/dev/zero``
refused rather than read forever); and at most a bound of bytes, counted
as read, since sysfs attributes report ``st_size`` 4096 or 0 whatever
they hold.
"""

import errno
import os
import stat

#: Captures, static topology files, Fabric Manager's config, pci.ids
#: (about 1.4 MiB): far more than any real one.
MAX_DOCUMENT = 16 * 1024 * 1024
#: A sysfs attribute: one page, 64 KiB on the largest pages Linux uses.
MAX_ATTRIBUTE = 64 * 1024


def read_head(path: str, size: int) -> bytes:
    """At most ``size`` bytes from the start of the regular file ``path``.

    :raises OSError: it cannot be opened, or is not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, 'rb') as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, 'not a regular file', path)
        return handle.read(size)


def read_bytes(path: str, limit: int = MAX_DOCUMENT) -> bytes:
    """The whole regular file; OSError where it holds over ``limit``."""
    data = read_head(path, limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, 'more than %d bytes' % limit, path)
    return data


def read_text(path: str, limit: int = MAX_DOCUMENT,
              errors: str = 'strict') -> str:
    """:func:`read_bytes` as UTF-8; UnicodeDecodeError where it is not."""
    return read_bytes(path, limit).decode('utf-8', errors)
