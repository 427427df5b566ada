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

"""The guest's sysfs and procfs: the described devices and the CPUs.

The guest's bus numbers are firmware's, not the host's: a device is found
below the expander bus and root port the description names, and its IDs
must be the ones described. The CPUs' type and each NUMA node's CPU map
are what NCCL's ``<cpu>`` element carries (:mod:`.nccl`).
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

from nova_gpu_p2p_guest import description
from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import input_file
from nova_gpu_p2p_guest import nccl

_BDF = re.compile(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z')
_CPUMAP = re.compile(r'[0-9a-f]+(,[0-9a-f]+)*\Z')
#: Enough of /proc/cpuinfo for its first processor, which is all it reads.
CPUINFO_HEAD = 64 * 1024


def _read(path: str, size: Optional[int] = None) -> Optional[str]:
    """The stripped text of a sysfs attribute (``size``: of its head).

    None where it cannot be read, as where the guest has no such
    attribute; a file that breaks :mod:`.input_file`'s rule (a FIFO, a
    device, over a page) stops the agent, naming it.
    """
    try:
        if size is None:
            data = input_file.read_bytes(path, input_file.MAX_ATTRIBUTE)
        else:
            data = input_file.read_head(path, size)
    except input_file.Refused as exc:
        raise errors.Problem('cannot read %s: %s' % (path, exc.strerror))
    except OSError:
        return None
    return data.decode('ascii', 'replace').strip()


class Found:
    """A described device as the guest sees it."""

    def __init__(self, index: int, device: dict, address: str,
                 ids: Dict[str, str]):
        self.index = index
        self.device = device
        self.address = address
        self.ids = ids


def _name(index: int, device: dict) -> str:
    return 'device %d (%s on expander bus %d slot %d)' % (
        index, device['role'], device['bus_nr'], device['slot'])


def find_device(sysfs_root: str, index: int, device: dict) -> Found:
    """The function below the device's root port, checked.

    The expander bus with busNr B is the guest's host bridge pci0000:BB and
    the device's root port is 0000:BB:SS.0 below it. The device is
    function 0 of the bus below that port: listed, not computed, whatever
    numbers firmware gave the buses.
    """
    bus, slot = device['bus_nr'], device['slot']
    name = _name(index, device)
    port = os.path.join(sysfs_root, 'devices', 'pci0000:%02x' % bus,
                        '0000:%02x:%02x.0' % (bus, slot))
    try:
        below = sorted(n for n in os.listdir(port)
                       if _BDF.match(n) and n.endswith(':00.0'))
    except OSError:
        raise errors.Problem('%s not found: the guest has no root port %s'
                             % (name, port))
    if not below:
        raise errors.Problem('%s not found: nothing below root port %s'
                             % (name, port))
    address = below[0]
    directory = os.path.join(port, address)
    ids = {}
    for key in ('vendor', 'device', 'subsystem_vendor', 'subsystem_device',
                'class'):
        value = _read(os.path.join(directory, key))
        if value is not None and description.HEX.match(value):
            ids[key] = value.lower()
    for key in ('vendor', 'class'):
        if key not in ids or int(ids[key], 16) != int(device[key], 16):
            raise errors.Problem(
                '%s: %s has %s %s, the description says %s'
                % (name, address, key, ids.get(key, 'unknown'), device[key]))
    return Found(index, device, address, ids)


#: A CPUID family or model as Linux writes it: ASCII decimal, and small
#: (family 0xf + 0xff, model 0xff at most), so no digit in another script
#: and no number past Python's digit limit reaches NCCL.
_CPUID_NUMBER = re.compile(r'[0-9]{1,4}\Z')


def _cpuid_number(text: str) -> Optional[int]:
    return int(text) if _CPUID_NUMBER.match(text) else None


def cpu_type(proc_root: str) -> List[Tuple[str, str]]:
    """``arch``, ``vendor``, ``familyid``, ``modelid`` as NCCL writes them.

    From the first processor of ``/proc/cpuinfo``; nothing where it cannot
    tell (NCCL then asks CPUID itself). NCCL computes the family as
    CPUID's base family plus the extended family shifted by 4, where Linux
    adds the two: the same number for the families NCCL looks at (Intel 6,
    Zhaoxin 7), converted here all the same.
    """
    text = _read(os.path.join(proc_root, 'cpuinfo'), CPUINFO_HEAD) or ''
    fields = {}
    for line in text.split('\n\n')[0].splitlines():
        key, _, value = line.partition(':')
        fields.setdefault(key.strip(), value.strip())
    vendor = fields.get('vendor_id')
    if vendor is not None:
        if vendor == 'Shanghai':
            vendor = '  Shanghai  '
        family = _cpuid_number(fields.get('cpu family', ''))
        model = _cpuid_number(fields.get('model', ''))
        if family is None or model is None:
            return [('arch', 'x86_64')]
        if family >= 0xf:
            family = 0xf + ((family - 0xf) << 4)
        if not nccl.SAFE_VALUE.match(vendor):
            return [('arch', 'x86_64')]
        return [('arch', 'x86_64'), ('vendor', vendor),
                ('familyid', str(family)), ('modelid', str(model))]
    if 'CPU implementer' in fields:
        return [('arch', 'arm64')]
    if fields.get('cpu', '').upper().startswith('POWER'):
        return [('arch', 'ppc64')]
    return []


def cpu_affinity(sysfs_root: str, node: int) -> Optional[str]:
    """Guest NUMA ``node``'s CPU map, where NCCL can take it."""
    value = _read(os.path.join(sysfs_root, 'devices', 'system', 'node',
                               'node%d' % node, 'cpumap'))
    if value and _CPUMAP.match(value) and len(value) <= nccl.MAX_VALUE:
        return value
    return None
