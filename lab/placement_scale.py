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

"""Which allocation candidates placement returns for N GPUs, and how fast.

With PCI devices in placement, Nova asks for N GPUs of one alias as N
request groups of one device each (``group_policy=none``), and every GPU
is a child provider of its compute node with one unit. Placement 16.0
builds every *ordered* assignment of free GPUs to those groups
(``n!/(n-k)!`` per host: 43680 for 4 of 16 GPUs, 518918400 for 8 of 16)
before it cuts the answer to the query's ``limit`` (Nova's ``[scheduler]
max_placement_results``), in the order of a Python set of candidates.
``[placement] max_allocation_candidates`` stops the generation early
instead, keeping the first candidates of each host: permutations in
lexicographic order over the host's GPUs as a Python set of provider IDs
lists them, which is no order an operator can choose. Whether a candidate
whose GPUs are one clique is among those Nova receives is what
:class:`~nova_gpu_p2p.scheduler.GPUP2PCliqueFilter` depends on.

:func:`measure` answers that with the real code: Nova's own request
building from the documented flavor (:func:`nova_query`) and placement's
WSGI application over in-memory SQLite (placement's
``PlacementFixture``), one case per forked process so that a case can be
stopped after ``timeout`` seconds or when it outgrows ``memory_mb``. A
case's ``seed`` stands for the luck of a real cloud: it is placement's
``PYTHONHASHSEED`` and moves the providers' database IDs, the two things
besides the settings that decide which candidates come first.
:func:`filter_seconds` times what Nova's scheduler then spends on each
candidate. ``python -m lab.placement_scale``
prints the tables of ``doc/source/scheduling-scale.rst``.
"""

import argparse
import collections
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
import contextlib
import dataclasses
import json
import os
import random
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from nova import conf as nova_conf
from nova import objects
from nova.pci import request as pci_request
from nova.pci import stats as pci_stats
from nova.scheduler.client import report
from nova.scheduler.filters import numa_topology_filter
from nova.scheduler.filters import pci_passthrough_filter
from nova.scheduler import host_manager
from nova.scheduler import utils as scheduler_utils
from nova.virt import hardware
from oslo_config import fixture as config_fixture
from placement import db_api as placement_db
from placement.tests.functional.fixtures import placement as placement_fixture
import requests
import sqlalchemy

from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import driver_stat
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p import scheduler
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p import traits
import tests

#: What the GPUs are to Nova: vendor 10de, one product, whole devices.
ALIAS = {'name': 'gpu', 'vendor_id': '10de', 'product_id': '2330',
         'device_type': 'type-PCI'}
#: The resource class Nova gives such a GPU in placement.
GPU_CLASS = 'CUSTOM_PCI_10DE_2330'
#: The compute node's own inventory, more than any case asks for.
HOST_INVENTORY = {'PCPU': 512, 'MEMORY_MB': 4194304, 'DISK_GB': 10000}
#: Nova's default ``[scheduler] max_placement_results``.
NOVA_LIMIT = 1000
#: How far apart the provider IDs of two seeds start.
ID_STRIDE = 1000
NAMESPACE = uuid.UUID('7d1c3b8e-4f0a-4e43-9a55-3c0b2f1e6a10')


@dataclasses.dataclass(frozen=True)
class Layout:
    """A host's GPUs as cliques: the first ``cliques[0]`` GPUs are clique 0.

    Nova creates a compute node's GPU providers in the order its PCI
    tracker lists the devices (by PCI address), so the GPUs of one clique
    get neighbouring provider IDs.
    """

    cliques: tuple[int, ...]

    @property
    def name(self) -> str:
        return '+'.join(str(size) for size in self.cliques)

    @property
    def gpus(self) -> int:
        return sum(self.cliques)

    def clique_of(self, gpu: int) -> int:
        """Clique ID of the host's ``gpu``-th GPU (0-based)."""
        end = 0
        for clique, size in enumerate(self.cliques):
            end += size
            if gpu < end:
                return clique
        raise IndexError(gpu)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The Nova and placement options that decide which candidates come."""

    name: str
    #: Nova ``[scheduler] max_placement_results``; None: no ``limit`` in
    #: the query, to count everything placement generates.
    max_placement_results: int | None = NOVA_LIMIT
    #: Placement ``[placement] max_allocation_candidates``.
    max_allocation_candidates: int = -1
    #: Placement ``[placement] allocation_candidates_generation_strategy``.
    generation_strategy: str = 'depth-first'
    #: Placement ``[workarounds] optimize_for_wide_provider_trees``.
    optimize_for_wide_provider_trees: bool = False
    #: Nova ``[pci] alias`` ``traits``: the alias asks for GPUs with this
    #: clique ID's trait (a flavor per clique); None: any GPU.
    alias_clique: int | None = None

    @property
    def generation(self) -> tuple:
        """The options that decide what placement generates (not limit)."""
        return (self.max_allocation_candidates, self.generation_strategy,
                self.optimize_for_wide_provider_trees, self.alias_clique)


#: Both services as installed.
DEFAULTS = Settings('defaults')
#: As installed, without a limit: every candidate placement generates.
UNLIMITED = Settings('no limit', max_placement_results=None)
#: What placement's option help suggests for wide provider trees.
PLACEMENT_HELP = Settings('placement help', NOVA_LIMIT, 100000,
                          'breadth-first', True)
#: What doc/source/scheduling-scale.rst recommended before the filter
#: built candidates from the pools: placement's answer alone had to hold
#: a fitting one.
CAP_10000 = Settings('cap 10000', 10000, 10000, 'breadth-first', True)
#: Candidates per compute node in the recommended cap.
PER_HOST = 2
#: The cloud doc/source/scheduling-scale.rst sizes its example for.
DOC_HOSTS = 50
#: The flavor's alias bound to clique 0, with the small cap it needs:
#: all candidates are then orders of the same GPUs, which placement keeps
#: apart by comparing each new one with every one it has.
PER_CLIQUE = Settings('clique-0 alias', 200, 200, 'breadth-first', True,
                      alias_clique=0)
SETTINGS = (UNLIMITED, DEFAULTS, PLACEMENT_HELP, CAP_10000, PER_CLIQUE)


def recommended(hosts: int) -> Settings:
    """What doc/source/scheduling-scale.rst recommends for ``hosts``.

    Two candidates per compute node, breadth-first, optimized: the filter
    builds a fitting candidate from any one a host gets.
    """
    cap = PER_HOST * hosts
    return Settings('recommended', cap, cap, 'breadth-first', True)


@dataclasses.dataclass(frozen=True)
class Case:
    """One GET /allocation_candidates over identical GPU hosts."""

    layout: Layout
    #: GPUs the flavor asks for (one alias, this count).
    request: int
    hosts: int = 1
    #: GPUs already in use on every host (indices into the layout).
    busy: tuple[int, ...] = ()
    settings: Settings = DEFAULTS
    #: Placement's PYTHONHASHSEED; provider IDs start at
    #: ``1 + seed * ID_STRIDE``.
    seed: int = 0

    def free(self, gpu: int) -> bool:
        return gpu not in self.busy

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> 'Case':
        layout = Layout(tuple(data['layout']['cliques']))
        return cls(**dict(data, layout=layout, busy=tuple(data['busy']),
                          settings=Settings(**data['settings'])))


#: Every host empty, and with one GPU of clique 0 in use.
BUSY = ((), (0,))


def default_cases(hosts: Sequence[int] = (1, 3),
                  busy: Sequence[tuple[int, ...]] = BUSY,
                  settings: Sequence[Settings] = SETTINGS,
                  seeds: int = 1) -> list[Case]:
    """The grid of the issue: 8 GPUs asked for 2 and 4, 16 for 2, 4, 8.

    8 GPUs as 4+4 and as four pairs, 16 as 8+8 and as four cliques of 4.
    Fewer hosts first, so :func:`measure` can skip what a smaller case
    showed to be too slow.
    """
    shapes = [(Layout((4, 4)), (2, 4)), (Layout((2, 2, 2, 2)), (2, 4)),
              (Layout((8, 8)), (2, 4, 8)), (Layout((4, 4, 4, 4)), (2, 4, 8))]
    return [Case(layout, request, count, used, option, seed)
            for seed in range(seeds)
            for count in hosts
            for layout, requests_ in shapes
            for request in requests_
            for used in busy
            for option in settings]


def luck_cases(seeds: int = 8) -> list[Case]:
    """Whether a fit survives a cap, over seeds: 4 and 8 of 16 GPUs.

    4 of 16 with every host empty, one GPU of clique 0 in use, and (four
    cliques of four) one GPU in use in each of cliques 0 to 2, so that
    only clique 3 fits; capped at Nova's 1000 and at the recommended
    10000 for one host, at 10000 and 30000 for three. 8 of 16 on empty
    8+8 hosts, recommended and with the clique-0 alias.
    """
    thirty = dataclasses.replace(CAP_10000, name='cap 30000',
                                 max_placement_results=30000,
                                 max_allocation_candidates=30000)
    thousand = dataclasses.replace(CAP_10000, name='cap 1000',
                                   max_placement_results=NOVA_LIMIT,
                                   max_allocation_candidates=NOVA_LIMIT)
    four = [(Layout((8, 8)), ()), (Layout((8, 8)), (0,)),
            (Layout((4, 4, 4, 4)), ()), (Layout((4, 4, 4, 4)), (0,)),
            (Layout((4, 4, 4, 4)), (0, 4, 8))]
    runs = [(1, thousand), (1, CAP_10000), (3, CAP_10000), (3, thirty)]
    cases = [Case(layout, 4, hosts, busy, settings, seed)
             for seed in range(seeds)
             for layout, busy in four
             for hosts, settings in runs]
    cases += [Case(Layout((8, 8)), 8, hosts, (), settings, seed)
              for seed in range(seeds)
              for hosts in (1, 3)
              for settings in (CAP_10000, PER_CLIQUE)]
    return cases


def flavor_request(request: int, numa_nodes: int = 1
                   ) -> flavor_commands.FlavorRequest:
    """The flavor ``nova-gpu-p2p flavor --gpus <request>`` prints."""
    return flavor_commands.FlavorRequest(gpus=request, alias=ALIAS['name'],
                                         numa_nodes=numa_nodes)


@contextlib.contextmanager
def _nova_config(limit: int | None = None,
                 alias_clique: int | None = None) -> Iterator[None]:
    """Nova's scheduler options for PCI in placement, only meanwhile.

    :param alias_clique: the alias asks for GPUs of this clique ID.
    """
    objects.register_all()
    alias = dict(ALIAS)
    if alias_clique is not None:
        alias['traits'] = traits.clique_id_trait(alias_clique)
    with config_fixture.Config(nova_conf.CONF) as conf:
        conf.config(group='pci', alias=[json.dumps(alias)])
        conf.config(group='filter_scheduler', pci_in_placement=True)
        conf.config(group='scheduler',
                    max_placement_results=limit or NOVA_LIMIT)
        # Nova caches the parsed aliases: ours only meanwhile.
        pci_request.get_alias_from_config.cache_clear()
        try:
            yield
        finally:
            pci_request.get_alias_from_config.cache_clear()


def _request_spec(request: int, required: bool = True,
                  numa_nodes: int = 1) -> 'objects.RequestSpec':
    """Nova's RequestSpec for the documented flavor, under _nova_config.

    :param required: False: the same flavor without its clique keys (no
        ``hw:gpu_p2p_clique``, no clique-size trait).
    :param numa_nodes: ``--numa-nodes`` of ``nova-gpu-p2p flavor``.
    """
    wanted = flavor_request(request, numa_nodes)
    specs = flavor_commands.properties(wanted)
    if not required:
        specs = {key: value for key, value in specs.items()
                 if key != extra_specs.CLIQUE_KEY
                 and not key.startswith('trait:%s' % traits.GPU_P2P)}
    flavor = objects.Flavor(
        vcpus=wanted.vcpu_count, memory_mb=wanted.ram,
        root_gb=wanted.disk_gb, ephemeral_gb=0, swap=0,
        extra_specs=specs)
    image = objects.ImageMeta.from_dict({})
    spec = objects.RequestSpec(
        flavor=flavor, is_bfv=False, image=image, requested_resources=[],
        instance_uuid=str(uuid.uuid4()),
        pci_requests=pci_request.get_pci_requests_from_flavor(flavor),
        numa_topology=hardware.numa_get_constraints(flavor, image))
    spec.generate_request_groups_from_pci_requests()
    return spec


def nova_query(request: int, limit: int | None,
               alias_clique: int | None = None) -> tuple[str, str]:
    """Nova's GET /allocation_candidates query for ``request`` GPUs.

    Built by Nova's scheduler code from the documented flavor
    (:func:`flavor_request`: PCI alias, dedicated CPUs, the clique-size
    trait) with ``[filter_scheduler] pci_in_placement``, so the groups,
    their suffixes and the group policy are Nova's. Returns the query
    string and the microversion Nova sends it with.
    """
    with _nova_config(limit, alias_clique):
        resources = scheduler_utils.resources_from_request_spec(
            None, _request_spec(request), None)
    if limit is None:
        resources._limit = None
    return resources.to_querystring(), report.SAME_SUBTREE_VERSION


def host_traits(layout: Layout) -> list[str]:
    """The compute node's traits as our driver reports them."""
    return [traits.GPU_P2P, traits.GPU_NUMA_AFFINITY] + [
        traits.GPU_P2P_CLIQUE[size] for size in traits.CLIQUE_SIZES
        if size <= max(layout.cliques)]


def gpu_name(host: int, gpu: int) -> str:
    """The GPU's provider name; :func:`filtered` reads the GPU back."""
    return 'host%d-gpu%02d' % (host, gpu)


class _Placement:
    """Placement's WSGI app over in-memory SQLite, and a client to it."""

    def __init__(self, settings: Settings, microversion: str) -> None:
        self._fixture = placement_fixture.PlacementFixture()
        self._settings = settings
        #: Custom traits created so far.
        self._traits: set[str] = set()
        self.session = requests.Session()
        self.session.headers.update({
            'x-auth-token': 'admin',
            'OpenStack-API-Version': 'placement %s' % microversion})

    def __enter__(self) -> '_Placement':
        self._fixture.setUp()
        conf = self._fixture.conf_fixture
        conf.config(group='placement',
                    max_allocation_candidates=(
                        self._settings.max_allocation_candidates),
                    allocation_candidates_generation_strategy=(
                        self._settings.generation_strategy))
        conf.config(group='workarounds', optimize_for_wide_provider_trees=(
            self._settings.optimize_for_wide_provider_trees))
        return self

    def __exit__(self, *exc) -> None:
        self._fixture.cleanUp()

    def call(self, method: str, path: str, body: dict | None = None
             ) -> requests.Response:
        response = self.session.request(
            method, self._fixture.endpoint + path, json=body)
        if response.status_code >= 300:
            raise RuntimeError('%s %s: %s %s' % (
                method, path, response.status_code, response.text[:500]))
        return response

    def start_ids(self, first: int) -> None:
        """Make the next provider's database ID ``first``.

        A placeholder row with the ID before it: SQLite numbers new rows
        after the highest one.
        """
        if first <= 1:
            return
        engine = placement_db.placement_context_manager.writer.get_engine()
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(
                'INSERT INTO resource_providers (id, uuid, name, '
                'generation, root_provider_id) VALUES (:id, :uuid, '
                '\'ids start here\', 0, :id)'),
                {'id': first - 1, 'uuid': str(uuid.uuid4())})

    def provider(self, name: str, parent: str | None = None,
                 trait_names: Sequence[str] = ()) -> str:
        """Create a provider with its traits; its UUID (generation 1)."""
        rp = str(uuid.uuid5(NAMESPACE, name))
        self.call('POST', '/resource_providers', {
            'name': name, 'uuid': rp, 'parent_provider_uuid': parent})
        for custom in set(trait_names) - self._traits:
            if custom.startswith('CUSTOM_'):
                self.call('PUT', '/traits/%s' % custom)
                self._traits.add(custom)
        self.call('PUT', '/resource_providers/%s/traits' % rp, {
            'resource_provider_generation': 0, 'traits': list(trait_names)})
        return rp

    def reshape(self, inventories: dict[str, dict[str, int]],
                used: Sequence[tuple[str, str]]) -> None:
        """Every provider's inventory, and a server on each used GPU.

        :param used: (compute node, GPU) provider pairs.

        In one call (placement's reshaper) instead of one per provider.
        """
        owner = {'project_id': str(uuid.UUID(int=1)),
                 'user_id': str(uuid.UUID(int=2)),
                 'consumer_generation': None}
        self.call('POST', '/reshaper', {
            'inventories': {
                rp: {'resource_provider_generation': 1,
                     'inventories': {rc: {'total': total, 'max_unit': total}
                                     for rc, total in inventory.items()}}
                for rp, inventory in inventories.items()},
            'allocations': {
                str(uuid.uuid4()): dict(owner, allocations={
                    root: {'resources': {'PCPU': 8}},
                    gpu: {'resources': {GPU_CLASS: 1}}})
                for root, gpu in used}})


def _build_hosts(placement: _Placement, case: Case) -> dict[str, str]:
    """The case's hosts as Nova reports them; GPU provider UUID -> name."""
    placement.call('PUT', '/resource_classes/%s' % GPU_CLASS)
    # Every clique-size trait exists in a cloud where any host has it.
    for name in traits.GPU_P2P_CLIQUE.values():
        placement.call('PUT', '/traits/%s' % name)
    placement.start_ids(1 + case.seed * ID_STRIDE)
    names = {}
    inventories = {}
    used = []
    for host in range(case.hosts):
        root = placement.provider('host%d' % host,
                                  trait_names=host_traits(case.layout))
        inventories[root] = HOST_INVENTORY
        for gpu in range(case.layout.gpus):
            name = gpu_name(host, gpu)
            rp = placement.provider(
                name, parent=root,
                trait_names=['COMPUTE_MANAGED_PCI_DEVICE',
                             traits.clique_id_trait(
                                 case.layout.clique_of(gpu))])
            names[rp] = name
            inventories[rp] = {GPU_CLASS: 1}
            if not case.free(gpu):
                used.append((root, rp))
    placement.reshape(inventories, used)
    return names


def _best_fit(case: Case) -> tuple[
        dict[str, int], dict[str, clique_fit.Gpu], dict[int, int],
        int | None]:
    """Each GPU name's host and GPU, free GPUs per clique, the best fit.

    Hosts are identical: the free GPUs and best-fit clique of one are
    every host's.
    """
    host_of = {}
    gpus = {}
    for host in range(case.hosts):
        for gpu in range(case.layout.gpus):
            name = gpu_name(host, gpu)
            host_of[name] = host
            gpus[name] = clique_fit.Gpu(name, case.layout.clique_of(gpu),
                                        int(case.free(gpu)))
    free = clique_fit.free_per_group(
        gpu for name, gpu in gpus.items() if host_of[name] == 0)
    return host_of, gpus, free, clique_fit.choose(free, case.request)


def judge(case: Case, candidates: Iterable[Sequence[str]]) -> dict:
    """Per host: candidates, the one-clique ones, whether a best fit is kept.

    :param candidates: the GPU provider names of each candidate.

    The rule is the filter's own (:mod:`nova_gpu_p2p.scheduler.
    clique_fit`): ``fitting`` counts the candidates it keeps and
    ``fitting_sets`` the distinct GPU sets among them (a set comes once
    per order of Nova's request groups); ``best_fit_kept`` says whether
    one of them leaves as few GPUs of its clique free as best fit over
    every candidate would; ``fit_exists`` whether the free GPUs of a host
    hold a fitting set at all.
    """
    host_of, gpus, free, best = _best_fit(case)
    counts = [0] * case.hosts
    fitting = [0] * case.hosts
    sets: list[set[frozenset[str]]] = [set() for _ in range(case.hosts)]
    kept = [False] * case.hosts
    for providers in candidates:
        host = host_of[providers[0]]
        counts[host] += 1
        group = clique_fit.fitting_group(providers, gpus)
        if group is not None:
            fitting[host] += 1
            sets[host].add(frozenset(providers))
            kept[host] = kept[host] or free[group] == free[best]
    return {'candidates': counts, 'fitting': fitting,
            'fitting_sets': [len(found) for found in sets],
            'best_fit_kept': kept, 'fit_exists': best is not None}


def answer(case: Case, query: str, microversion: str
           ) -> tuple[list[list[str]], dict]:
    """Build the hosts and time the GET: each candidate's GPU names.

    The time is the GET with its JSON parsed, as Nova's report client
    does; ``peak_mb`` is how far the resident set grew meanwhile.
    """
    with _Placement(case.settings, microversion) as placement:
        names = _build_hosts(placement, case)
        before = _statm_mb(1)
        start = time.perf_counter()
        response = placement.call('GET', '/allocation_candidates?' + query)
        body = response.json()
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    candidates = [[names[rp] for rps in request['mappings'].values()
                   for rp in rps if rp in names]
                  for request in body['allocation_requests']]
    return candidates, {'seconds': seconds,
                        'response_mb': len(response.content) / 2 ** 20,
                        'peak_mb': max(0.0, peak - before)}


def run_case(case: Case, query: str, microversion: str) -> dict:
    """:func:`answer`, and what :func:`judge` makes of it.

    In this process; :func:`measure` calls it in a forked child.
    """
    candidates, stats = answer(case, query, microversion)
    return dict(judge(case, candidates), status='ok', **stats)


#: The sockets of a GPU host, its GPUs split evenly over them in order.
SOCKETS = 2
#: Dedicated CPUs and MiB of memory per socket.
SOCKET_CPUS = 64
SOCKET_MB = 1048576


def _host_numa() -> 'objects.NUMATopology':
    cells = []
    for cell in range(SOCKETS):
        cpus = set(range(cell * SOCKET_CPUS, (cell + 1) * SOCKET_CPUS))
        cells.append(objects.NUMACell(
            id=cell, cpuset=set(), pcpuset=cpus, memory=SOCKET_MB,
            cpu_usage=0, memory_usage=0, pinned_cpus=set(),
            siblings=[{cpu} for cpu in sorted(cpus)],
            mempages=[objects.NUMAPagesTopology(
                size_kb=4, total=SOCKET_MB * 256, used=0)],
            network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False)))
    return objects.NUMATopology(cells=cells)


def _scheduler_host(layout: Layout, candidates: Sequence[Sequence[int]],
                    spec: 'objects.RequestSpec',
                    busy: Sequence[int] = ()) -> host_manager.HostState:
    """A GPU host as nova-scheduler sees it, with these candidates.

    One PCI pool per GPU with its provider UUID and clique tag, as the
    compute reports them with PCI in placement (none free for the
    ``busy`` GPUs); each candidate maps Nova's request groups to the GPUs
    at those indices.
    """
    numa = _host_numa()
    providers = [str(uuid.uuid5(NAMESPACE, gpu_name(0, gpu)))
                 for gpu in range(layout.gpus)]
    pools = objects.PciDevicePoolList(objects=[objects.PciDevicePool(
        vendor_id=ALIAS['vendor_id'], product_id=ALIAS['product_id'],
        numa_node=gpu * SOCKETS // layout.gpus,
        count=0 if gpu in busy else 1,
        tags={'dev_type': ALIAS['device_type'], 'rp_uuid': providers[gpu],
              device_spec_tags.CLIQUE_TAG: str(layout.clique_of(gpu))})
        for gpu in range(layout.gpus)])
    groups = [group.requester_id for group in spec.requested_resources]
    host = host_manager.HostState('gpu-host', 'gpu-host', uuid.uuid4())
    # Its compute runs our driver.
    host.stats = driver_stat.reported({})
    host.numa_topology = numa
    host.cpu_allocation_ratio = host.ram_allocation_ratio = 1.0
    host.pci_stats = pci_stats.PciDeviceStats(numa, stats=pools)
    host.limits = {}
    host.allocation_candidates = [
        {'mappings': {group: [providers[gpu]]
                      for group, gpu in zip(groups, gpus)}}
        for gpus in candidates]
    return host


def filtered(case: Case, candidates: Iterable[Sequence[str]]) -> dict:
    """What GPUP2PCliqueFilter hands Nova's filters on each host, judged.

    Each host's candidates from placement (GPU names, as :func:`answer`
    gives them) go through the filter on a scheduler HostState of the
    case's layout and busy GPUs (:func:`_scheduler_host`), with the
    default ``candidates_per_host``. Per host, ``built_fit``: its first
    candidate is free GPUs of one clique; ``built_best_fit``: and leaves
    as few GPUs of its clique free as best fit can.
    """
    host_of, _, free, best = _best_fit(case)
    provider = {str(uuid.uuid5(NAMESPACE, gpu_name(0, gpu))): gpu
                for gpu in range(case.layout.gpus)}
    per_host: list[list[list[int]]] = [[] for _ in range(case.hosts)]
    for providers in candidates:
        per_host[host_of[providers[0]]].append(
            [int(name.rpartition('-gpu')[2]) for name in providers])
    fit, best_fit = [], []
    with _nova_config(case.settings.max_placement_results):
        spec = _request_spec(case.request)
        for found in per_host:
            host = _scheduler_host(case.layout, found, spec, case.busy)
            first = None
            if found and scheduler.GPUP2PCliqueFilter().host_passes(
                    host, spec):
                first = [provider[rp] for rps in host.allocation_candidates[
                    0]['mappings'].values() for rp in rps]
            cliques = {case.layout.clique_of(gpu) for gpu in first or ()}
            fits = (len(cliques) == 1 and len(first) == case.request
                    and all(case.free(gpu) for gpu in first))
            fit.append(fits)
            best_fit.append(fits and best is not None and free[
                clique_fit.Group(cliques.pop())] == free[best])
    return {'built_fit': fit, 'built_best_fit': best_fit}


#: Nova's candidate filters for a GPU flavor with PCI in placement, in
#: the order nova.conf lists them.
NOVA_FILTERS = (pci_passthrough_filter.PciPassthroughFilter,
                numa_topology_filter.NUMATopologyFilter)


def filter_seconds(layout: Layout, request: int, candidates: int = 200,
                   seed: int = 0) -> dict[str, float]:
    """Scheduler time per 1000 candidates of one host, by filter order.

    Nova's PciPassthroughFilter and NUMATopologyFilter check every
    allocation candidate of a host (:data:`NOVA_FILTERS`), ours keeps
    only the one-clique ones: run it first, and Nova's check only those.
    Times the real filters over ``candidates`` random candidates of an
    empty ``layout`` host with two sockets, for the documented flavor;
    ``fitting`` is the share of one-clique candidates in the sample.
    """
    chosen = random.Random(seed)
    sample = [chosen.sample(range(layout.gpus), request)
              for _ in range(candidates)]
    fitting = sum(1 for gpus in sample
                  if len({layout.clique_of(gpu) for gpu in gpus}) == 1)
    orders = {'nova_filters_first': NOVA_FILTERS + (
        scheduler.GPUP2PCliqueFilter,),
        'ours_first': (scheduler.GPUP2PCliqueFilter,) + NOVA_FILTERS}
    seconds = {}
    with _nova_config():
        spec = _request_spec(request)
        for name, order in orders.items():
            host = _scheduler_host(layout, sample, spec)
            start = time.perf_counter()
            for filter_class in order:
                if not filter_class().host_passes(host, spec):
                    break
            seconds[name] = (time.perf_counter() - start) * 1000 / len(
                sample)
    return dict(seconds, fitting=fitting / len(sample))


def _statm_mb(field: int, pid: int | str = 'self') -> float:
    """A process's address space (field 0) or resident set (1), MiB."""
    with open('/proc/%s/statm' % pid) as statm:
        pages = int(statm.read().split()[field])
    return pages * resource.getpagesize() / 2 ** 20


def _child(case: Case, job: dict, memory_mb: int, out_fd: int) -> None:
    """Run one case in a forked child, its address space capped."""
    cap = int((_statm_mb(0) + memory_mb) * 2 ** 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        result = run_case(case, job['query'], job['microversion'])
    except MemoryError:
        result = {'status': 'memory'}
    except Exception as error:
        text = str(error)
        result = {'status': 'memory' if 'MemoryError' in text
                  else 'error: %s' % text[:300]}
    with os.fdopen(out_fd, 'w') as out:
        json.dump(result, out)


def _forked(case: Case, job: dict, timeout: float, memory_mb: int) -> dict:
    """:func:`run_case` in a child stopped after ``timeout`` seconds."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(case, job, memory_mb, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    chunks = []
    with os.fdopen(read_fd, 'rb') as answer:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([answer], [], [], left)[0]:
                resident = _statm_mb(1, pid)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {'status': 'timeout', 'resident_mb': resident}
            chunk = answer.read1(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {'status': 'died (wait status %d)' % status}
    return json.loads(b''.join(chunks))


def _worker(jobs_path: str, timeout: float, memory_mb: int) -> None:
    """Run the jobs of one seed; a JSON line per job on stdout.

    What a case with fewer hosts showed to be too slow is not run again
    with more hosts or another ``limit``: placement generates the same
    candidates per host whatever the limit, and more hosts only add.
    """
    out = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    too_slow: dict[tuple, int] = {}
    with open(jobs_path) as jobs:
        for line in jobs:
            job = json.loads(line)
            case = Case.from_json(job['case'])
            key = (case.layout, case.request, case.busy,
                   case.settings.generation)
            if case.hosts >= too_slow.get(key, sys.maxsize):
                result = {'status': 'timeout', 'skipped': True}
            else:
                result = _forked(case, job, timeout, memory_mb)
                if result['status'] == 'timeout':
                    too_slow[key] = min(case.hosts,
                                        too_slow.get(key, sys.maxsize))
            out.write(json.dumps(result) + '\n')
            out.flush()


def record(case: Case, result: dict) -> dict:
    """One flat row: what the case was, and what came back."""
    settings = dataclasses.asdict(case.settings)
    settings['settings'] = settings.pop('name')
    return dict(settings, layout=case.layout.name, gpus=case.layout.gpus,
                request=case.request, hosts=case.hosts,
                busy=list(case.busy), seed=case.seed, **result)


def measure(cases: Iterable[Case] | None = None, timeout: float = 60.0,
            memory_mb: int = 4096,
            progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Run the cases (default :func:`default_cases`); a record for each.

    Every case runs in a forked child of a fresh interpreter started
    with the case's ``PYTHONHASHSEED``; a child is stopped after
    ``timeout`` seconds (``status`` "timeout") or when its address space
    grows by ``memory_mb`` ("memory"). A record has the settings' fields
    (``settings`` is the name), the case's shape (``layout``, ``gpus``,
    ``request``, ``hosts``, ``busy``, ``seed``), ``status``, and for
    "ok" ``seconds`` (GET plus JSON parsing), ``response_mb``,
    ``peak_mb``, :func:`judge`'s per-host lists ``candidates``,
    ``fitting``, ``fitting_sets``, ``best_fit_kept`` and ``fit_exists``;
    for "timeout" ``resident_mb``, what the case held when it was stopped
    (none where it was skipped, ``skipped``). ``progress`` is called with
    each record as it comes.
    """
    cases = list(default_cases() if cases is None else cases)
    queries = {}
    for case in cases:
        key = _query_key(case)
        if key not in queries:
            queries[key] = nova_query(*key)
    by_seed = collections.defaultdict(list)
    for index, case in enumerate(cases):
        by_seed[case.seed].append(index)
    records: dict[int, dict] = {}
    for seed, indices in by_seed.items():
        results = _run_worker([cases[i] for i in indices], queries, seed,
                              timeout, memory_mb)
        for index, result in zip(indices, results):
            records[index] = record(cases[index], result)
            if progress is not None:
                progress(records[index])
    return [records[index] for index in range(len(cases))]


def _query_key(case: Case) -> tuple:
    return (case.request, case.settings.max_placement_results,
            case.settings.alias_clique)


def _worker_env(seed: int) -> dict[str, str]:
    """The worker's environment: its hash seed, and this very checkout."""
    checkout = tests.ROOT
    path = os.pathsep.join(
        filter(None, [checkout, os.environ.get('PYTHONPATH')]))
    return dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=path)


def _run_worker(cases: list[Case], queries: dict, seed: int,
                timeout: float, memory_mb: int) -> Iterator[dict]:
    """Results of :func:`_worker` for the cases of one seed, as they come."""
    with tempfile.NamedTemporaryFile('w', suffix='.jsonl') as jobs, \
            tempfile.TemporaryFile('w+') as errors:
        for case in cases:
            query, microversion = queries[_query_key(case)]
            jobs.write(json.dumps({'case': case.to_json(), 'query': query,
                                   'microversion': microversion}) + '\n')
        jobs.flush()
        with subprocess.Popen(
                [sys.executable, '-m', __spec__.name, '--worker', jobs.name,
                 '--timeout', str(timeout), '--memory-mb', str(memory_mb)],
                stdout=subprocess.PIPE, stderr=errors, text=True,
                env=_worker_env(seed)) as worker:
            count = 0
            for line in worker.stdout:
                count += 1
                yield json.loads(line)
        if count != len(cases):
            errors.seek(0)
            raise RuntimeError('placement_scale worker stopped after %d of '
                               '%d cases:\n%s' % (count, len(cases),
                                                  errors.read()[-4000:]))


def _busy(gpus: Sequence[int]) -> str:
    if not gpus:
        return '-'
    if len(gpus) > 2 and list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return '%d-%d' % (gpus[0], gpus[-1])
    return ','.join(str(gpu) for gpu in gpus)


def _time(rows: Sequence[dict], timeout: float) -> str:
    if any(row['status'] == 'timeout' for row in rows):
        return '> %g s' % timeout
    failed = [row['status'] for row in rows if row['status'] != 'ok']
    if failed:
        return failed[0].split(':')[0]
    return '%.2f s' % statistics.median(row['seconds'] for row in rows)


def _hosts_kept(rows: Sequence[dict], field: str) -> str:
    """Per host, whether (one seed) or on how many seeds it kept one."""
    kept = [sum(1 for value in values if value)
            for values in zip(*(row[field] for row in rows))]
    if len(rows) == 1:
        return '/'.join('yes' if count else 'no' for count in kept)
    return '/'.join(str(count) for count in kept) + ' of %d' % len(rows)


COLUMNS = ('GPUs', 'cliques', 'req', 'hosts', 'busy', 'settings', 'time',
           'MB', 'candidates/host', 'one-clique/host', 'GPU sets',
           'fit kept', 'best fit kept')


def table(records: Iterable[dict], timeout: float = 60.0) -> str:
    """The records as a reStructuredText table, one row over all seeds.

    Times are medians; counts are the first seed's; MB is what the GET
    added, or what a stopped case held; "GPU sets" counts
    the distinct sets among the one-clique candidates; "fit kept" says on
    how many seeds each host kept a one-clique candidate.
    """
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for row in records:
        groups[(row['gpus'], row['layout'], row['request'], row['hosts'],
                tuple(row['busy']), row['settings'])].append(row)
    lines = []
    for (gpus, layout, request, hosts, busy, name), rows in groups.items():
        done = [row for row in rows if row['status'] == 'ok']
        cells = [str(gpus), layout, str(request), str(hosts), _busy(busy),
                 name, _time(rows, timeout)]
        if len(done) == len(rows):
            first = done[0]
            cells += ['%.0f' % max(row['peak_mb'] for row in done),
                      '/'.join(map(str, first['candidates']))]
            if first['fit_exists']:
                cells += ['/'.join(map(str, first['fitting'])),
                          '/'.join(map(str, first['fitting_sets'])),
                          _hosts_kept(done, 'fitting'),
                          _hosts_kept(done, 'best_fit_kept')]
            else:
                cells.append('none fits')
        elif any('resident_mb' in row for row in rows):
            held = max(row.get('resident_mb', 0) for row in rows)
            cells.append('%.0f held' % held)
        lines.append(cells)
    return _table(COLUMNS, lines)


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A reStructuredText simple table; short rows leave cells empty."""
    widths = [max(len(cells[i]) for cells in [columns, *rows]
                  if i < len(cells)) for i in range(len(columns))]
    rule = '  '.join('=' * width for width in widths)
    lines = [rule, _row(columns, widths), rule]
    lines += [_row(cells, widths) for cells in rows]
    lines.append(rule)
    return '\n'.join(lines)


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return '  '.join(cell.ljust(width)
                     for cell, width in zip(cells, widths)).rstrip()


#: The shapes :func:`filter_seconds` is shown for.
FILTER_SHAPES = ((Layout((4, 4)), 2), (Layout((4, 4)), 4),
                 (Layout((2, 2, 2, 2)), 2), (Layout((8, 8)), 2),
                 (Layout((8, 8)), 4), (Layout((8, 8)), 8),
                 (Layout((4, 4, 4, 4)), 2), (Layout((4, 4, 4, 4)), 4))


def filter_table(candidates: int = 200,
                 shapes: Sequence[tuple[Layout, int]] = FILTER_SHAPES) -> str:
    """:func:`filter_seconds` for ``shapes``, as a table."""
    rows = []
    for layout, request in shapes:
        found = filter_seconds(layout, request, candidates)
        rows.append([str(layout.gpus), layout.name, str(request),
                     '%.0f%%' % (found['fitting'] * 100),
                     '%.1f' % found['nova_filters_first'],
                     '%.1f' % found['ours_first']])
    return _table(('GPUs', 'cliques', 'req', 'one-clique',
                   'ms, Nova\'s filters first', 'ms, ours first'), rows)


def small_cap_table(hosts: Sequence[int] = (1, 3, 50)) -> str:
    """16-GPU hosts under :func:`recommended`: placement, then the filter.

    In this process (every answer is small): placement's GET time, what
    it returned per host, and whether GPUP2PCliqueFilter handed Nova a
    one-clique (``fit``) and best-fit candidate on every host
    (:func:`filtered`).
    """
    rows = []
    for count in hosts:
        for layout, request in ((Layout((8, 8)), 4), (Layout((8, 8)), 8),
                                (Layout((4, 4, 4, 4)), 4)):
            for busy in BUSY + ((0, 4, 8),) * (len(layout.cliques) == 4):
                case = Case(layout, request, count, busy,
                            recommended(count))
                query, microversion = nova_query(
                    request, case.settings.max_placement_results)
                candidates, stats = answer(case, query, microversion)
                judged = judge(case, candidates)
                built = filtered(case, candidates)
                rows.append([
                    str(layout.gpus), layout.name, str(request), str(count),
                    _busy(busy), str(case.settings.max_allocation_candidates),
                    '%.2f s' % stats['seconds'],
                    str(sum(judged['candidates'])),
                    str(sum(judged['fitting'])),
                    '%d/%d' % (sum(built['built_fit']), count),
                    '%d/%d' % (sum(built['built_best_fit']), count)])
    return _table(('GPUs', 'cliques', 'req', 'hosts', 'busy', 'cap',
                   'placement', 'candidates', 'one-clique', 'filter: fit',
                   'best fit'), rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--timeout', type=float, default=60.0,
                        help='seconds before a case is stopped')
    parser.add_argument('--memory-mb', type=int, default=4096,
                        help='growth of a case\'s address space that '
                        'stops it')
    parser.add_argument('--hosts', type=int, nargs='+', default=[1, 3])
    parser.add_argument('--seeds', type=int,
                        help='run every case under seeds 0..N-1 (default 1, '
                        'with --luck 8)')
    parser.add_argument('--luck', action='store_true',
                        help='the cases of luck_cases() instead')
    parser.add_argument('--filters', action='store_true',
                        help='time the scheduler filters per candidate '
                        'instead')
    parser.add_argument('--small-cap', action='store_true',
                        help='the recommended cap on 16-GPU hosts, with '
                        'the filter, instead')
    parser.add_argument('--json', help='also write the records here')
    parser.add_argument('--quick', action='store_true',
                        help='the first case (shape) of the table only, '
                        'on one host: to see that it runs (CI)')
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.timeout, args.memory_mb)
        return
    if args.filters:
        print(filter_table(*((2, FILTER_SHAPES[:1]) if args.quick else ())))
        return
    if args.small_cap:
        print(small_cap_table(hosts=(1,) if args.quick else (1, 3, 50)))
        return
    cases = (luck_cases(args.seeds or 8) if args.luck
             else default_cases(hosts=args.hosts, seeds=args.seeds or 1))
    if args.quick:
        cases = cases[:1]
    records = measure(cases, args.timeout, args.memory_mb,
                      progress=lambda row: print(
                          table([row], args.timeout).splitlines()[3],
                          file=sys.stderr, flush=True))
    if args.json:
        with open(args.json, 'w') as out:
            json.dump(records, out, indent=1)
    print(table(records, args.timeout))


if __name__ == '__main__':
    main()
