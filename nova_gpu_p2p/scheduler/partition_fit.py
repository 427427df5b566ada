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

"""Which free GPUs a ``required`` request may take on a Fabric Manager host.

On an HGX board a VM's GPUs reach each other over NVLink only when they
are exactly one Fabric Manager partition (H100: the pairs of modules
{1,3} {2,4} {5,7} {6,8}, the halves, the whole board, and one partition
per GPU). The rule, over the GPUs of one host whose PCI pools carry the
``gpu_p2p_partitions`` tag (:mod:`nova_gpu_p2p.device_spec_tags`); hosts
without it keep :mod:`nova_gpu_p2p.scheduler.clique_fit`:

1. **Partitions.** Each GPU's tag names the partitions of two or more
   GPUs holding it, each with its GPU count; every GPU is also a
   partition of its own. The pools hold only free GPUs, so the count, not
   the GPUs seen, says how many GPUs a partition has.
2. **Fit.** A set of GPUs fits a ``required`` request when it is exactly
   one partition: every GPU of the set tagged with the partition, as many
   GPUs as it has, none twice (its GPUs agreeing on that count). A single
   GPU always fits: it is its own partition.
3. **Best fit.** Among fitting sets, take the one whose *enclosing*
   partitions (those holding all its GPUs and more) have the fewest free
   GPUs, compared from the smallest enclosing partition upward; ties go
   to the lowest partition ID (a single GPU: no enclosing partition
   first). So a pair is taken from a half already in use before a free
   half is broken, a half before the board, and a single GPU from a pair
   already broken: the free partitions stay whole for the requests that
   need them.
4. **Across hosts**, the tightest fit wins: the host whose best fit keeps
   the fewest GPUs free in its smallest enclosing partition after the
   claim (its *leftover*; none when nothing encloses it), the first step
   of rule 3.

Pure functions over plain data; :mod:`nova_gpu_p2p.scheduler` feeds them
Nova's allocation candidates and PCI pools.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses


@dataclasses.dataclass(frozen=True)
class Gpu:
    """A GPU's placement provider, its partitions and how many are free."""

    provider: str
    #: Partition ID -> GPU count, for the partitions of 2+ GPUs holding it.
    partitions: Mapping[int, int]
    #: Free devices on the provider (1 or 0 for a passthrough GPU).
    free: int = 1


@dataclasses.dataclass(frozen=True)
class Fit:
    """A fitting candidate: where it sits in the list, and what it costs."""

    index: int
    #: The partition it is; None for a single GPU (its own partition).
    partition: int | None
    #: Free GPUs of its smallest enclosing partition after the claim.
    leftover: int
    #: Rule 3's order: enclosing partitions' free GPUs, smallest first.
    enclosing_free: tuple[int, ...] = ()

    @property
    def family(self) -> int | None:
        """Fits of one family are one partition (None: single GPUs)."""
        return self.partition

    @property
    def cost(self) -> tuple[int, ...]:
        """What best fit minimises; equal costs are equally good fits."""
        return self.enclosing_free


def free_per_partition(gpus: Iterable[Gpu]) -> dict[int, int]:
    """Free GPUs in each partition of two or more (rule 1)."""
    free: dict[int, int] = {}
    for gpu in gpus:
        for partition in gpu.partitions:
            free[partition] = free.get(partition, 0) + gpu.free
    return free


def fit(index: int, providers: Sequence[str], gpus: Mapping[str, Gpu],
        free: Mapping[int, int]) -> Fit | None:
    """The candidate as a fit (rules 2 and 3), or None if it is none.

    :param providers: the GPU providers the candidate takes, a provider
        once per device; providers that are not GPUs are left out by the
        caller.
    """
    if not providers or len(set(providers)) != len(providers):
        return None
    # (ID, GPU count) pairs that every GPU of the candidate carries.
    shared = set.intersection(*(set(gpus[p].partitions.items())
                                for p in providers))
    count = len(providers)
    exact = sorted(pid for pid, size in shared if size == count)
    if count > 1 and not exact:
        return None
    enclosing = sorted((size, pid) for pid, size in shared if size > count)
    enclosing_free = tuple(free[pid] for _, pid in enclosing)
    return Fit(index, exact[0] if count > 1 else None,
               enclosing_free[0] - count if enclosing_free else 0,
               enclosing_free)


def best_first(candidates: Sequence[Sequence[str]],
               gpus: Mapping[str, Gpu]) -> list[Fit]:
    """The fitting candidates, best fit first (rules 2 and 3).

    Equivalent candidates keep their given order, so placement's own
    preference still decides between them.
    """
    free = free_per_partition(gpus.values())
    fits = [found for found in (fit(index, providers, gpus, free)
                                for index, providers in enumerate(candidates))
            if found is not None]
    fits.sort(key=lambda f: (f.enclosing_free,
                             -1 if f.partition is None else f.partition,
                             f.index))
    return fits
