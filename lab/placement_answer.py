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

"""One case's answer from the real code: Nova's query for the documented
flavor, placement's WSGI application over in-memory SQLite holding the
case's hosts, and what the candidates it returns are worth.
"""

from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
import contextlib
import json
import resource
import time
import uuid

from nova import conf as nova_conf
from nova import objects
from nova.pci import request as pci_request
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils
from nova.virt import hardware
from oslo_config import fixture as config_fixture
from placement import db_api as placement_db
from placement.tests.functional.fixtures import placement as placement_fixture
import requests
import sqlalchemy

from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p import traits

from lab import placement_cases as model


def flavor_request(request: int, numa_nodes: int = 1,
                   free_trait: bool = False
                   ) -> flavor_commands.FlavorRequest:
    """The flavor ``nova-gpu-p2p flavor --gpus <request>`` prints."""
    return flavor_commands.FlavorRequest(gpus=request,
                                         alias=model.ALIAS['name'],
                                         numa_nodes=numa_nodes,
                                         free_trait=free_trait)


@contextlib.contextmanager
def _nova_config(limit: int | None = None,
                 alias_clique: int | None = None) -> Iterator[None]:
    """Nova's scheduler options for PCI in placement, only meanwhile.

    :param alias_clique: the alias asks for GPUs of this clique ID.
    """
    objects.register_all()
    alias = dict(model.ALIAS)
    if alias_clique is not None:
        alias['traits'] = traits.clique_id_trait(alias_clique)
    with config_fixture.Config(nova_conf.CONF) as conf:
        conf.config(group='pci', alias=[json.dumps(alias)])
        conf.config(group='filter_scheduler', pci_in_placement=True)
        conf.config(group='scheduler',
                    max_placement_results=limit or model.NOVA_LIMIT)
        # Nova caches the parsed aliases: ours only meanwhile.
        pci_request.get_alias_from_config.cache_clear()
        try:
            yield
        finally:
            pci_request.get_alias_from_config.cache_clear()


def _request_spec(request: int, required: bool = True,
                  numa_nodes: int = 1, free_trait: bool = False
                  ) -> 'objects.RequestSpec':
    """Nova's RequestSpec for the documented flavor, under _nova_config.

    :param required: False: the same flavor without its clique keys (no
        ``hw:gpu_p2p_clique``, no clique-size trait).
    :param numa_nodes: ``--numa-nodes`` of ``nova-gpu-p2p flavor``.
    :param free_trait: its ``--free-trait``.
    """
    wanted = flavor_request(request, numa_nodes, free_trait)
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
               alias_clique: int | None = None,
               free_trait: bool = False) -> tuple[str, str]:
    """Nova's GET /allocation_candidates query for ``request`` GPUs.

    Built by Nova's scheduler code from the documented flavor
    (:func:`flavor_request`: PCI alias, dedicated CPUs, the clique-size
    trait) with ``[filter_scheduler] pci_in_placement``, so the groups,
    their suffixes and the group policy are Nova's. Returns the query
    string and the microversion Nova sends it with.
    """
    with _nova_config(limit, alias_clique):
        resources = scheduler_utils.resources_from_request_spec(
            None, _request_spec(request, free_trait=free_trait), None)
    if limit is None:
        resources._limit = None
    return resources.to_querystring(), report.SAME_SUBTREE_VERSION


def host_traits(layout: model.Layout) -> list[str]:
    """The compute node's traits as our driver reports them."""
    return [traits.GPU_P2P, traits.GPU_NUMA_AFFINITY] + [
        traits.GPU_P2P_CLIQUE[size] for size in traits.CLIQUE_SIZES
        if size <= max(layout.cliques)]


def gpu_name(host: int, gpu: int) -> str:
    """The GPU's provider name.

    :func:`~lab.candidate_filters.filtered` reads the GPU back.
    """
    return 'host%d-gpu%02d' % (host, gpu)


class _Placement:
    """Placement's WSGI app over in-memory SQLite, and a client to it."""

    def __init__(self, settings: model.Settings, microversion: str) -> None:
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
        rp = str(uuid.uuid5(model.NAMESPACE, name))
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
                    gpu: {'resources': {model.GPU_CLASS: 1}}})
                for root, gpu in used}})


def _build_hosts(placement: _Placement, case: model.Case) -> dict[str, str]:
    """The case's hosts as Nova reports them; GPU provider UUID -> name."""
    placement.call('PUT', '/resource_classes/%s' % model.GPU_CLASS)
    # Every clique-size trait exists in a cloud where any host has it.
    for name in traits.GPU_P2P_CLIQUE.values():
        placement.call('PUT', '/traits/%s' % name)
    placement.start_ids(1 + case.seed * model.ID_STRIDE)
    names = {}
    inventories = {}
    used = []
    for host in range(case.hosts):
        root = placement.provider('host%d' % host,
                                  trait_names=host_traits(case.layout))
        inventories[root] = model.HOST_INVENTORY
        for gpu in range(case.layout.gpus):
            name = gpu_name(host, gpu)
            rp = placement.provider(
                name, parent=root,
                trait_names=['COMPUTE_MANAGED_PCI_DEVICE',
                             traits.clique_id_trait(
                                 case.layout.clique_of(gpu))])
            names[rp] = name
            inventories[rp] = {model.GPU_CLASS: 1}
            if not case.free(gpu):
                used.append((root, rp))
    placement.reshape(inventories, used)
    return names


def _best_fit(case: model.Case) -> tuple[
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


def judge(case: model.Case, candidates: Iterable[Sequence[str]]) -> dict:
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


def answer(case: model.Case, query: str, microversion: str
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


def run_case(case: model.Case, query: str, microversion: str) -> dict:
    """:func:`answer`, and what :func:`judge` makes of it.

    In this process; :func:`~lab.placement_runner.measure` calls it in a
    forked child.
    """
    candidates, stats = answer(case, query, microversion)
    return dict(judge(case, candidates), status='ok', **stats)


def _statm_mb(field: int, pid: int | str = 'self') -> float:
    """A process's address space (field 0) or resident set (1), MiB."""
    with open('/proc/%s/statm' % pid) as statm:
        pages = int(statm.read().split()[field])
    return pages * resource.getpagesize() / 2 ** 20
