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

"""Which of a host's allocation candidates reach Nova's own filters.

With GPUs in placement a request for N GPUs of one alias is N identical
request groups, and placement returns every *order* of every free set:
1680 candidates per 8-GPU host for 4 GPUs. Nova's ``PciPassthroughFilter``
and ``NUMATopologyFilter`` then cost milliseconds per candidate, so a
50-host cloud spends minutes on one request. The rule, for every request
with GPUs:

1. **One candidate per claim.** Candidates that give each request the
   same providers, differing only in which of a request's identical groups
   maps to which GPU, are one claim: the first is kept. Nova splits an
   ``InstancePCIRequest`` of N devices into groups ``<request_id>-0`` ..
   ``-<N-1>``, so those suffixes count as one request.
2. **Best fit first, spread.** Candidates whose GPUs fit one clique (or
   are exactly one Fabric Manager partition) come first, best fit first
   (:mod:`~nova_gpu_p2p.scheduler.clique_fit`,
   :mod:`~nova_gpu_p2p.scheduler.partition_fit`); within a clique, those
   whose GPUs sit on fewer host NUMA nodes first. They are taken in
   rounds over *families* (a clique and a set of NUMA nodes): the best of
   each family, then the next of each, so that a few candidates already
   span the host's cliques and NUMA nodes, one of which Nova's
   ``NUMATopologyFilter`` may refuse (a one-cell guest and GPUs on two
   nodes, or a node without free CPUs). A ``required`` request keeps only
   those; any other keeps the rest after them, fewest NUMA nodes first,
   spread over their sets of nodes the same way.
3. **At most K per host** (``[gpu_p2p] candidates_per_host``; 0 keeps
   them all).
4. **Only where it can matter.** With K, of candidates Nova's filters
   judge alike (GPUs of the same kinds on the same host NUMA nodes, the
   same other providers) only the first is kept: Nova's filters pass
   both or neither, and its scheduler claims a host's first. So a
   second candidate reaches them only on other NUMA nodes (which
   ``NUMATopologyFilter`` may judge otherwise, for their free CPUs and
   memory) or with other devices.
5. **One where the first surely passes.** Where Nova's NUMA check
   surely passes the first (a guest without NUMA topology, or a one-cell
   guest of dedicated CPUs whose GPUs sit on one host node with room for
   the whole cell), no second candidate can matter: only the first is
   kept.

Pure functions over plain data: the candidates as Nova holds them
(``allocations`` and ``mappings``) and the fits.
"""

from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import re
import typing
from typing import Any

#: Nova's suffix for one device of an InstancePCIRequest of N.
_DEVICE_GROUP = re.compile(
    r'^(?P<request>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
    r'[0-9a-f]{12})-[0-9]+$')


class Fit(typing.Protocol):
    """What the fit rules return: a candidate's index and its family."""

    index: int

    @property
    def family(self) -> Hashable:
        """Fits of one family take GPUs from one clique or partition."""


def request_of(suffix: str) -> str:
    """The request a group suffix belongs to: its devices are alike.

    Nova's PCI request ID for one device's group, else the suffix.
    """
    match = _DEVICE_GROUP.match(suffix)
    return match.group('request') if match else suffix


def claim_key(candidate: Mapping[str, Any]) -> Hashable:
    """What Nova's claim of a candidate depends on (rule 1).

    Each provider's resources, and for each request the providers its
    groups map to, counted: not which identical group maps where.
    """
    allocations = frozenset(
        (provider, frozenset(entry.get('resources', {}).items()))
        for provider, entry in candidate.get('allocations', {}).items())
    taken: dict[tuple[str, str], int] = {}
    for suffix, providers in candidate.get('mappings', {}).items():
        for provider in providers:
            key = (request_of(suffix), provider)
            taken[key] = taken.get(key, 0) + 1
    return allocations, frozenset(taken.items())


def judgement(candidate: Mapping[str, Any],
              gpus: Mapping[str, Hashable]) -> Hashable:
    """What Nova's PCI and NUMA filters judge a candidate by (rule 4).

    Each GPU's host NUMA node and kind (vendor, product, type, tags Nova
    matches), counted, and every other provider's allocation as it is.
    Of two claimable candidates alike in this, Nova's filters pass both
    or neither, and its scheduler claims only the first.

    :param gpus: the host's GPU providers, each with its NUMA node and
        kind.
    """
    taken: dict[Hashable, int] = {}
    for providers in candidate.get('mappings', {}).values():
        for provider in providers:
            if provider in gpus:
                taken[gpus[provider]] = taken.get(gpus[provider], 0) + 1
    others = frozenset(
        (provider, frozenset(entry.get('resources', {}).items()))
        for provider, entry in candidate.get('allocations', {}).items()
        if provider not in gpus)
    return frozenset(taken.items()), others


def distinct(candidates: Iterable[Mapping[str, Any]],
             key: Callable[[Mapping[str, Any]], Hashable] = claim_key
             ) -> list[int]:
    """The index of each key's first candidate, in order (rules 1, 4).

    :param key: what makes two candidates one: the claim, by default.
    """
    seen: set[Hashable] = set()
    kept = []
    for index, candidate in enumerate(candidates):
        found = key(candidate)
        if found not in seen:
            seen.add(found)
            kept.append(index)
    return kept


def claimable(providers: Iterable[str], free: Mapping[str, int]) -> bool:
    """Whether the host still has every device the candidate takes.

    :param providers: the GPU providers a candidate takes, once per
        device.
    :param free: free devices per provider, as the host's pools count
        them: for the second and later instances of a multi-create, after
        Nova consumed the earlier ones, whose candidates a later one's
        overlap (Nova's ``PciPassthroughFilter`` would drop them).
    """
    wanted: dict[str, int] = {}
    for provider in providers:
        wanted[provider] = wanted.get(provider, 0) + 1
    return all(free.get(provider, 0) >= count
               for provider, count in wanted.items())


@dataclasses.dataclass(frozen=True)
class NodeSize:
    """Dedicated CPUs and memory of a NUMA node or cell.

    Free on a host NUMA node, or what a guest cell of dedicated CPUs and
    small pages asks for.
    """

    pcpus: int
    memory_mb: int


def surely_passes(cells: Sequence[NodeSize] | None,
                  rooms: Mapping[int, NodeSize] | None,
                  span: frozenset[int | None]) -> bool:
    """Whether Nova's NUMA check surely passes a candidate (rule 5).

    True for a guest without NUMA topology (``cells`` empty: Nova's
    check is then the same for every candidate), and for a one-cell guest
    whose GPUs sit on one host node with free dedicated CPUs and memory
    for the whole cell. False wherever it might refuse it (more cells, a
    cell Nova pins otherwise, an unknown node or room), which keeps a
    second candidate that Nova might judge otherwise.

    :param cells: the guest's cells; None where they are not plain
        (shared or mixed CPUs, huge pages, a thread or emulator policy).
    :param rooms: each host node's free room; None where unknown.
    :param span: the host NUMA nodes of the candidate's GPUs.
    """
    if cells is not None and not cells:
        return True
    if not cells or rooms is None or len(cells) != 1 or len(span) != 1:
        return False
    room = rooms.get(next(iter(span)))  # type: ignore[arg-type]
    return (room is not None and room.pcpus >= cells[0].pcpus
            and room.memory_mb >= cells[0].memory_mb)


#: The host NUMA nodes of a candidate's GPUs (None: unknown).
Span = frozenset[int | None]


def spread(order: Sequence[tuple[int, Hashable]]) -> list[int]:
    """Candidate indexes in rounds over their families (rule 2).

    :param order: (index, family) pairs, best first. Families come in
        the order of their first member; within one, members keep their
        order.
    """
    families: dict[Hashable, list[int]] = {}
    for index, family in order:
        families.setdefault(family, []).append(index)
    rounds = max((len(indexes) for indexes in families.values()), default=0)
    return [indexes[n] for n in range(rounds)
            for indexes in families.values() if n < len(indexes)]


def choose(spans: Sequence[Span], fits: Sequence[Fit], required: bool,
           keep: int) -> list[int]:
    """Indexes of the candidates to hand on, in order (rules 2 and 3).

    :param spans: every candidate's NUMA nodes, by index.
    :param fits: the fitting ones, best fit first.
    :param keep: at most this many; 0 for all.
    """
    rank = {}
    for found in fits:
        rank.setdefault(found.family, len(rank))
    fitting = sorted(fits, key=lambda f: (rank[f.family],
                                          len(spans[f.index])))
    order = spread([(f.index, (f.family, spans[f.index]))
                    for f in fitting])
    if not required:
        taken = set(order)
        rest = sorted((index for index in range(len(spans))
                       if index not in taken),
                      key=lambda index: len(spans[index]))
        order += spread([(index, spans[index]) for index in rest])
    return order[:keep] if keep else order
