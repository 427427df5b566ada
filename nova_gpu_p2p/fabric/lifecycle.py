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

"""Fabric Manager partitions follow the domains: activate, release, reconcile.

Between tenants the GPUs of an HGX board sit on the ``nvidia`` driver, so
that Fabric Manager and NVML see them (and their module IDs can be read).
Nova passes them through as ``managed='yes'`` hostdevs: libvirt binds
each GPU to vfio-pci when the domain starts and back to ``nvidia`` when
it stops. Fabric Manager wants the partition active before the guest
sees the GPUs, and it may be torn down only once the guest is gone, so
the driver activates it just before the domain starts and releases it
after the domain is destroyed; the periodic reconcile puts right what
was missed (a failed start, a stale partition, a restarted Fabric
Manager).

One lock covers every call here, and a domain being started counts as
running until it has started: the reconcile must never deactivate a
partition between its activation and the domain's start.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
import contextlib
import dataclasses
from typing import Any

from oslo_concurrency import lockutils
from oslo_log import log as logging

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.fabric import reconcile as reconcile_mod

LOG = logging.getLogger(__name__)

#: Instance UUID -> the host PCI addresses of its running domain.
Running = Mapping[str, Iterable[str]]


@dataclasses.dataclass(frozen=True)
class Activation:
    """What an instance's GPUs got from Fabric Manager before it starts."""

    #: The GPUs (fabric GPUs only) and the partitions activated for them.
    gpus: tuple[str, ...]
    ids: tuple[int, ...]
    #: Whether those are one partition of two or more GPUs.
    nvlink: bool
    #: Why not every partition is active (Fabric Manager's status, or GPUs
    #: in no partition); None when all are.
    problem: str | None = None

    def outcome(self, new_build: bool, required: bool) -> 'Outcome':
        """What the driver does about it.

        Issue 9's rule: only a new build is refused (another host may do);
        an existing server starts, and what it lacks is reported.
        """
        if self.problem is not None:
            if new_build:
                return Outcome(refusal=self.problem)
            return Outcome(lost='no NVLink, and maybe no CUDA: %s'
                           % self.problem)
        if len(self.gpus) > 1 and not self.nvlink:
            note = ('GPUs %s are not one Fabric Manager partition: each got '
                    'its 1-GPU partition, so CUDA works without NVLink '
                    'between them' % ', '.join(self.gpus))
            return Outcome(lost=note) if required else Outcome(note=note)
        return Outcome()


@dataclasses.dataclass(frozen=True)
class Outcome:
    """At most one of: refuse the new build, report the loss, warn."""

    refusal: str | None = None
    lost: str | None = None
    note: str | None = None


def _direct(func: Callable[..., Any], *args: Any) -> Any:
    return func(*args)


class Lifecycle:
    """The host's Fabric Manager partitions, kept in step with its domains.

    ``partitions`` gives the host's partitions now (empty: no Fabric
    Manager, nothing to do), ``running`` its running domains' devices,
    ``connect`` a :class:`nvfm.FabricManager` to enter. Each Fabric
    Manager session goes through ``offload`` (the driver's native thread:
    the library's calls never yield to eventlet).
    """

    def __init__(self, connect: Callable[[], nvfm.FabricManager],
                 partitions: Callable[
                     [], tuple[partitions_mod.FabricPartition, ...]],
                 running: Callable[[], Running],
                 offload: Callable[..., Any] = _direct) -> None:
        self._connect = connect
        self._partitions = partitions
        self._running = running
        self._offload = offload
        self._lock = lockutils.internal_lock('nova-gpu-p2p-fabric-manager')
        self._starting: dict[str, tuple[str, ...]] = {}
        self._reported: dict[str, str] = {}
        self._trouble: str | None = None
        #: The partitions last seen or made active; None until known.
        self._known_active: set[int] | None = None

    @contextlib.contextmanager
    def starting(self, uuid: str, addresses: Iterable[str],
                 exact_only: bool = False) -> Iterator[Activation]:
        """Activate the instance's partitions; its domain starts inside.

        Until the block ends the instance counts as running, so neither a
        reconcile nor another instance's release deactivates them. With
        ``exact_only``, GPUs that are not one partition get nothing.
        """
        addresses = tuple(sorted(set(addresses)))
        with self._lock:
            activation = self._activate(addresses, exact_only)
            self._starting[uuid] = addresses
        try:
            yield activation
        finally:
            with self._lock:
                del self._starting[uuid]

    def release(self) -> None:
        """Deactivate what no running domain holds (after a domain is gone)."""
        self._reconcile(restore=False)

    def reconcile(self) -> None:
        """Deactivate stale partitions, restore needed ones, report the rest.

        Fabric Manager unreachable is logged (once until it changes), not
        raised: this runs at start-up and on every periodic update.
        """
        self._reconcile(restore=True)

    def _activate(self, addresses: tuple[str, ...],
                  exact_only: bool) -> Activation:
        partitions = self._partitions()
        gpus = reconcile_mod.fabric_gpus(partitions, addresses)
        plan = partitions_mod.for_instance(partitions, gpus)
        activation = Activation(gpus=gpus, ids=plan.ids, nvlink=plan.nvlink)
        if not gpus:
            return activation
        if plan.missing:
            return dataclasses.replace(
                activation, problem='GPU(s) %s are in no Fabric Manager '
                'partition' % ', '.join(plan.missing))
        if exact_only and len(gpus) > 1 and not plan.nvlink:
            return dataclasses.replace(
                activation, ids=(), problem='GPUs %s are not one Fabric '
                'Manager partition, so they cannot have NVLink'
                % ', '.join(gpus))
        try:
            # Read here, on the caller's thread (libvirt), in case Fabric
            # Manager restarted and must be told what is in use.
            in_use = self._in_use(partitions, self._all_running())
            self._offload(self._activate_all, plan.ids, in_use)
        except exception.FmError as exc:
            reason = str(exc)
        except Exception as exc:  # never a lost server for Fabric Manager
            LOG.exception('Fabric Manager activation failed unexpectedly')
            reason = repr(exc)
        else:
            LOG.info('Fabric Manager partition(s) %s activated for GPUs %s',
                     ', '.join(map(str, plan.ids)), ', '.join(gpus))
            return activation
        return dataclasses.replace(
            activation, problem='Fabric Manager partition(s) %s (GPUs %s) '
            'not activated: %s' % (', '.join(map(str, plan.ids)),
                                   ', '.join(gpus), reason))

    def _all_running(self) -> dict[str, Iterable[str]]:
        return {**self._running(), **self._starting}

    def _in_use(self, partitions, running: Running) -> tuple[int, ...]:
        """What a restarted Fabric Manager is told is active.

        The partitions running servers hold, less those known not to be
        active (one whose activation failed during an outage was never
        routed): never a partition no running server holds.
        """
        needed = reconcile_mod.decide(partitions, (), running).needed
        if self._known_active is None:
            return needed
        return tuple(p for p in needed if p in self._known_active)

    def _told(self, fm: nvfm.FabricManager, in_use: tuple[int, ...]) -> None:
        """fmSetActivatedFabricPartitions, as the restart protocol asks.

        Sent only after Fabric Manager said it has no partition data
        (FmNotReady): NVIDIA documents no answer from one that did not
        restart, which might mark the partitions active unrouted.
        """
        fm.set_activated(in_use)
        self._known_active = set(in_use)
        LOG.warning('Fabric Manager restarted: told it the partitions of '
                    'running servers (%s)',
                    ', '.join(map(str, in_use)) or 'none')

    def _activate_all(self, ids: tuple[int, ...],
                      in_use: tuple[int, ...]) -> None:
        with self._connect() as fm:
            for partition_id in ids:
                try:
                    fm.activate(partition_id)
                except exception.FmNotReady:
                    self._told(fm, in_use)
                    fm.activate(partition_id)
                except exception.FmInUse:
                    # Already active is fine (a restart after a stop
                    # the reconcile has not caught up with yet).
                    if not any(p.id == partition_id and p.active
                               for p in fm.partitions()):
                        raise
                if self._known_active is not None:
                    self._known_active.add(partition_id)

    def _reconcile(self, restore: bool) -> None:
        with self._lock:
            partitions = self._partitions()
            if not partitions:
                return
            running = self._all_running()
            try:
                active = self._offload(self._sync, partitions, running,
                                       restore)
            except exception.FmError as exc:
                self._fm_trouble(str(exc))
                return
            self._fm_trouble(None)
            if restore:
                self._report(reconcile_mod.lacking(partitions, active,
                                                   running))

    def _sync(self, partitions, running: Running,
              restore: bool) -> set[int]:
        """Fabric Manager's calls; the partitions active after them.

        A Fabric Manager without partition data (restarted in restart
        mode) is told the running servers' partitions first, here, so that
        it serves the query again within one periodic.
        """
        with self._connect() as fm:
            try:
                listed = fm.partitions()
            except exception.FmNotReady:
                self._told(fm, self._in_use(partitions, running))
                listed = fm.partitions()
            active = {p.id for p in listed if p.active}
            decision = reconcile_mod.decide(partitions, active, running)
            if restore and decision.restore:
                active |= _restore(fm, decision)
            for partition_id in decision.deactivate:
                try:
                    fm.deactivate(partition_id)
                except exception.FmNotActive:
                    LOG.info('Fabric Manager partition %d was no longer '
                             'active', partition_id)
                except exception.FmError as exc:
                    LOG.warning('Stale Fabric Manager partition %d held by '
                                'no running server stays active: %s',
                                partition_id, exc)
                    continue
                else:
                    LOG.info('Fabric Manager partition %d deactivated: no '
                             'running server holds its GPUs', partition_id)
                active.discard(partition_id)
            self._known_active = set(active)
            return active

    def _fm_trouble(self, trouble: str | None) -> None:
        """Log Fabric Manager failing, or recovering, once per change."""
        if trouble is not None and trouble != self._trouble:
            LOG.warning('Fabric Manager partitions not reconciled: %s',
                        trouble)
        elif trouble is None and self._trouble is not None:
            LOG.info('Fabric Manager reachable again, partitions reconciled')
        self._trouble = trouble

    def _report(self, lacking: Mapping[str, str]) -> None:
        """One WARNING per instance running without its partitions."""
        for uuid, why in lacking.items():
            if self._reported.get(uuid) != why:
                LOG.warning('Instance %s runs without NVLink or CUDA through '
                            'Fabric Manager: %s', uuid, why)
        self._reported = dict(lacking)


def _restore(fm: nvfm.FabricManager,
             decision: reconcile_mod.Decision) -> set[int]:
    """Activate the running domains' missing partitions; those now active.

    One by one: a Fabric Manager that restarted was told what runs before
    it answered the query (:meth:`Lifecycle._sync`).
    """
    restored = set()
    for partition_id in decision.restore:
        try:
            fm.activate(partition_id)
        except exception.FmError as exc:
            LOG.warning('Fabric Manager partition %d of a running server '
                        'not activated: %s', partition_id, exc)
            continue
        restored.add(partition_id)
        LOG.info('Fabric Manager partition %d of a running server activated',
                 partition_id)
    return restored
