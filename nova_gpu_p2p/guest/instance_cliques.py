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

"""Which clique ID each of an instance's GPUs gets.

The rule, applied to the instance's NVIDIA GPUs only (QEMU refuses the
property on anything else):

* ``none``: no GPU gets an ID.
* ``auto`` and ``required``: the host's groups (see
  :mod:`nova_gpu_p2p.topology.host_cliques`) restricted to the GPUs this
  instance got. Each group holding two or more of them gets an ID,
  numbered from 0 in the order of the group's first address, so an
  instance never runs out of the 16 IDs QEMU allows, whatever the host
  numbering. A GPU with no peer in the instance gets none. ``required``
  additionally needs all the instance's GPUs in one group; otherwise the
  plan carries the reason, naming the GPUs and their link.
* a fixed ID: every GPU gets it, as the operator asserted; where the
  topology disagrees a warning says so.

A GPU the host bars from cliques (a consumer GPU, see
:mod:`~nova_gpu_p2p.topology.consumer_gpus`) gets no ID in any mode: for
``auto`` that is an informational note, for a fixed ID a warning, and
``required`` is refused naming why.
"""

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.topology import host_cliques

#: (address, address) -> link class name, for messages only.
LinkName = Callable[[str, str], str]


@dataclasses.dataclass(frozen=True)
class CliquePlan:
    """Clique ID per GPU address, and what to tell the operator."""

    ids: dict[str, int] = dataclasses.field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: What is as designed but worth saying: GPUs barred from cliques.
    info: tuple[str, ...] = ()
    #: Why ``required`` cannot be honoured on this host; None when it can.
    refusal: str | None = None


def _split(gpus: Sequence[str], host: host_cliques.Cliques
           ) -> tuple[list[list[str]], list[str]]:
    """The instance's GPUs per host group, and those the host lacks."""
    group_of = {address: index for index, group in enumerate(host.groups)
                for address in group}
    groups: dict[int, list[str]] = {}
    unknown = []
    for address in sorted(gpus):
        if address in group_of:
            groups.setdefault(group_of[address], []).append(address)
        else:
            unknown.append(address)
    return [groups[index] for index in sorted(groups)], unknown


def _why_apart(groups: list[list[str]], unknown: list[str],
               link: LinkName, level: str) -> str:
    if unknown:
        return ('the host GPU topology does not list %s'
                % ', '.join(unknown))
    a, b = groups[0][0], groups[1][0]
    return ('%s and %s are linked by %s, farther than [gpu_p2p] p2p_level '
            '= %s' % (a, b, link(a, b), level))


def plan(request: extra_specs.CliqueRequest, gpus: Sequence[str],
         host: host_cliques.Cliques, link: LinkName,
         level: str) -> CliquePlan:
    """Apply the rule above to the instance's NVIDIA GPU addresses."""
    if request.mode is extra_specs.CliqueMode.NONE or not gpus:
        return CliquePlan()
    barred = host_cliques.why_barred(
        {a: host.barred[a] for a in gpus if a in host.barred})
    allowed = [a for a in gpus if a not in host.barred]
    groups, unknown = _split(allowed, host)
    apart = len(groups) > 1 or bool(unknown)
    if request.mode is extra_specs.CliqueMode.FIXED:
        # Asked for by ID, so worth a warning even for one GPU.
        warnings = tuple(barred)
        if apart:
            warnings += ('%s=%d puts %s in one clique, but the host topology '
                         'disagrees: %s' % (
                             extra_specs.CLIQUE_KEY, request.clique_id,
                             ', '.join(sorted(allowed)),
                             _why_apart(groups, unknown, link, level)),)
        return CliquePlan(ids={a: request.clique_id for a in allowed},
                          warnings=warnings)
    ids = {}
    next_id = 0
    for group in groups:
        if len(group) > 1:
            ids.update((address, next_id) for address in group)
            next_id += 1
    if len(gpus) < 2:
        # One GPU has no peer: nothing was promised, nothing withheld.
        barred = []
    if not apart and not barred:
        return CliquePlan(ids=ids)
    if request.mode is extra_specs.CliqueMode.REQUIRED:
        return CliquePlan(ids=ids, refusal=_not_one(gpus, '; '.join(
            barred or [_why_apart(groups, unknown, link, level)])))
    # auto: several cliques are an answer, not a problem; only a GPU the
    # topology does not know deserves a warning.
    warnings = ()
    if unknown:
        warnings = (_not_one(allowed,
                             _why_apart(groups, unknown, link, level)),)
    return CliquePlan(ids=ids, info=tuple(barred), warnings=warnings)


def _not_one(gpus: Sequence[str], why: str) -> str:
    return ('GPUs %s cannot form one P2P clique on this host: %s'
            % (', '.join(sorted(gpus)), why))
