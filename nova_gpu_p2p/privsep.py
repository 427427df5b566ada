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

"""The one privileged read nova-gpu-p2p needs, through oslo.privsep.

Reading PCI config space beyond its first 64 bytes (where the PCI Express
and ACS capabilities live) needs CAP_SYS_ADMIN. :func:`read_pci_configs`
runs in the sys_admin privsep daemon nova-compute already starts, so no
new rootwrap filter is needed; the daemon imports this module by name.

It reads as little as the job needs: the ``config`` file of PCI functions
named by address (``dddd:bb:ss.f``, lower-case hex), at most
:data:`MAX_CONFIG_SIZE` bytes each, of the host's own ``/sys``. The caller
names no path. The checks live in :func:`read_config`, a plain function of
the sysfs root so that tests run it on a generated tree; the entrypoint
hard-wires :data:`SYS`. Importing this module does not import oslo.privsep
(nor eventlet, which it brings): only a call through the daemon needs it,
not the same read as root nor ``nova-gpu-p2p``'s other commands, so
the entrypoint is made on first use (:func:`__getattr__`).
"""

import os
import re
import stat

from nova_gpu_p2p import pci_address

#: The only sysfs the privileged side ever reads.
SYS = '/sys'
#: PCI Express extended config space; nothing in sysfs' config is larger.
MAX_CONFIG_SIZE = 4096
#: Addresses per privileged call: far more bridges than a host has, and a
#: bound on the reply (4 MiB). Callers with more send several batches.
MAX_BATCH = 1024

_ROOT_COMPLEX = re.compile(r'pci[0-9a-f]{4,}:[0-9a-f]{2}')
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# O_NONBLOCK: a FIFO named config must not hang the open; fstat refuses it.
_OPEN_CONFIG = (os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
                | os.O_NONBLOCK)


def _check_size(size: object) -> int:
    if type(size) is not int or not 1 <= size <= MAX_CONFIG_SIZE:
        raise ValueError('config space size must be an int from 1 to %d, '
                         'not %r' % (MAX_CONFIG_SIZE, size))
    return size


def _check_device_dir(sys_root: str, dir_fd: int, address: str) -> None:
    """The directory opened is a PCI function's, under devices/pci*."""
    # What the kernel says the descriptor is, not what the link says now.
    opened = os.readlink('/proc/self/fd/%d' % dir_fd)
    prefix = os.path.join(os.path.realpath(sys_root), 'devices') + os.sep
    parts = (opened[len(prefix):].split(os.sep)
             if opened.startswith(prefix) else [])
    if (len(parts) < 2 or not _ROOT_COMPLEX.fullmatch(parts[0])
            or parts[-1] != address):
        raise ValueError('%s does not lead to %s/devices/pci*/.../%s'
                         % (address, sys_root, address))


def _read_up_to(fd: int, size: int) -> bytes:
    chunks = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b''.join(chunks)


def read_config(sys_root: str, address: str, size: int) -> bytes:
    """Up to ``size`` bytes of ``bus/pci/devices/<address>/config``.

    The device link is followed once, by opening the directory it names;
    what is checked is the directory actually opened (its path as the
    kernel resolves the descriptor), which must be
    ``<sys_root>/devices/pci*/.../<address>``. ``config`` is then opened
    relative to that descriptor, without following a symlink, and must be
    a regular file. A link swapped after the open changes nothing: the
    descriptor stays on the device that was checked.

    :raises FileNotFoundError: no such device (any more).
    :raises ValueError: a bad address or size, or a device that is not
        where PCI functions are.
    :raises OSError: anything else the kernel refuses.
    """
    if not pci_address.is_sysfs(address):
        raise ValueError('not a PCI address (dddd:bb:ss.f, lower case)')
    _check_size(size)
    link = os.path.join(sys_root, 'bus', 'pci', 'devices', address)
    dir_fd = os.open(link, _OPEN_DIR)
    try:
        _check_device_dir(sys_root, dir_fd, address)
        fd = os.open('config', _OPEN_CONFIG, dir_fd=dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError('%s: config is not a regular file'
                                 % address)
            return _read_up_to(fd, size)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def read_configs(sys_root: str, addresses: list[str],
                 size: int) -> dict[str, bytes | str | None]:
    """:func:`read_config` for each address, in one call.

    Each address maps to its bytes, to None where there is no such device
    (unplugged during a scan), or to why it was refused. A batch that is
    not a list of strings, is longer than :data:`MAX_BATCH`, or asks for
    a bad size is refused whole.
    """
    if (not isinstance(addresses, (list, tuple))
            or not all(isinstance(a, str) for a in addresses)):
        raise ValueError('addresses must be a list of strings')
    if len(addresses) > MAX_BATCH:
        raise ValueError('at most %d addresses per call, not %d'
                         % (MAX_BATCH, len(addresses)))
    _check_size(size)
    result: dict[str, bytes | str | None] = {}
    for address in addresses:
        try:
            result[address] = read_config(sys_root, address, size)
        except FileNotFoundError:
            result[address] = None
        except (OSError, ValueError) as exc:
            result[address] = str(exc)
    return result


def __getattr__(name: str):
    """``read_pci_configs``, the privsep entrypoint, made on first use.

    oslo.privsep's daemon finds it the same way: it imports this module
    and looks the name up with getattr.
    """
    if name != 'read_pci_configs':
        raise AttributeError('module %r has no attribute %r'
                             % (__name__, name))
    from nova import privsep

    def read_pci_configs(addresses: list[str],
                         size: int) -> dict[str, bytes | str | None]:
        """The privileged side: :func:`read_configs` of the host's /sys."""
        return read_configs(SYS, addresses, size)

    entrypoint = privsep.sys_admin_pctxt.entrypoint(read_pci_configs)
    globals()[name] = entrypoint
    return entrypoint
