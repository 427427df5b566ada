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

"""NCCL's bandwidths and transport choices for GPU pairs and GPU-NIC pairs.

On top of :mod:`lab.nccl_paths` (the XML tree, the graph with each
link's GB/s, and ``ncclTopoSetPaths``), what ``ncclTopoComputePaths``
and the transports then decide, from NVIDIA/nccl v2.30.7
(``src/graph/paths.cc`` unless named):

* P2P between two GPUs at ``PXB`` or closer; ``SYS`` on x86 AMD with at
  most two GPUs (``ncclTopoCheckP2p``, 355-368; the CPU type is the first
  CPU node's, ``ncclTopoCpuType``).
* A pair without P2P goes through the CPU nearest the second GPU: its
  type is the larger of the two halves', its bandwidth the smaller
  (``ncclTopoComputePaths`` 763-772, ``addInterStep`` 210-229,
  ``ncclGetLocalCpu`` 186-200).
* ``ncclTopoCheckNet`` (602-630): the pair goes through the network where
  both GPUs reach a NIC at ``PXB`` or closer faster than each other; the
  P2P and SHM transports then refuse it (``src/transport/p2p.cc`` 136-145,
  ``shm.cc`` 69). So a pair's transport is ``NET`` where that says so,
  else ``P2P`` where P2P is allowed, else ``SHM``.
* GPUDirect RDMA for a GPU-NIC path at ``PXB`` or closer (``netGdrLevel``,
  ``ncclTopoCheckGdr`` 511-514); farther paths already go through a CPU
  and keep their type and bandwidth (843-856).
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import itertools

from lab import nccl_paths as np_


@dataclasses.dataclass(frozen=True)
class Pair:
    """What NCCL decides for one pair."""

    #: ``PIX``, ``PXB``, ``PHB``, ``SYS``...
    type: str
    #: The path's GB/s, rounded to 0.1 as NCCL prints it.
    bw: float
    #: GPU pairs: ``P2P``, ``SHM`` or ``NET``; GPU-NIC pairs: ``GDR`` or
    #: ``CPU`` (bounced through host memory).
    transport: str


def _cpu_type(topology: np_.Topology) -> tuple:
    cpu = topology.system.find('cpu')
    if cpu is None:
        return (None, None)
    return (cpu.get('arch'), cpu.get('vendor'))


def _local_cpu(paths: Mapping, kinds: Mapping) -> tuple:
    """``ncclGetLocalCpu``: the CPU of the best path, then the shortest."""
    cpus = [k for k in paths if kinds[k] == np_.CPU]
    return min(cpus, key=lambda c: (paths[c][0], -paths[c][1]))


def decide(topology: np_.Topology, gpus: Iterable[str],
           nics: Mapping[str, float] = {}) -> dict[tuple[str, str], Pair]:
    """NCCL's decision for every GPU pair and GPU-NIC port pair.

    :param topology: a :class:`nccl_paths.Topology` (sysfs, file, CPUID,
        NVML links) with nothing added yet.
    :param gpus: the ranks' GPUs' bus IDs.
    :param nics: IB port bus ID -> its speed in GB/s (ports of one NIC
        are merged as NCCL's IB plugin merges them).
    :returns: ``{(a, b): Pair}``, GPU pairs in the order given and
        ``(gpu, port)`` for NICs.
    """
    gpus = [g.lower() for g in gpus]
    for gpu in gpus:
        topology.add_gpu(gpu)
    for port, gbs in nics.items():
        topology.add_nic(port, gbs)
    graph = topology.graph()
    kinds = graph[0]
    paths = {g: topology.paths((np_.GPU, g), graph) for g in gpus}
    arch, vendor = _cpu_type(topology)
    level = np_.PATH_PXB
    if arch == 'x86_64' and vendor == 'AuthenticAMD' and len(gpus) <= 2:
        level = np_.PATH_SYS
    gpu_paths = {}
    for a, b in itertools.permutations(gpus, 2):
        path_type, bw = paths[a].get((np_.GPU, b), (np_.PATH_DIS, 0.0))
        p2p = path_type <= level
        if not p2p:
            cpu = _local_cpu(paths[b], kinds)
            to_cpu, from_cpu = paths[a][cpu], paths[b][cpu]
            path_type = max(to_cpu[0], from_cpu[0])
            bw = min(to_cpu[1], from_cpu[1])
        gpu_paths[a, b] = (path_type, bw, p2p)
    nets = {g: [found for node, found in paths[g].items()
                if kinds[node] == np_.NET] for g in gpus}

    def net_speed(gpu):
        return max((bw for t, bw in nets[gpu] if t <= np_.PATH_PXB),
                   default=0.0)

    result = {}
    for a, b in itertools.combinations(gpus, 2):
        path_type, bw, p2p = gpu_paths[a, b]
        use_net = net_speed(a) > bw and net_speed(b) > bw
        transport = 'NET' if use_net else 'P2P' if p2p else 'SHM'
        result[a, b] = Pair(np_.PATH_TYPES[path_type], round(bw, 1),
                            transport)
    for gpu, port in itertools.product(gpus, nics):
        path_type, bw = paths[gpu].get((np_.NET, port.lower()),
                                       (np_.PATH_DIS, 0.0))
        result[gpu, port.lower()] = Pair(
            np_.PATH_TYPES[path_type], round(bw, 1),
            'GDR' if path_type <= np_.PATH_PXB else 'CPU')
    return result


def device_links(topology: np_.Topology, busids: Iterable[str]
                 ) -> dict[str, tuple[str, str]]:
    """``link_speed``/``link_width`` NCCL reads for each device, as is."""
    found = {}
    for busid in busids:
        node = topology._pci_node(busid.lower())
        found[busid.lower()] = (node.get('link_speed'),
                                node.get('link_width'))
    return found
