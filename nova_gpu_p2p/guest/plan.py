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

"""The whole decision for one guest: cliques, buses, hole, distances.

A pure function of the flavor's request, the instance's devices, the
cached host topology and the facts Nova's own guest config states. It
either returns what to add to the guest config, with notes explaining
every fallback, or a refusal saying what to change and whether another
host could do better (reschedule) or none can (the build fails).

Only a new build is ever refused. Every other operation that rebuilds the
guest config (hard reboot, resume after a host restart, resize and its
revert, migration, evacuation, unshelve, rebuild, rescue) concerns a
server that exists: refusing would leave it without a domain. There the
plan degrades to what the host can do now, as ``auto`` and ``preferred``
would, and lists what ``required`` asked for and the server goes without
in :attr:`GuestPlan.lost`.
"""

from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from oslo_config import cfg

from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import devices as devices_mod
from nova_gpu_p2p.guest import expander_buses
from nova_gpu_p2p.guest import grace_cells
from nova_gpu_p2p.guest import instance_cliques
from nova_gpu_p2p.guest import numa_distances
from nova_gpu_p2p.guest import pcihole64
from nova_gpu_p2p.guest import root_port_links
from nova_gpu_p2p.guest import topology_description
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import grace
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import link_class


@dataclasses.dataclass(frozen=True)
class Options:
    """The ``[gpu_p2p]`` options the decision reads."""

    p2p_level: str = 'PXB'
    acs_policy: str = 'route'
    grouping: expander_buses.Grouping = expander_buses.Grouping.ROOT_COMPLEX
    align: frozenset[str] = frozenset(('gpu', 'nic'))
    numa_distances: bool = True
    pcihole64: str | int = 'auto'
    guest_topology: bool = True
    grace_cells_per_gpu: int = 8

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> 'Options':
        group = conf.gpu_p2p
        return cls(p2p_level=group.p2p_level, acs_policy=group.acs_policy,
                   grouping=expander_buses.Grouping(
                       group.expander_bus_grouping),
                   align=frozenset(group.align_device_types),
                   numa_distances=group.guest_numa_distances,
                   pcihole64=group.pcihole64,
                   guest_topology=group.guest_topology,
                   grace_cells_per_gpu=group.grace_numa_cells_per_gpu)


@dataclasses.dataclass(frozen=True)
class GuestFacts:
    """What Nova's guest config and host say, as plain values."""

    #: Guest cell i -> host NUMA node; None: no instance NUMA topology.
    host_node_of_cell: tuple[int, ...] | None = None
    machine_type: str | None = 'q35'
    acpi: bool = True
    hypervisor_hidden: bool = False
    libvirt_version: tuple[int, int, int] = (10, 0, 0)
    qemu_version: tuple[int, int, int] = (8, 2, 0)
    #: PCI controller indexes Nova's config already uses.
    used_pci_indexes: frozenset[int] = frozenset()
    #: Guest RAM, bytes.
    memory: int = 0
    #: Guest physical address bits; None where unknown.
    phys_bits: int | None = 40
    #: Whether those bits are the host's (host-passthrough CPU or
    #: maxphysaddr passthrough): another host may then have more.
    phys_bits_from_host: bool = False
    #: Where bits that are not the host's were set: the flavor's extra
    #: spec or the tenant's image property (both reach Nova unchecked).
    phys_bits_property: str = 'hw_maxphysaddr_bits (image property)'
    #: Whether Nova is building a new instance, the one case where a
    #: refusal is safe (Nova reschedules or fails the build).
    new_build: bool = True
    #: The host CPU's identity as NCCL reads it (:mod:`..topology.host_cpu`);
    #: None where unknown.
    host_cpu: dict | None = None

    @property
    def guest_cell_of(self) -> Mapping[int, int]:
        return {host: cell
                for cell, host in enumerate(self.host_node_of_cell or ())}


@dataclasses.dataclass(frozen=True)
class Refusal:
    message: str
    #: True: another host may honour it (Nova reschedules); False: no
    #: host can, the flavor or image must change.
    reschedule: bool


@dataclasses.dataclass(frozen=True)
class GuestPlan:
    request: extra_specs.GPUP2PRequest
    devices: tuple[devices_mod.GuestDevice, ...] = ()
    #: Host GPU address -> clique ID in this guest.
    cliques: dict[str, int] = dataclasses.field(default_factory=dict)
    buses: expander_buses.BusLayout = expander_buses.BusLayout()
    hole64: pcihole64.Hole64 | None = None
    #: Guest cell distance matrix, Nova's cells then the Grace cells;
    #: None: leave Nova's cells as they are.
    distances: tuple[tuple[int, ...], ...] | None = None
    #: CPU-less, memory-less cells tied to Grace GPUs (generic initiators).
    grace: grace_cells.Layout = grace_cells.Layout()
    #: The fw_cfg entry text describing the placed devices' host topology
    #: (see :mod:`topology_description`); None: no entry.
    guest_topology: str | None = None
    #: Root port controller index -> its ``x-speed``/``x-width``: the host
    #: link of the device on it (:mod:`root_port_links`).
    port_links: dict[int, root_port_links.PortLink] = dataclasses.field(
        default_factory=dict)
    #: Warnings and fallbacks, each saying what to change.
    notes: tuple[str, ...] = ()
    #: What the host withholds by design, worth an INFO line: GPUs
    #: barred from cliques under ``auto``.
    info: tuple[str, ...] = ()
    #: What ``required`` asked for that this existing server goes
    #: without, and why: each would have refused a new build.
    lost: tuple[str, ...] = ()
    refusal: Refusal | None = None


def _link_name(host: host_gpus.HostGPUs, acs: str):
    topology = host.topology

    def name(a: str, b: str) -> str:
        if topology.p2p_overrides.get(frozenset((a, b))) is False:
            return 'a link the static topology marks not P2P capable'
        return link_class.effective_class(
            topology, a, b, link_class.AcsPolicy(acs)).name
    return name


class _Decision:
    """One run of :func:`decide`; collects notes as it goes.

    The first problem that refuses a new build is kept in
    :attr:`refusal`; each step stops where :meth:`problem` says so and
    :meth:`run` stops after a step that refused.
    """

    def __init__(self, request: extra_specs.GPUP2PRequest,
                 devices: Sequence[devices_mod.GuestDevice],
                 host: host_gpus.HostGPUs, facts: GuestFacts,
                 options: Options) -> None:
        self.request = request
        self.devices = tuple(devices)
        self.host = host
        self.facts = facts
        self.options = options
        self.notes: list[str] = []
        self.info: list[str] = []
        self.lost: list[str] = []
        self.refusal: Refusal | None = None
        on_grace = grace.discover(host.topology).gpus
        self.grace_gpus = tuple(on_grace[d.address] for d in self.devices
                                if d.address in on_grace)

    def problem(self, message: str, required: bool,
                reschedule: bool) -> bool:
        """Refuse a new build when the request is ``required``.

        Otherwise note it and go on; for an existing server a ``required``
        problem is recorded as lost instead of refused. Returns whether
        the build is refused, and the caller must stop.
        """
        if not required:
            self.notes.append(message)
        elif self.facts.new_build:
            self.refusal = Refusal(message, reschedule)
            return True
        else:
            self.lost.append(message)
        return False

    def run(self) -> GuestPlan:
        clique_required = (
            self.request.clique.mode is extra_specs.CliqueMode.REQUIRED)
        numa_required = (self.request.numa_affinity
                         is extra_specs.NumaAffinity.REQUIRED)
        any_required = clique_required or numa_required
        if self.tenant_input_refused():
            return self.plan()
        if self.host.error:
            self.problem('GPU topology discovery failed on this host (%s); '
                         'fix it (see nova-compute\'s log and '
                         '`nova-gpu-p2p topology`)' % self.host.error,
                         any_required, reschedule=True)
            return self.plan()
        if not any(d.kind is devices_mod.DeviceKind.GPU
                   for d in self.devices):
            self.problem(
                '%s: the flavor has no passthrough GPU; add '
                'pci_passthrough:alias for the GPUs, or remove the key'
                % ' and '.join(
                    key for key, on in (
                        (extra_specs.CLIQUE_KEY,
                         self.request.clique.mode
                         is not extra_specs.CliqueMode.NONE),
                        (extra_specs.NUMA_AFFINITY_KEY,
                         self.request.numa_affinity
                         is not extra_specs.NumaAffinity.NONE)) if on),
                any_required, reschedule=False)
            return self.plan()
        ids = self.cliques(clique_required)
        if self.refusal:
            return self.plan()
        buses, hole = self.buses(numa_required)
        if self.refusal:
            return self.plan()
        cells = self.grace(numa_required, buses)
        if self.refusal:
            return self.plan()
        return self.plan(cliques=ids, buses=buses, hole64=hole,
                         distances=self.distances(cells), grace=cells,
                         guest_topology=self.guest_topology(ids, buses),
                         port_links=self.port_links(buses))

    def tenant_input_refused(self) -> bool:
        """Refuse a new build whose image or flavor says what QEMU refuses.

        Physical address bits reach the guest config from the tenant's
        image (``hw_maxphysaddr_bits``: Nova's API and scheduler take any
        integer) or a flavor made before our validators; QEMU refuses to
        start a guest outside its range, and the hole arithmetic must not
        meet a negative or astronomic count. An existing server keeps
        running: its hole is then sized without a bits check, as it is
        where the host reports bits outside that range.
        """
        facts = self.facts
        bits = facts.phys_bits
        if (bits is None
                or pcihole64.MIN_PHYS_BITS <= bits <= pcihole64.MAX_PHYS_BITS):
            return False
        if facts.phys_bits_from_host:
            self.facts = dataclasses.replace(facts, phys_bits=None)
            return False
        shown = str(bits) if abs(bits) < 10 ** 12 else 'a %d-bit number' % (
            bits.bit_length())
        message = '%s is %s; allowed: %s: change it and boot again' % (
            facts.phys_bits_property, shown, pcihole64.PHYS_BITS_ALLOWED)
        if facts.new_build:
            self.refusal = Refusal(message, reschedule=False)
            return True
        self.notes.append(message + ' (the 64-bit PCI hole is sized '
                          'without a physical address bits check)')
        self.facts = dataclasses.replace(facts, phys_bits=None)
        return False

    def plan(self, **changes) -> GuestPlan:
        """The plan with ``changes``, or only the refusal once refused."""
        if self.refusal:
            changes = {'refusal': self.refusal}
        return GuestPlan(request=self.request, devices=self.devices,
                         notes=tuple(self.notes), info=tuple(self.info),
                         lost=tuple(self.lost),
                         **changes)

    def cliques(self, required: bool) -> dict[str, int]:
        request = self.request.clique
        if request.mode is extra_specs.CliqueMode.NONE:
            return {}
        key = '%s=%s' % (extra_specs.CLIQUE_KEY,
                         request.clique_id if request.clique_id is not None
                         else request.mode.value)
        if self.facts.libvirt_version < min_versions.LIBVIRT_QEMU_OVERRIDE:
            self.problem(
                '%s needs libvirt %s or later for <qemu:override>; this '
                'host has %s: upgrade libvirt on it' % (
                    key, min_versions.text(min_versions.LIBVIRT_QEMU_OVERRIDE),
                    min_versions.text(self.facts.libvirt_version)),
                required, reschedule=True)
            return {}
        if self.facts.hypervisor_hidden and self.problem(
                '%s: remove hw:hide_hypervisor_id (flavor) and '
                'img_hide_hypervisor_id (image); the NVIDIA guest driver '
                'ignores cliques when the hypervisor is hidden' % key,
                required, reschedule=False):
            return {}
        gpus = [d.address for d in self.devices if d.nvidia_gpu]
        if not gpus:
            self.problem('%s: no GPU of the instance is an NVIDIA '
                         'display-class device; point the flavor\'s PCI '
                         'alias at NVIDIA GPUs' % key, required,
                         reschedule=False)
            return {}
        result = instance_cliques.plan(
            request, gpus, self.host.cliques,
            _link_name(self.host, self.options.acs_policy),
            self.options.p2p_level)
        # Existing servers keep the cliques the host still has.
        if result.refusal and self.problem(
                '%s: %s; another host may have them in one clique, or '
                'use %s=auto to accept several' % (
                    key, result.refusal, extra_specs.CLIQUE_KEY),
                required=True, reschedule=True):
            return {}
        self.notes.extend(result.warnings)
        self.info.extend('%s: %s' % (key, line) for line in result.info)
        return result.ids

    def buses(self, required: bool
              ) -> tuple[expander_buses.BusLayout, pcihole64.Hole64 | None]:
        none = expander_buses.BusLayout(), None
        if self.request.numa_affinity is extra_specs.NumaAffinity.NONE:
            return none
        key = '%s=%s' % (extra_specs.NUMA_AFFINITY_KEY,
                         self.request.numa_affinity.value)
        facts = self.facts
        if not facts.host_node_of_cell:
            self.problem('%s needs an instance NUMA topology: add '
                         'hw:cpu_policy=dedicated or hw:numa_nodes to the '
                         'flavor' % key, required, reschedule=False)
            return none
        machine = facts.machine_type or ''
        if 'q35' not in machine and not machine.startswith('virt'):
            self.problem('%s needs the q35 (x86) or virt (aarch64) machine '
                         'type (PCIe expander buses), this guest has %s: '
                         'set hw_machine_type=q35 on the image' % (
                             key, facts.machine_type),
                         required, reschedule=False)
            return none
        if not facts.acpi:
            self.problem('%s needs guest ACPI, the only way a guest learns '
                         'an expander bus\'s NUMA node: use an image and '
                         'architecture where Nova enables ACPI' % key,
                         required, reschedule=False)
            return none
        aligned = [d for d in self.devices
                   if devices_mod.aligned(d, self.options.align)]
        try:
            # A Grace GPU has a root complex of its own: its own bus.
            layout = expander_buses.layout(
                aligned, facts.guest_cell_of,
                expander_buses.Grouping.ROOT_COMPLEX if self.grace_gpus
                else self.options.grouping, facts.used_pci_indexes)
        except exception.GuestLayoutError as exc:
            self.problem('%s: %s' % (key, exc), required, reschedule=False)
            return none
        for address, reason in sorted(layout.unplaced.items()):
            if self.problem(
                    '%s: %s stays on the root bus: %s' % (
                        key, address, reason),
                    required, reschedule=True):
                return none
        if not layout.buses:
            return none
        # nvgrace-gpu shows a Grace GPU's memory as BARs of its own.
        hole = pcihole64.plan(self.options.pcihole64,
                              tuple(bar for d in self.devices
                                    for bar in d.bars64)
                              + tuple(bar for g in self.grace_gpus
                                      for bar in g.memory_bars),
                              facts.memory, facts.phys_bits)
        if hole.problem:
            if self.problem('%s: %s' % (key, hole.problem), required,
                            reschedule=facts.phys_bits_from_host):
                return none
            self.notes.append('%s: devices stay where Nova puts them' % key)
            return none
        return layout, hole

    def guest_topology(self, cliques: dict[str, int],
                       buses: expander_buses.BusLayout) -> str | None:
        """The placed devices' host topology, for an agent in the guest."""
        if not self.options.guest_topology or not buses.buses:
            return None
        facts = self.facts
        if (facts.libvirt_version < min_versions.LIBVIRT_FWCFG
                or facts.qemu_version < min_versions.QEMU_FWCFG):
            self.notes.append(
                'the guest gets no topology description: fw_cfg entries '
                'need libvirt %s and QEMU %s or later, this host has '
                'libvirt %s and QEMU %s' % tuple(map(min_versions.text, (
                    min_versions.LIBVIRT_FWCFG, min_versions.QEMU_FWCFG,
                    facts.libvirt_version, facts.qemu_version))))
            return None
        try:
            return topology_description.encode(topology_description.describe(
                buses, self.devices, cliques, self.host,
                link_class.AcsPolicy(self.options.acs_policy),
                facts.host_cpu))
        except exception.DescriptionTooLarge as exc:
            self.notes.append('the guest gets no topology description: %s'
                              % exc)
            return None

    def grace(self, required: bool,
              buses: expander_buses.BusLayout) -> grace_cells.Layout:
        """Generic-initiator cells for the Grace GPUs on expander buses.

        Without them the NVIDIA guest driver cannot use the GPU's memory:
        a stack that cannot write them refuses a new build whatever the
        flavor's mode, rather than start a guest with a crippled GPU.
        """
        placed = [g for g in self.grace_gpus if buses.port_of(g.address)]
        if not placed:
            return grace_cells.Layout()
        key = '%s=%s' % (extra_specs.NUMA_AFFINITY_KEY,
                         self.request.numa_affinity.value)
        facts = self.facts
        if (facts.libvirt_version < min_versions.LIBVIRT_GENERIC_INITIATOR
                or facts.qemu_version < min_versions.QEMU_GENERIC_INITIATOR):
            self.problem(
                '%s: Grace GPU %s needs libvirt %s and QEMU %s or later for '
                'its memory\'s NUMA cells (ACPI generic initiators); this '
                'host has libvirt %s and QEMU %s: upgrade them' % (
                    key, ', '.join(g.address for g in placed),
                    *map(min_versions.text, (
                        min_versions.LIBVIRT_GENERIC_INITIATOR,
                        min_versions.QEMU_GENERIC_INITIATOR,
                        facts.libvirt_version, facts.qemu_version))),
                True, reschedule=True)
            return grace_cells.Layout()
        unknown = [g.address for g in placed if not g.memory_nodes]
        if unknown and self.problem(
                '%s: the host memory nodes of Grace GPU %s are unknown (see '
                '`nova-gpu-p2p topology`); its guest gets no NUMA cells for '
                'its memory' % (key, ', '.join(unknown)),
                required, reschedule=True):
            return grace_cells.Layout()
        return grace_cells.layout(
            [g for g in placed if g.memory_nodes],
            len(facts.host_node_of_cell), self.options.grace_cells_per_gpu)

    def port_links(self, buses: expander_buses.BusLayout
                   ) -> dict[int, root_port_links.PortLink]:
        """Each placed device's root port at its host link, where known.

        Needs ``<qemu:override>`` (libvirt 8.2); without it the ports
        keep QEMU's defaults and only the agent's file tells NCCL.
        """
        if (not buses.buses or self.facts.libvirt_version
                < min_versions.LIBVIRT_QEMU_OVERRIDE):
            return {}
        links, inexact = root_port_links.port_links(
            buses, self.host.topology, self.facts.qemu_version)
        if inexact:
            self.info.append(inexact)
        return links

    def distances(self, grace_layout: grace_cells.Layout = (
            grace_cells.Layout())) -> tuple[tuple[int, ...], ...] | None:
        cells = (self.facts.host_node_of_cell or ()) + grace_layout.host_nodes
        if not self.options.numa_distances or len(cells) < 2:
            return None
        distances = numa_distances.guest_distances(
            cells, self.host.topology.numa_nodes)
        if distances is None:
            self.notes.append('the host reports no NUMA distances for '
                              'nodes %s; the guest keeps default distances'
                              % ', '.join(map(str, cells)))
        return distances


def decide(request: extra_specs.GPUP2PRequest,
           devices: Sequence[devices_mod.GuestDevice],
           host: host_gpus.HostGPUs, facts: GuestFacts,
           options: Options) -> GuestPlan:
    """Everything to add to one guest's config, or why not."""
    if not request.wanted:
        return GuestPlan(request=request, devices=tuple(devices))
    return _Decision(request, devices, host, facts, options).run()
