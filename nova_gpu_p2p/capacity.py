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

"""How many ``required`` P2P servers of each size a cloud can take now.

Pure functions over what placement holds (read by
:mod:`nova_gpu_p2p.osc.placement_reader`): each GPU is a provider with
its free units, its resource class (the GPU model) and its
``CUSTOM_GPU_P2P_CLIQUE_ID_<n>`` / ``CUSTOM_GPU_P2P_PARTITION_<id>``
traits. The rules are the scheduler's
(:mod:`nova_gpu_p2p.scheduler.clique_fit`,
:mod:`nova_gpu_p2p.scheduler.partition_fit`):

* A server of N GPUs takes N free GPUs of one resource class.
* On a Fabric Manager host (any GPU carries a partition trait) it takes
  exactly one partition of N GPUs, all of them free; elsewhere any N free
  GPUs of one clique. One GPU always fits.
* A disabled compute node (``COMPUTE_STATUS_DISABLED``) counts nothing.
* CPU, RAM and disk are not considered.

Per size N: *Placeable* is how many N-GPU servers could land now, that
size alone (on a Fabric Manager host the most partitions of N that are
free at once); *Stranded GPUs* are the free GPUs in no free clique or
partition that holds N (no N-GPU server can use them);
*Fragmentation* is the share of free GPUs that N-GPU servers could not
use if the cloud were filled with them now: ``1 - N * Placeable / Free``.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import functools

#: The server sizes of the cloud-wide table.
SIZES = (1, 2, 4, 8, 16)


@dataclasses.dataclass(frozen=True)
class Gpu:
    """A GPU's placement provider."""

    provider: str
    #: Units placement could allocate now (reserved and used ones are not).
    free: int
    #: Its resource class; None where placement showed no free unit of it.
    resource_class: str | None = None
    clique: int | None = None
    #: The Fabric Manager partitions of two or more GPUs holding it.
    partitions: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class Host:
    """A compute node (placement's root provider) and its GPUs."""

    name: str
    gpus: tuple[Gpu, ...]
    disabled: bool = False
    #: The root provider's UUID.
    uuid: str = ''

    @property
    def fabric_manager(self) -> bool:
        """Judged by partitions: any GPU carries a partition trait."""
        return any(gpu.partitions for gpu in self.gpus)

    def partition(self, partition_id: int) -> tuple[Gpu, ...]:
        """The GPUs of a partition."""
        return tuple(g for g in self.gpus if partition_id in g.partitions)

    def partition_ids(self) -> list[int]:
        return sorted({p for gpu in self.gpus for p in gpu.partitions})


@dataclasses.dataclass(frozen=True)
class Group:
    """GPUs that may serve one ``required`` server together.

    A clique (with the free GPUs of one resource class), a partition, or
    a GPU in neither.
    """

    kind: str
    #: Clique or partition ID; None for a lone GPU.
    id: int | None
    resource_class: str | None
    gpus: tuple[Gpu, ...]
    #: GPUs of one resource class free in it.
    free: int

    @property
    def label(self) -> str:
        if self.id is None:
            return 'GPU %s' % self.gpus[0].provider
        return '%s %d' % (self.kind, self.id)


def _free_partition(gpus: Sequence[Gpu]) -> str | None:
    """The resource class of a partition all of whose GPUs are free."""
    classes = {gpu.resource_class for gpu in gpus}
    if len(classes) != 1 or any(gpu.free < 1 for gpu in gpus):
        return None
    return next(iter(classes))


def groups(host: Host, size: int) -> list[Group]:
    """The groups a ``size``-GPU server could take GPUs of, free or not.

    Cliques of a Fabric Manager host do not count: partitions do. A
    clique is a group per resource class of its free GPUs (each with all
    the clique's GPUs). Size 1: every GPU on its own.
    """
    if size == 1:
        return [Group('gpu', None, gpu.resource_class, (gpu,), gpu.free)
                for gpu in host.gpus]
    if host.fabric_manager:
        found = []
        for pid in host.partition_ids():
            members = host.partition(pid)
            if len(members) != size:
                continue
            rc = _free_partition(members)
            found.append(Group('partition', pid, rc, members,
                               size if rc else sum(
                                   1 for g in members if g.free)))
        return found
    found = []
    for clique, members in _cliques(host).items():
        free: dict[str | None, int] = {}
        for gpu in members:
            if gpu.free and gpu.resource_class:
                free[gpu.resource_class] = (free.get(gpu.resource_class, 0)
                                            + gpu.free)
        for rc in sorted(free) or [None]:
            found.append(Group('clique', clique, rc, members,
                               free.get(rc, 0)))
    return found


def _cliques(host: Host) -> dict[int, tuple[Gpu, ...]]:
    """The GPUs of each clique, by clique ID."""
    cliques: dict[int, list[Gpu]] = {}
    for gpu in host.gpus:
        if gpu.clique is not None:
            cliques.setdefault(gpu.clique, []).append(gpu)
    return {clique: tuple(members)
            for clique, members in sorted(cliques.items())}


def _pack(partitions: Sequence[frozenset[str]]) -> int:
    """Most disjoint sets among these (partitions of one size)."""

    @functools.lru_cache(maxsize=None)
    def best(start: int, taken: frozenset[str]) -> int:
        if start == len(partitions):
            return 0
        skip = best(start + 1, taken)
        if partitions[start] & taken:
            return skip
        return max(skip, 1 + best(start + 1, taken | partitions[start]))

    return best(0, frozenset())


def _free_units(host: Host) -> dict[str, int]:
    free: dict[str, int] = {}
    for gpu in host.gpus:
        if gpu.free and gpu.resource_class:
            free[gpu.resource_class] = (free.get(gpu.resource_class, 0)
                                        + gpu.free)
    return free


@dataclasses.dataclass(frozen=True)
class HostSize:
    """One host's answer for one size, per resource class."""

    free: Mapping[str, int]
    placeable: Mapping[str, int]
    stranded: Mapping[str, int]


def host_size(host: Host, size: int) -> HostSize:
    """Free, placeable and stranded GPUs of one host for one size."""
    if host.disabled:
        return HostSize({}, {}, {})
    free = _free_units(host)
    if size == 1:
        return HostSize(free, dict(free), {rc: 0 for rc in free})
    placeable = {rc: 0 for rc in free}
    usable = {rc: 0 for rc in free}
    if host.fabric_manager:
        by_class: dict[str, list[frozenset[str]]] = {}
        for group in groups(host, size):
            if group.free == size and group.resource_class:
                by_class.setdefault(group.resource_class, []).append(
                    frozenset(g.provider for g in group.gpus))
        for rc, found in by_class.items():
            placeable[rc] = _pack(found)
            members = frozenset().union(*found)
            usable[rc] = sum(g.free for g in host.gpus
                             if g.provider in members)
    else:
        for group in groups(host, size):
            if group.free >= size:
                placeable[group.resource_class] += group.free // size
                usable[group.resource_class] += group.free
    return HostSize(free, placeable,
                    {rc: free[rc] - usable[rc] for rc in free})


@dataclasses.dataclass(frozen=True)
class SizeRow:
    """A row of the cloud-wide table (its columns: :data:`SIZE_COLUMNS`)."""

    size: int
    placeable: int
    free: int
    stranded: int

    @property
    def fragmentation(self) -> float:
        """Share of free GPUs that servers of this size could not use."""
        if not self.free:
            return 0.0
        return round(1 - self.size * self.placeable / self.free, 4)

    def row(self) -> tuple:
        return (self.size, self.placeable, self.free, self.stranded,
                self.fragmentation)


SIZE_COLUMNS = ('Size', 'Placeable', 'Free GPUs', 'Stranded GPUs',
                'Fragmentation')


def cloud_sizes(hosts: Iterable[Host], sizes: Sequence[int] = SIZES
                ) -> list[SizeRow]:
    """The cloud-wide table, summed over hosts and GPU models."""
    hosts = list(hosts)
    rows = []
    for size in sizes:
        placeable = free = stranded = 0
        for host in hosts:
            found = host_size(host, size)
            placeable += sum(found.placeable.values())
            free += sum(found.free.values())
            stranded += sum(found.stranded.values())
        rows.append(SizeRow(size, placeable, free, stranded))
    return rows


def largest_fit(host: Host) -> int:
    """GPUs of the largest ``required`` server that fits on it now."""
    if host.disabled or not _free_units(host):
        return 0
    if host.fabric_manager:
        sizes = [len(host.partition(p)) for p in host.partition_ids()
                 if _free_partition(host.partition(p))]
    else:
        sizes = [group.free for group in groups(host, 2)]
    return max([1] + sizes)


def host_groups_text(host: Host) -> str:
    """Free GPUs of each clique or partition, e.g. ``clique 0: 2/4``."""
    parts = []
    if host.fabric_manager:
        for pid in host.partition_ids():
            members = host.partition(pid)
            parts.append('partition %d: %d/%d' % (
                pid, sum(1 for g in members if g.free), len(members)))
        alone = [g for g in host.gpus if not g.partitions]
    else:
        for clique, members in _cliques(host).items():
            parts.append('clique %d: %d/%d' % (
                clique, sum(1 for g in members if g.free), len(members)))
        alone = [g for g in host.gpus if g.clique is None]
    if alone:
        parts.append('no group: %d' % sum(1 for g in alone if g.free))
    return ', '.join(parts)


HOST_COLUMNS = ('Host', 'Resource Classes', 'Free GPUs', 'Free per Group',
                'Largest Fit', 'Disabled')


def host_rows(hosts: Iterable[Host]) -> list[tuple]:
    """The per-host table (its columns: :data:`HOST_COLUMNS`)."""
    return [(host.name, ','.join(sorted(_free_units(host))),
             0 if host.disabled else sum(_free_units(host).values()),
             host_groups_text(host), largest_fit(host), host.disabled)
            for host in sorted(hosts, key=lambda h: h.name)]


@dataclasses.dataclass(frozen=True)
class Near:
    """A group that comes close to holding a ``size``-GPU server."""

    host: Host
    group: Group
    #: GPUs that would have to be freed first.
    missing: int

    @property
    def held(self) -> tuple[Gpu, ...]:
        """Its GPUs that are not free (what blocks it)."""
        return tuple(g for g in self.group.gpus if not g.free)


def nears(hosts: Iterable[Host], size: int) -> list[Near]:
    """Every group of an enabled host that could ever hold ``size``.

    Fewest GPUs missing first, then by host name.
    """
    found = [Near(host, group, max(0, size - group.free))
             for host in hosts if not host.disabled
             for group in groups(host, size) if len(group.gpus) >= size]
    found.sort(key=lambda near: (near.missing, near.host.name))
    return found


def closest(hosts: Iterable[Host], size: int, limit: int) -> list[Near]:
    """The best group of each of the ``limit`` closest hosts.

    Hosts with no clique or partition that could ever hold ``size``
    GPUs are not listed.
    """
    best: dict[str, Near] = {}
    for near in nears(hosts, size):
        best.setdefault(near.host.name, near)
    return list(best.values())[:limit]
