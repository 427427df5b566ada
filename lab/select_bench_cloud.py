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

"""Nova's whole ``select_destinations`` at cloud size, timed (bench).

Not a test module (stestr collects ``test_*`` only). For
``lab/bench.py``: an in-process cloud of :attr:`SelectCloud.hosts`
computes of one :data:`SHAPES` shape, GPUs in placement, under the
settings ``doc/source/scheduling-scale.rst`` recommends (placement's cap
two candidates per host, breadth-first, optimized; Nova's limit the same;
``GPUP2PCliqueFilter`` first with its default ``candidates_per_host``).
Every other host first runs a ``required`` pair, booted through the
filters. Then each request of :meth:`SelectCloud.requests` boots one
server, through the API, and is deleted again; its record holds the time
of Nova's ``SchedulerManager.select_destinations`` (request filters, both
placement queries, host states, filters, weighers, claim), of placement's
GET and of the filters within it, how many hosts had a free fitting set
and how many the filters kept, and whether the GPUs claimed are one
clique (on the Fabric Manager shape: one partition) and a best fit.

Candidates come in placement's own order here, not PCI address order.

Every compute is a real nova-compute service, up to 500 of them; as in a
cloud rather than a test, their heartbeats stay out of the scheduler's
process, each has synced its instances with the scheduler once, and
Nova logs at INFO (see :meth:`SelectCloud.setUp`).
"""

from collections.abc import Callable
import contextlib
import dataclasses
import functools
import logging
import os
import time

import fixtures
from nova import context as nova_context
from nova import filters
from nova.scheduler.client import query
from nova.scheduler.client import report
from nova.scheduler import host_manager
from nova.scheduler import utils as scheduler_utils
from oslo_db.sqlalchemy import engines

from lab import cloned_hosts
from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.scheduler import clique_filter
from nova_gpu_p2p.scheduler import clique_fit_weigher
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p import traits
from tests.cloud import nova_cloud
from tests.cloud import scheduling
from tests.fixtures import waits

#: GPUs a busy host's server has.
BUSY_GPUS = 2
#: Busy hosts' servers asked for together: few enough that none waits
#: for the scheduler longer than Nova's RPC timeout.
BUSY_AT_ONCE = 10
#: GPUs per host NUMA node of both corpus hosts: a server of more spans
#: two guest NUMA nodes, as ``nova-gpu-p2p flavor --numa-nodes`` sizes it.
GPUS_PER_SOCKET = 4
REQUESTS = (1, 2, 4, 8)
#: A batch: this many ``required`` servers of :data:`BATCH_GPUS` GPUs in
#: one request (``openstack server create --min 20 --max 20``).
BATCH = 20
BATCH_GPUS = 4
#: Seconds between a compute's service heartbeats here, and how long
#: before the scheduler's ComputeFilter calls a silent one down: longer
#: than any run. Each compute writes its service record every
#: ``[DEFAULT] report_interval`` (10 s); in a cloud those writes reach
#: the database from each compute host, here all 500 would run in the
#: scheduler's own process, 50 a second, and be timed as its work.
HEARTBEAT_S = 24 * 3600
#: The longest :meth:`SelectCloud.wait_for_quiet` waits, seconds.
QUIET_WAIT_S = 1800


def _kept_connections(create_engine):
    """oslo.db's create_engine, an in-memory SQLite connection never renewed.

    oslo.db renews a connection after ``connection_recycle_time`` (3600
    s), and an in-memory SQLite database goes with its connection: a
    1000-host cloud, which takes more than an hour to start, lost its
    tables (Nova's and placement's) half way.
    """
    @functools.wraps(create_engine)
    def create(sql_connection, **kwargs):
        if str(sql_connection).startswith('sqlite'):
            kwargs['connection_recycle_time'] = -1
        return create_engine(sql_connection=sql_connection, **kwargs)
    return create


@dataclasses.dataclass(frozen=True)
class Shape:
    corpus_host: str
    p2p_level: str
    #: ``[pci] device_spec`` carries the HGX board's Fabric Manager
    #: partitions.
    partitions: bool = False


SHAPES = {
    'hgx-board': Shape(scheduling.HGX_HOST, 'SYS'),
    '2+2+2+2': Shape(scheduling.CORPUS_HOST, 'PXB'),
    '4+4': Shape(scheduling.CORPUS_HOST, 'PHB'),
    'hgx-fabric-manager': Shape(scheduling.HGX_HOST, 'SYS',
                                partitions=True),
}


class SelectCloud(scheduling.CliqueSchedulingBase):
    """``hosts`` computes of one shape; requests timed end to end."""

    #: Receives one dict per request; the tool running us sets it.
    sink: Callable[[dict], None] = staticmethod(lambda found: None)
    #: The tool sets these.
    shape = '4+4'
    hosts = 10
    #: Every other host first runs a ``required`` pair.
    busy = True
    #: Computes report CUSTOM_GPU_P2P_FREE_<n>, and every ``required``
    #: request is also asked with a flavor that requires its size
    #: (``nova-gpu-p2p flavor --free-trait``).
    free_trait = False
    #: The GPU counts :meth:`requests` asks for.
    sizes: tuple[int, ...] = REQUESTS
    #: Servers in :meth:`batch`'s one request.
    batch_size = BATCH
    #: Hosts started as real nova-computes; the others are clones of the
    #: first one's records with one GPU of each clique held
    #: (:mod:`lab.cloned_hosts`), and :meth:`requests` asks only for
    #: servers they cannot take. None: every host real.
    real_hosts: int | None = None
    #: Placement's caps (and Nova's limit), per host: :meth:`select`
    #: asks its requests under each in turn, the first also when the
    #: busy hosts' servers boot.
    caps_per_host: tuple[float, ...] = (2,)
    #: ``[gpu_p2p] candidates_per_host``; None: the default.
    candidates_per_host: int | None = None
    #: Each request asked again with stock Nova's filters and weighers
    #: (ours left out), on the same cloud.
    compare_stock = False
    #: :meth:`select` also asks a batch (:meth:`batch_here`) at the end.
    with_batch = False
    #: Before its requests :meth:`select` waits (up to :data:`QUIET_WAIT_S`)
    #: for the machine's 1-minute load average to fall to this; None: no
    #: wait. A 1000-host cloud takes most of an hour to start; its
    #: requests are timed when nothing else runs.
    quiet_load: float | None = None
    #: Told each step; the tool running us shows it.
    progress: Callable[[str], None] = staticmethod(lambda step: None)
    OURS_FIRST = True
    ADDRESS_ORDER = False
    SHARED_TREES = True

    @property
    def PARTITIONED(self) -> bool:
        """Read by the clique scheduling base: the shape's partitions."""
        return SHAPES[self.shape].partitions

    def setUp(self) -> None:
        started = time.perf_counter()
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_db.sqlalchemy.engines.create_engine',
            _kept_connections(engines.create_engine)))
        super().setUp()
        # As nova.conf's default debug = False: Nova's test logging
        # formats every debug message (thousands per request here).
        root = logging.getLogger()
        self.addCleanup(root.setLevel, root.level)
        root.setLevel(logging.INFO)
        shape = SHAPES[self.shape]
        self.flags(instances=max(self.hosts, self.batch_size) + 1,
                   cores=-1, ram=-1,
                   group='quota')
        if self.candidates_per_host is not None:
            self.flags(candidates_per_host=self.candidates_per_host,
                       group='gpu_p2p')
        self.cap_placement(self.cap(self.caps_per_host[0]))
        self.flags(report_free_traits=self.free_trait, group='gpu_p2p')
        self.names = ['host%03d' % n for n in range(self.hosts)]
        self.flags(p2p_level=shape.p2p_level, group='gpu_p2p')
        if self.real_hosts is not None and shape.partitions:
            raise ValueError('%s: clones have no Fabric Manager; '
                             'real_hosts needs a sysfs shape' % self.shape)
        real = self.names[:self.real_hosts]
        for hostname in real:
            self.start_gpu_compute(
                hostname, shape.corpus_host,
                gpu_p2p_options={'p2p_level': shape.p2p_level})
        #: Fabric Manager partitions (a claim must be one), else None.
        self.partitions = ([frozenset(partition.gpus) for partition in
                            scheduling.board_partitions(self.BOARD)]
                           if shape.partitions else None)
        #: What a best fit is judged in: the cliques, or the partitions of
        #: four and eight GPUs (two halves and the board).
        self.groups = self._groups()
        topology = self.topologies[self.names[0]]
        self.numa = {address: function.numa_node for address, function
                     in topology.functions.items()
                     if function.is_nvidia_gpu}
        #: The GPUs in use on each host.
        self.used: dict[str, set[str]] = {name: set() for name in self.names}
        self._clone(self.names[len(real):])
        self._occupy(real[1::2] if self.busy else [])
        if self.free_trait:
            # A claim shows in the free sizes at the periodic update.
            self._run_periodics()
        self._sync_instance_info()
        self.timings = self._timed()
        #: Seconds the cloud took to start, its busy servers booted.
        self.start_seconds = time.perf_counter() - started
        self.progress('%d hosts of %s started in %.0f s' % (
            self.hosts, self.shape, self.start_seconds))

    def _clone(self, hostnames: list[str]) -> None:
        """``hostnames`` as clones of the first host, crowded.

        One GPU of each clique held (the first by address): no
        ``required`` server of a whole clique fits them
        (:mod:`lab.cloned_hosts`).
        """
        if not hostnames:
            return
        context = nova_context.get_admin_context()
        template = cloned_hosts.read_template(context, self.names[0])
        host = self.computes[self.names[0]].manager.driver.host_gpus
        held = {min(group) for group in self.groups}
        manager = self.scheduler.manager.host_manager
        for count, hostname in enumerate(hostnames, 1):
            cloned_hosts.clone(context, template, hostname, held, host,
                               manager)
            self.used[hostname] = set(held)
            if count % 100 == 0:
                self.progress('%d hosts cloned' % count)

    def wait_for_quiet(self) -> None:
        """Until the load average is :attr:`quiet_load` (if set)."""
        if self.quiet_load is None:
            return
        self.progress('waiting for a load average of %g' % self.quiet_load)
        deadline = time.monotonic() + QUIET_WAIT_S
        while (os.getloadavg()[0] > self.quiet_load
               and time.monotonic() < deadline):
            time.sleep(5)

    def cap(self, per_host: float) -> int:
        """Placement's cap for ``per_host`` candidates a host."""
        return max(1, round(per_host * self.hosts))

    def _sync_instance_info(self) -> None:
        """Each compute's periodic instance sync, as in a running cloud.

        Every ``[DEFAULT] scheduler_instance_sync_interval`` (120 s) each
        compute tells the scheduler which instances it has; until the
        scheduler has such news of a host it asks the database for the
        host's instances each time it weighs it. Nova's tests turn
        periodic tasks off. A host the scheduler heard nothing of yet
        needs a second sync, as it would two minutes later.
        """
        context = nova_context.get_admin_context()
        known = self.scheduler.manager.host_manager._instance_info

        def stale() -> list[str]:
            return [name for name in self.names
                    if not known.get(name, {}).get('updated')]

        for done in (lambda: all(name in known for name in self.names),
                     lambda: not stale()):
            for hostname in stale():
                self.computes[hostname].manager.\
                    _sync_scheduler_instance_info(context)
            waits.until(done, lambda: 'instance info not synced: %s'
                        % stale())

    def _occupy(self, hostnames: list[str]) -> None:
        """A ``required`` pair on each host, through the filters.

        :data:`BUSY_AT_ONCE` at a time, then waited for: one after the
        other took about a second each, most of it waiting.
        """
        pair = self.bench_flavor(BUSY_GPUS, required=True)
        for start in range(0, len(hostnames), BUSY_AT_ONCE):
            self._occupy_now(pair, hostnames[start:start + BUSY_AT_ONCE])

    def _occupy_now(self, pair: str, hostnames: list[str]) -> None:
        posted = [(hostname, self.admin_api.post_server({
            'server': self._build_server(
                flavor_id=pair, image_uuid=self.q35_image, networks='none',
                host=hostname)})) for hostname in hostnames]
        for hostname, server in posted:
            server = self._wait_for_state_change(server, 'ACTIVE')
            self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
            self.settle(server)
            self.used[hostname].update(self.gpus(server))

    def _setup_scheduler_service(self):
        # Before the scheduler's ComputeFilter reads service_down_time.
        self.flags(report_interval=HEARTBEAT_S,
                   service_down_time=2 * HEARTBEAT_S)
        return super()._setup_scheduler_service()

    def _groups(self) -> list[frozenset[str]]:
        if self.partitions:
            return [gpus for gpus in self.partitions
                    if len(gpus) >= GPUS_PER_SOCKET]
        cliques = discovery.evaluate(self.topologies[self.names[0]],
                                     scheduling.CONF).cliques.ids
        found: dict[int, set[str]] = {}
        for address, clique_id in cliques.items():
            if clique_id is not None:
                found.setdefault(clique_id, set()).add(address)
        return [frozenset(gpus) for gpus in found.values()]

    def bench_flavor(self, gpus: int, required: bool,
                     free_trait: bool = False) -> str:
        """``nova-gpu-p2p flavor --gpus N``'s keys, sized for these hosts.

        One vCPU and 2 GiB per guest NUMA node; without the clique keys
        (``hw:gpu_p2p_clique``, the clique-size trait) unless
        ``required``; with ``--free-trait``'s if ``free_trait``.
        """
        cells = -(-gpus // GPUS_PER_SOCKET)
        specs = flavor_commands.properties(flavor_commands.FlavorRequest(
            gpus=gpus, alias=nova_cloud.GPU_ALIAS, numa_nodes=cells,
            free_trait=free_trait))
        if not required:
            del specs[extra_specs.CLIQUE_KEY]
            del specs['trait:%s' % flavor_commands.clique_trait(gpus)]
        specs.pop('trait:%s' % traits.GPU_NUMA_AFFINITY)
        specs.pop(extra_specs.NUMA_AFFINITY_KEY)
        return self._create_flavor(vcpu=cells, memory_mb=2048 * cells,
                                   extra_spec=specs)

    def _timed(self) -> dict[str, list]:
        """Time select_destinations and its parts.

        Placement's GET, the host states, the filters (all, and each
        one's ``filter_all`` by class name), the weighers and the claim.
        """
        found: dict[str, list] = {name: [] for name in (
            'select', 'placement', 'host_states', 'filters', 'weighers',
            'claim')}
        #: Each filter's seconds over a request, by class name.
        self.by_filter: dict[str, list[float]] = {}
        by_filter = self.by_filter

        def timed(name: str, original, count=len):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                start = time.perf_counter()
                try:
                    result = original(*args, **kwargs)
                except Exception:
                    # NoValidHost: timed too, nothing kept.
                    found[name].append((time.perf_counter() - start, 0))
                    raise
                found[name].append((time.perf_counter() - start,
                                    count(result)))
                return result
            return wrapper

        # Where the conductor asks: the scheduler's whole answer.
        self.useFixture(fixtures.MockPatchObject(
            query.SchedulerQueryClient, 'select_destinations',
            timed('select', query.SchedulerQueryClient.select_destinations)))
        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient, 'get_allocation_candidates',
            timed('placement',
                  report.SchedulerReportClient.get_allocation_candidates,
                  lambda result: len(result[0] or ()))))
        self.useFixture(fixtures.MockPatchObject(
            host_manager.HostManager, 'get_filtered_hosts',
            timed('filters', host_manager.HostManager.get_filtered_hosts,
                  lambda hosts: len(hosts or ()))))
        self.useFixture(fixtures.MockPatchObject(
            host_manager.HostManager, 'get_host_states_by_uuids',
            timed('host_states',
                  host_manager.HostManager.get_host_states_by_uuids,
                  lambda hosts: 0)))
        self.useFixture(fixtures.MockPatchObject(
            host_manager.HostManager, 'get_weighed_hosts',
            timed('weighers', host_manager.HostManager.get_weighed_hosts)))
        self.useFixture(fixtures.MockPatchObject(
            scheduler_utils, 'claim_resources',
            timed('claim', scheduler_utils.claim_resources, int)))

        def each_filter(filter_all):
            def timed_filter(one, objs, spec_obj):
                start = time.perf_counter()
                result = filter_all(one, objs, spec_obj)
                # A generator: the filter runs as the handler lists it.
                kept = None if result is None else list(result)
                by_filter.setdefault(type(one).__name__, []).append(
                    time.perf_counter() - start)
                return kept
            return timed_filter

        # Nova's filter_all, and ours, which reads the request once.
        for cls in (filters.BaseFilter, clique_filter.GPUP2PCliqueFilter):
            self.useFixture(fixtures.MockPatchObject(
                cls, 'filter_all', each_filter(cls.filter_all)))
        return found

    def _clear_timings(self) -> None:
        for found in self.timings.values():
            found.clear()
        self.by_filter.clear()

    def _parts(self) -> dict[str, object]:
        """The parts of the last request's select_destinations, seconds."""
        return {
            'placement_seconds': sum(s for s, _ in self.timings['placement']),
            'candidates': sum(n for _, n in self.timings['placement']),
            'host_state_seconds': sum(
                s for s, _ in self.timings['host_states']),
            'filter_seconds': sum(s for s, _ in self.timings['filters']),
            'filter_seconds_by_class': {
                name: sum(seconds)
                for name, seconds in self.by_filter.items()},
            'weigher_seconds': sum(s for s, _ in self.timings['weighers']),
            'claim_seconds': sum(s for s, _ in self.timings['claim']),
        }

    def requests(self) -> list[tuple[int, bool, bool]]:
        """:attr:`sizes` GPUs: ``required`` where a group holds that many.

        (GPUs, required, with the free trait) each.
        """
        largest = max(len(group) for group in self.groups)
        clones = ([] if self.real_hosts is None
                  else self.names[self.real_hosts:])
        return [(gpus, required, free) for gpus in self.sizes
                for required in (True, False)
                if not required or (gpus > 1 and largest >= gpus)
                # No nova-compute would build it on a clone.
                if not any(self.fits(self._free(name), gpus, required)
                           for name in clones[:1])
                for free in (False, True)[:1 + (required
                                                and self.free_trait)]]

    def _one_node(self, gpus: int, found: set[str]) -> list[set[str]]:
        """``found`` per host NUMA node for a one-cell flavor, else whole.

        A one-cell flavor needs its GPUs on one node, as Nova's NUMA check
        does.
        """
        if gpus > GPUS_PER_SOCKET:
            return [found]
        return [{gpu for gpu in found if self.numa[gpu] == node}
                for node in set(self.numa.values())]

    def fits_in(self, free: set[str], group: frozenset[str],
                gpus: int) -> bool:
        """Whether a ``required`` claim of ``gpus`` fits in ``group``."""
        if self.partitions:
            return any(len(part) == gpus and part <= free & group
                       and any(part <= on
                               for on in self._one_node(gpus, set(part)))
                       for part in self.partitions)
        return any(len(on) >= gpus
                   for on in self._one_node(gpus, free & group))

    def fits(self, free: set[str], gpus: int, required: bool) -> bool:
        """Whether ``gpus`` of ``free`` fit the flavor."""
        if required:
            return any(self.fits_in(free, group, gpus)
                       for group in self.groups)
        return any(len(on) >= gpus for on in self._one_node(gpus, free))

    def _free(self, hostname: str) -> set[str]:
        return set(self.numa) - self.used[hostname]

    def best_left(self, gpus: int) -> int | None:
        """The fewest GPUs a fitting claim can leave free in its group."""
        left = [len(self._free(name) & group) - gpus
                for name in self.names for group in self.groups
                if self.fits_in(self._free(name), group, gpus)]
        return min(left, default=None)

    def one_group(self, claimed: set[str]) -> frozenset[str] | None:
        """The smallest group of the claim, if it is one clique/partition."""
        if self.partitions and claimed not in self.partitions:
            return None
        found = [group for group in self.groups if claimed <= group]
        return min(found, key=len, default=None)

    @contextlib.contextmanager
    def stock(self, stock: bool = True):
        """Stock Nova's filters and weighers meanwhile: ours left out."""
        manager = self.scheduler.manager.host_manager
        kept = manager.enabled_filters, manager.weighers
        if stock:
            manager.enabled_filters = [
                one for one in manager.enabled_filters
                if not isinstance(one, clique_filter.GPUP2PCliqueFilter)]
            manager.weighers = [
                one for one in manager.weighers if not isinstance(
                    one, clique_fit_weigher.GPUP2PCliqueFitWeigher)]
        try:
            yield
        finally:
            manager.enabled_filters, manager.weighers = kept

    def select(self) -> None:
        """Each request under each of :attr:`caps_per_host`, recorded.

        With :attr:`compare_stock` each also with stock Nova's filters;
        with :attr:`with_batch` a batch at the end (each way).
        """
        self.wait_for_quiet()
        for per_host in self.caps_per_host:
            self.cap_placement(self.cap(per_host))
            for stock in (False, True)[:1 + self.compare_stock]:
                with self.stock(stock):
                    self._select(per_host, stock)
        if self.with_batch:
            for stock in (False, True)[:1 + self.compare_stock]:
                with self.stock(stock):
                    self.batch_here(stock)

    def _select(self, cap_per_host: float, stock: bool = False) -> None:
        """Boot, record and delete each request's server."""
        for gpus, required, free in self.requests():
            fitting = sum(self.fits(self._free(name), gpus, required)
                          for name in self.names)
            best = self.best_left(gpus)
            self._clear_timings()
            server = self._boot_or_refused(
                self.bench_flavor(gpus, required, free), stock)
            placed = server['status'] == 'ACTIVE'
            claimed = set(self.gpus(server)) if placed else set()
            host = server['OS-EXT-SRV-ATTR:host']
            group = self.one_group(claimed) if placed else None
            (select, _), = self.timings['select']
            self.sink({
                'placed': placed,
                'shape': self.shape, 'hosts': self.hosts, 'gpus': gpus,
                'required': required, 'stock': stock, 'free_trait': free,
                'cap_per_host': cap_per_host,
                'cap': self.cap(cap_per_host),
                'select_seconds': select,
                **self._parts(),
                'start_seconds': self.start_seconds,
                'hosts_fitting': fitting,
                'hosts_kept': (self.timings['filters'][0][1]
                               if self.timings['filters'] else 0),
                'one_group': group is not None,
                'best_fit': group is not None and best is not None and (
                    len(self._free(host) & group) - gpus == best),
            })
            self.delete(server)

    def _boot_or_refused(self, flavor: str, refusable: bool) -> dict:
        """A server of ``flavor``, ACTIVE; or ERROR where ``refusable``.

        Stock Nova's filters may refuse every candidate placement's cap
        left a host (a one-cell guest's GPUs on two NUMA nodes).
        """
        server = self.api.post_server({'server': self._build_server(
            flavor_id=flavor, image_uuid=self.q35_image, networks='none')})
        server = self.wait_for_status(server, self._ends(refusable))
        self.settle(server)
        return server

    @staticmethod
    def _ends(refusable: bool) -> str | tuple[str, ...]:
        """The statuses a boot may end in."""
        return ('ACTIVE', 'ERROR') if refusable else 'ACTIVE'

    def batch_here(self, stock: bool) -> None:
        """:meth:`batch` on this cloud, its servers deleted after.

        With :attr:`free_trait` again with the ``--free-trait`` flavor.
        """
        for free in (False, True)[:1 + self.free_trait]:
            for server in self.batch(stock, free):
                self.delete(server)

    def batch(self, stock: bool = False, free: bool = False) -> list[dict]:
        """A single request, then :attr:`batch_size` in one, recorded.

        Both of :data:`BATCH_GPUS` ``required`` GPUs (the flavor also
        requiring their free-size trait if ``free``); the batch's record
        has the time of its one ``select_destinations``, its servers per
        host and how many of them are one clique (partition) each.
        """
        flavor = self.bench_flavor(BATCH_GPUS, required=True, free_trait=free)
        self._clear_timings()
        single = self._boot_or_refused(flavor, stock)
        (single_seconds, _), = self.timings['select']
        self.delete(single)
        self._clear_timings()
        servers = self.boot_together(flavor, self.batch_size,
                                     self._ends(stock))
        (select, _), = self.timings['select']
        per_host: dict[str, int] = {}
        placed = [server for server in servers
                  if server['status'] == 'ACTIVE']
        for server in placed:
            host = server['OS-EXT-SRV-ATTR:host']
            per_host[host] = per_host.get(host, 0) + 1
        self.sink({
            'shape': self.shape, 'hosts': self.hosts, 'gpus': BATCH_GPUS,
            'batch': True, 'stock': stock, 'required': True,
            'free_trait': free,
            'servers': len(servers), 'placed': len(placed),
            'select_seconds': select,
            'per_server_seconds': select / len(servers),
            'single_seconds': single_seconds,
            **self._parts(),
            'one_group': sum(self.one_group(set(self.gpus(server)))
                             is not None for server in placed),
            'hosts_used': len(per_host),
            'most_per_host': max(per_host.values(), default=0),
        })
        return servers
