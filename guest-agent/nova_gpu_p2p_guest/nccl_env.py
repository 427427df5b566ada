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

"""``--env``: the NCCL settings for this topology.

``NCCL_TOPO_FILE`` for the file, and, for an image that cannot use the
file, the ``NCCL_P2P_LEVEL`` / ``NCCL_NET_GDR_LEVEL`` that alone give the
host's P2P and GPUDirect RDMA decisions, where one does.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from nova_gpu_p2p_guest import nccl


def _plain_class(devices: list, i: int, j: int) -> str:
    """What NCCL sees in the guest without the file: one CPU per node."""
    same = devices[i]['numa_node'] == devices[j]['numa_node']
    return 'PHB' if same else 'SYS'


def level_for(description: dict, roles: Tuple[str, str]) -> Optional[str]:
    """The NCCL level that alone gives the host's decisions, or None.

    For the pairs of ``roles`` (GPU-GPU: P2P, GPU-NIC: GPUDirect RDMA),
    NCCL's default allows a pair at PXB or closer. Without the file, a
    guest pair is PHB (same guest node) or SYS; a level is equivalent
    where exactly the pairs the host allows are at or under it.
    ``nccl.DEFAULT_LEVEL`` when no pair needs more.
    """
    devices = description['devices']
    pairs = []
    for i, j, host_class in description['pairs']:
        if host_class == 'NV' or sorted(
                (devices[i]['role'], devices[j]['role'])) != sorted(roles):
            continue
        allowed = nccl.PATH[nccl.OF_HOST[host_class]] <= nccl.PATH['PXB']
        pairs.append((allowed, _plain_class(devices, i, j)))
    if not any(allowed for allowed, _ in pairs):
        return nccl.DEFAULT_LEVEL
    for level in ('PHB', 'SYS'):
        if all(allowed == (nccl.PATH[plain] <= nccl.PATH[level])
               for allowed, plain in pairs):
            return level
    return None


def env_lines(description: dict, output: str) -> List[str]:
    lines = []
    if output != '-':
        lines.append('NCCL_TOPO_FILE=%s' % output)
    settings = []
    for variable, roles in (('NCCL_P2P_LEVEL', ('gpu', 'gpu')),
                            ('NCCL_NET_GDR_LEVEL', ('gpu', 'nic'))):
        level = level_for(description, roles)
        if level is None:
            lines.append('# %s: no level alone gives the host\'s choices; '
                         'use the topology file' % variable)
        elif level != nccl.DEFAULT_LEVEL:
            settings.append('%s=%s' % (variable, level))
    if settings:
        lines.append('# or, without the topology file: '
                     + ' '.join(settings))
    return lines
