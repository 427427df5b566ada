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

"""The placement traits that describe a host's GPU P2P ability.

Only the names in :data:`OWNED` are ever added or removed on the compute
node provider by the driver; every other trait on the provider belongs to
someone else. :func:`clique_id_trait` names the trait that marks a GPU's
own provider with its clique when PCI devices are tracked in placement,
:func:`partition_trait` those marking it with each NVIDIA Fabric Manager
partition of two or more GPUs it is in.

os-traits has no standard trait for GPU peer-to-peer or for guest PCIe
buses bound to NUMA nodes (``COMPUTE_SOCKET_PCI_NUMA_AFFINITY`` is Nova's
``socket`` PCI NUMA policy, another thing), so these are custom traits,
named by os-traits' rule for them (:func:`os_traits.normalize_name`).
"""

from collections.abc import Iterable
from collections.abc import Set

import os_traits

from nova_gpu_p2p import capacity
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import grace
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import host_gpus as host_gpus_mod
from nova_gpu_p2p.topology import model

#: CUSTOM_GPU_P2P: a clique of two or more GPUs.
GPU_P2P = os_traits.normalize_name('GPU_P2P')
#: CUSTOM_GPU_P2P_NVLINK: GPUs linked by NVLink.
GPU_P2P_NVLINK = os_traits.normalize_name('GPU_P2P_NVLINK')
#: CUSTOM_GPU_NUMA_AFFINITY: guest buses can be bound to NUMA nodes.
GPU_NUMA_AFFINITY = os_traits.normalize_name('GPU_NUMA_AFFINITY')
CLIQUE_SIZES = (2, 4, 8, 16)
#: CUSTOM_GPU_P2P_CLIQUE_<size>: a clique of at least that size.
GPU_P2P_CLIQUE = {size: os_traits.normalize_name('GPU_P2P_CLIQUE_%d' % size)
                  for size in CLIQUE_SIZES}
#: Sizes of ``required`` servers a compute node says fit on it now.
FREE_SIZES = tuple(range(2, 17))
GPU_P2P_FREE = {size: os_traits.normalize_name('GPU_P2P_FREE_%d' % size)
                for size in FREE_SIZES}
OWNED = frozenset([GPU_P2P, GPU_P2P_NVLINK, GPU_NUMA_AFFINITY,
                   *GPU_P2P_CLIQUE.values(), *GPU_P2P_FREE.values()])
#: Prefix of the per-GPU trait naming its host clique ID.
CLIQUE_ID_PREFIX = os_traits.normalize_name('GPU_P2P_CLIQUE_ID_')
#: Prefix of the per-GPU trait naming a Fabric Manager partition it is in.
PARTITION_PREFIX = os_traits.normalize_name('GPU_P2P_PARTITION_')


def p2p_traits(topology: model.HostTopology,
               cliques: cliques_mod.Cliques) -> set[str]:
    """CUSTOM_GPU_P2P* traits: clique sizes reached, NVLink seen.

    GPUs barred from cliques (consumer GPUs) count for none of them; an
    NVLink pair counts only when it is two NVIDIA GPUs, not a bridge, an
    NVSwitch or a GPU paired with itself (a hand-edited capture).
    """
    largest = cliques.largest()
    traits = {GPU_P2P_CLIQUE[size] for size in CLIQUE_SIZES
              if largest >= size}
    if largest >= 2:
        traits.add(GPU_P2P)
    gpus = frozenset(gpu.address for gpu in topology.gpus())
    if any(len(pair) == 2 and pair <= gpus
           and pair.isdisjoint(cliques.barred)
           for pair in topology.nvlink_pairs):
        traits.add(GPU_P2P_NVLINK)
    return traits


def numa_affinity(topology: model.HostTopology,
                  libvirt_version: tuple[int, int, int],
                  qemu_version: tuple[int, int, int]) -> set[str]:
    """CUSTOM_GPU_NUMA_AFFINITY: this host can bind guest buses to nodes.

    Needs a GPU whose host NUMA node is known (nothing to bind otherwise)
    and the libvirt and QEMU the guest XML for it needs (:mod:`min_versions`);
    on a Grace host, those its GPUs' generic-initiator cells need, without
    which every such build here is refused.
    """
    if (libvirt_version < min_versions.LIBVIRT_NUMA_AFFINITY
            or qemu_version < min_versions.QEMU_NUMA_AFFINITY):
        return set()
    if grace.discover(topology).gpus and (
            libvirt_version < min_versions.LIBVIRT_GENERIC_INITIATOR
            or qemu_version < min_versions.QEMU_GENERIC_INITIATOR):
        return set()
    if not any(gpu.numa_node is not None for gpu in topology.gpus()):
        return set()
    return {GPU_NUMA_AFFINITY}


def free_traits(host: host_gpus_mod.HostGPUs,
                partitions: Iterable[partitions_mod.FabricPartition],
                held: Set[str]) -> set[str]:
    """CUSTOM_GPU_P2P_FREE_<n>: a ``required`` server of n GPUs fits now.

    A flavor that requires the trait of its size lets placement leave out
    every host where its server cannot land, before Nova reads a host
    state or runs a filter. The rule is the scheduler's (through
    :func:`nova_gpu_p2p.capacity.host_size`): n free GPUs of one model in
    one clique, on a Fabric Manager host one partition of n GPUs all
    free. ``held``: the addresses this host's domains hold, running or
    not. A GPU claimed for a server whose domain is not defined yet
    counts as free until the next update: the trait may promise room
    that is gone (placement or the filter then drops the host), not hide
    room that is there.
    """
    in_partition: dict[str, set[int]] = {}
    for partition in partitions:
        if len(partition.gpus) > 1:
            for address in partition.gpus:
                in_partition.setdefault(address, set()).add(partition.id)
    gpus = []
    for address, clique in sorted(host.cliques.ids.items()):
        if address in host.cliques.barred:
            continue
        function = host.topology.functions[address]
        gpus.append(capacity.Gpu(
            address, int(address not in held),
            '%04x:%04x' % (function.vendor, function.device), clique,
            frozenset(in_partition.get(address, ()))))
    host = capacity.Host('', tuple(gpus))
    return {GPU_P2P_FREE[size] for size in FREE_SIZES
            if any(capacity.host_size(host, size).placeable.values())}


def clique_id_trait(clique_id: int) -> str:
    """The trait marking a GPU's own provider with its host clique ID."""
    return '%s%d' % (CLIQUE_ID_PREFIX, clique_id)


def partition_trait(partition_id: int) -> str:
    """The trait marking a GPU's own provider with a partition holding it."""
    return '%s%d' % (PARTITION_PREFIX, partition_id)
