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

"""The host CPU's identity as NCCL reads it: vendor, family, model.

NCCL sets its socket-to-socket (``SYS``) bandwidth by CPU
(``ncclTopoGetInterCpuBw``, NVIDIA/nccl v2.30.7 ``src/graph/topo.cc``
lines 60-83: Intel Broadwell 6, Skylake 10, Sapphire Rapids 22, Emerald
Rapids 40 GB/s, AMD 16), and tells those apart by CPUID's vendor string,
family and model (``xml.cc`` lines 504-558; ``topo.cc`` lines 744-751).
A guest with a named CPU model (``cpu_mode = custom``) reports that
model's CPUID, not the host's, so the description carries the host's and
the guest agent writes it into NCCL's topology file.
"""

import re

#: The first processor's block of ``/proc/cpuinfo`` is all we read.
CPUINFO_HEAD = 8192
#: CPUID family and model as Linux writes them: small decimal numbers.
_NUMBER = re.compile(r'[0-9]{1,4}\Z')
#: A CPUID vendor string: 12 printable characters.
_VENDOR = re.compile(r'[ -~]{1,12}\Z')


def parse(text: str) -> dict | None:
    """``{"vendor", "familyid", "modelid"}`` of an x86 ``/proc/cpuinfo``.

    NCCL's family is CPUID's base family plus the extended family shifted
    by 4, where Linux adds the two (``cpu family``: 6 or 25, not 0xf +
    ext): converted back here. None on other architectures, or where a
    field is missing or malformed.
    """
    fields: dict[str, str] = {}
    for line in text.split('\n\n')[0].splitlines():
        key, _, value = line.partition(':')
        fields.setdefault(key.strip(), value.strip())
    vendor = fields.get('vendor_id', '')
    family = fields.get('cpu family', '')
    model = fields.get('model', '')
    if not (_VENDOR.match(vendor) and _NUMBER.match(family)
            and _NUMBER.match(model)):
        return None
    family_id = int(family)
    if family_id >= 0xf:
        family_id = 0xf + ((family_id - 0xf) << 4)
    return {'vendor': vendor, 'familyid': family_id,
            'modelid': int(model)}


def read(path: str = '/proc/cpuinfo') -> dict | None:
    """:func:`parse` of the host's ``/proc/cpuinfo``; None if unreadable."""
    try:
        with open(path, encoding='ascii', errors='replace') as f:
            return parse(f.read(CPUINFO_HEAD))
    except OSError:
        return None
