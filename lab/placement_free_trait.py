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

"""Placement's answer with and without ``CUSTOM_GPU_P2P_FREE_<n>`` (bench).

A cloud of *4+4* hosts, GPUs in placement, where only some hosts have a
clique of four free: the others run a server on one GPU of each clique
(three free in each), as hosts of a busy GPU cloud do. Nova's query for a
``required`` flavor of four GPUs, built by Nova's own code from what
``nova-gpu-p2p flavor`` prints without and with ``--free-trait``
(:func:`lab.placement_answer.nova_query`), is timed against placement's
WSGI application over in-memory SQLite under the recommended settings
(:func:`lab.placement_cases.recommended`: two candidates per host,
breadth-first, optimized). Each host carries the traits our driver
reports, its free sizes from :func:`nova_gpu_p2p.traits.free_traits`
over the GPUs its servers hold.

Both queries return every host with a free clique of four; the first
also every other host with four free GPUs, which Nova then reads a host
state for and ``GPUP2PCliqueFilter`` drops. A third asks for the trait as
``root_required`` (placement 1.35), which Nova sends only for its own
request filters: what placement would take if a flavor's trait on the
compute node were sent so.
"""

import collections
from collections.abc import Sequence
import hashlib
import json
import statistics
import time

from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import model as topology_model
from nova_gpu_p2p import traits

from lab import placement_answer as placed
from lab import placement_cases as model

LAYOUT = model.Layout((4, 4))
REQUEST = 4
#: GPUs a crowded host's servers hold: one of each clique.
CROWDED = (0, 4)
#: The queries of each cloud (:func:`measure`), in the table's order.
QUERIES = ('plain', 'free', 'root')
#: Each query is timed this many times; the median is kept.
ROUNDS = 3


def free_traits(busy: Sequence[int]) -> list[str]:
    """What the driver reports for a *4+4* host whose ``busy`` GPUs run."""
    addresses = ['0000:%02x:00.0' % (0x10 + gpu)
                 for gpu in range(LAYOUT.gpus)]
    topology = topology_model.HostTopology(functions={
        address: topology_model.PCIFunction(
            address=address, vendor=0x10de, device=0x2330,
            class_code=0x030200, parent=None, root_complex='pci0000:00',
            numa_node=0)
        for address in addresses})
    groups = tuple(tuple(addresses[start:start + size]) for start, size in
                   ((0, LAYOUT.cliques[0]),
                    (LAYOUT.cliques[0], LAYOUT.cliques[1])))
    cliques = host_cliques.Cliques(
        groups=groups, ids={address: LAYOUT.clique_of(gpu)
                            for gpu, address in enumerate(addresses)})
    host = host_gpus.HostGPUs(topology=topology, cliques=cliques)
    return sorted(traits.free_traits(host, (), {addresses[gpu]
                                                for gpu in busy}))


def _build(placement: placed._Placement, hosts: int, fitting: int) -> None:
    """``hosts`` hosts, every ``hosts // fitting``-th of them empty."""
    placement.call('PUT', '/resource_classes/%s' % model.GPU_CLASS)
    step = max(1, hosts // max(fitting, 1))
    inventories = {}
    used = []
    for host in range(hosts):
        busy = () if host % step == 0 and host // step < fitting else CROWDED
        root = placement.provider(
            'host%d' % host,
            trait_names=placed.host_traits(LAYOUT) + free_traits(busy))
        inventories[root] = model.HOST_INVENTORY
        for gpu in range(LAYOUT.gpus):
            rp = placement.provider(
                placed.gpu_name(host, gpu), parent=root,
                trait_names=['COMPUTE_MANAGED_PCI_DEVICE',
                             traits.clique_id_trait(LAYOUT.clique_of(gpu))])
            inventories[rp] = {model.GPU_CLASS: 1}
            if gpu in busy:
                used.append((root, rp))
    placement.reshape(inventories, used)


def answer_digest(body: dict) -> str:
    """What of placement's answer a change to placement must keep.

    The hosts, each provider's summary and each host's number of
    candidates. Not which of a host's candidates fill the cap, nor their
    order: both follow the order of Python sets of providers, which any
    change in what placement reads reorders.
    """
    roots = {rp: summary['root_provider_uuid']
             for rp, summary in body['provider_summaries'].items()}
    candidates = collections.Counter(
        roots[next(iter(areq['allocations']))]
        for areq in body['allocation_requests'])
    canonical = json.dumps({
        'candidates': candidates,
        'provider_summaries': {
            rp: dict(summary, traits=sorted(summary['traits']))
            for rp, summary in body['provider_summaries'].items()}},
        sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _timed(placement: placed._Placement, query: str
           ) -> tuple[float, int, str]:
    """Median seconds of the GET with its JSON read.

    Also the hosts it returned and :func:`answer_digest`.
    """
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        body = placement.call('GET', '/allocation_candidates?' + query).json()
        times.append(time.perf_counter() - start)
    roots = {rp for rp, summary in body['provider_summaries'].items()
             if summary.get('parent_provider_uuid') is None}
    return statistics.median(times), len(roots), answer_digest(body)


def measure(hosts: int, fitting: int) -> dict:
    """One cloud: the time and hosts of each query."""
    settings = model.recommended(hosts)
    plain, microversion = placed.nova_query(
        REQUEST, settings.max_placement_results)
    free, _ = placed.nova_query(REQUEST, settings.max_placement_results,
                                free_trait=True)
    root = '%s&root_required=%s' % (plain, traits.GPU_P2P_FREE[REQUEST])
    with placed._Placement(settings, microversion) as placement:
        _build(placement, hosts, fitting)
        record = {'hosts': hosts, 'fitting': fitting}
        for name, query in zip(QUERIES, (plain, free, root)):
            (record['%s_seconds' % name], record['%s_hosts' % name],
             record['%s_answer' % name]) = _timed(placement, query)
    return record


def run(clouds: Sequence[tuple[int, int]]) -> list[dict]:
    return [measure(hosts, fitting) for hosts, fitting in clouds]


def print_result(records: Sequence[dict], fixed: Sequence[dict]) -> None:
    """Each cloud's row under placement as released, then as patched."""
    print('\nplacement_free_trait: GET /allocation_candidates for a '
          'required flavor of %d GPUs,\nwithout and with '
          'CUSTOM_GPU_P2P_FREE_%d (lab/placement_free_trait.py; hosts of '
          '4+4, the\nothers with one GPU of each clique running)'
          % (REQUEST, REQUEST))
    print('placement  hosts  fitting  ' + '  '.join(
        '%7s s  hosts' % query for query in QUERIES))
    for name, rows in (('released', records), ('patched', fixed)):
        for row in rows:
            print('%-9s  %5d  %7d  ' % (name, row['hosts'], row['fitting'])
                  + '  '.join('%9.3f  %5d' % (row['%s_seconds' % query],
                                              row['%s_hosts' % query])
                              for query in QUERIES))
    print('  plain: the flavor as nova-gpu-p2p flavor prints it; free: '
          'with --free-trait; root: the same trait as root_required;\n'
          '  patched: with patches/placement (later request groups read '
          'only the trees of earlier ones)')
