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

"""``hw:gpu_p2p_clique=required`` scheduling, simulated, for the benchmark.

A cloud of GPU hosts serves a sequence of boots and deletes, one at a
time, under three policies; the question is how many boots fail although
a fitting clique was free, and how many free GPUs end up in broken
cliques. Pure Python over :mod:`nova_gpu_p2p.scheduler.clique_fit`, the
rule the real filter and weigher apply, so a 2000-op run takes well under
a second. :func:`replay` gives each boot's host and GPUs, to set against
the real scheduler's on the same sequence.

What is modelled:

* **A host** is its GPUs in PCI address order, each with its host clique
  ID, and its compute node traits. :func:`corpus_host` gets both from the
  real code path: the corpus host's sysfs tree (``sysfs_builder``),
  discovery and :func:`nova_gpu_p2p.topology.host_cliques.assign` at the
  chosen ``[gpu_p2p] p2p_level`` (ACS routed), and
  :func:`nova_gpu_p2p.traits.p2p_traits`.
* **A boot** of N GPUs asks, for N >= 2, for the compute node trait
  ``nova-gpu-p2p flavor`` puts in the flavor
  (:func:`nova_gpu_p2p.cmd.flavor_commands.clique_trait`: the host has a
  clique of N or more, N rounded up to 2, 4, 8 or 16); a 1-GPU
  ``required`` flavor carries none.
* **Host order.** Nova weighs the hosts that pass its filters and tries
  them best first; the selected host and ``[scheduler] max_attempts`` - 1
  alternates (:data:`MAX_ATTEMPTS`, Nova's default 3) are all a boot
  gets. Which GPU host Nova's default weighers put first depends on more
  than GPUs, so two plain orders are modelled (:class:`HostOrder`):
  *spread*, most free GPUs first (what the RAM and CPU weighers do where
  a flavor's RAM and vCPUs follow its GPUs), and *stack*, fewest free
  GPUs first (Nova's ``PCIWeigher`` alone). Ties keep the cloud's order.
* **Policies** (:class:`Policy`):

  - ``nova``, Nova's own order, as without the filter: every host with
    the trait and N free GPUs passes; its compute claims the N free GPUs
    of lowest address; when they are not one clique
    (:func:`clique_fit.fitting_group`) the compute refuses and the boot
    is rescheduled to the next alternate; after the last one it fails.
  - ``filter``: only hosts with N free GPUs in one clique pass; the claim
    is the fitting set of lowest addresses (how placement's candidate
    order is modelled, the filter keeping it); hosts in the same order.
  - ``best-fit``, filter + best fit: the group is
    :func:`clique_fit.choose`'s (fewest free GPUs that still fit), the
    claim its free GPUs of lowest address; the host is the one whose
    choice leaves the fewest GPUs of its group free (rule 4, the
    weigher's), ties in the host order (the other weighers).

Metrics (:class:`Metrics`), per boot:

* placed on the first host tried, or after compute refusals;
* rejected while a fitting clique was free: at the moment of the boot,
  some host with the trait had N free GPUs in one group
  (:func:`clique_fit.choose` finds one), yet the boot failed (the bad
  case; the filter makes it impossible, Nova's order does not);
* rejected because nothing fitted anywhere (legitimate);
* GPUs idle in broken cliques, the mean over boots of the free GPUs, at
  the moment of the boot, of cliques (host clique IDs) that have some GPU
  in use: GPUs that can no longer serve a request for their whole clique;
* stranded GPUs, the subset of those that are the last free GPU of their
  clique: they can serve only a 1-GPU boot, and never a P2P request.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import enum
import functools
import random
import statistics
import tempfile
import typing

from oslo_config import cfg

from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import conf
from nova_gpu_p2p.scheduler import clique_fit
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p import traits
from tests.fixtures import hosts as corpus
from tests.fixtures import sysfs_builder

#: Nova's ``[scheduler] max_attempts`` default: the host and 2 alternates.
MAX_ATTEMPTS = 3
#: GPUs per boot, and how often each size comes.
SIZES = (1, 2, 4, 8)
SIZE_WEIGHTS = (4, 3, 2, 1)
#: GPUs asked for by live boots, as a share of the cloud's GPUs, around
#: which :func:`random_ops` keeps the offered load.
LOAD = 1.25
#: Chance that the next op is a boot, below and above that load.
BOOT_BELOW, BOOT_ABOVE = 0.7, 0.3

#: The simulated cloud: (corpus host, [gpu_p2p] p2p_level, how many). The
#: corpus' 8-GPU hosts have cliques of 4 only where the operator accepts
#: PHB (two switches under one host bridge); no host has a clique of 8, so
#: 8-GPU boots fit nowhere and their rejections are legitimate.
CLOUD: tuple[tuple[str, str, int], ...] = (
    ('large-16gpu-8numa', 'PXB', 1),          # 16 GPUs, 8 pairs
    ('hgx-8gpu-nvswitch-2numa', 'PXB', 2),    # 8 GPUs, 4 pairs
    ('pcie-8gpu-4switch-2socket', 'PHB', 2),  # 8 GPUs, 2 cliques of 4
    ('pcie-2level-switch-pxb', 'PXB', 2),     # 6 GPUs, 5 + 1 alone
    ('acs-redirect-switch', 'PXB', 1),        # 4 GPUs, 2 + 2 alone
    ('four-numa-7gpu', 'PXB', 1),             # 7 GPUs, all alone
)


class Boot(typing.NamedTuple):
    id: int
    gpus: int


class Delete(typing.NamedTuple):
    id: int


Op = Boot | Delete


class Policy(enum.Enum):
    NOVA = 'nova'
    FILTER = 'filter'
    BEST_FIT = 'best-fit'


class HostOrder(enum.Enum):
    SPREAD = 'spread'
    STACK = 'stack'


@dataclasses.dataclass(frozen=True)
class Host:
    """A compute host as the scheduler sees it."""

    name: str
    #: Its GPUs in address order, the address as provider, all free.
    gpus: tuple[clique_fit.Gpu, ...]
    #: Its compute node's traits.
    traits: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What became of one boot."""

    boot: Boot
    #: The host it was placed on; None when it failed.
    host: str | None
    #: The GPUs it got, in address order; () when it failed.
    addresses: tuple[str, ...]
    #: Hosts whose compute refused the claim, in the order tried.
    refused: tuple[str, ...]
    #: Whether a fitting clique was free somewhere when the boot came.
    fit_free: bool
    #: Free GPUs in the cloud, in broken cliques, and the last free GPU of
    #: their clique, when the boot came (before it was placed).
    free: int
    idle_broken: int
    stranded: int


@dataclasses.dataclass(frozen=True)
class Metrics:
    boots: int
    placed_first: int
    placed_rescheduled: int
    rejected_fit_free: int
    rejected_no_fit: int
    #: Compute refusals, summed over all boots.
    refusals: int
    mean_free: float
    mean_idle_broken: float
    mean_stranded: float


def make_host(name: str, clique_ids: Mapping[str, int | None]) -> Host:
    """A host from its GPUs' clique IDs (None: in no clique), for tests."""
    members: dict[int, list[str]] = {}
    for address, clique in clique_ids.items():
        if clique is not None:
            members.setdefault(clique, []).append(address)
    groups = [tuple(sorted(g)) for g in members.values()] + [
        (a,) for a, clique in clique_ids.items() if clique is None]
    found = cliques_mod.Cliques(groups=tuple(sorted(groups)),
                                ids=dict(clique_ids))
    return Host(name, tuple(clique_fit.Gpu(a, clique_ids[a])
                            for a in sorted(clique_ids)),
                frozenset(traits.p2p_traits(model.HostTopology(functions={}),
                                            found)))


@functools.cache
def _discover(corpus_name: str, level: str) -> host_gpus.HostGPUs:
    with tempfile.TemporaryDirectory(
            dir=sysfs_builder.scratch_dir()) as root:
        sysfs_builder.build(corpus.host(corpus_name), root)
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        opts([], default_config_files=[])
        opts.set_override('sysfs_root', root, group='gpu_p2p')
        backend = sysfs.SysfsBackend(opts,
                                     read_config=sysfs.read_config_direct)
        return discovery.evaluate(backend.discover(), opts,
                                  link_class.LinkClass[level])


def corpus_host(corpus_name: str, level: str = 'PXB',
                name: str | None = None) -> Host:
    """A corpus host as discovery sees it at ``p2p_level`` ``level``."""
    found = _discover(corpus_name, level)
    return Host(name or corpus_name,
                tuple(clique_fit.Gpu(gpu.address,
                                     found.cliques.ids[gpu.address])
                      for gpu in found.topology.gpus()),
                frozenset(traits.p2p_traits(found.topology, found.cliques)))


def corpus_cloud(spec: Iterable[tuple[str, str, int]] = CLOUD
                 ) -> list[Host]:
    """The hosts of ``spec``, named ``<corpus host>#<n>``."""
    return [corpus_host(name, level, '%s#%d' % (name, n))
            for name, level, count in spec for n in range(1, count + 1)]


def random_ops(count: int, seed: int, capacity: int, load: float = LOAD,
               sizes: Sequence[int] = SIZES,
               weights: Sequence[int] = SIZE_WEIGHTS) -> list[Op]:
    """``count`` boots and deletes, the same for the same arguments.

    Deletes take a random live boot; boots are more likely while the GPUs
    asked for by live boots are under ``load`` x ``capacity``. The same
    sequence serves every policy: deleting a boot that failed under one
    does nothing there.
    """
    rng = random.Random(seed)
    live: list[Boot] = []
    asked = 0
    ops: list[Op] = []
    for _ in range(count):
        boot_chance = BOOT_BELOW if asked < load * capacity else BOOT_ABOVE
        if not live or rng.random() < boot_chance:
            boot = Boot(len(ops), rng.choices(sizes, weights)[0])
            live.append(boot)
            asked += boot.gpus
            ops.append(boot)
        else:
            boot = live.pop(rng.randrange(len(live)))
            asked -= boot.gpus
            ops.append(Delete(boot.id))
    return ops


@dataclasses.dataclass(frozen=True)
class _View:
    """A host's GPUs at the moment of a boot."""

    host: Host
    #: Its GPUs by address, ``free`` 1 or 0.
    gpus: Mapping[str, clique_fit.Gpu]
    #: :func:`clique_fit.free_per_group` of them.
    free: Mapping[clique_fit.Group, int]

    def free_in(self, group: clique_fit.Group) -> list[str]:
        """The group's free GPUs, in address order."""
        return [address for address, gpu in self.gpus.items()
                if gpu.free and gpu.group == group]


def _lowest(view: _View, count: int) -> tuple[str, ...] | None:
    """The ``count`` free GPUs of lowest address, if there are as many."""
    free = [address for address, gpu in view.gpus.items() if gpu.free]
    return tuple(free[:count]) if len(free) >= count else None


def _lowest_fitting(view: _View, count: int) -> tuple[str, ...] | None:
    """The fitting set of lowest addresses (placement's order)."""
    sets = [claim for group, free in view.free.items() if free >= count
            and clique_fit.fitting_group(
                claim := tuple(view.free_in(group)[:count]),
                view.gpus) is not None]
    return min(sets, default=None)


def _best_fit(view: _View, count: int) -> tuple[str, ...] | None:
    """The lowest free GPUs of :func:`clique_fit.choose`'s group."""
    group = clique_fit.choose(view.free, count)
    return None if group is None else tuple(view.free_in(group)[:count])


_CLAIM = {Policy.NOVA: _lowest, Policy.FILTER: _lowest_fitting,
          Policy.BEST_FIT: _best_fit}


def _wanted_trait(count: int) -> str | None:
    return flavor_commands.clique_trait(count) if count > 1 else None


class _Cloud:
    """Which GPUs of which host each live boot holds."""

    def __init__(self, hosts: Sequence[Host]):
        self.hosts = list(hosts)
        self.used: dict[str, set[str]] = {h.name: set() for h in hosts}
        self.placed: dict[int, tuple[str, tuple[str, ...]]] = {}
        #: Each GPU taken and free, made once: a boot looks at them all.
        self._states = {h.name: [(dataclasses.replace(gpu, free=0),
                                  dataclasses.replace(gpu, free=1))
                                 for gpu in h.gpus] for h in hosts}
        self._sizes = {h.name: clique_fit.free_per_group(
            dataclasses.replace(gpu, free=1) for gpu in h.gpus)
            for h in hosts}

    def view(self, host: Host) -> _View:
        used = self.used[host.name]
        gpus = {free.provider: taken if free.provider in used else free
                for taken, free in self._states[host.name]}
        return _View(host, gpus, clique_fit.free_per_group(gpus.values()))

    def idle(self, view: _View) -> tuple[int, int]:
        """Free GPUs in broken cliques, and those last free in theirs."""
        size = self._sizes[view.host.name]
        broken = stranded = 0
        for group, free in view.free.items():
            if group.clique is not None and 0 < free < size[group]:
                broken += free
                stranded += free == 1
        return broken, stranded

    def delete(self, boot_id: int) -> None:
        if boot_id in self.placed:
            host, addresses = self.placed.pop(boot_id)
            self.used[host].difference_update(addresses)

    def boot(self, boot: Boot, policy: Policy, order: HostOrder,
             max_attempts: int) -> Outcome:
        trait = _wanted_trait(boot.gpus)
        views = [self.view(host) for host in self.hosts]
        eligible = [(position, view) for position, view in enumerate(views)
                    if trait is None or trait in view.host.traits]
        candidates = []
        for position, view in eligible:
            claim = _CLAIM[policy](view, boot.gpus)
            if claim is None:
                continue
            free = sum(view.free.values())
            rank = (free if order is HostOrder.STACK else -free, position)
            if policy is Policy.BEST_FIT:
                # Rule 4: the fewest GPUs of the claim's group left free.
                group = view.gpus[claim[0]].group
                rank = (view.free[group] - len(claim),) + rank
            candidates.append((rank, view, claim))
        candidates.sort(key=lambda found: found[0])
        idle = [self.idle(view) for view in views]
        found = {'boot': boot,
                 'fit_free': any(clique_fit.choose(view.free, boot.gpus)
                                 is not None for _, view in eligible),
                 'free': sum(sum(view.free.values()) for view in views),
                 'idle_broken': sum(b for b, _ in idle),
                 'stranded': sum(s for _, s in idle)}
        refused = []
        for _, view, claim in candidates[:max_attempts]:
            if clique_fit.fitting_group(claim, view.gpus) is None:
                refused.append(view.host.name)
                continue
            self.used[view.host.name].update(claim)
            self.placed[boot.id] = (view.host.name, claim)
            return Outcome(host=view.host.name, addresses=claim,
                           refused=tuple(refused), **found)
        return Outcome(host=None, addresses=(), refused=tuple(refused),
                       **found)


def replay(hosts: Sequence[Host], ops: Iterable[Op], policy: Policy,
           order: HostOrder = HostOrder.SPREAD,
           max_attempts: int = MAX_ATTEMPTS) -> list[Outcome]:
    """Run ``ops`` on an empty cloud of ``hosts``: one outcome per boot."""
    cloud = _Cloud(hosts)
    outcomes = []
    for op in ops:
        if isinstance(op, Delete):
            cloud.delete(op.id)
        else:
            outcomes.append(cloud.boot(op, policy, order, max_attempts))
    return outcomes


def metrics(outcomes: Sequence[Outcome]) -> Metrics:
    """The counts and means of the module docstring."""
    placed = [o for o in outcomes if o.host is not None]
    failed = [o for o in outcomes if o.host is None]

    def mean(field: str) -> float:
        return statistics.fmean(getattr(o, field) for o in outcomes) \
            if outcomes else 0.0

    return Metrics(
        boots=len(outcomes),
        placed_first=sum(not o.refused for o in placed),
        placed_rescheduled=sum(bool(o.refused) for o in placed),
        rejected_fit_free=sum(o.fit_free for o in failed),
        rejected_no_fit=sum(not o.fit_free for o in failed),
        refusals=sum(len(o.refused) for o in outcomes),
        mean_free=mean('free'), mean_idle_broken=mean('idle_broken'),
        mean_stranded=mean('stranded'))
