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

"""The host's PCI ID database: what ``lspci`` calls each NVIDIA device.

The plain-text ``pci.ids`` of the PCI ID Repository, as pciutils reads it
(Debian and Ubuntu: package ``pci.ids``; RHEL family: ``hwdata``), rather
than udev's hwdb, which is compiled from the same file, often older, and
only readable through libudev. Only the NVIDIA vendor section is kept:
the file is large, so it is read once per discovery and no further than
that section.
"""

from collections.abc import Iterable
import dataclasses
import os
import re

from nova_gpu_p2p_guest import input_file

from nova_gpu_p2p.topology import model

#: Where distributions install it, in the order pciutils' builds look.
SEARCH_PATHS = ('/usr/share/misc/pci.ids', '/usr/share/hwdata/pci.ids',
                '/usr/share/pci.ids')
#: The real file is about 1.4 MiB; anything far larger is not it.
MAX_SIZE = input_file.MAX_DOCUMENT

_VENDOR = re.compile(r'^([0-9a-fA-F]{4})\s+(.*\S)')
_DEVICE = re.compile(r'^\t([0-9a-fA-F]{4})\s+(.*\S)')


@dataclasses.dataclass(frozen=True)
class Database:
    """The NVIDIA device names of one ``pci.ids``, or why there are none."""

    #: The file read; None where none was found.
    path: str | None
    #: NVIDIA device ID -> name, as ``lspci`` prints it.
    names: dict[int, str] = dataclasses.field(default_factory=dict)
    #: Why no names could be read; None when the file was read.
    error: str | None = None


def parse(lines: Iterable[str],
          vendor: int = model.NVIDIA_VENDOR_ID) -> dict[int, str]:
    """Device ID -> name in ``vendor``'s section; stops after it."""
    names: dict[int, str] = {}
    inside = False
    for line in lines:
        if not line.strip() or line.startswith('#'):
            continue
        vendor_line = _VENDOR.match(line)
        if vendor_line:
            if inside:
                break
            inside = int(vendor_line.group(1), 16) == vendor
            continue
        device_line = _DEVICE.match(line) if inside else None
        if device_line:
            names[int(device_line.group(1), 16)] = device_line.group(2)
    return names


def read(path: str | None = None) -> Database:
    """``path``, else the first of :data:`SEARCH_PATHS` that exists."""
    if path is None:
        path = next((p for p in SEARCH_PATHS if os.path.exists(p)), None)
        if path is None:
            return Database(path=None, error='no PCI ID database found '
                            '(looked for %s)' % ', '.join(SEARCH_PATHS))
    try:
        text = input_file.read_text(path, MAX_SIZE, errors='replace')
        return Database(path=path, names=parse(text.splitlines()))
    except OSError as exc:
        return Database(path=path, error='cannot read the PCI ID database '
                        '%s: %s' % (path, exc.strerror or exc))
