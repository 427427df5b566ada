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

"""Checking the topology description the driver wrote.

Format version 1 (``doc/source/guest-topology.rst``): base64 of a JSON
object of ``switches`` (ID -> link), ``devices`` (expander bus, slot,
role, IDs, NUMA node, clique, the switches above it, its link) and
``pairs`` (two device indexes and their host link class), and optionally
``cpu``: the host CPU's ``vendor``, ``familyid`` and ``modelid`` as NCCL
reads them (an older driver sends none). Whatever the
agent later reads from a description has been checked here, so a bad
entry is one line naming the bad field, not a traceback.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import nccl

FORMAT_VERSION = 1
ROLES = ('gpu', 'nic', 'other')
HOST_CLASSES = ('NV', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS')
#: A PCI ID or class as sysfs and the description write it.
HEX = re.compile(r'0x[0-9a-fA-F]{1,8}\Z')


def _is_int(value, low: int, high: int) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and low <= value <= high)


def _require(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise errors.Problem('bad topology description: %s: %s'
                             % (where, what))


def _check_link(link, where: str) -> None:
    _require(isinstance(link, dict), where, 'not an object')
    speed, width = link.get('link_speed'), link.get('link_width')
    _require(speed is None or (isinstance(speed, str)
                               and nccl.SAFE_VALUE.match(speed)
                               and len(speed) <= 64),
             where, '"link_speed" must be null or Linux max_link_speed text')
    _require(width is None or _is_int(width, 0, 64), where,
             '"link_width" must be null or an integer from 0 to 64')


def _check_device(device, index: int, switches: dict) -> None:
    where = 'device %d' % index
    _require(isinstance(device, dict), where, 'not an object')
    _require(_is_int(device.get('bus_nr'), 1, 255), where,
             '"bus_nr" must be an integer from 1 to 255')
    _require(_is_int(device.get('slot'), 0, 31), where,
             '"slot" must be an integer from 0 to 31')
    _require(device.get('role') in ROLES, where,
             '"role" must be one of %s' % ', '.join(ROLES))
    for key in ('vendor', 'class'):
        value = device.get(key)
        _require(isinstance(value, str) and HEX.match(value), where,
                 '"%s" must be a hex string such as 0x10de' % key)
    _require(_is_int(device.get('numa_node'), 0, 4095), where,
             '"numa_node" must be an integer from 0 to 4095')
    clique = device.get('clique')
    _require(clique is None or _is_int(clique, 0, 15), where,
             '"clique" must be null or an integer from 0 to 15')
    ids = device.get('switches')
    _require(isinstance(ids, list) and all(
        isinstance(s, str) and s in switches for s in ids), where,
        '"switches" must list IDs of "switches"')
    _require(len(set(ids)) == len(ids), where, '"switches" repeats an ID')
    _check_link(device, where)


def _check_cpu(cpu) -> None:
    where = 'cpu'
    _require(isinstance(cpu, dict), where, 'not an object')
    vendor = cpu.get('vendor')
    _require(isinstance(vendor, str) and 0 < len(vendor) <= 12
             and nccl.SAFE_VALUE.match(vendor) is not None, where,
             '"vendor" must be a CPUID vendor string such as GenuineIntel')
    for key in ('familyid', 'modelid'):
        _require(_is_int(cpu.get(key), 0, 4095), where,
                 '"%s" must be an integer from 0 to 4095' % key)


def check_description(description) -> dict:
    """``description`` itself, once it is a version 1 description."""
    _require(isinstance(description, dict), 'top level', 'not an object')
    version = description.get('version')
    _require(_is_int(version, 0, 1 << 31), 'top level',
             'no integer "version"')
    if version != FORMAT_VERSION:
        raise errors.Problem(
            'the topology description is version %d; this agent knows '
            'version %d only: upgrade nova-gpu-p2p in the image'
            % (version, FORMAT_VERSION))
    switches = description.get('switches')
    _require(isinstance(switches, dict), 'top level',
             '"switches" must be an object')
    for name, link in switches.items():
        _check_link(link, 'switch %s' % errors.quoted(name))
    devices = description.get('devices')
    _require(isinstance(devices, list) and devices, 'top level',
             '"devices" must be a list of at least one device')
    places = set()
    for index, device in enumerate(devices):
        _check_device(device, index, switches)
        place = (device['bus_nr'], device['slot'])
        _require(place not in places, 'device %d' % index,
                 'a second device on expander bus %d slot %d' % place)
        places.add(place)
    if description.get('cpu') is not None:
        _check_cpu(description['cpu'])
    pairs = description.get('pairs')
    _require(isinstance(pairs, list), 'top level',
             '"pairs" must be a list')
    for pair in pairs:
        _require(isinstance(pair, list) and len(pair) == 3
                 and _is_int(pair[0], 0, len(devices) - 1)
                 and _is_int(pair[1], 0, len(devices) - 1)
                 and pair[0] != pair[1] and pair[2] in HOST_CLASSES,
                 'pair %s' % errors.quoted(pair),
                 'must be [i, j, class] with two device indexes and one of '
                 + ', '.join(HOST_CLASSES))
    return description


def parse_entry(data: bytes) -> dict:
    """The checked description from the fw_cfg entry's bytes."""
    text = data.strip(b'\0 \t\r\n')
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise errors.Problem('bad topology description: not base64')
    try:
        description = json.loads(decoded.decode('utf-8'))
    except (UnicodeDecodeError, ValueError):
        raise errors.Problem('bad topology description: not JSON')
    except RecursionError:
        raise errors.Problem('bad topology description: JSON nested deeper '
                             'than Python reads')
    return check_description(description)
