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

"""A fitting candidate built from a returned one, by exchanging GPUs.

Placement caps its answer, and which candidates of a host survive the cap
depends on the order it meets the host's GPUs: a host whose pools show a
free clique for a ``hw:gpu_p2p_clique=required`` request may come back
without any candidate on it, or only with candidates whose GPUs span two
NUMA nodes where one node holds a fitting set (which Nova's NUMA check
refuses for a one-cell guest). Then one is built from a returned
candidate of that host by exchanging its GPU providers. The rule,
failing closed (no candidate rather than a doubtful one):

1. **The set.** The clique :func:`clique_fit.choose` picks (fewest free
   GPUs that still hold the request; for a request that is not
   ``required``, any free GPUs where no clique holds it), its free GPUs
   on one host NUMA node first; on a host with Fabric Manager partitions,
   the whole free partition of the request's size that
   :func:`partition_fit.best_first` would pick. It is used when no
   returned candidate fits, or when it spans fewer NUMA nodes than every
   one that does.
2. **Only like for like.** A provider is exchanged only for one whose pool
   matches it in everything Nova matches a request against (vendor,
   product, device type and device_spec tags; not the clique), which is
   free, and which the candidate does not take already.
3. **Nothing a group asked for is lost.** Each GPU's group must ask for
   one unit of the resource class Nova gives both GPUs by default
   (``CUSTOM_PCI_<VENDOR>_<PRODUCT>``), and for no trait but the clique
   ID and partition traits, which the pools show, and those Nova gives
   every PCI device provider (``OWNER_NOVA``,
   ``COMPUTE_MANAGED_PCI_DEVICE``): so the new provider has the same
   class and every required trait.
4. **Consistent.** Allocations and mappings change together; nothing else
   of the candidate does. Nova's ``PciPassthroughFilter`` then checks it
   against the pools and placement's claim checks capacity, as for any
   candidate: if the claim fails, Nova goes on with its next alternate.

Pure functions over plain data.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import copy
import dataclasses
from typing import Any

import os_traits

from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p.scheduler import partition_fit
from nova_gpu_p2p import traits

#: Traits Nova gives every PCI device provider it reports.
NOVA_PCI_TRAITS = frozenset({os_traits.OWNER_NOVA,
                             os_traits.COMPUTE_MANAGED_PCI_DEVICE})
#: Pool keys that are not the device's kind: bookkeeping and our tags.
_NOT_KIND = frozenset({'count', 'rp_uuid', 'numa_node', 'address',
                       'devices', 'gpu_p2p_clique', 'gpu_p2p_partitions'})


def kind(pool: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """Everything Nova matches a request against in a pool, as (key, value).

    Not the clique, partition or order tags: only our filter and Nova's
    pool order read them.
    """
    return frozenset((k, str(v)) for k, v in pool.items()
                     if k not in _NOT_KIND
                     and not device_spec_tags.is_order_tag(k))


@dataclasses.dataclass(frozen=True)
class Pool:
    """A GPU provider's pool as the exchange needs it."""

    provider: str
    free: int
    numa_node: int | None
    clique: int | None
    #: Everything Nova matches a request against, as (key, value).
    kind: frozenset[tuple[str, str]]
    #: The traits the pool shows: its clique ID and partition traits, and
    #: those Nova gives every PCI device provider.
    traits: frozenset[str] = NOVA_PCI_TRAITS

    @classmethod
    def from_nova(cls, pool: Mapping[str, Any], clique: int | None,
                  partitions: Iterable[int] = ()) -> 'Pool':
        shown = {traits.partition_trait(p) for p in partitions}
        shown.update(NOVA_PCI_TRAITS)
        if clique is not None:
            shown.add(traits.clique_id_trait(clique))
        return cls(pool['rp_uuid'], int(pool.get('count', 0)),
                   pool.get('numa_node'), clique, kind(pool),
                   frozenset(shown))

    @property
    def resource_class(self) -> str:
        """The class Nova gives the device without a resource_class tag."""
        kind = dict(self.kind)
        return 'CUSTOM_PCI_%s_%s' % (kind.get('vendor_id', '').upper(),
                                     kind.get('product_id', '').upper())


@dataclasses.dataclass(frozen=True)
class Group:
    """One request group: what each of its providers must give and have."""

    resources: Mapping[str, int]
    required_traits: frozenset[str] = frozenset()
    #: One device of a request for NVIDIA devices: the provider it maps
    #: to is a GPU even where the pools no longer show it (Nova consumed
    #: it for an earlier instance of the request).
    gpu: bool = False


def target(pools: Sequence[Pool], count: int,
           required: bool = True) -> list[str] | None:
    """The free GPUs a request of ``count`` should take (rule 1).

    The best-fit clique's; for a request that is not ``required``, any
    free GPUs where no clique holds it. Those of one host NUMA node first.
    """
    free = clique_fit.free_per_group(
        clique_fit.Gpu(p.provider, p.clique, p.free) for p in pools)
    group = clique_fit.choose(free, count)
    if group is not None:
        members = [p for p in pools if p.free > 0 and (
            p.provider == group.lone if group.clique is None
            else p.clique == group.clique)]
    elif required:
        return None
    else:
        members = [p for p in pools if p.free > 0]
    per_node: dict[int | None, list[Pool]] = {}
    for pool in members:
        per_node.setdefault(pool.numa_node, []).append(pool)
    # The node holding the most of them first, then the others.
    ordered = [pool for node in sorted(per_node, key=lambda n: (
        -len(per_node[n]), -1 if n is None else n)) for pool in per_node[node]]
    if len(ordered) < count:
        return None
    return [pool.provider for pool in ordered[:count]]


def target_partition(gpus: Mapping[str, partition_fit.Gpu],
                     count: int) -> list[str] | None:
    """On a Fabric Manager host: the free partition to take (rule 1).

    The best fit :func:`partition_fit.best_first` would pick among
    candidates on every partition of ``count`` GPUs whose GPUs are all
    free; for one GPU, among the free GPUs.
    """
    free = [provider for provider, gpu in gpus.items() if gpu.free > 0]
    if count == 1:
        sets = [[provider] for provider in free]
    else:
        members: dict[int, list[str]] = {}
        for provider in free:
            for partition, size in gpus[provider].partitions.items():
                if size == count:
                    members.setdefault(partition, []).append(provider)
        sets = [sorted(found) for _, found in sorted(members.items())
                if len(found) == count]
    fits = partition_fit.best_first(sets, gpus)
    return sets[fits[0].index] if fits else None


def _may_take(old: Pool | None, new: Pool, group: Group) -> bool:
    """Rules 2 and 3 for one exchange.

    ``old`` is None for a GPU Nova consumed for an earlier instance of
    the request: the group's class and traits, which the new one has,
    are what it matched (and Nova's PCI filter checks the new one's pool
    against the request).
    """
    like = old is None or new.kind == old.kind
    return (like and new.free > 0
            and dict(group.resources) == {(old or new).resource_class: 1}
            and group.required_traits <= new.traits)


def exchange(candidate: Mapping[str, Any], pools: Mapping[str, Pool],
             groups: Mapping[str, Group],
             wanted: Sequence[str]) -> dict[str, Any] | None:
    """The candidate with its GPU providers exchanged for ``wanted``.

    :param pools: the host's GPU pools by provider.
    :param groups: the request's groups by suffix.
    :param wanted: the providers to take, as :func:`target` gives them.
    :returns: a new candidate, or None where a rule forbids it.
    """
    mappings = candidate.get('mappings', {})
    taken = [(suffix, provider) for suffix, providers in mappings.items()
             for provider in providers
             if provider in pools or (suffix in groups
                                      and groups[suffix].gpu)]
    if len(taken) != len(wanted) or len(set(wanted)) != len(wanted):
        return None
    gpu_providers = [provider for _, provider in taken]
    if len(set(gpu_providers)) != len(gpu_providers):
        return None
    others = {provider for providers in mappings.values()
              for provider in providers} - set(gpu_providers)
    if others & set(wanted):
        return None
    left = list(wanted)
    chosen: dict[str, str] = {}
    for suffix, old in taken:
        group = groups.get(suffix)
        if group is None:
            return None
        new = next((p for p in left
                    if _may_take(pools.get(old), pools[p], group)), None)
        if new is None:
            return None
        left.remove(new)
        chosen[old] = new
    built = copy.deepcopy(dict(candidate))
    built['mappings'] = {
        suffix: [chosen.get(provider, provider) for provider in providers]
        for suffix, providers in mappings.items()}
    built['allocations'] = {
        chosen.get(provider, provider): entry
        for provider, entry in built.get('allocations', {}).items()}
    return built
