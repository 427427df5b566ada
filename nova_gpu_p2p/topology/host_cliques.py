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

"""Which GPUs share a GPUDirect clique.

The rule, chosen so the answer is stable across restarts and explainable:

0. A GPU that may not be promised P2P (a consumer or unknown GPU, see
   :mod:`~nova_gpu_p2p.topology.consumer_gpus`) is a group of its own
   with no ID, even where ``clique_map`` names it.
1. GPUs named in ``[gpu_p2p] clique_map`` take the operator's ID.
2. The other NVIDIA GPUs are taken in PCI address order. Each GPU not yet
   in a group starts one and then admits, again in address order, every
   later ungrouped GPU that is P2P capable with *all* current members. The
   groups are maximal cliques of the P2P graph and no GPU is in two. Where
   P2P is not transitive (A-B and B-C capable, A-C not), A and B form the
   group and C starts its own.
3. Groups of two or more GPUs get IDs in the order of their first address,
   skipping IDs the operator used. A lone GPU gets none: it has no peer.
4. QEMU's property holds 0-15. A group beyond the 16th gets no ID at host
   level (and is reported); an instance's own GPUs are renumbered from 0
   when its guest config is built, so no instance is ever short of IDs.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model

#: QEMU 2.12 added vfio-pci's ``x-nv-gpudirect-clique``, a 4-bit field of
#: the NVIDIA vendor capability it adds (hw/vfio/pci-quirks.c refuses
#: other values: "valid range 0-15"): IDs 0-15.
MAX_CLIQUE_ID = 15

CLIQUE_IDS = range(MAX_CLIQUE_ID + 1)


@dataclasses.dataclass(frozen=True)
class Cliques:
    """The host's GPU grouping."""

    #: Each group of mutually P2P capable GPUs, in order, addresses sorted.
    groups: tuple[tuple[str, ...], ...]
    #: Clique ID of every NVIDIA GPU; None for a GPU without one.
    ids: dict[str, int | None]
    findings: tuple[str, ...] = ()
    #: GPUs barred from any clique (rule 0), and why.
    barred: dict[str, str] = dataclasses.field(default_factory=dict)

    def with_id(self) -> tuple[tuple[str, ...], ...]:
        """The groups of two or more GPUs that carry a clique ID.

        These are the host's cliques as P2P flavors and the traits see
        them: a lone GPU has no peer even where clique_map gives it an ID.
        """
        return tuple(g for g in self.groups
                     if len(g) > 1 and self.ids[g[0]] is not None)

    def largest(self) -> int:
        """Size of the largest group with an ID (0 where there is none)."""
        return max((len(g) for g in self.with_id()), default=0)

    def without_id(self) -> list[str]:
        """GPUs with no clique ID: lone ones and groups past the 16th."""
        return sorted(a for a, clique in self.ids.items() if clique is None)


def why_barred(barred: Mapping[str, str]) -> list[str]:
    """One line per reason: which GPUs get no clique (rule 0), and why."""
    by_reason: dict[str, list[str]] = {}
    for address, why in sorted(barred.items()):
        by_reason.setdefault(why, []).append(address)
    return ['%s get%s no clique: %s' % (
        ', '.join(addresses), 's' if len(addresses) == 1 else '', why)
        for why, addresses in by_reason.items()]


def group_gpus(addresses: Iterable[str],
               capable: Callable[[str, str], bool]) -> list[list[str]]:
    """Greedy maximal cliques in address order (rule 2 above)."""
    remaining = sorted(addresses)
    groups = []
    while remaining:
        group = [remaining.pop(0)]
        for address in list(remaining):
            if all(capable(member, address) for member in group):
                group.append(address)
                remaining.remove(address)
        groups.append(group)
    return groups


def assign(topology: model.HostTopology,
           level: link_class.LinkClass,
           acs_policy: link_class.AcsPolicy = link_class.AcsPolicy.ROUTE,
           clique_map: Mapping[str, int] | None = None,
           barred: Mapping[str, str] | None = None) -> Cliques:
    """Apply the rule above to the host's NVIDIA GPUs.

    :param barred: GPU address -> why it may have no clique (rule 0).
    """
    clique_map = dict(clique_map or {})
    gpus = [gpu.address for gpu in topology.gpus()]
    barred = {a: why for a, why in (barred or {}).items() if a in gpus}
    findings = ['clique_map names %s, which is not an NVIDIA GPU on this '
                'host; ignored' % address
                for address in sorted(set(clique_map) - set(gpus))]
    findings.extend(why_barred(barred))
    ids: dict[str, int | None] = {address: None for address in barred}
    fixed: dict[int, list[str]] = {}
    for address in gpus:
        if address in clique_map and address not in barred:
            ids[address] = clique_map[address]
            fixed.setdefault(clique_map[address], []).append(address)

    groups = group_gpus(
        (a for a in gpus if a not in ids),
        lambda a, b: link_class.p2p_capable(topology, a, b, level,
                                            acs_policy))
    free_ids = iter(i for i in CLIQUE_IDS if i not in fixed)
    for group in groups:
        clique_id = next(free_ids, None) if len(group) > 1 else None
        if len(group) > 1 and clique_id is None:
            findings.append('more than %d cliques: %s get no clique ID at '
                            'host level' % (len(CLIQUE_IDS), ', '.join(group)))
        for address in group:
            ids[address] = clique_id
    all_groups = ([sorted(members) for members in fixed.values()] + groups
                  + [[address] for address in barred])
    all_groups.sort(key=lambda g: g[0])
    return Cliques(groups=tuple(tuple(g) for g in all_groups),
                   ids={a: ids[a] for a in gpus},
                   findings=tuple(findings), barred=barred)
