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

"""The cases :mod:`lab.placement_scale` measures: hosts' GPU layouts, the
Nova and placement settings, and the documented flavor's request on them.
"""

from collections.abc import Sequence
import dataclasses
import uuid


#: What the GPUs are to Nova: vendor 10de, one product, whole devices.
ALIAS = {'name': 'gpu', 'vendor_id': '10de', 'product_id': '2330',
         'device_type': 'type-PCI'}
#: The resource class Nova gives such a GPU in placement.
GPU_CLASS = 'CUSTOM_PCI_10DE_2330'
#: The compute node's own inventory, more than any case asks for.
HOST_INVENTORY = {'PCPU': 512, 'MEMORY_MB': 4194304, 'DISK_GB': 10000}
#: Nova's default ``[scheduler] max_placement_results``.
NOVA_LIMIT = 1000
#: How far apart the provider IDs of two seeds start.
ID_STRIDE = 1000
NAMESPACE = uuid.UUID('7d1c3b8e-4f0a-4e43-9a55-3c0b2f1e6a10')


@dataclasses.dataclass(frozen=True)
class Layout:
    """A host's GPUs as cliques: the first ``cliques[0]`` GPUs are clique 0.

    Nova creates a compute node's GPU providers in the order its PCI
    tracker lists the devices (by PCI address), so the GPUs of one clique
    get neighbouring provider IDs.
    """

    cliques: tuple[int, ...]

    @property
    def name(self) -> str:
        return '+'.join(str(size) for size in self.cliques)

    @property
    def gpus(self) -> int:
        return sum(self.cliques)

    def clique_of(self, gpu: int) -> int:
        """Clique ID of the host's ``gpu``-th GPU (0-based)."""
        end = 0
        for clique, size in enumerate(self.cliques):
            end += size
            if gpu < end:
                return clique
        raise IndexError(gpu)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The Nova and placement options that decide which candidates come."""

    name: str
    #: Nova ``[scheduler] max_placement_results``; None: no ``limit`` in
    #: the query, to count everything placement generates.
    max_placement_results: int | None = NOVA_LIMIT
    #: Placement ``[placement] max_allocation_candidates``.
    max_allocation_candidates: int = -1
    #: Placement ``[placement] allocation_candidates_generation_strategy``.
    generation_strategy: str = 'depth-first'
    #: Placement ``[workarounds] optimize_for_wide_provider_trees``.
    optimize_for_wide_provider_trees: bool = False
    #: Nova ``[pci] alias`` ``traits``: the alias asks for GPUs with this
    #: clique ID's trait (a flavor per clique); None: any GPU.
    alias_clique: int | None = None

    @property
    def generation(self) -> tuple:
        """The options that decide what placement generates (not limit)."""
        return (self.max_allocation_candidates, self.generation_strategy,
                self.optimize_for_wide_provider_trees, self.alias_clique)


#: Both services as installed.
DEFAULTS = Settings('defaults')
#: As installed, without a limit: every candidate placement generates.
UNLIMITED = Settings('no limit', max_placement_results=None)
#: What placement's option help suggests for wide provider trees.
PLACEMENT_HELP = Settings('placement help', NOVA_LIMIT, 100000,
                          'breadth-first', True)
#: What doc/source/scheduling-scale.rst recommended before the filter
#: built candidates from the pools: placement's answer alone had to hold
#: a fitting one.
CAP_10000 = Settings('cap 10000', 10000, 10000, 'breadth-first', True)
#: Candidates per compute node in the recommended cap.
PER_HOST = 2
#: The cloud doc/source/scheduling-scale.rst sizes its example for.
DOC_HOSTS = 50
#: The flavor's alias bound to clique 0, with the small cap it needs:
#: all candidates are then orders of the same GPUs, which placement keeps
#: apart by comparing each new one with every one it has.
PER_CLIQUE = Settings('clique-0 alias', 200, 200, 'breadth-first', True,
                      alias_clique=0)
SETTINGS = (UNLIMITED, DEFAULTS, PLACEMENT_HELP, CAP_10000, PER_CLIQUE)


def recommended(hosts: int) -> Settings:
    """What doc/source/scheduling-scale.rst recommends for ``hosts``.

    Two candidates per compute node, breadth-first, optimized: the filter
    builds a fitting candidate from any one a host gets.
    """
    cap = PER_HOST * hosts
    return Settings('recommended', cap, cap, 'breadth-first', True)


@dataclasses.dataclass(frozen=True)
class Case:
    """One GET /allocation_candidates over identical GPU hosts."""

    layout: Layout
    #: GPUs the flavor asks for (one alias, this count).
    request: int
    hosts: int = 1
    #: GPUs already in use on every host (indices into the layout).
    busy: tuple[int, ...] = ()
    settings: Settings = DEFAULTS
    #: Placement's PYTHONHASHSEED; provider IDs start at
    #: ``1 + seed * ID_STRIDE``.
    seed: int = 0

    def free(self, gpu: int) -> bool:
        return gpu not in self.busy

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> 'Case':
        layout = Layout(tuple(data['layout']['cliques']))
        return cls(**dict(data, layout=layout, busy=tuple(data['busy']),
                          settings=Settings(**data['settings'])))


#: Every host empty, and with one GPU of clique 0 in use.
BUSY = ((), (0,))


def default_cases(hosts: Sequence[int] = (1, 3),
                  busy: Sequence[tuple[int, ...]] = BUSY,
                  settings: Sequence[Settings] = SETTINGS,
                  seeds: int = 1) -> list[Case]:
    """The grid of the issue: 8 GPUs asked for 2 and 4, 16 for 2, 4, 8.

    8 GPUs as 4+4 and as four pairs, 16 as 8+8 and as four cliques of 4.
    Fewer hosts first, so :func:`~lab.placement_runner.measure` can skip
    what a smaller case showed to be too slow.
    """
    shapes = [(Layout((4, 4)), (2, 4)), (Layout((2, 2, 2, 2)), (2, 4)),
              (Layout((8, 8)), (2, 4, 8)), (Layout((4, 4, 4, 4)), (2, 4, 8))]
    return [Case(layout, request, count, used, option, seed)
            for seed in range(seeds)
            for count in hosts
            for layout, requests_ in shapes
            for request in requests_
            for used in busy
            for option in settings]


def luck_cases(seeds: int = 8) -> list[Case]:
    """Whether a fit survives a cap, over seeds: 4 and 8 of 16 GPUs.

    4 of 16 with every host empty, one GPU of clique 0 in use, and (four
    cliques of four) one GPU in use in each of cliques 0 to 2, so that
    only clique 3 fits; capped at Nova's 1000 and at the recommended
    10000 for one host, at 10000 and 30000 for three. 8 of 16 on empty
    8+8 hosts, recommended and with the clique-0 alias.
    """
    thirty = dataclasses.replace(CAP_10000, name='cap 30000',
                                 max_placement_results=30000,
                                 max_allocation_candidates=30000)
    thousand = dataclasses.replace(CAP_10000, name='cap 1000',
                                   max_placement_results=NOVA_LIMIT,
                                   max_allocation_candidates=NOVA_LIMIT)
    four = [(Layout((8, 8)), ()), (Layout((8, 8)), (0,)),
            (Layout((4, 4, 4, 4)), ()), (Layout((4, 4, 4, 4)), (0,)),
            (Layout((4, 4, 4, 4)), (0, 4, 8))]
    runs = [(1, thousand), (1, CAP_10000), (3, CAP_10000), (3, thirty)]
    cases = [Case(layout, 4, hosts, busy, settings, seed)
             for seed in range(seeds)
             for layout, busy in four
             for hosts, settings in runs]
    cases += [Case(Layout((8, 8)), 8, hosts, (), settings, seed)
              for seed in range(seeds)
              for hosts in (1, 3)
              for settings in (CAP_10000, PER_CLIQUE)]
    return cases
