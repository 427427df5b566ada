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

"""Nova's candidate filters over a whole cloud's answer, stock and ours.

A cloud of identical GPU hosts, half of them running a server on two GPUs
of their first clique. Placement's answer is modelled as
:mod:`lab.placement_scale` measured it under the recommended settings
(``breadth-first``, a cap of ``cap`` candidates shared equally by the
hosts): each host's first ordered assignments of its free GPUs to Nova's
request groups, in the order of its GPU providers as a Python set lists
them (shuffled per host). Then, per request, the real filters on real
scheduler HostStates (:func:`lab.candidate_filters._scheduler_host`):

* **stock**: Nova's ``PciPassthroughFilter`` and ``NUMATopologyFilter``
  over every candidate, timed per candidate on one host's sample and
  multiplied by the cloud's candidates (running them all takes minutes
  per request);
* **ours**: ``GPUP2PCliqueFilter`` first over every host's candidates,
  then Nova's two over what it keeps, all timed.

Placement's own time is :mod:`lab.placement_scale`'s.
"""

import dataclasses
import itertools
import random
import time

from nova import conf as nova_conf
from nova.scheduler import filters
from oslo_config import fixture as config_fixture

from nova_gpu_p2p import scheduler

from lab import candidate_filters as checks
from lab import placement_answer as placed
from lab import placement_cases as model

#: The recommended [scheduler] max_placement_results and placement cap.
CAP = 10000
#: GPUs of the busy hosts' server: two of the first clique.
BUSY = (0, 1)
SHAPES = (model.Layout((8,)), model.Layout((2, 2, 2, 2)),
          model.Layout((4, 4)))


@dataclasses.dataclass(frozen=True)
class Case:
    layout: model.Layout
    request: int
    hosts: int
    #: ``hw:gpu_p2p_clique=required`` (the flavor ``nova-gpu-p2p flavor``
    #: prints), else the same flavor without the clique keys.
    required: bool = True

    @property
    def numa_nodes(self) -> int:
        """As an operator sizes the flavor: a guest cell per socket used."""
        per_socket = self.layout.gpus // checks.SOCKETS
        return -(-self.request // per_socket)

    @property
    def name(self) -> str:
        return '%s/%d/%s/%d' % (self.layout.name, self.request,
                                'required' if self.required else 'plain',
                                self.hosts)


def answer(case: Case, cap: int = CAP,
           seed: int = 0) -> list[list[tuple[int, ...]]]:
    """Each host's candidates as GPU indices, placement's model above."""
    chosen = random.Random(seed)
    per_host = max(1, cap // case.hosts)
    hosts = []
    for host in range(case.hosts):
        free = [gpu for gpu in range(case.layout.gpus)
                if host % 2 == 0 or gpu not in BUSY]
        chosen.shuffle(free)
        hosts.append(list(itertools.islice(
            itertools.permutations(free, case.request), per_host)))
    return hosts


def _fitting_free(case: Case, busy: bool) -> bool:
    """Whether a host has a free set that fits, Nova's NUMA rule included.

    One clique for ``required``; on one host NUMA node for a one-cell
    flavor.
    """
    free: dict[tuple, int] = {}
    for gpu in range(case.layout.gpus):
        if busy and gpu in BUSY:
            continue
        key = (case.layout.clique_of(gpu) if case.required else None,
               gpu * checks.SOCKETS // case.layout.gpus
               if case.numa_nodes == 1 else None)
        free[key] = free.get(key, 0) + 1
    return max(free.values(), default=0) >= case.request


def run(case: Case, keep: int = 2, cap: int = CAP) -> dict:
    """One request over the cloud: candidates, seconds, hosts kept.

    :param cap: placement's cap, shared breadth-first.
    """
    hosts = answer(case, cap)
    nova = [f() for f in checks.NOVA_FILTERS]
    ours = scheduler.GPUP2PCliqueFilter()
    with placed._nova_config(), config_fixture.Config(
            nova_conf.CONF) as options:
        options.config(candidates_per_host=keep, group='gpu_p2p')
        spec = placed._request_spec(case.request, case.required,
                                    case.numa_nodes)
        sample = checks._scheduler_host(case.layout, hosts[0][:200], spec)
        start = time.perf_counter()
        _passes(nova, sample, spec)
        per_candidate = ((time.perf_counter() - start)
                         / min(200, len(hosts[0])))
        ours_seconds = nova_seconds = 0.0
        handed = rejected_all = fitting = kept = 0
        for index, candidates in enumerate(hosts):
            if not candidates:
                # Placement leaves out a host without enough free GPUs.
                continue
            busy = BUSY if index % 2 else ()
            host = checks._scheduler_host(case.layout, candidates, spec,
                                          busy)
            fits = _fitting_free(case, bool(busy))
            fitting += fits
            start = time.perf_counter()
            passed = ours.host_passes(host, spec)
            ours_seconds += time.perf_counter() - start
            handed += len(host.allocation_candidates)
            if not passed:
                continue
            start = time.perf_counter()
            survived = _passes(nova, host, spec)
            nova_seconds += time.perf_counter() - start
            rejected_all += not survived
            kept += survived and fits
    total = sum(len(c) for c in hosts)
    return {'case': case.name, 'candidates': total, 'handed_on': handed,
            'stock_seconds': per_candidate * total,
            'ours_seconds': ours_seconds + nova_seconds,
            'our_filter_seconds': ours_seconds,
            'hosts_fitting': fitting, 'hosts_kept': kept,
            'hosts_rejected_all': rejected_all}


def whole_cloud(case: Case, per_host: int = 1) -> dict:
    """One request through Nova's filter handler, stock and ours, timed.

    Every host at once, as nova-scheduler filters them: stock is Nova's
    two filters over every host's candidates (placement's cap
    ``per_host`` a host); ours is ``GPUP2PCliqueFilter`` first, which
    for ``required`` hands on only the best-fitting few hosts that
    Nova's two pass, then Nova's two over those.
    """
    rows = answer(case, per_host * case.hosts)
    with placed._nova_config(), config_fixture.Config(
            nova_conf.CONF) as options:
        options.config(group='filter_scheduler', enabled_filters=[
            'GPUP2PCliqueFilter'] + [f.__name__ for f in checks.NOVA_FILTERS],
            available_filters=['nova.scheduler.filters.all_filters',
                               'nova_gpu_p2p.scheduler.GPUP2PCliqueFilter'])
        spec = placed._request_spec(case.request, case.required,
                                    case.numa_nodes)
        handler = filters.HostFilterHandler()
        found = {}
        for name, chain in (
                ('stock', [f() for f in checks.NOVA_FILTERS]),
                ('ours', [scheduler.GPUP2PCliqueFilter()]
                 + [f() for f in checks.NOVA_FILTERS])):
            hosts = [checks._scheduler_host(case.layout, candidates, spec,
                                            BUSY if index % 2 else ())
                     for index, candidates in enumerate(rows) if candidates]
            start = time.perf_counter()
            kept = handler.get_filtered_objects(chain, hosts, spec)
            found[name + '_seconds'] = time.perf_counter() - start
            found[name + '_kept'] = len(kept)
    return {'case': case.name, 'hosts': case.hosts, **found}


def _passes(filters, host, spec) -> bool:
    """Nova's filter handler's loop for one host: all must pass."""
    return all(f.host_passes(host, spec) for f in filters)


def cases(hosts=(10, 50, 100)) -> list[Case]:
    """Every shape x 1, 2, 4, 8 GPUs x cloud size.

    ``required`` where the shape has a clique of that size, plain always.
    """
    found = []
    for count in hosts:
        for layout in SHAPES:
            for request in (1, 2, 4, 8):
                if request > 1 and max(layout.cliques) >= request:
                    found.append(Case(layout, request, count))
                found.append(Case(layout, request, count, required=False))
    return found
