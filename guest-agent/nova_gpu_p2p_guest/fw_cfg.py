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

"""Reading the topology entry QEMU fw_cfg gives the guest.

The driver names the entry :data:`ENTRY_NAME`; Linux shows it under
``/sys/firmware/qemu_fw_cfg/by_name`` once the ``qemu_fw_cfg`` module is
loaded. An instance without GPU P2P topology has no entry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Callable, Optional

from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import input_file

ENTRY_NAME = 'opt/org.openstack.nova-gpu-p2p/topology'
#: The most the driver writes into the entry (its
#: ``topology_description.MAX_ENTRY_SIZE``): a longer entry is refused.
MAX_ENTRY_SIZE = 32 * 1024


def fw_cfg_dir(sysfs_root: str) -> str:
    return os.path.join(sysfs_root, 'firmware', 'qemu_fw_cfg')


def entry_path(sysfs_root: str) -> str:
    return os.path.join(fw_cfg_dir(sysfs_root), 'by_name',
                        *ENTRY_NAME.split('/'), 'raw')


def load_module(directory: str) -> None:
    """``modprobe qemu_fw_cfg``, for a kernel that has it as a module.

    Without a QEMU fw_cfg device the module loads and the directory stays
    absent: that guest has no entry. Where modprobe fails, nobody can tell.
    """
    search = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin',
                              '/sbin'])
    modprobe = shutil.which('modprobe', path=search)
    if modprobe is None:
        reason = 'modprobe not found'
    else:
        try:
            result = subprocess.run(
                [modprobe, 'qemu_fw_cfg'], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            reason = str(exc)
        else:
            if result.returncode == 0:
                for _ in range(20):
                    if os.path.isdir(directory):
                        break
                    time.sleep(0.05)
                return
            lines = result.stderr.strip().splitlines()
            reason = (lines[-1] if lines
                      else 'exit status %d' % result.returncode)
    raise errors.Problem(
        'cannot read fw_cfg: %s is absent and "modprobe qemu_fw_cfg" '
        'failed (%s); load the qemu_fw_cfg kernel module '
        '(CONFIG_FW_CFG_SYSFS) or give --fw-cfg FILE' % (directory, reason))


def read_entry(sysfs_root: str, fw_cfg: Optional[str],
               load: Callable[[str], None] = load_module) -> Optional[bytes]:
    """The entry's bytes, or None where the instance has none.

    A regular file of at most :data:`MAX_ENTRY_SIZE` bytes: a FIFO or a
    device given as ``--fw-cfg`` (or found in its place) is refused, not
    waited on or read forever.
    """
    if fw_cfg is not None:
        path = fw_cfg
    else:
        directory = fw_cfg_dir(sysfs_root)
        if (not os.path.isdir(directory)
                and os.path.abspath(sysfs_root) == '/sys'):
            load(directory)
        path = entry_path(sysfs_root)
    try:
        return input_file.read_bytes(path, MAX_ENTRY_SIZE)
    except (FileNotFoundError, NotADirectoryError):
        if fw_cfg is not None:
            raise errors.Problem('cannot read %s: no such file' % fw_cfg)
        return None
    except OSError as exc:
        raise errors.Problem('cannot read %s: %s'
                             % (path, exc.strerror or exc))
