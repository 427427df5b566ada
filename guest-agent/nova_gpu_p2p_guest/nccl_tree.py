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

"""The tree NCCL is to see: guest NUMA nodes, host switch levels, devices.

Each device hangs below the host switches the description lists above it,
under its guest NUMA node's CPU; a pair's class is then what
``ncclTopoSetPaths`` computes on that tree (:mod:`.nccl`). Where the host
keeps a pair apart although it shares a switch (ACS), the tree is cut
until NCCL sees no pair closer than the host does.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from nova_gpu_p2p_guest import nccl

Key = Tuple
DEVICE, SWITCH = 'device', 'switch'


class Tree:
    """Guest NUMA nodes, host switch levels and devices, as NCCL nodes.

    ``parent`` maps a node to the switch above it, None for the CPU.
    Switches are keyed per NUMA node: a switch is one NCCL node under one
    CPU.
    """

    def __init__(self, description: dict):
        self.devices = description['devices']
        self.parent: Dict[Key, Optional[Key]] = {}
        for index, device in enumerate(self.devices):
            above: Optional[Key] = None
            for switch in device['switches']:
                key = (SWITCH, device['numa_node'], switch)
                self.parent.setdefault(key, above)
                above = key
            self.parent[(DEVICE, index)] = above
        self.expected: Dict[Tuple[int, int], str] = {}
        for i, j, host_class in description['pairs']:
            if host_class in nccl.OF_HOST:
                self.expected[min(i, j), max(i, j)] = (
                    nccl.OF_HOST[host_class])

    def above(self, key: Key) -> List[Key]:
        chain = []
        node = self.parent[key]
        while node is not None:
            chain.append(node)
            node = self.parent[node]
        return chain

    def meeting(self, i: int, j: int):
        """(switch where i and j meet or None, i's chain, j's chain)."""
        up_i, up_j = self.above((DEVICE, i)), self.above((DEVICE, j))
        for switch in up_i:
            if switch in up_j:
                return switch, up_i, up_j
        return None, up_i, up_j

    def nccl_class(self, i: int, j: int) -> str:
        """The pair's path type as ``ncclTopoSetPaths`` computes it."""
        if self.devices[i]['numa_node'] != self.devices[j]['numa_node']:
            return 'SYS'
        switch, up_i, up_j = self.meeting(i, j)
        if switch is None:
            return 'PHB'
        crossed = up_i.index(switch) + up_j.index(switch) + 1
        return 'PIX' if crossed == 1 else 'PXB'

    def mismatches(self) -> List[Tuple[int, int, str, str]]:
        return [(i, j, want, self.nccl_class(i, j))
                for (i, j), want in sorted(self.expected.items())
                if self.nccl_class(i, j) != want]

    def reconcile(self) -> List[Tuple[int, int, str, str]]:
        """Cut switch links until no pair is closer than on the host.

        Where ACS sends a pair's traffic through the root complex, the
        host's class is PHB though the two share a switch. Such a pair must
        not look closer to NCCL than it is: the link into the switch where
        the two meet is cut on one side (the child then hangs off the CPU),
        whichever side leaves fewer pairs unlike the host. Returns the
        pairs still unlike the host (NCCL sees them farther, or a host
        class the guest's NUMA nodes cannot show).
        """
        while True:
            closer = [(i, j) for i, j, want, got in self.mismatches()
                      if nccl.PATH[got] < nccl.PATH[want]
                      and self.meeting(i, j)[0] is not None]
            if not closer:
                return self.mismatches()
            i, j = closer[0]
            switch, up_i, up_j = self.meeting(i, j)
            options = []
            for index, chain in ((i, up_i), (j, up_j)):
                at = chain.index(switch)
                child = chain[at - 1] if at else (DEVICE, index)
                self.parent[child], kept = None, self.parent[child]
                options.append((len(self.mismatches()), len(options), child))
                self.parent[child] = kept
            self.parent[min(options)[2]] = None
