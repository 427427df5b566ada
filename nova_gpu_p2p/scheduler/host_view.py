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

"""What the filter and weigher read from Nova's scheduler objects.

Everything comes from the compute host's own report: its PCI pools (one
per GPU provider when PCI devices are in placement, each with the GPU's
``gpu_p2p_clique`` and, on a Fabric Manager host, ``gpu_p2p_partitions``
device_spec tags and its provider UUID) and placement's allocation
candidates; for a request whose claim may ignore placement, also the
instance's task state and PCI request IDs, read once per request.
Nothing here holds a second copy of any topology.
"""

from collections.abc import Mapping
from collections.abc import Sequence
import copy
import functools
from typing import Any

from nova import conf as nova_conf
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.virt import hardware
from oslo_log import log as logging

from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p import nova_fix
from nova_gpu_p2p.scheduler import candidate_exchange
from nova_gpu_p2p.scheduler import candidates as candidates_mod
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p.scheduler import move_claims
from nova_gpu_p2p.scheduler import partition_fit
from nova_gpu_p2p.topology import model

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)


def wants_one_clique(spec_obj) -> bool:
    """True for a flavor with ``hw:gpu_p2p_clique=required``."""
    flavor = getattr(spec_obj, 'flavor', None)
    return extra_specs.requires_clique(
        getattr(flavor, 'extra_specs', None) or {})


def _gpu_pools(host_state) -> dict[str, Mapping[str, Any]]:
    """The host's NVIDIA GPU pools, by provider."""
    return {pool['rp_uuid']: pool
            for pool in getattr(host_state.pci_stats, 'pools', None) or ()
            if pool.get('rp_uuid') is not None
            and pool.get('vendor_id') == model.NVIDIA_VENDOR_HEX}


def gpus(host_state) -> dict[str, clique_fit.Gpu]:
    """The host's NVIDIA GPU providers, with clique and free count."""
    return {provider: clique_fit.Gpu(provider,
                                     device_spec_tags.tag_clique(pool),
                                     int(pool.get('count', 0)))
            for provider, pool in _gpu_pools(host_state).items()}


def partition_gpus(host_state) -> dict[str, partition_fit.Gpu]:
    """The GPU providers with their partitions; none without partitions.

    A host is judged by partitions when any GPU pool carries the tag; a
    GPU without one there is in no partition of two or more.
    """
    pools = _gpu_pools(host_state)
    tagged = {provider: device_spec_tags.tag_partitions(pool)
              for provider, pool in pools.items()}
    if all(partitions is None for partitions in tagged.values()):
        return {}
    return {provider: partition_fit.Gpu(
        provider, tagged[provider] or {}, int(pool.get('count', 0)))
        for provider, pool in pools.items()}


def gpu_providers(
        candidate: Mapping[str, Any], host_gpus: Mapping[str, object],
        groups: Mapping[str, candidate_exchange.Group] | None = None
) -> list[str]:
    """The GPU providers one allocation candidate takes, once per device.

    :param groups: the request's groups by suffix: the providers of its
        GPU groups count even where the host no longer shows them.
    """
    groups = groups or {}
    return [provider
            for suffix, providers in candidate.get('mappings', {}).items()
            for provider in providers
            if provider in host_gpus or (suffix in groups
                                         and groups[suffix].gpu)]


def fits(host_state, candidates: Sequence[Mapping[str, Any]] | None = None
         ) -> tuple[list[clique_fit.Fit] | list[partition_fit.Fit], bool]:
    """Best-first fits of the host's candidates, and whether GPUs count.

    By the partition rule on a Fabric Manager host, else by cliques. The
    flag is False when no candidate takes an NVIDIA GPU: the request has
    nothing for either rule to judge.

    :param candidates: these instead of the host's own.
    """
    host_gpus = gpus(host_state)
    if candidates is None:
        candidates = host_state.allocation_candidates or ()
    taken = [gpu_providers(c, host_gpus) for c in candidates]
    if not any(taken):
        return [], False
    return _best_first(host_state, taken), True


def _best_first(host_state, taken: Sequence[Sequence[str]]
                ) -> list[clique_fit.Fit] | list[partition_fit.Fit]:
    """The fitting GPU provider lists, best first, by the host's rule."""
    partitioned = partition_gpus(host_state)
    if partitioned:
        return partition_fit.best_first(taken, partitioned)
    return clique_fit.best_first(taken, gpus(host_state))


def _nvidia_requests(spec_obj) -> set[str]:
    """The IDs of the request's PCI requests for NVIDIA devices."""
    if not spec_obj.obj_attr_is_set('pci_requests'):
        return set()
    return {request.request_id
            for request in getattr(spec_obj.pci_requests, 'requests', ())
            if any(str(spec.get('vendor_id', '')).lower()
                   == model.NVIDIA_VENDOR_HEX for spec in request.spec or ())}


def request_groups(spec_obj) -> dict[str, candidate_exchange.Group]:
    """The request's groups by suffix, as candidates' mappings name them."""
    nvidia = _nvidia_requests(spec_obj)
    return {group.requester_id or '': candidate_exchange.Group(
        dict(group.resources), frozenset(group.required_traits or ()),
        candidates_mod.request_of(group.requester_id or '') in nvidia)
        for group in getattr(spec_obj, 'requested_resources', None) or ()}


def _set(obj, name: str):
    """A Nova object's field, or None where it is not set."""
    return getattr(obj, name) if obj.obj_attr_is_set(name) else None


def guest_cells(spec_obj) -> list[candidates_mod.NodeSize] | None:
    """The guest's NUMA cells as :func:`candidates.surely_passes` reads them.

    Empty without a NUMA topology; None where any cell is not plain
    (shared or mixed CPUs, huge pages, a thread or emulator thread
    policy) or the request does not say.
    """
    if not spec_obj.obj_attr_is_set('numa_topology'):
        return None
    topology = spec_obj.numa_topology
    if topology is None:
        return []
    if _set(topology, 'emulator_threads_policy') is not None:
        return None
    cells = []
    for cell in topology.cells:
        if (_set(cell, 'cpuset') or not _set(cell, 'pcpuset')
                or _set(cell, 'pagesize') is not None
                or _set(cell, 'cpu_thread_policy') not in (None, 'prefer')):
            return None
        cells.append(candidates_mod.NodeSize(len(cell.pcpuset),
                                             int(cell.memory)))
    return cells


def _rooms(host_state) -> dict[int, candidates_mod.NodeSize] | None:
    """Each host NUMA node's free dedicated CPUs and memory, if known."""
    topology = getattr(host_state, 'numa_topology', None)
    if topology is None:
        return None
    return {cell.id: candidates_mod.NodeSize(len(cell.free_pcpus),
                                             int(cell.avail_memory))
            for cell in topology.cells}


def _exchange_pools(host_state) -> dict[str, candidate_exchange.Pool]:
    """The host's GPU pools as the exchange reads them, by provider."""
    partitioned = partition_gpus(host_state)
    return {provider: candidate_exchange.Pool.from_nova(
        pool, device_spec_tags.tag_clique(pool),
        partitioned[provider].partitions if partitioned else ())
        for provider, pool in _gpu_pools(host_state).items()}


def _exchanged(host_state, found: Sequence[Mapping[str, Any]],
               groups: Mapping[str, candidate_exchange.Group],
               required: bool) -> Mapping[str, Any] | None:
    """A candidate built from a returned one on the set to take, or None.

    :mod:`nova_gpu_p2p.scheduler.candidate_exchange`'s rule.
    """
    partitioned = partition_gpus(host_state)
    pools = _exchange_pools(host_state)
    counts = {len(gpu_providers(c, pools, groups)) for c in found} - {0}
    if len(counts) != 1:
        return None
    if partitioned:
        wanted = candidate_exchange.target_partition(partitioned,
                                                     counts.pop())
    else:
        wanted = candidate_exchange.target(list(pools.values()),
                                           counts.pop(), required)
    if wanted is None:
        return None
    for candidate in found:
        built = candidate_exchange.exchange(candidate, pools, groups, wanted)
        if built is not None:
            return built
    return None


def pruned(host_state, required: bool, keep: int,
           groups: Mapping[str, candidate_exchange.Group] | None = None,
           cells: Sequence[candidates_mod.NodeSize] | None = None
           ) -> tuple[list[Mapping[str, Any]], bool]:
    """The candidates to hand on to Nova's filters, and whether GPUs count.

    :mod:`nova_gpu_p2p.scheduler.candidates`' rule over the host's
    candidates that it can still claim (for the second and later
    instances of a multi-create, Nova has consumed the earlier ones from
    its pools); they are returned as they are when none takes a GPU. A
    candidate built on the set the request should take, from any of them,
    comes first where none of the claimable ones fits, where it fits
    better than the best of them, or where it spans fewer NUMA nodes than
    each of them (:mod:`nova_gpu_p2p.scheduler.candidate_exchange`).
    With ``keep`` (not 0), of candidates Nova's filters would judge alike
    only the first is kept (:func:`candidates.judgement`), and only the
    first where Nova's NUMA check surely passes it.

    :param groups: the request's groups by suffix, for that exchange.
    :param cells: the guest's NUMA cells (:func:`guest_cells`): where
        Nova's NUMA check surely passes the first candidate, it alone is
        kept.
    """
    every = host_state.allocation_candidates or []
    unique = [every[index] for index in candidates_mod.distinct(every)]
    pools = _gpu_pools(host_state)
    taken = [gpu_providers(candidate, pools, groups) for candidate in unique]
    if not pools or not any(taken):
        return list(every), False
    free = {provider: int(pool.get('count', 0))
            for provider, pool in pools.items()}
    claimable = [candidate for candidate, gpus in zip(unique, taken)
                 if candidates_mod.claimable(gpus, free)]
    found, _ = fits(host_state, claimable)
    node = {provider: pool.get('numa_node')
            for provider, pool in pools.items()}

    def span(candidate: Mapping[str, Any]) -> frozenset:
        return frozenset(node[provider]
                         for provider in gpu_providers(candidate, node))

    spans = [span(candidate) for candidate in claimable]
    kept = [claimable[index] for index in candidates_mod.choose(
        spans, found, required, 0)]
    if groups:
        built = _exchanged(host_state, unique, groups, required)
        best = kept[:keep] if keep else kept
        if built is not None and (
                not kept or _fits_better(host_state, built, kept[0])
                or len(span(built)) < min(len(span(candidate))
                                          for candidate in best)):
            kept.insert(0, built)
    if not keep:
        return kept, True
    gpu = {provider: (pool.get('numa_node'), candidate_exchange.kind(pool))
           for provider, pool in pools.items()}
    kept = [kept[index] for index in candidates_mod.distinct(
        kept, functools.partial(candidates_mod.judgement, gpus=gpu))][:keep]
    if kept and candidates_mod.surely_passes(cells, _rooms(host_state),
                                             span(kept[0])):
        kept = kept[:1]
    return kept, True


def _fits_better(host_state, built: Mapping[str, Any],
                 first: Mapping[str, Any]) -> bool:
    """Whether the built candidate is a strictly better fit than ``first``.

    Placement may return a fitting candidate on a clique other than the
    best fit; ties keep placement's own.
    """
    ranked, _ = fits(host_state, [first, built])
    return bool(ranked) and ranked[0].index == 1 and (
        len(ranked) == 1 or ranked[0].cost < ranked[1].cost)


def claims_ignore_placement(spec_obj) -> bool:
    """Whether Nova claims this request's GPUs without placement's choice.

    :func:`move_claims.ignores_placement` over the instance's task state
    and PCI request IDs: one read of the instance, in its cell, per
    request (:class:`Request`). The request spec says nothing of the
    operation (a resize is not marked at all), and the task state is set
    by Nova's API before the conductor asks the scheduler. Where the
    instance cannot be read (a build: it is in no cell yet) the claim
    follows placement, as a build's does: treating a build as a move
    would refuse hosts a build may use. Never on a Nova that carries the
    move-claim fix (:mod:`nova_gpu_p2p.nova_fix`).
    """
    if not _nvidia_requests(spec_obj) or nova_fix.carried():
        return False
    instance = _instance(spec_obj)
    if instance is None:
        return False
    requests = _set(instance, 'pci_requests')
    return move_claims.ignores_placement(
        _set(instance, 'task_state'),
        None if requests is None else [
            request.request_id for request in requests.requests
            if request.source == objects.InstancePCIRequest.FLAVOR_ALIAS],
        [request.request_id for request in spec_obj.pci_requests.requests])


def _instance(spec_obj):
    """The request's instance with its PCI requests; None if not found."""
    context = getattr(spec_obj, '_context', None)
    uuid = _set(spec_obj, 'instance_uuid')
    if context is None or not uuid:
        return None
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(context, uuid)
        cell = _set(mapping, 'cell_mapping')
        if cell is None:
            return None
        with nova_context.target_cell(context, cell) as cell_context:
            return objects.Instance.get_by_uuid(
                cell_context, uuid, expected_attrs=['pci_requests'])
    except (nova_exception.InstanceMappingNotFound,
            nova_exception.InstanceNotFound):
        return None
    except Exception:
        # Never fail scheduling because of us: judged as a build.
        LOG.exception('GPU P2P: could not read instance %s; judging its '
                      'request as a build\'s', uuid)
        return None


class Request:
    """What the filter learns of a request once per pass over the hosts."""

    def __init__(self, spec_obj) -> None:
        self.spec_obj = spec_obj

    @functools.cached_property
    def claims_ignore_placement(self) -> bool:
        return claims_ignore_placement(self.spec_obj)


def move_claim(host_state, spec_obj) -> list[str] | None:
    """The GPU providers Nova claims on this host ignoring placement.

    :mod:`move_claims` rule 2, by Nova's own code as the destination runs
    it (``MoveClaim``, then ``PciDeviceStats.consume_requests``): the
    request's PCI requests without providers fitted with the guest's
    NUMA topology (``hardware.numa_fit_instance_to_host``, the limits
    ``NUMATopologyFilter`` sets), then applied in the cells it gave to a
    copy of the host's pools, which are the compute's own, in its order.
    None where that claim fails.
    """
    stats = copy.deepcopy(host_state.pci_stats)
    before = {provider: int(pool.get('count', 0))
              for provider, pool in _gpu_pools(host_state).items()}
    requests = []
    for request in spec_obj.pci_requests.requests:
        request = request.obj_clone()
        request.spec = [{key: value for key, value in spec.items()
                         if key != 'rp_uuids'} for spec in request.spec]
        requests.append(request)
    topology = _set(spec_obj, 'numa_topology')
    host_topology = getattr(host_state, 'numa_topology', None)
    cells = None
    if topology is not None and host_topology:
        limits = objects.NUMATopologyLimits(
            cpu_allocation_ratio=host_state.cpu_allocation_ratio,
            ram_allocation_ratio=host_state.ram_allocation_ratio)
        if _set(spec_obj, 'network_metadata') is not None:
            limits.network_metadata = spec_obj.network_metadata
        fitted = hardware.numa_fit_instance_to_host(
            host_topology, topology.obj_clone(), provider_mapping=None,
            limits=limits, pci_requests=requests, pci_stats=stats)
        if fitted is None:
            return None
        cells = fitted.cells
    try:
        stats.apply_requests(requests, None, cells)
    except nova_exception.PciDeviceRequestFailed:
        return None
    after = {pool['rp_uuid']: int(pool['count']) for pool in stats.pools
             if pool.get('rp_uuid') in before}
    return move_claims.claimed(before, after)


def for_move(host_state, spec_obj, required: bool,
             groups: Mapping[str, candidate_exchange.Group]
             ) -> list[Mapping[str, Any]] | None:
    """The candidates to keep where Nova's claim ignores placement.

    :mod:`move_claims` rule 3: those taking exactly what Nova will claim
    (:func:`move_claim`), or one built on it; empty where the host is
    refused (the debug log says why); None where the host is left to
    :func:`pruned`, as for other requests.
    """
    every = host_state.allocation_candidates or []
    unique = [every[index] for index in candidates_mod.distinct(every)]
    pools = _gpu_pools(host_state)
    taken = [gpu_providers(candidate, pools, groups) for candidate in unique]
    if not pools or not any(taken):
        return None
    claim = move_claim(host_state, spec_obj)
    keep = move_claims.matching(taken, claim) if claim else ()
    built = None
    if claim and not keep:
        exchange_pools = _exchange_pools(host_state)
        built = next((found for found in (
            candidate_exchange.exchange(candidate, exchange_pools, groups,
                                        claim)
            for candidate in unique) if found is not None), None)
    verdict = move_claims.judge(
        claim, bool(claim) and bool(_best_first(host_state, [claim])),
        required, keep, built is not None)
    if verdict.refusal:
        LOG.warning('GPU P2P: %s refused for the move of instance %s: %s; '
                    'the server keeps running where it is (Nova lacks the '
                    'move-claim fix: see troubleshooting, "Moves after a '
                    'nova-compute restart")', host_state,
                    _set(spec_obj, 'instance_uuid'), verdict.refusal)
        return []
    if verdict.as_before:
        return None
    if verdict.use_built:
        return [built]
    return [unique[index] for index in verdict.keep]
