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

"""Fabric Manager partitions as sets of GPU addresses: pure rules.

Fabric Manager names GPUs by module ID; everything above this module
works on PCI addresses. A guest gets NVLink only when the partition
active for it holds exactly its GPUs, so these rules say which partition
that is, and which GPU pairs can ever share NVLink.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import itertools


@dataclasses.dataclass(frozen=True)
class FabricPartition:
    """One NVIDIA Fabric Manager partition, its GPUs by PCI address.

    Fabric Manager names a partition's GPUs by module ID; the backend
    maps them to addresses, so the rules never see module IDs.
    """

    id: int
    #: PCI addresses of its GPUs, sorted.
    gpus: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class InstancePartitions:
    """What to activate for one instance's GPUs."""

    #: Partition IDs to activate: one exact partition, or each GPU's
    #: 1-GPU partition (so CUDA works, without NVLink).
    ids: tuple[int, ...]
    #: Whether the guest gets NVLink between its GPUs.
    nvlink: bool
    #: GPUs in no 1-GPU partition, when no partition is exactly the set.
    missing: tuple[str, ...] = ()


def to_addresses(
        fm: Iterable[tuple[int, frozenset[int]]],
        modules: Mapping[int, str],
) -> tuple[tuple[FabricPartition, ...], tuple[str, ...]]:
    """Partitions by GPU address, and findings on the ones left out.

    ``fm`` gives each partition's ID and module IDs; ``modules`` maps a
    module ID to its GPU's address (one address per module). A partition
    holding a module whose GPU is unknown cannot be offered, so it is
    dropped, with one finding per such module.
    """
    partitions = []
    dropped: dict[int, list[int]] = {}
    for partition_id, module_ids in sorted(fm, key=lambda p: p[0]):
        unknown = sorted(module_ids - modules.keys())
        for module_id in unknown:
            dropped.setdefault(module_id, []).append(partition_id)
        if not unknown:
            partitions.append(FabricPartition(
                id=partition_id,
                gpus=tuple(sorted(modules[m] for m in module_ids))))
    findings = tuple(
        'Fabric Manager module ID %d: no GPU of this host is known to have '
        'it, so the partitions holding it (%s) are left out'
        % (module_id, ', '.join(map(str, ids)))
        for module_id, ids in sorted(dropped.items()))
    return tuple(partitions), findings


def exact(partitions: Iterable[FabricPartition],
          addresses: Iterable[str]) -> FabricPartition | None:
    """The partition whose GPUs are exactly these; None if there is none."""
    wanted = frozenset(addresses)
    for partition in partitions:
        if frozenset(partition.gpus) == wanted:
            return partition
    return None


def for_instance(partitions: Iterable[FabricPartition],
                 addresses: Iterable[str]) -> InstancePartitions:
    """The partitions to activate for an instance with these GPUs.

    The exact partition when there is one; otherwise every GPU's 1-GPU
    partition, without NVLink: Fabric Manager lets CUDA use a GPU on an
    NVSwitch board only while a partition holding it is active.
    """
    partitions = tuple(partitions)
    wanted = sorted(set(addresses))
    if not wanted:
        return InstancePartitions(ids=(), nvlink=False)
    match = exact(partitions, wanted)
    if match is not None:
        return InstancePartitions(ids=(match.id,),
                                  nvlink=len(match.gpus) > 1)
    ids = []
    missing = []
    for address in wanted:
        single = exact(partitions, (address,))
        if single is None:
            missing.append(address)
        else:
            ids.append(single.id)
    return InstancePartitions(ids=tuple(ids), nvlink=False,
                              missing=tuple(missing))


def nvlink_pairs(partitions: Iterable[FabricPartition]
                 ) -> frozenset[frozenset[str]]:
    """GPU pairs that share a partition of two or more GPUs.

    Only such a pair can ever be given NVLink inside one guest.
    """
    return frozenset(
        frozenset(pair)
        for partition in partitions
        for pair in itertools.combinations(partition.gpus, 2))
