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
only readable through libudev. Only the NVIDIA vendor section is kept,
device and subsystem names (a TITAN V CEO Edition is named only on a
subsystem line of the Quadro GV100's device ID): the file is large, so it
is read once per discovery and parsed no further than that section.

A file that names one device or subsystem twice in that section, or has
a second NVIDIA section, is refused whole, as pciutils refuses it
("Duplicate entry" at its line; ``lspci`` then shows numbers only): which
of the two names is right cannot be told, and a name decides whether a
GPU may have a clique.
"""

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

_DEVICE = re.compile(r'^\t([0-9a-fA-F]{4})\s+(.*\S)')
_SUBSYSTEM = re.compile(r'^\t\t([0-9a-fA-F]{4})\s+([0-9a-fA-F]{4})\s+(.*\S)')
_VERSION = re.compile(r'^#\s*Version:\s*(\S+)', re.MULTILINE)
#: A line that is no device, subsystem or comment: the next section.
_SECTION_END = re.compile(r'^[^\t#\n]', re.MULTILINE)

#: (device, subsystem vendor, subsystem device).
SubsystemKey = tuple[int, int, int]


class DuplicateEntry(ValueError):
    """The file names one ID twice; pciutils refuses it."""


@dataclasses.dataclass(frozen=True)
class Names:
    """One vendor's device and subsystem names, and the file's version."""

    #: Device ID -> name, as ``lspci`` prints it.
    devices: dict[int, str] = dataclasses.field(default_factory=dict)
    #: (device, subsystem vendor, subsystem device) -> name.
    subsystems: dict[SubsystemKey, str] = dataclasses.field(
        default_factory=dict)
    #: The ``Version:`` of the file's header, where it has one.
    version: str | None = None


@dataclasses.dataclass(frozen=True)
class Database:
    """The NVIDIA device names of one ``pci.ids``, or why there are none."""

    #: The file read; None where none was found.
    path: str | None
    #: NVIDIA device ID -> name, as ``lspci`` prints it.
    names: dict[int, str] = dataclasses.field(default_factory=dict)
    #: (device, subsystem vendor, subsystem device) -> name.
    subsystems: dict[SubsystemKey, str] = dataclasses.field(
        default_factory=dict)
    #: Why no names could be read; None when the file was read.
    error: str | None = None
    #: The file's ``Version:`` (``2023.04.10``), where it says.
    version: str | None = None

    def subsystems_of(self, device: int) -> dict[tuple[int, int], str]:
        """The named subsystems of one device, by (vendor, device)."""
        return {(vendor, sub): name for (dev, vendor, sub), name
                in self.subsystems.items() if dev == device}


def _duplicate(number: int, what: str) -> DuplicateEntry:
    return DuplicateEntry('Duplicate entry at line %d (%s named twice)'
                          % (number, what))


def _vendor_line(vendor: int) -> re.Pattern:
    return re.compile(r'^%04x\s' % vendor, re.MULTILINE | re.IGNORECASE)


def _line_number(text: str, offset: int) -> int:
    return text.count('\n', 0, offset) + 1


def parse(text: str, vendor: int = model.NVIDIA_VENDOR_ID) -> Names:
    """``vendor``'s device and subsystem names.

    Only that vendor's section is split into lines; the rest of the file
    is searched, not parsed, for a second section. Raises
    :class:`DuplicateEntry` naming the line where an ID of that section
    comes a second time, or a second section begins.
    """
    version = _VERSION.search(text)
    found = Names(version=version.group(1) if version else None)
    section = _vendor_line(vendor).search(text)
    if section is None:
        return found
    end = _SECTION_END.search(text, section.end())
    end_offset = end.start() if end else len(text)
    again = _vendor_line(vendor).search(text, end_offset)
    if again is not None:
        raise _duplicate(_line_number(text, again.start()),
                         'vendor %04x' % vendor)
    first = _line_number(text, section.start())
    device = None
    lines = text[section.start():end_offset].splitlines()
    for number, line in enumerate(lines[1:], first + 1):
        device_line = _DEVICE.match(line)
        if device_line:
            device = int(device_line.group(1), 16)
            if device in found.devices:
                raise _duplicate(number, 'device %04x:%04x'
                                 % (vendor, device))
            found.devices[device] = device_line.group(2)
            continue
        subsystem_line = _SUBSYSTEM.match(line)
        if subsystem_line and device is not None:
            key = (device, int(subsystem_line.group(1), 16),
                   int(subsystem_line.group(2), 16))
            if key in found.subsystems:
                raise _duplicate(number, 'subsystem %04x:%04x of %04x:%04x'
                                 % (key[1], key[2], vendor, device))
            found.subsystems[key] = subsystem_line.group(3)
    return found


def read(path: str | None = None) -> Database:
    """``path``, else the first of :data:`SEARCH_PATHS` that exists."""
    if path is None:
        path = next((p for p in SEARCH_PATHS if os.path.exists(p)), None)
        if path is None:
            return Database(path=None, error='no PCI ID database found '
                            '(looked for %s)' % ', '.join(SEARCH_PATHS))
    try:
        text = input_file.read_text(path, MAX_SIZE, errors='replace')
    except OSError as exc:
        return Database(path=path, error='cannot read the PCI ID database '
                        '%s: %s' % (path, exc.strerror or exc))
    try:
        names = parse(text)
    except DuplicateEntry as exc:
        return Database(path=path, error='the PCI ID database %s is refused '
                        'as pciutils refuses it: %s' % (path, exc))
    return Database(path=path, names=names.devices,
                    subsystems=names.subsystems, version=names.version)
