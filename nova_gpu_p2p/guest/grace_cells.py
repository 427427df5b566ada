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

"""A Grace GPU's memory as the guest's own NUMA cells.

The NVIDIA guest driver onlines a Grace GPU's coherent memory on NUMA
nodes that ACPI ties to the GPU as Generic Initiators (SRAT type 5); with
none, the memory is not usable as the guest's NUMA memory. Each GPU gets
cells of its own, without CPUs or memory, numbered after Nova's cells;
QEMU writes one ``acpi-generic-initiator`` object per cell, from
libvirt's ``<hostdev><acpi nodeset>``. Each cell stands for one of the
GPU's host memory nodes, whose SLIT row gives the guest its distances.
"""

from collections.abc import Sequence
import dataclasses

from nova_gpu_p2p.topology import grace


@dataclasses.dataclass(frozen=True)
class InitiatorCell:
    #: Guest NUMA cell id.
    cell: int
    #: The host memory node whose distances it takes.
    host_node: int
    #: Host address of the GPU it belongs to.
    gpu: str


@dataclasses.dataclass(frozen=True)
class Layout:
    cells: tuple[InitiatorCell, ...] = ()

    def nodeset(self, address: str) -> str | None:
        """The GPU's cells as libvirt's ``nodeset`` (``2-9``); None: none."""
        ids = [c.cell for c in self.cells if c.gpu == address]
        if not ids:
            return None
        if ids == list(range(ids[0], ids[-1] + 1)):
            return '%d-%d' % (ids[0], ids[-1]) if len(ids) > 1 else str(
                ids[0])
        return ','.join(map(str, ids))

    @property
    def host_nodes(self) -> tuple[int, ...]:
        return tuple(c.host_node for c in self.cells)


def layout(gpus: Sequence[grace.GraceGpu], first_cell: int,
           per_gpu: int) -> Layout:
    """``per_gpu`` cells per GPU, in address order, after ``first_cell``.

    Cell k of a GPU stands for its k-th host memory node; where the host
    has fewer than ``per_gpu``, the remaining cells take the last one's
    distances (they are as far from everything as it is).
    """
    cells = []
    for gpu in sorted(gpus, key=lambda g: g.address):
        for k in range(per_gpu):
            cells.append(InitiatorCell(
                cell=first_cell + len(cells),
                host_node=gpu.memory_nodes[min(k, len(gpu.memory_nodes) - 1)],
                gpu=gpu.address))
    return Layout(tuple(cells))
