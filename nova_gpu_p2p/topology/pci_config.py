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

"""Reads the few PCI config space fields the topology needs.

Only the first 64 bytes of config space are readable without root; the
PCI Express capability (port type) and the ACS extended capability live
beyond that, which is why the sysfs backend reads config space through
privsep. Everything here is a pure function over bytes.
"""

import dataclasses
import struct

from nova_gpu_p2p.topology import model

_VENDOR_ID = 0x00
#: What Linux returns for every read of a device that does not answer
#: (gone, in reset, powered off): no vendor has this ID.
NO_ANSWER_VENDOR = 0xffff
_STATUS = 0x06
_STATUS_CAP_LIST = 1 << 4
_CAP_POINTER = 0x34
#: Capabilities live past the header; a pointer into it is corrupt.
_CAP_START = 0x40
_PCIE_CAP_ID = 0x10
_EXT_CAP_START = 0x100
_ACS_EXT_CAP_ID = 0x000d
STANDARD_SIZE = 0x100
EXTENDED_SIZE = 0x1000

_PORT_TYPES = {
    0x0: model.PortType.ENDPOINT,
    0x1: model.PortType.ENDPOINT,   # legacy endpoint
    0x4: model.PortType.ROOT_PORT,
    0x5: model.PortType.UPSTREAM,
    0x6: model.PortType.DOWNSTREAM,
    0x7: model.PortType.PCI_BRIDGE,
    0x8: model.PortType.PCI_BRIDGE,  # PCI to PCIe bridge
    0x9: model.PortType.ENDPOINT,   # root complex integrated endpoint
}


@dataclasses.dataclass(frozen=True)
class ConfigFacts:
    #: From the PCI Express capability; None without one or unread.
    port_type: model.PortType | None
    acs: model.Acs | None
    #: False where config space past the header could not be read.
    acs_known: bool = True


#: What a bridge whose config space could not be read tells.
UNREAD = ConfigFacts(port_type=None, acs=None, acs_known=False)


def _u16(data: bytes, offset: int) -> int:
    return struct.unpack_from('<H', data, offset)[0]


def _u32(data: bytes, offset: int) -> int:
    return struct.unpack_from('<I', data, offset)[0]


def port_type(data: bytes) -> model.PortType | None:
    """Walk the standard capability list for the PCIe capability."""
    if len(data) < STANDARD_SIZE or not _u16(data, _STATUS) & \
            _STATUS_CAP_LIST:
        return None
    pointer = data[_CAP_POINTER] & 0xfc
    seen = set()
    while (_CAP_START <= pointer and pointer not in seen
           and pointer + 4 <= STANDARD_SIZE):
        seen.add(pointer)
        if data[pointer] == _PCIE_CAP_ID:
            return _PORT_TYPES.get((_u16(data, pointer + 2) >> 4) & 0xf)
        pointer = data[pointer + 1] & 0xfc
    return None


def acs(data: bytes) -> model.Acs | None:
    """Walk the extended capability list for ACS."""
    if len(data) < EXTENDED_SIZE:
        return None
    offset = _EXT_CAP_START
    seen = set()
    while (_EXT_CAP_START <= offset and offset not in seen
           and offset + 8 <= EXTENDED_SIZE):
        seen.add(offset)
        header = _u32(data, offset)
        if header in (0, 0xffffffff):
            return None
        if header & 0xffff == _ACS_EXT_CAP_ID:
            return model.Acs(capability=_u16(data, offset + 4),
                             control=_u16(data, offset + 6))
        offset = (header >> 20) & 0xffc
    return None


def answered(data: bytes) -> bool:
    """Whether the device answered the read (its vendor ID is not 0xffff).

    A device that does not answer reads as all ones: without this test
    its capability lists end at once and it would read as "no ACS".
    """
    return (len(data) >= 2
            and _u16(data, _VENDOR_ID) != NO_ANSWER_VENDOR)


def parse(data: bytes) -> ConfigFacts:
    """The facts in a config space read, as much of it as was read.

    ACS lives in extended config space: a read that stops at the 256
    standard bytes (no extended config space access, as without ECAM)
    leaves it unknown, which fails closed, not "no ACS"; so does a read
    the device did not answer (:func:`answered`).
    """
    if not answered(data):
        return UNREAD
    return ConfigFacts(port_type=port_type(data), acs=acs(data),
                       acs_known=len(data) >= EXTENDED_SIZE)
