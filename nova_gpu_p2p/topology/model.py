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

"""The host's PCI and NUMA topology as plain, immutable data.

Backends (sysfs, static file, NVML, Fabric Manager) produce a
:class:`HostTopology`; the link-class, clique and guest-layout rules are
pure functions over it.
"""

import dataclasses
import enum

from nova_gpu_p2p.fabric import partitions

NVIDIA_VENDOR_ID = 0x10de
#: As Nova's PCI device objects spell vendor IDs.
NVIDIA_VENDOR_HEX = '%04x' % NVIDIA_VENDOR_ID
DISPLAY_BASE_CLASS = 0x03
NETWORK_BASE_CLASS = 0x02
BRIDGE_CLASS = 0x0604
#: PCI class of an HGX board's NVSwitch functions (bridge, other).
NVSWITCH_CLASS = 0x0680
#: Per host, far above real hosts (16 GPUs, a few thousand PCI functions
#: with SR-IOV): every rule over all pairs (cliques, link classes, the
#: matrix, a static file's or capture's pairs) stays cheap up to these, and
#: a file or tree beyond them is refused before that work starts.
MAX_GPUS = 128
MAX_FUNCTIONS = 32768
MAX_PAIRS = MAX_GPUS * (MAX_GPUS - 1) // 2


def size_problem(functions: int, gpus: int, pairs: int = 0) -> str | None:
    """Why a host of this size is refused; None when it is not."""
    if functions > MAX_FUNCTIONS:
        return ('%d PCI functions, more than the %d per host supported'
                % (functions, MAX_FUNCTIONS))
    if gpus > MAX_GPUS:
        return ('%d NVIDIA GPUs, more than the %d per host supported (real '
                'hosts have up to 16)' % (gpus, MAX_GPUS))
    if pairs > MAX_PAIRS:
        return ('%d GPU pairs, more than the %d that %d GPUs make'
                % (pairs, MAX_PAIRS, MAX_GPUS))
    return None


class PortType(str, enum.Enum):
    """PCIe Device/Port Type, as in the PCI Express capability."""

    ENDPOINT = 'endpoint'
    ROOT_PORT = 'root_port'
    UPSTREAM = 'upstream'
    DOWNSTREAM = 'downstream'
    PCI_BRIDGE = 'pci_bridge'


@dataclasses.dataclass(frozen=True)
class Acs:
    """A downstream port's ACS capability and control registers.

    The bits are those of both registers: the capability register says
    what the port implements, the control register what is enabled.
    """

    capability: int
    control: int

    #: ACS P2P Request Redirect: peer requests go up to the root complex.
    P2P_REQUEST_REDIRECT = 1 << 2
    #: ACS P2P Completion Redirect: so do peer completions.
    P2P_COMPLETION_REDIRECT = 1 << 3
    #: ACS P2P Egress Control: the port's Egress Control Vector (not read
    #: here) blocks peer requests to other ports, or redirects them.
    P2P_EGRESS_CONTROL = 1 << 5
    #: What Linux's ``pci=disable_acs_redir`` clears: every bit that keeps
    #: peer traffic from crossing the switch directly.
    REDIRECT_BITS = (P2P_REQUEST_REDIRECT | P2P_COMPLETION_REDIRECT
                     | P2P_EGRESS_CONTROL)

    def enabled(self, bit: int) -> bool:
        """Implemented (capability) and switched on (control)."""
        return bool(self.capability & self.control & bit)

    @property
    def request_redirect(self) -> bool:
        return self.enabled(self.P2P_REQUEST_REDIRECT)

    @property
    def egress_control(self) -> bool:
        return self.enabled(self.P2P_EGRESS_CONTROL)


@dataclasses.dataclass(frozen=True)
class PCIFunction:
    """One PCI function, as the host sees it."""

    address: str
    vendor: int
    device: int
    #: 24-bit class code: base class, subclass, programming interface.
    class_code: int
    #: Address of the bridge above it; None directly under a root complex.
    parent: str | None
    #: The host bridge it hangs under, as sysfs names it: ``pci0000:00``.
    root_complex: str
    #: Host NUMA node; None where firmware reports none (sysfs: -1).
    numa_node: int | None = None
    driver: str | None = None
    iommu_group: int | None = None
    #: Sizes in bytes of its 64-bit memory BARs.
    bars64: tuple[int, ...] = ()
    port_type: PortType = PortType.ENDPOINT
    #: ACS registers; None where the port has no ACS capability, or where
    #: config space could not be read (then ``acs_known`` is False).
    acs: Acs | None = None
    #: False where config space could not be read (no privsep, not root):
    #: whether the port has ACS, and what it enables, is unknown. The
    #: link-class rule counts such a switch downstream port as Request
    #: Redirect on (fail closed), as Linux sets it with the IOMMU on.
    acs_known: bool = True
    #: The PCIe link above it, as sysfs' ``max_link_speed`` writes it
    #: (``32.0 GT/s PCIe``) and ``max_link_width`` (lanes); None where
    #: unknown. NCCL inside the guest weighs paths by them.
    link_speed: str | None = None
    link_width: int | None = None
    #: Subsystem vendor and device: who built the board (NVIDIA: 10de),
    #: which model it is; None where the backend cannot say.
    subsystem_vendor: int | None = None
    subsystem_device: int | None = None
    #: The IOMMU unit it sits behind, as its sysfs ``iommu`` link names
    #: it (``smmu3.0x0000000016000000`` on Arm); None where it has none.
    iommu: str | None = None

    def __post_init__(self) -> None:
        if self.acs is not None and not self.acs_known:
            raise ValueError('%s: ACS registers read, yet unknown'
                             % self.address)

    @property
    def base_class(self) -> int:
        return self.class_code >> 16

    @property
    def is_bridge(self) -> bool:
        return self.class_code >> 8 == BRIDGE_CLASS

    @property
    def is_nvidia_gpu(self) -> bool:
        """What QEMU's x-nv-gpudirect-clique accepts: NVIDIA, display."""
        return (self.vendor == NVIDIA_VENDOR_ID
                and self.base_class == DISPLAY_BASE_CLASS)

    @property
    def is_gpu(self) -> bool:
        return self.base_class == DISPLAY_BASE_CLASS

    @property
    def is_nvswitch(self) -> bool:
        """An NVSwitch of an HGX board (H100/H200: ``10de:22a3``).

        By class rather than device ID, so that other generations count
        too.
        """
        return (self.vendor == NVIDIA_VENDOR_ID
                and self.class_code >> 8 == NVSWITCH_CLASS)

    @property
    def is_nic(self) -> bool:
        return self.base_class == NETWORK_BASE_CLASS


@dataclasses.dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: frozenset[int]
    #: SLIT distances to every node, indexed by node id order of the host.
    distances: tuple[int, ...]
    #: An ACPI SRAT Generic Initiator node (sysfs
    #: ``has_generic_initiator``): on Grace hosts, a GPU's memory node.
    generic_initiator: bool = False


@dataclasses.dataclass(frozen=True)
class HostTopology:
    """Everything the rules need to know about one host."""

    functions: dict[str, PCIFunction]
    numa_nodes: tuple[NumaNode, ...] = ()
    #: Pairs of GPU addresses joined by NVLink (NVML backend), or sharing
    #: a Fabric Manager partition of two or more GPUs (fabricmanager
    #: backend).
    nvlink_pairs: frozenset[frozenset[str]] = frozenset()
    #: False when config space could not be read (no root, no privsep):
    #: port types are inferred from the tree, and the bridges read without
    #: it have ``acs_known`` False.
    config_space_read: bool = True
    #: Operator-supplied P2P answers for GPU pairs (static backend): a pair
    #: listed here is P2P capable or not regardless of the PCI tree.
    p2p_overrides: dict[frozenset[str], bool] = dataclasses.field(
        default_factory=dict)
    #: The partitions NVIDIA Fabric Manager supports on an HGX board
    #: (fabricmanager backend); empty on hosts without Fabric Manager.
    fabric_partitions: tuple[partitions.FabricPartition, ...] = ()
    #: Human-readable notes on what was odd or missing during discovery.
    findings: tuple[str, ...] = ()
    #: GPU address -> NVML's brand of it (``GeForce``, ``Tesla``, ...),
    #: for the GPUs NVML sees (nvml and fabricmanager backends).
    gpu_brands: dict[str, str] = dataclasses.field(default_factory=dict)

    def gpus(self) -> list[PCIFunction]:
        """NVIDIA display-class functions, in PCI address order."""
        return sorted((f for f in self.functions.values() if f.is_nvidia_gpu),
                      key=lambda f: f.address)

    def ancestors(self, address: str) -> list[PCIFunction]:
        """Bridges from the function's parent up to its root complex.

        A loop of parents raises ValueError rather than growing the chain
        forever; captures and sysfs trees are refused before this.
        """
        chain = []
        seen = {address}
        parent = self.functions[address].parent
        while parent is not None:
            if parent in seen:
                refuse_parent_loops(self.functions)
            seen.add(parent)
            bridge = self.functions[parent]
            chain.append(bridge)
            parent = bridge.parent
        return chain


def parent_cycle(functions: dict[str, PCIFunction]) -> list[str] | None:
    """Bridges that are each other's parent, in order; None if none are.

    Parent links must end at a root complex; a loop of them would make
    every walk up the tree go on forever.
    """
    done: set[str] = set()
    for start in sorted(functions):
        path: list[str] = []
        on_path: set[str] = set()
        address: str | None = start
        while (address is not None and address in functions
               and address not in done):
            if address in on_path:
                return path[path.index(address):]
            on_path.add(address)
            path.append(address)
            address = functions[address].parent
        done.update(path)
    return None


def refuse_parent_loops(functions: dict[str, PCIFunction]) -> None:
    """ValueError naming the bridges, where parents form a loop."""
    cycle = parent_cycle(functions)
    if cycle is None:
        return
    if len(cycle) == 1:
        raise ValueError('bridge %s is its own parent' % cycle[0])
    if len(cycle) == 2:
        raise ValueError('bridges %s and %s are each other\'s parent'
                         % tuple(cycle))
    raise ValueError('bridges %s are each other\'s parent in a loop'
                     % ', '.join(cycle))
