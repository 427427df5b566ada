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

"""Guest NUMA distances copied from the host's SLIT.

Nova maps guest cell i to one host node; the distance between guest cells
i and j is the host's distance between their host nodes, so the guest
ranks its cells as the hardware does.
"""

from collections.abc import Sequence

from nova_gpu_p2p.topology import model


def guest_distances(host_node_of_cell: Sequence[int],
                    host_nodes: Sequence[model.NumaNode]
                    ) -> tuple[tuple[int, ...], ...] | None:
    """Row i, column j: distance from guest cell i to guest cell j.

    None when the host does not report distances for every node involved
    (nothing to copy then).
    """
    position = {node.id: index for index, node in enumerate(host_nodes)}
    rows = []
    for a in host_node_of_cell:
        if a not in position:
            return None
        distances = host_nodes[position[a]].distances
        row = []
        for b in host_node_of_cell:
            if b not in position or position[b] >= len(distances):
                return None
            row.append(distances[position[b]])
        rows.append(tuple(row))
    return tuple(rows)
