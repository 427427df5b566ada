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

"""Grace Hopper and Grace Blackwell GPUs, from the host topology.

On these hosts (aarch64) each GPU is coherent with its Grace CPU over
NVLink-C2C and its memory belongs to host NUMA nodes that firmware
declares as ACPI SRAT Generic Initiators (sysfs ``has_generic_initiator``):
eight per GPU, which the guest needs again as its own nodes for the
NVIDIA driver to online the memory (MIG uses them). Firmware numbers them
after the CPU nodes, GPU by GPU in address order (GH200: CPU node 0, GPU
nodes 1-8; a GB200 tray: CPU nodes 0 and 1, GPU nodes 2-9, 10-17 on the
first Grace, 18-25, 26-33 on the second); each node's nearest CPU node
is its Grace socket. Linux binds the GPUs for passthrough with
``nvgrace_gpu_vfio_pci`` (drivers/vfio/pci/nvgrace-gpu/), which shows
the memory to the guest as 64-bit BARs of power-of-two size.

Pure rules over a :class:`~nova_gpu_p2p.topology.model.HostTopology`; what
cannot be told for sure (an uneven split of nodes, a model of unknown
memory size) is left out with a finding, never guessed.
"""

import dataclasses

from nova_gpu_p2p.topology import model

GiB = 1 << 30
#: ``KBUILD_MODNAME`` of the kernel's variant driver: its sysfs name.
VFIO_DRIVER = 'nvgrace_gpu_vfio_pci'
#: Drivers a Grace GPU may be bound to on a host this project serves:
#: the variant driver, or nvidia (libvirt moves it at guest start).
DRIVERS = frozenset((VFIO_DRIVER, 'nvidia'))
#: nvgrace-gpu's non-cached carve-out on Grace Hopper (``resmem``), and
#: the block the usable part is rounded down to.
_RESMEM = GiB
_MEMBLK = 512 << 20


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    #: Device memory, bytes, as NVIDIA's product pages state it.
    memory: int
    #: Grace Hopper's MIG hardware bug: nvgrace-gpu carves 1 GiB out of
    #: the memory as a second, non-cached BAR.
    resmem: bool


#: The device IDs ``nvgrace_gpu_vfio_pci`` binds (its id_table).
MODELS: dict[int, Model] = {
    0x2342: Model('GH200 120GB', 96 * GiB, True),
    0x2345: Model('GH200 480GB', 96 * GiB, True),
    0x2348: Model('GH200 144GB HBM3e', 144 * GiB, True),
    0x2941: Model('GB200', 186 * GiB, False),
    0x31c2: Model('GB300', 288 * GiB, False),
}


def _pow2(size: int) -> int:
    return 1 << (size - 1).bit_length()


def memory_bars(found: Model) -> tuple[int, ...]:
    """The BAR sizes nvgrace-gpu gives the guest for the device memory.

    As ``nvgrace_gpu_init_nvdev_struct`` computes them: the usable memory
    (BAR 4) and, on Grace Hopper, the carve-out (BAR 2), each rounded up
    to a power of two.
    """
    if not found.resmem:
        return (_pow2(found.memory),)
    usable = (found.memory - _RESMEM) // _MEMBLK * _MEMBLK
    return (_pow2(usable), _pow2(found.memory - usable))


@dataclasses.dataclass(frozen=True)
class GraceGpu:
    address: str
    #: The model's name; None for a GPU on the variant driver that this
    #: release does not know.
    model: str | None
    driver: str | None
    #: The host NUMA node of its Grace CPU; None where unknown.
    socket: int | None
    #: The host generic-initiator nodes that carry its memory.
    memory_nodes: tuple[int, ...]
    #: Sizes of the device-memory BARs the guest sees; () where unknown.
    memory_bars: tuple[int, ...]
    #: The SMMU it sits behind (sysfs ``iommu`` link).
    smmu: str | None


@dataclasses.dataclass(frozen=True)
class GraceHost:
    gpus: dict[str, GraceGpu] = dataclasses.field(default_factory=dict)
    findings: tuple[str, ...] = ()


def is_grace_gpu(function: model.PCIFunction) -> bool:
    """A GPU the variant driver binds, by ID or by its binding."""
    return function.is_nvidia_gpu and (function.device in MODELS
                                       or function.driver == VFIO_DRIVER)


def _nearest_cpu_node(node: int, nodes: dict[int, model.NumaNode],
                      order: list[int]) -> int | None:
    """The CPU node nearest ``node`` by SLIT; None on a tie or no answer."""
    if node not in nodes:
        return None
    if nodes[node].cpus:
        return node
    distances = nodes[node].distances
    candidates = sorted(
        (distances[position], other)
        for position, other in enumerate(order)
        if position < len(distances) and nodes[other].cpus)
    if not candidates or (len(candidates) > 1
                          and candidates[0][0] == candidates[1][0]):
        return None
    return candidates[0][1]


def discover(topology: model.HostTopology) -> GraceHost:
    """Each Grace GPU's socket, memory nodes, BARs and SMMU."""
    gpus = [g for g in topology.gpus() if is_grace_gpu(g)]
    if not gpus:
        return GraceHost()
    findings = []
    nodes = {n.id: n for n in topology.numa_nodes}
    order = [n.id for n in topology.numa_nodes]
    socket_of = {g.address: _nearest_cpu_node(g.numa_node, nodes, order)
                 if g.numa_node is not None else None for g in gpus}
    initiators: dict[int | None, list[int]] = {}
    for node in topology.numa_nodes:
        if node.generic_initiator:
            initiators.setdefault(
                _nearest_cpu_node(node.id, nodes, order), []).append(node.id)
    if not initiators:
        findings.append(
            'no host NUMA node is a generic initiator '
            '(devices/system/node/has_generic_initiator): the Grace GPUs\' '
            'memory nodes are unknown; update the host firmware and kernel '
            '(5.10 or later)')
    memory: dict[str, tuple[int, ...]] = {}
    for socket in sorted(set(socket_of.values()) - {None}):
        on_socket = [g.address for g in gpus if socket_of[g.address] == socket]
        free = sorted(initiators.get(socket, ()))
        if free and len(free) % len(on_socket) == 0:
            share = len(free) // len(on_socket)
            for index, address in enumerate(on_socket):
                memory[address] = tuple(free[index * share:
                                             (index + 1) * share])
        elif free:
            findings.append(
                'socket node %d has %d generic-initiator nodes for %d GPUs: '
                'which belong to which GPU is unknown' % (
                    socket, len(free), len(on_socket)))
    result = {}
    for gpu in gpus:
        found = MODELS.get(gpu.device)
        if found is None:
            findings.append('%s: Grace GPU 10de:%04x of unknown device '
                            'memory size' % (gpu.address, gpu.device))
        if socket_of[gpu.address] is None:
            findings.append('%s: its Grace socket is unknown (numa_node %s)'
                            % (gpu.address, gpu.numa_node))
        result[gpu.address] = GraceGpu(
            address=gpu.address, model=found.name if found else None,
            driver=gpu.driver, socket=socket_of[gpu.address],
            memory_nodes=memory.get(gpu.address, ()),
            memory_bars=memory_bars(found) if found else (),
            smmu=gpu.iommu)
    return GraceHost(result, tuple(findings))
