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

"""What nova-scheduler's filters make of placement's candidates: a GPU host
as the scheduler sees it, what GPUP2PCliqueFilter keeps of each host's
candidates, and the filters' time per candidate.
"""

from collections.abc import Iterable
from collections.abc import Sequence
import random
import time
import uuid

from nova import objects
from nova.pci import stats as pci_stats
from nova.scheduler.filters import numa_topology_filter
from nova.scheduler.filters import pci_passthrough_filter
from nova.scheduler import host_manager

from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import driver_stat
from nova_gpu_p2p import scheduler
from nova_gpu_p2p.scheduler import clique_fit

from lab import placement_answer as placed
from lab import placement_cases as model


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


def _scheduler_host(layout: model.Layout, candidates: Sequence[Sequence[int]],
                    spec: 'objects.RequestSpec',
                    busy: Sequence[int] = ()) -> host_manager.HostState:
    """A GPU host as nova-scheduler sees it, with these candidates.

    One PCI pool per GPU with its provider UUID and clique tag, as the
    compute reports them with PCI in placement (none free for the
    ``busy`` GPUs); each candidate maps Nova's request groups to the GPUs
    at those indices.
    """
    numa = _host_numa()
    providers = [str(uuid.uuid5(model.NAMESPACE, placed.gpu_name(0, gpu)))
                 for gpu in range(layout.gpus)]
    pools = objects.PciDevicePoolList(objects=[objects.PciDevicePool(
        vendor_id=model.ALIAS['vendor_id'],
        product_id=model.ALIAS['product_id'],
        numa_node=gpu * SOCKETS // layout.gpus,
        count=0 if gpu in busy else 1,
        tags={'dev_type': model.ALIAS['device_type'],
              'rp_uuid': providers[gpu],
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


def filtered(case: model.Case, candidates: Iterable[Sequence[str]]) -> dict:
    """What GPUP2PCliqueFilter hands Nova's filters on each host, judged.

    Each host's candidates from placement (GPU names, as
    :func:`~lab.placement_answer.answer` gives them) go through the filter on a
    scheduler HostState of the case's layout and busy GPUs
    (:func:`_scheduler_host`), with the default ``candidates_per_host``. Per
    host, ``built_fit``: its first candidate is free GPUs of one clique;
    ``built_best_fit``: and leaves as few GPUs of its clique free as best fit
    can.
    """
    host_of, _, free, best = placed._best_fit(case)
    provider = {str(uuid.uuid5(model.NAMESPACE, placed.gpu_name(0, gpu))): gpu
                for gpu in range(case.layout.gpus)}
    per_host: list[list[list[int]]] = [[] for _ in range(case.hosts)]
    for providers in candidates:
        per_host[host_of[providers[0]]].append(
            [int(name.rpartition('-gpu')[2]) for name in providers])
    fit, best_fit = [], []
    with placed._nova_config(case.settings.max_placement_results):
        spec = placed._request_spec(case.request)
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


def filter_seconds(layout: model.Layout, request: int, candidates: int = 200,
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
    with placed._nova_config():
        spec = placed._request_spec(request)
        for name, order in orders.items():
            host = _scheduler_host(layout, sample, spec)
            start = time.perf_counter()
            for filter_class in order:
                if not filter_class().host_passes(host, spec):
                    break
            seconds[name] = (time.perf_counter() - start) * 1000 / len(
                sample)
    return dict(seconds, fitting=fitting / len(sample))
