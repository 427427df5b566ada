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
subsystem line of the Quadro GV100's device ID); the file is read once
per discovery.

Every line is parsed as pciutils 3.9 parses it (``lspci`` is the
reference): comments and blank lines, indented or not, are skipped
wherever they are, so neither ends the NVIDIA section nor hides what
follows. A file pciutils refuses, for a line too long, a line it cannot
parse or an ID named twice anywhere ("Duplicate entry" at its line;
``lspci`` then shows numbers only), is refused whole: which of two names
is right cannot be told, and a name decides whether a GPU may have a
clique.
"""

from collections.abc import Iterator
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

_VERSION = re.compile(rb'^#[ \t]*Version:[ \t]*(\S+)', re.MULTILINE)
#: An entry's IDs, as pciutils' id_hex and id_white_p take them, then
#: its name: white space, then something.
_ID4 = re.compile(rb'([0-9a-fA-F]{4})[ \t][ \t]*([^ \t].*)', re.DOTALL)
_ID2 = re.compile(rb'([0-9a-fA-F]{2})[ \t][ \t]*([^ \t].*)', re.DOTALL)
_SUBSYSTEM = re.compile(rb'([0-9a-fA-F]{4})[ \t]([0-9a-fA-F]{4})[ \t]'
                        rb'[ \t]*([^ \t].*)', re.DOTALL)
_GENERIC = re.compile(rb'([0-9a-fA-F]{4})')
#: pciutils' line buffer: a line must fit it with its newline and NUL.
MAX_LINE = 1024
_WHITE = (b' ', b'\t')

#: (device, subsystem vendor, subsystem device).
SubsystemKey = tuple[int, int, int]


class Unreadable(ValueError):
    """pciutils refuses the file whole (``lspci`` then shows numbers)."""


class DuplicateEntry(Unreadable):
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


class _Parser:
    """pciutils 3.9's ``id_parse_list`` (lib/names-parse.c), line by line.

    Every line of the file is read as pciutils reads it, whatever vendor
    it is under: a line too long, a line it cannot parse, or an ID named
    twice anywhere refuses the whole file, as pciutils refuses it. A
    comment or blank line (any white space first) is skipped wherever it
    is, so it neither ends a section nor hides what follows.
    """

    def __init__(self, vendor: int) -> None:
        self.vendor = vendor
        self.found = Names()
        self.seen: set[tuple[int, ...]] = set()
        self.category: str | None = None
        self.ids = [0, 0, 0, 0]

    def line(self, number: int, text: bytes) -> None:
        nest = len(text) - len(text.lstrip(b'\t'))
        category = self.category
        if not nest:
            self._top(number, text)
        elif category == 'unknown':
            return
        elif nest == 1 and category in ('vendor', 'device', 'subsystem'):
            found = self._match(_ID4, number, text, nest)
            self.ids[1:] = [int(found[1], 16), 0, 0]
            self._entry(number, 'device', found[2])
        elif nest == 1 and category == 'generic':
            found = self._match(_ID4, number, text, nest)
            self.ids[1] = int(found[1], 16)
            self._entry(number, 'generic', found[2])
        elif nest == 1 and category in ('class', 'subclass', 'prog-if'):
            found = self._match(_ID2, number, text, nest)
            self.ids[1:] = [int(found[1], 16), 0, 0]
            self._entry(number, 'subclass', found[2])
        elif nest == 2 and category in ('device', 'subsystem'):
            found = self._match(_SUBSYSTEM, number, text, nest)
            self.ids[2:] = [int(found[1], 16), int(found[2], 16)]
            self._entry(number, 'subsystem', found[3])
        elif nest == 2 and category in ('subclass', 'prog-if'):
            found = self._match(_ID2, number, text, nest)
            self.ids[2] = int(found[1], 16)
            self._entry(number, 'prog-if', found[2])
        else:
            raise Unreadable('Parse error at line %d' % number)

    def _top(self, number: int, text: bytes) -> None:
        if text[:2] == b'C ':
            found = self._match(_ID2, number, text, 2)
            self.ids = [int(found[1], 16), 0, 0, 0]
            self._entry(number, 'class', found[2])
        elif text[:2] == b'S ':
            found = self._match(_GENERIC, number, text, 2)
            vendor = int(found[1], 16)
            if ('vendor', vendor, 0, 0, 0) not in self.seen:
                raise Unreadable('Vendor does not exist at line %d' % number)
            self.ids, self.category = [vendor, 0, 0, 0], 'generic'
        elif text[:1].isupper() and text[1:2] == b' ':
            self.category = 'unknown'
        else:
            found = self._match(_ID4, number, text, 0)
            self.ids = [int(found[1], 16), 0, 0, 0]
            self._entry(number, 'vendor', found[2])

    @staticmethod
    def _match(pattern: re.Pattern, number: int, text: bytes,
               start: int) -> re.Match:
        """``pattern`` at ``start`` to the line's end, or a parse error."""
        found = pattern.fullmatch(text, start)
        if found is None:
            raise Unreadable('Parse error at line %d' % number)
        return found

    def _entry(self, number: int, category: str, name: bytes) -> None:
        """Name the ID the line gives; a duplicate refuses the file."""
        self.category = category
        key = (category, *self.ids)
        if key in self.seen:
            raise DuplicateEntry('Duplicate entry at line %d (%s named '
                                 'twice)' % (number, _what(key)))
        self.seen.add(key)
        if self.ids[0] == self.vendor and category == 'device':
            self.found.devices[self.ids[1]] = name.decode('utf-8', 'replace')
        elif self.ids[0] == self.vendor and category == 'subsystem':
            self.found.subsystems[tuple(self.ids[1:])] = name.decode(
                'utf-8', 'replace')


def _what(key: tuple) -> str:
    category, first, second, third, fourth = key
    if category == 'subsystem':
        return 'subsystem %04x:%04x of %04x:%04x' % (
            third, fourth, first, second)
    if category in ('class', 'subclass', 'prog-if'):
        return '%s %s' % (category, ''.join(
            '%02x' % n for n in (first, second, third)[
                :('class', 'subclass', 'prog-if').index(category) + 1]))
    if category == 'vendor':
        return 'vendor %04x' % first
    return '%s %04x:%04x' % (category, first, second)


def _lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(number, text) of each line as pciutils' fgets loop sees it.

    Cut at the first CR (or NUL, on the last line), one trailing space
    or tab removed; comments and blank lines left out. A line that does
    not fit :data:`MAX_LINE` is refused as pciutils refuses it.
    """
    lines = data.split(b'\n')
    # Where the file ends without a newline, fgets meets its end.
    at_end = len(lines) if lines[-1] else 0
    if not lines[-1]:
        lines.pop()
    # The common file: no line to cut or refuse.
    plain = (b'\r' not in data and b'\0' not in data
             and max(map(len, lines), default=0) <= MAX_LINE - 2)
    for number, text in enumerate(lines, 1):
        if not plain:
            cut = min((i for i in (text.find(b'\r'), text.find(b'\0'))
                       if i >= 0), default=len(text))
            if (cut > MAX_LINE - 2
                    or text[cut:cut + 1] == b'\0' and number != at_end):
                raise Unreadable('Line too long at line %d' % number)
            text = text[:cut]
        if text[-1:] in _WHITE:
            text = text[:-1]
        first = text.lstrip(b' \t')[:1]
        if first and first != b'#':
            yield number, text


def parse(data: bytes, vendor: int = model.NVIDIA_VENDOR_ID) -> Names:
    """``vendor``'s device and subsystem names, and the file's version.

    Raises :class:`Unreadable` (:class:`DuplicateEntry` for an ID named
    twice) naming the line where pciutils stops.
    """
    version = _VERSION.search(data)
    parser = _Parser(vendor)
    for number, text in _lines(data):
        parser.line(number, text)
    return Names(devices=parser.found.devices,
                 subsystems=parser.found.subsystems,
                 version=version.group(1).decode('ascii', 'replace')
                 if version else None)


def read(path: str | None = None) -> Database:
    """``path``, else the first of :data:`SEARCH_PATHS` that exists."""
    if path is None:
        path = next((p for p in SEARCH_PATHS if os.path.exists(p)), None)
        if path is None:
            return Database(path=None, error='no PCI ID database found '
                            '(looked for %s)' % ', '.join(SEARCH_PATHS))
    try:
        data = input_file.read_bytes(path, MAX_SIZE)
    except OSError as exc:
        return Database(path=path, error='cannot read the PCI ID database '
                        '%s: %s' % (path, exc.strerror or exc))
    try:
        names = parse(data)
    except Unreadable as exc:
        return Database(path=path, error='the PCI ID database %s is refused '
                        'as pciutils refuses it: %s' % (path, exc))
    return Database(path=path, names=names.devices,
                    subsystems=names.subsystems, version=names.version)
