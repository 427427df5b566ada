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

"""The fewest cold migrations that free one N-GPU clique or partition.

Pure functions over :mod:`nova_gpu_p2p.capacity`'s hosts and the
servers (placement consumers) holding GPUs of the groups that come
closest (:func:`nova_gpu_p2p.capacity.closest`). Each moved server must
fit elsewhere now by the scheduler's rules for a ``required`` server of
its GPU count (placement alone cannot tell a flavor's
``hw:gpu_p2p_clique``, so every server of two or more GPUs is held to
one clique or partition: stricter than some flavors need, never looser),
on another enabled host (a cold migration leaves its own host) whose
root provider has room for its CPU, RAM and disk (``room``, placement's
answer). Each target host takes at most one moved server, so that
placement's answer for that server still holds when the plan is carried
out. Nothing here changes anything.
"""

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import itertools

from nova_gpu_p2p import capacity


@dataclasses.dataclass(frozen=True)
class Consumer:
    """A server (placement consumer) holding GPUs."""

    uuid: str
    #: (provider, resource class) of each GPU unit it holds.
    gpus: tuple[tuple[str, str], ...]

    @property
    def resource_class(self) -> str | None:
        """Its GPUs' one resource class; None where they are of several."""
        classes = {rc for _, rc in self.gpus}
        return next(iter(classes)) if len(classes) == 1 else None


@dataclasses.dataclass(frozen=True)
class Move:
    consumer: Consumer
    source: capacity.Host
    target: capacity.Host


@dataclasses.dataclass(frozen=True)
class Plan:
    """Moves that leave ``group`` of ``host`` free for a server."""

    host: capacity.Host
    group: capacity.Group
    moves: tuple[Move, ...]

    def cost(self) -> tuple:
        return (len(self.moves),
                sum(len(m.consumer.gpus) for m in self.moves),
                self.host.name, self.group.label)


def fits(host: capacity.Host, count: int, rc: str) -> int | None:
    """GPUs left free in the tightest group taking ``count`` now, or None.

    By the rules of a ``required`` server of ``count`` GPUs of class
    ``rc`` (:mod:`nova_gpu_p2p.capacity`).
    """
    if host.disabled:
        return None
    if count == 1:
        free = [g for g in host.gpus if g.free and g.resource_class == rc]
        return sum(g.free for g in free) - 1 if free else None
    left = [group.free - count for group in capacity.groups(host, count)
            if group.resource_class == rc and group.free >= count
            and (group.kind == 'clique' or group.free == count)]
    return min(left) if left else None


def _assign(movers: Sequence[Consumer], source: capacity.Host,
            hosts: Sequence[capacity.Host],
            room: Callable[[capacity.Host, Consumer], bool]
            ) -> list[Move] | None:
    """A distinct target host for each mover (bipartite matching)."""
    options = []
    for consumer in movers:
        rc = consumer.resource_class
        found = []
        for host in hosts:
            if host.name == source.name or rc is None:
                continue
            left = fits(host, len(consumer.gpus), rc)
            if left is not None and room(host, consumer):
                found.append((left, host.name, host))
        options.append([host for _, _, host in sorted(found)])
    taken: dict[str, int] = {}

    def augment(index: int, seen: set[str]) -> bool:
        for host in options[index]:
            if host.name in seen:
                continue
            seen.add(host.name)
            if host.name not in taken or augment(taken[host.name], seen):
                taken[host.name] = index
                return True
        return False

    if not all(augment(i, set()) for i in range(len(movers))):
        return None
    by_index = {index: name for name, index in taken.items()}
    named = {host.name: host for host in hosts}
    return [Move(movers[i], source, named[by_index[i]])
            for i in range(len(movers))]


def _group_plan(near: capacity.Near, size: int, hosts: Sequence[capacity.Host],
                holders: Mapping[str, Sequence[Consumer]],
                room: Callable[[capacity.Host, Consumer], bool],
                most: int) -> Plan | None:
    """The fewest moves (at most ``most``) freeing this group."""
    group = near.group
    members = {g.provider for g in group.gpus}
    held = [g for g in group.gpus if not g.free]
    # A GPU held by no server (reserved) is never freed: a partition
    # with one cannot be; a clique may still be, by its other GPUs.
    if group.kind != 'clique' and any(not holders.get(g.provider)
                                      for g in held):
        return None
    holding = {c.uuid: c for g in held for c in holders.get(g.provider, ())}
    classes = ({group.resource_class} if group.resource_class
               else {c.resource_class for c in holding.values()} - {None})
    best = None
    for rc in sorted(classes):
        if group.kind == 'clique':
            need = size - (group.free if rc == group.resource_class else 0)
            usable = sorted(
                (c for c in holding.values() if c.resource_class == rc),
                key=lambda c: (-sum(1 for p, _ in c.gpus if p in members),
                               c.uuid))
            combos = (combo for k in range(1, min(most, len(usable)) + 1)
                      for combo in itertools.combinations(usable, k)
                      if sum(1 for c in combo for p, _ in c.gpus
                             if p in members) >= need)
        else:
            if any(c.resource_class != rc for c in holding.values()):
                continue
            movers = sorted(holding.values(), key=lambda c: c.uuid)
            combos = iter([tuple(movers)] if len(movers) <= most else [])
        for combo in combos:
            moves = _assign(combo, near.host, hosts, room)
            if moves is not None:
                found = Plan(near.host, dataclasses.replace(
                    group, resource_class=rc), tuple(moves))
                if best is None or found.cost() < best.cost():
                    best = found
                break
    return best


def plan(nears: Sequence[capacity.Near], size: int,
         hosts: Sequence[capacity.Host],
         holders: Mapping[str, Sequence[Consumer]],
         room: Callable[[capacity.Host, Consumer], bool]) -> Plan | None:
    """The plan with the fewest moves over these groups, or None.

    :param nears: the groups to consider (:func:`capacity.closest`).
    :param holders: GPU provider -> the consumers holding it, for every
        GPU that is not free in those groups.
    :param room: whether a host's root provider has room for a
        consumer's CPU, RAM and disk.
    """
    best = None
    for near in nears:
        if near.missing == 0:
            return Plan(near.host, near.group, ())
        most = best.cost()[0] if best else size
        found = _group_plan(near, size, hosts, holders, room, most)
        if found is not None and (best is None
                                  or found.cost() < best.cost()):
            best = found
    return best


def commands(found: Plan) -> list[str]:
    """The ``openstack`` commands carrying out a plan, one per move.

    ``--host`` (compute API 2.56) names the target this plan checked; a
    cold migration holds the source's GPUs until it is confirmed.
    """
    return ['openstack server migrate --os-compute-api-version 2.56 '
            '--host %s --wait %s && openstack server resize confirm %s'
            % (move.target.name, move.consumer.uuid, move.consumer.uuid)
            for move in found.moves]
