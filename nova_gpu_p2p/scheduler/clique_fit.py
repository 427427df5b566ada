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

"""Which free GPUs a ``required`` request may take, best fit first.

The rule, over the GPUs of one host as its compute reports them:

1. **Groups.** GPUs with the same host clique ID form a group; a GPU in
   no clique is a group of its own.
2. **Fit.** A set of GPUs fits a ``required`` request when all of them are
   in one group. A single GPU always fits (it has no peer to reach); two
   or more need a shared clique.
3. **Best fit.** Among fitting sets, take one from the group with the
   fewest free GPUs that still holds the request; ties go to the lowest
   clique ID, and a GPU in no clique comes before any clique. So a 2-GPU
   request takes a free pair before it breaks into a free 4-clique, and a
   1-GPU request takes a GPU without peers first: the large cliques stay
   whole for the requests that need them.
4. **Across hosts**, the tightest fit wins: the host whose best group
   keeps the fewest GPUs free after the claim (its *leftover*).

Pure functions over plain data; :mod:`nova_gpu_p2p.scheduler` feeds them
Nova's allocation candidates and PCI pools.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import typing


class Group(typing.NamedTuple):
    """GPUs that may serve one ``required`` request together."""

    #: Host clique ID; None for a GPU in no clique.
    clique: int | None
    #: The provider of a GPU in no clique (its own group); None otherwise.
    lone: str | None = None

    def sort_key(self) -> tuple[int, str]:
        """Ties: no clique first, then the lowest clique ID."""
        return (-1 if self.clique is None else self.clique, self.lone or '')


@dataclasses.dataclass(frozen=True)
class Gpu:
    """A GPU's placement provider, its clique and how many are free."""

    provider: str
    clique: int | None
    #: Free devices on the provider (1 or 0 for a passthrough GPU).
    free: int = 1

    @property
    def group(self) -> Group:
        if self.clique is None:
            return Group(None, self.provider)
        return Group(self.clique)


@dataclasses.dataclass(frozen=True)
class Fit:
    """A fitting candidate: where it sits in the list, and what it costs."""

    index: int
    group: Group
    #: GPUs of the group still free after this candidate is claimed.
    leftover: int

    @property
    def family(self) -> Group:
        """Fits of one family take GPUs of one group."""
        return self.group

    @property
    def cost(self) -> int:
        """What best fit minimises; equal costs are equally good fits."""
        return self.leftover


def free_per_group(gpus: Iterable[Gpu]) -> dict[Group, int]:
    """Free GPUs in each group (rule 1)."""
    free: dict[Group, int] = {}
    for gpu in gpus:
        free[gpu.group] = free.get(gpu.group, 0) + gpu.free
    return free


def fitting_group(providers: Sequence[str],
                  gpus: Mapping[str, Gpu]) -> Group | None:
    """The group all these GPU providers share (rule 2), if any.

    :param providers: the GPU providers one candidate takes, a provider
        once per device; providers that are not GPUs are left out by the
        caller.
    """
    groups = {gpus[provider].group for provider in providers}
    if len(groups) != 1:
        return None
    group = next(iter(groups))
    if len(providers) > 1 and group.clique is None:
        return None
    return group


def fit_key(group: Group, free: int) -> tuple[int, tuple[int, str]]:
    """Sort key of rule 3: fewest free first, then the tie rule."""
    return (free, group.sort_key())


def best_first(candidates: Sequence[Sequence[str]],
               gpus: Mapping[str, Gpu]) -> list[Fit]:
    """The fitting candidates, best fit first (rules 2 and 3).

    Candidates of one group keep their given order, so placement's own
    preference still decides between equivalent sets.
    """
    free = free_per_group(gpus.values())
    fits = []
    for index, providers in enumerate(candidates):
        group = fitting_group(providers, gpus)
        if group is not None:
            fits.append(Fit(index, group, free[group] - len(providers)))
    fits.sort(key=lambda fit: (fit_key(fit.group, free[fit.group]),
                               fit.index))
    return fits


def choose(free: Mapping[Group, int], count: int) -> Group | None:
    """The group a request for ``count`` GPUs should take (rules 2, 3).

    The same choice :func:`best_first` makes, for callers that hold only
    free counts (a simulation); None when no group fits.
    """
    fitting = [group for group, n in free.items()
               if n >= count and (count == 1 or group.clique is not None)]
    if not fitting:
        return None
    return min(fitting, key=lambda group: fit_key(group, free[group]))
