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

"""Domain XML of every corpus host x flavor kind, through the real driver.

Checks that need the XML libvirt would get (schema validation here;
``virsh domxml-to-native`` and benchmarks later) all need the same
documents: Nova's whole guest config build plus ours, on a compute that
looks like the corpus host. :class:`CorpusXMLMixin` boots each
:data:`KINDS` entry that fits a host on Nova's in-process cloud and
returns one :class:`Outcome` per kind: the XML, or the refusal.

Whether a host *can* honour a ``required`` kind is answered by
:func:`can_honour` from the hand-written oracle in
:mod:`tests.fixtures.hosts` (``EXPECTED``) and the devices
Nova claimed, never from our planner, so a test can compare the two.

Limits of Nova's libvirt test double, recorded per host in
:attr:`HostFacts.limits` rather than skipped silently:

* it knows PCI domain 0000 only, so GPUs and NICs in other domains are
  not offered to Nova (``gpu-on-cpuless-node``: 0000:01:00.0 and
  0000:41:00.0 are; 0001:01:00.0 is not);
* it gives every NUMA node an equal share of CPUs; a CPU-less node is
  represented by leaving its CPUs out of ``[compute] cpu_dedicated_set``
  and restarting the compute, so Nova puts no pinned guest cell there
  (every kind here pins its CPUs).
"""

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import itertools
import time

import fixtures
from nova.tests.functional.api import client as api_client

from nova_gpu_p2p.compute import driver
from tests.cloud import nova_cloud as base
from tests.fixtures import hosts

CLIQUE_KEY = 'hw:gpu_p2p_clique'
AFFINITY_KEY = 'hw:gpu_numa_affinity'
PCI_POLICY_KEY = 'hw:pci_numa_affinity_policy'
#: The defaults a required clique is judged by: ``[gpu_p2p] p2p_level``
#: PXB with ``acs_policy = route`` (hosts.EXPECTED's routed links).
P2P_CLASSES = frozenset(('PIX', 'PXB'))
#: Fake host CPUs a guest cell gets at most: small, so every host fits.
CPUS_PER_CELL = 2
#: Seconds a boot or delete may take before the helper gives up.
WAIT_S = 60.0
POLL_S = 0.05
#: The compute manager's instance action event for one build.
BUILD_EVENT = 'compute__do_build_and_run_instance'
DELETE_EVENT = 'compute_terminate_instance'
#: A boot that fails before the driver runs is tried this often in all.
BOOT_ATTEMPTS = 2


@dataclasses.dataclass(frozen=True)
class FlavorKind:
    """One flavor shape; counts are resolved per host by HostFacts."""

    name: str
    #: hw:gpu_p2p_clique: none, auto, required or 0..15.
    clique: str
    #: hw:gpu_numa_affinity: none, preferred or required.
    affinity: str
    #: hw:numa_nodes: 1 or 2.
    guest_nodes: int = 1
    #: One NIC (PCI alias ``nic``) besides the GPUs.
    nic: bool = False
    #: Every GPU Nova is offered on the host; False: half of them.
    all_gpus: bool = False

    @property
    def required(self) -> bool:
        """Whether a host may legitimately refuse this kind."""
        return 'required' in (self.clique, self.affinity)

    def extra_specs(self) -> dict[str, str]:
        specs = {}
        if self.clique != 'none':
            specs[CLIQUE_KEY] = self.clique
        if self.affinity != 'none':
            specs[AFFINITY_KEY] = self.affinity
        return specs


#: Chosen so that on every host each value of each dimension occurs: the
#: 1-node, NIC-less kinds alone cover every clique, affinity and GPU-count
#: value (hosts without NICs or a second node with CPUs run those); the
#: NIC and 2-node kinds add what those hosts can do. Fixed IDs use both
#: ends of QEMU's 0..15.
KINDS: tuple[FlavorKind, ...] = (
    FlavorKind('nova-only', 'none', 'none'),
    FlavorKind('auto-all', 'auto', 'none', all_gpus=True),
    FlavorKind('clique-required-half', 'required', 'preferred'),
    FlavorKind('fixed0-affinity-required', '0', 'required'),
    FlavorKind('affinity-required-all', 'none', 'required', all_gpus=True),
    FlavorKind('both-required-all', 'required', 'required', all_gpus=True),
    FlavorKind('fixed15-preferred-all', '15', 'preferred', all_gpus=True),
    FlavorKind('nic-auto-required', 'auto', 'required', nic=True),
    FlavorKind('nic-2node-fixed15-required-all', '15', 'required',
               guest_nodes=2, nic=True, all_gpus=True),
    FlavorKind('2node-auto-required', 'auto', 'required', guest_nodes=2),
)


def _domain(address: str) -> int:
    return int(address.split(':')[0], 16)


@dataclasses.dataclass(frozen=True)
class HostFacts:
    """What Nova's test double can offer of one corpus host."""

    name: str
    expected: hosts.Expected
    #: NVIDIA GPUs Nova is offered (alias ``gpu``), in address order.
    gpus: tuple[str, ...]
    #: NICs Nova is offered (alias ``nic``), in address order.
    nics: tuple[str, ...]
    #: Host NUMA nodes with CPUs.
    cpu_nodes: tuple[int, ...]
    #: Host NUMA nodes, CPU-less ones included.
    all_nodes: int
    #: What of the real host the test double cannot show, and why.
    limits: tuple[str, ...]
    #: NIC address -> host NUMA node (hosts.EXPECTED has no NIC nodes).
    nic_node: dict[str, int | None] = dataclasses.field(
        default_factory=dict)

    @property
    def gpu_node(self) -> dict[str, int | None]:
        return {g.address: g.numa_node for g in self.expected.gpus}

    def gpu_count(self, kind: FlavorKind) -> int:
        return len(self.gpus) if kind.all_gpus else max(1, len(self.gpus) // 2)

    def vcpus(self, kind: FlavorKind) -> int:
        per_node = base.FAKE_CPUS // self.all_nodes
        return kind.guest_nodes * min(CPUS_PER_CELL, per_node)

    def not_applicable(self, kind: FlavorKind) -> str | None:
        """Why the kind cannot run on this host at all; None: it can."""
        if kind.nic and not self.nics:
            return 'the host offers Nova no NIC'
        if kind.guest_nodes > len(self.cpu_nodes):
            return ('%d guest NUMA nodes, the host has %d with CPUs'
                    % (kind.guest_nodes, len(self.cpu_nodes)))
        gpu_nodes = {self.gpu_node[a] for a in self.gpus} - {None}
        if kind.guest_nodes > 1 and len(gpu_nodes) < kind.guest_nodes:
            return ('%d guest NUMA nodes, the host has GPUs on %d'
                    % (kind.guest_nodes, len(gpu_nodes)))
        return None

    def _fits_locally(self, kind: FlavorKind) -> bool:
        """Whether Nova's default (legacy) PCI NUMA policy can place it.

        Legacy wants every device with a NUMA node on one of the guest's
        host nodes; when no choice of nodes holds enough GPUs (and the
        NIC), the kind asks for ``preferred`` so the boot reaches our
        driver, which then has devices without a guest cell to handle.
        """
        nic_nodes = [self.nic_node.get(a) for a in self.nics]
        for nodes in itertools.combinations(self.cpu_nodes,
                                            kind.guest_nodes):
            near = set(nodes) | {None}
            gpus = sum(self.gpu_node[a] in near for a in self.gpus)
            nics = sum(n in near for n in nic_nodes)
            if gpus >= self.gpu_count(kind) and (nics or not kind.nic):
                return True
        return False

    def flavor_specs(self, kind: FlavorKind) -> dict[str, str]:
        specs = kind.extra_specs()
        if not self._fits_locally(kind):
            specs[PCI_POLICY_KEY] = 'preferred'
        return specs


def host_facts(name: str, nic_nodes: dict[str, int | None] | None = None
               ) -> HostFacts:
    """The corpus host as Nova's test double can show it.

    ``nic_nodes`` gives the NICs' NUMA nodes (hosts.EXPECTED lists NIC
    addresses only); the mixin reads them from the discovered topology.
    """
    expected = hosts.EXPECTED[name]
    nodes = hosts.HOSTS[name].numa_nodes
    limits = []
    left_out = [a for a in expected.addresses + expected.nics if _domain(a)]
    if left_out:
        limits.append(
            '%s: PCI domain other than 0000, which Nova\'s libvirt test '
            'double cannot list; not offered to Nova' % ', '.join(left_out))
    cpu_less = [n.id for n in nodes if not n.cpus]
    if cpu_less:
        limits.append(
            'NUMA node %s has no CPUs; the test double gives every node '
            'CPUs, so they are left out of [compute] cpu_dedicated_set'
            % ', '.join(map(str, cpu_less)))
    return HostFacts(
        name=name, expected=expected,
        gpus=tuple(a for a in expected.addresses if not _domain(a)),
        nics=tuple(a for a in expected.nics if not _domain(a)),
        cpu_nodes=tuple(n.id for n in nodes if n.cpus),
        all_nodes=len(nodes), limits=tuple(limits),
        nic_node=dict(nic_nodes or {}))


@dataclasses.dataclass
class Outcome:
    """One boot of one kind: the XML Nova defined, or the refusal."""

    host: str
    kind: FlavorKind
    flavor_specs: dict[str, str]
    gpus: int
    vcpus: int
    server_id: str
    #: The domain XML as passed to libvirt; None when the build failed.
    xml: str | None = None
    #: The API's fault message (after a reschedule, Nova's generic one).
    fault: str | None = None
    #: What our driver raised, from the last _get_guest_config call.
    refusal: str | None = None
    #: Host PCI addresses Nova claimed for the instance.
    pci_devices: tuple[str, ...] = ()
    #: Host NUMA node of each guest cell, as Nova fitted them.
    host_cells: tuple[int, ...] = ()

    @property
    def refused(self) -> bool:
        return self.xml is None

    @property
    def label(self) -> str:
        return '%s/%s' % (self.host, self.kind.name)


def can_honour(facts: HostFacts, kind: FlavorKind,
               devices: Iterable[str], host_cells: Sequence[int]
               ) -> tuple[bool, str]:
    """Whether the host can honour the kind's ``required`` parts.

    Judged from hosts.EXPECTED for the devices Nova claimed: a required
    clique needs every pair of the instance's GPUs within the P2P
    classes at the default level and ACS policy, and GPUs that are not
    consumer cards (GeForce, TITAN); required affinity needs
    every GPU and NIC on a host node where the instance has a cell.
    """
    devices = sorted(devices)
    gpus = [a for a in devices if a in facts.gpu_node]
    reasons = []
    if kind.clique == 'required':
        far = ['%s-%s %s' % (a, b, facts.expected.link(a, b))
               for a, b in itertools.combinations(gpus, 2)
               if facts.expected.link(a, b) not in P2P_CLASSES]
        if far:
            reasons.append('GPU pairs beyond PXB: %s' % ', '.join(far))
        if facts.expected.consumer and len(gpus) > 1:
            reasons.append('consumer GPUs get no clique')
    if kind.affinity == 'required':
        node = dict(facts.gpu_node, **facts.nic_node)
        away = ['%s (node %s)' % (a, node.get(a)) for a in devices
                if node.get(a) not in host_cells]
        if away:
            reasons.append('devices off the guest\'s host nodes %s: %s'
                           % (list(host_cells), ', '.join(away)))
    return not reasons, '; '.join(reasons) or 'honourable'


class _GuestConfigSpy:
    """Records what Nova handed our driver, and what the driver raised.

    Wraps, never replaces, the real method: the XML is still Nova's
    whole build plus ours.
    """

    def __init__(self) -> None:
        self.calls: dict[str, dict] = {}
        self.original = driver.GPUP2PLibvirtDriver._get_guest_config

    def __call__(self, compute_driver, instance, *args, **kwargs):
        record = {
            'pci_devices': tuple(sorted(
                d.address for d in instance.pci_devices or ())),
            'host_cells': tuple(
                c.id for c in instance.numa_topology.cells)
            if instance.numa_topology is not None else (),
            'refusal': None,
        }
        self.calls[instance.uuid] = record
        try:
            return self.original(compute_driver, instance, *args, **kwargs)
        except Exception as exc:
            record['refusal'] = '%s: %s' % (type(exc).__name__, exc)
            raise


class CorpusXMLMixin:
    """Boots flavor kinds on corpus hosts; use with GPUHostsTestBase."""

    #: Corpus host name -> the compute's hostname (start_corpus_host).
    corpus_hostnames: dict[str, str]

    def setUp(self):
        super().setUp()
        self.corpus_hostnames = {}

    def _spy(self) -> _GuestConfigSpy:
        spy = getattr(self, '_corpus_spy', None)
        if spy is None:
            spy = self._corpus_spy = _GuestConfigSpy()

            def wrapper(compute_driver, instance, *args, **kwargs):
                return spy(compute_driver, instance, *args, **kwargs)

            self.useFixture(fixtures.MockPatchObject(
                driver.GPUP2PLibvirtDriver, '_get_guest_config', wrapper))
        return spy

    def start_corpus_host(self, corpus_host: str,
                          hostname: str | None = None) -> HostFacts:
        """A compute as close to the corpus host as the test double gets."""
        hostname = hostname or corpus_host
        # Refusals are builds that failed on this compute; a run of them
        # must not get the compute disabled before the kinds that fit.
        self.flags(consecutive_build_service_disable_threshold=0,
                   group='compute')
        topology = self.start_gpu_compute(hostname, corpus_host)
        facts = host_facts(corpus_host, nic_nodes={
            a: topology.functions[a].numa_node
            for a in hosts.EXPECTED[corpus_host].nics})
        cpu_less = set(range(facts.all_nodes)) - set(facts.cpu_nodes)
        if cpu_less:
            per_node = base.FAKE_CPUS // facts.all_nodes
            dedicated = sorted(
                cpu for node in facts.cpu_nodes
                for cpu in range(node * per_node, (node + 1) * per_node))
            self.flags(cpu_dedicated_set=','.join(map(str, dedicated)),
                       group='compute')
            self.restart_compute_service(hostname)
        self.corpus_hostnames[corpus_host] = hostname
        return facts

    def _wait_for_build(self, server: dict) -> dict:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            server = self.api.get_server(server['id'])
            if server['status'] == 'ACTIVE' or (
                    server['status'] == 'ERROR' and 'fault' in server):
                return server
            time.sleep(POLL_S)
        self.fail('server %s still %s after %ds' % (
            server['id'], server['status'], WAIT_S))

    def _wait_for_compute(self, server: dict, action_name: str = 'create',
                          event_name: str = BUILD_EVENT) -> None:
        """Until the compute's work on the server for an action is done.

        The API shows ACTIVE or ERROR before the build thread is done, and
        a deleted server is gone from the API before the compute has
        updated its resource tracker; the next boot then races that thread
        in this one process (both update one ComputeNode object, whose
        context the other thread is using: "Can't upgrade a READER
        transaction to a WRITER", or a PCI claim that fails because the
        devices are not free yet).
        """
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for action in self.admin_api.get_instance_actions(server['id']):
                if action['action'] != action_name:
                    continue
                events = self.admin_api.get_instance_action_details(
                    server['id'], action['request_id'])['events']
                if any(e['event'] == event_name and e['finish_time']
                       for e in events):
                    return
            time.sleep(POLL_S)
        self.fail('%s of server %s still running after %ds'
                  % (action_name, server['id'], WAIT_S))

    def _delete_and_wait(self, server: dict) -> None:
        """Nova's _delete_server, polling faster: boots are the cost."""
        self.api.delete_server(server['id'])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                self.api.get_server(server['id'])
            except api_client.OpenStackApiNotFoundException:
                if server.get('OS-EXT-SRV-ATTR:host'):
                    self._wait_for_compute(server, 'delete', DELETE_EVENT)
                return
            time.sleep(POLL_S)
        self.fail('server %s not deleted after %ds'
                  % (server['id'], WAIT_S))

    def boot_kind(self, facts: HostFacts, kind: FlavorKind) -> Outcome:
        """Boot one kind, capture its XML or refusal, delete the server."""
        spy = self._spy()
        specs = facts.flavor_specs(kind)
        gpus, vcpus = facts.gpu_count(kind), facts.vcpus(kind)
        flavor = self.gpu_flavor(gpus, numa_nodes=kind.guest_nodes,
                                 nics=1 if kind.nic else 0, vcpus=vcpus,
                                 extra_specs=specs)
        for attempt in range(BOOT_ATTEMPTS):
            server = self.api.post_server({'server': self._build_server(
                image_uuid=self.q35_image, flavor_id=flavor,
                networks='none')})
            server = self._wait_for_build(server)
            call = spy.calls.get(server['id'], {})
            if (call or server['status'] == 'ACTIVE'
                    or attempt + 1 == BOOT_ATTEMPTS):
                break
            # Failed before our driver ran: in this one process a build
            # can race another thread for the compute node record ("Can't
            # upgrade a READER transaction to a WRITER" in the claim),
            # which leaves the resource tracker holding that claim's PCI
            # devices, so every later boot fails too. Restart the compute
            # (its tracker is rebuilt from the database) and try once
            # more; a second such failure is reported by the test.
            self._delete_and_wait(server)
            self.restart_compute_service(self.corpus_hostnames[facts.name])
        if call or server['OS-EXT-SRV-ATTR:host']:
            self._wait_for_compute(server)
        outcome = Outcome(
            host=facts.name, kind=kind, flavor_specs=specs, gpus=gpus,
            vcpus=vcpus, server_id=server['id'],
            pci_devices=call.get('pci_devices', ()),
            host_cells=call.get('host_cells', ()),
            refusal=call.get('refusal'))
        if server['status'] == 'ACTIVE':
            outcome.xml = self.defined_xml[server['id']]
        else:
            outcome.fault = server['fault']['message']
        self._delete_and_wait(server)
        return outcome

    def corpus_outcomes(self, corpus_host: str,
                        kinds: Sequence[FlavorKind] = KINDS
                        ) -> tuple[HostFacts, list[Outcome]]:
        """Every applicable kind booted once on a fresh compute."""
        facts = self.start_corpus_host(corpus_host)
        return facts, [self.boot_kind(facts, kind) for kind in kinds
                       if facts.not_applicable(kind) is None]
