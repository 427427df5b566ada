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

"""Which Fabric Manager partitions should be active: pure rules.

Fabric Manager keeps partitions active until told otherwise, and forgets
them when it restarts; the domains running on the host are what count.
Each running domain holds what :func:`partitions.for_instance` gives its
GPUs (its exact partition, or its GPUs' 1-GPU partitions). A partition
that holds none of their GPUs is stale: it would refuse those GPUs to the
next server. A partition over a running domain's GPUs is never torn down,
even when it is not the one that domain should hold: that would take
CUDA away from a running guest.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova_gpu_p2p.fabric import partitions as partitions_mod


@dataclasses.dataclass(frozen=True)
class Decision:
    """What to tell Fabric Manager, and what to report."""

    #: Active partitions holding no GPU of a running domain.
    deactivate: tuple[int, ...]
    #: Every partition the running domains hold (what a restarted Fabric
    #: Manager is told with fmSetActivatedFabricPartitions).
    needed: tuple[int, ...]
    #: Needed partitions that are not active.
    restore: tuple[int, ...]


def fabric_gpus(partitions: tuple[partitions_mod.FabricPartition, ...],
                addresses: Iterable[str]) -> tuple[str, ...]:
    """The addresses that are Fabric Manager GPUs (not NICs, not others)."""
    known = {gpu for partition in partitions for gpu in partition.gpus}
    return tuple(sorted(set(addresses) & known))


def held(partitions: Iterable[partitions_mod.FabricPartition],
         running: Mapping[str, Iterable[str]]
         ) -> dict[str, partitions_mod.InstancePartitions]:
    """What each running domain with fabric GPUs holds, by instance UUID."""
    partitions = tuple(partitions)
    found = {}
    for uuid, addresses in running.items():
        gpus = fabric_gpus(partitions, addresses)
        if gpus:
            found[uuid] = partitions_mod.for_instance(partitions, gpus)
    return found


def decide(partitions: Iterable[partitions_mod.FabricPartition],
           active: Iterable[int],
           running: Mapping[str, Iterable[str]]) -> Decision:
    """Compare what Fabric Manager has active with what domains hold.

    ``running`` maps each running domain's instance UUID to its host PCI
    addresses (any device: those that are no fabric GPU are ignored).
    """
    partitions = tuple(partitions)
    active = frozenset(active)
    holdings = held(partitions, running)
    needed = frozenset(i for h in holdings.values() for i in h.ids)
    in_use = {gpu for uuid in holdings
              for gpu in fabric_gpus(partitions, running[uuid])}
    deactivate = tuple(sorted(
        p.id for p in partitions
        if p.id in active and p.id not in needed
        and not in_use.intersection(p.gpus)))
    return Decision(deactivate=deactivate, needed=tuple(sorted(needed)),
                    restore=tuple(sorted(needed - active)))


def lacking(partitions: Iterable[partitions_mod.FabricPartition],
            active: Iterable[int],
            running: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Instance UUID -> the partitions it holds that are not active.

    Asked after the reconcile's calls, so it names only what Fabric
    Manager could not be brought to.
    """
    active = frozenset(active)
    found = {}
    for uuid, holding in sorted(held(partitions, running).items()):
        why = []
        inactive = [str(i) for i in holding.ids if i not in active]
        if inactive:
            why.append('Fabric Manager partition(s) %s not active'
                       % ', '.join(inactive))
        if holding.missing:
            why.append('GPU(s) %s in no 1-GPU Fabric Manager partition'
                       % ', '.join(holding.missing))
        if why:
            found[uuid] = '; '.join(why)
    return found
