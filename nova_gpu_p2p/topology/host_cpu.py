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
the guest agent writes it into NCCL's topology file. Read with the
agent's own reader of ``/proc/cpuinfo``, the one that would otherwise
describe the guest's CPU.
"""

from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import guest_sysfs


def read(proc_root: str = '/proc') -> dict | None:
    """``{"vendor", "familyid", "modelid"}`` of an x86 host; else None.

    None too where ``cpuinfo`` under ``proc_root`` cannot be read or does
    not say: the guest agent then writes the guest's own CPU.
    """
    try:
        attrs = dict(guest_sysfs.cpu_type(proc_root))
    except errors.Problem:
        return None
    if 'vendor' not in attrs:
        return None
    return {'vendor': attrs['vendor'], 'familyid': int(attrs['familyid']),
            'modelid': int(attrs['modelid'])}
