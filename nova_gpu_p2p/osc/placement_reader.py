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

"""What :mod:`nova_gpu_p2p.capacity` needs, read from placement.

A number of calls that does not grow with the hosts: placement lists the
providers with a trait, and those with a free unit of a resource class,
in one call each.

* ``GET /resource_classes``: the GPU models, Nova's
  ``CUSTOM_PCI_10DE_<product>`` classes and any named by the caller;
* ``GET /traits?name=startswith:CUSTOM_GPU_P2P_``, then
  ``GET /resource_providers?required=<trait>`` for each clique and
  partition trait that exists (at most 16 and 64);
* ``GET /resource_providers?resources=<class>:<k>`` for k = 1, 2, ...
  until none is left, per GPU class: each provider's free units
  (reserved and used units are not free; a passthrough GPU has one);
* ``GET /resource_providers?required=COMPUTE_STATUS_DISABLED``.

A GPU provider is a child of its compute node, which Nova names
``<node>_<PCI ADDRESS>``: the host's name is read from it. GPUs that are
neither free nor in a clique or partition are not seen (they count for
nothing). ``--why`` and ``--plan`` also read the allocations of the GPUs
that block the closest groups, and each blocking server's own, a call
each: their number grows with ``--limit``, not with the cloud.

No Nova import: the command must start fast on any machine.
"""

from collections.abc import Callable
from collections.abc import Iterable
import re
import urllib.parse

from nova_gpu_p2p import capacity
from nova_gpu_p2p import capacity_plan

MICROVERSION = '1.18'
#: Nova's resource class for an NVIDIA PCI device without a named one.
NVIDIA_CLASS_PREFIX = 'CUSTOM_PCI_10DE_'
TRAIT_PREFIX = 'CUSTOM_GPU_P2P_'
CLIQUE_ID_PREFIX = 'CUSTOM_GPU_P2P_CLIQUE_ID_'
PARTITION_PREFIX = 'CUSTOM_GPU_P2P_PARTITION_'
DISABLED = 'COMPUTE_STATUS_DISABLED'
#: What a server needs of its compute node, checked for a plan's moves.
ROOT_CLASSES = frozenset(['VCPU', 'PCPU', 'MEMORY_MB', 'DISK_GB'])
#: A free-unit count no GPU provider reaches: stop asking there.
MAX_UNITS = 64
_DEVICE_NAME = re.compile(
    r'^(?P<node>.+)_[0-9A-F]{4}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$')


class PlacementError(Exception):
    """Placement did not answer as expected."""


def _number(trait: str, prefix: str) -> int | None:
    """The ID a clique or partition trait ends with; None if not one."""
    suffix = trait[len(prefix):]
    if not trait.startswith(prefix) or not suffix.isdigit():
        return None
    return int(suffix)


class Reader:
    """Placement reads, counted (:attr:`calls`).

    :param client: a keystoneauth ``Adapter`` (openstacksdk's placement
        proxy is one) for placement's endpoint.
    """

    def __init__(self, client, resource_classes: Iterable[str] = ()):
        self._client = client
        self._named = tuple(resource_classes)
        self.calls = 0
        self._classes: list[str] | None = None
        #: Consumer UUID -> its resources on its compute node provider.
        self.root_resources: dict[str, dict[str, int]] = {}

    def get(self, path: str, **params: str) -> dict:
        """One GET; its JSON body."""
        self.calls += 1
        url = path + ('?' + urllib.parse.urlencode(params) if params else '')
        response = self._client.get(url, microversion=MICROVERSION,
                                    raise_exc=False)
        if response.status_code != 200:
            raise PlacementError('placement answered %s to GET %s: %s' % (
                response.status_code, url,
                ' '.join(response.text.split())[:200]))
        return response.json()

    def gpu_classes(self) -> list[str]:
        """Nova's NVIDIA PCI classes in placement, and the named ones."""
        if self._classes is None:
            known = {rc['name'] for rc in self.get(
                '/resource_classes')['resource_classes']}
            missing = [rc for rc in self._named if rc not in known]
            if missing:
                raise PlacementError(
                    'placement has no resource class %s' % ', '.join(missing))
            self._classes = sorted(
                {rc for rc in known if rc.startswith(NVIDIA_CLASS_PREFIX)}
                | set(self._named))
        return self._classes

    def _providers(self, **params: str) -> list[dict]:
        return self.get('/resource_providers', **params)['resource_providers']

    def hosts(self) -> list[capacity.Host]:
        """Every compute node with a GPU that is free or in a group."""
        seen: dict[str, dict] = {}
        cliques: dict[str, int] = {}
        partitions: dict[str, set[int]] = {}
        traits = self.get('/traits', name='startswith:' + TRAIT_PREFIX)
        for trait in sorted(traits['traits']):
            clique = _number(trait, CLIQUE_ID_PREFIX)
            partition = _number(trait, PARTITION_PREFIX)
            if clique is None and partition is None:
                continue
            for rp in self._providers(required=trait):
                seen[rp['uuid']] = rp
                if clique is not None:
                    cliques[rp['uuid']] = clique
                else:
                    partitions.setdefault(rp['uuid'], set()).add(partition)
        free: dict[str, int] = {}
        classes: dict[str, str] = {}
        for rc in self.gpu_classes():
            for units in range(1, MAX_UNITS + 1):
                found = self._providers(resources='%s:%d' % (rc, units))
                if not found:
                    break
                for rp in found:
                    seen[rp['uuid']] = rp
                    free[rp['uuid']] = units
                    classes[rp['uuid']] = rc
        disabled = {rp['uuid']: rp['name']
                    for rp in self._providers(required=DISABLED)}
        by_root: dict[str, list[dict]] = {}
        for rp in seen.values():
            by_root.setdefault(rp['root_provider_uuid'], []).append(rp)
        hosts = []
        for root, providers in by_root.items():
            gpus = tuple(capacity.Gpu(
                rp['uuid'], free.get(rp['uuid'], 0), classes.get(rp['uuid']),
                cliques.get(rp['uuid']),
                frozenset(partitions.get(rp['uuid'], ())))
                for rp in sorted(providers, key=lambda rp: rp['name']))
            hosts.append(capacity.Host(
                disabled.get(root) or _host_name(providers, root), gpus,
                root in disabled, root))
        return sorted(hosts, key=lambda host: host.name)

    def holders(self, gpus: Iterable[capacity.Gpu]
                ) -> dict[str, list[capacity_plan.Consumer]]:
        """The servers holding each of these GPUs, with all their GPUs.

        Also keeps each server's resources on its compute node
        (:attr:`root_resources`) for :meth:`room`.
        """
        classes = set(self.gpu_classes())
        found: dict[str, list[capacity_plan.Consumer]] = {}
        consumers: dict[str, capacity_plan.Consumer] = {}
        for gpu in gpus:
            held = self.get('/resource_providers/%s/allocations'
                            % gpu.provider)['allocations']
            for uuid in sorted(held):
                if uuid not in consumers:
                    consumers[uuid] = self._consumer(uuid, classes)
                found.setdefault(gpu.provider, []).append(consumers[uuid])
        return found

    def _consumer(self, uuid: str, classes: set[str]
                  ) -> capacity_plan.Consumer:
        allocations = self.get('/allocations/%s' % uuid)['allocations']
        gpus = []
        other: dict[str, int] = {}
        for rp, held in sorted(allocations.items()):
            for rc, amount in sorted(held['resources'].items()):
                if rc in classes:
                    gpus.extend([(rp, rc)] * amount)
                elif rc in ROOT_CLASSES:
                    other[rc] = other.get(rc, 0) + amount
        self.root_resources[uuid] = other
        return capacity_plan.Consumer(uuid, tuple(gpus))

    def room(self, consumers: Iterable[capacity_plan.Consumer]
             ) -> Callable[[capacity.Host, capacity_plan.Consumer], bool]:
        """Whether a host's node has room for a server's CPU, RAM, disk.

        Placement's answer now, a call per distinct need.
        """
        fitting: dict[str, set[str]] = {}
        for consumer in consumers:
            need = ','.join('%s:%d' % item for item in sorted(
                self.root_resources.get(consumer.uuid, {}).items()))
            if need and need not in fitting:
                fitting[need] = {rp['uuid'] for rp in self._providers(
                    resources=need)}

        def room(host: capacity.Host,
                 consumer: capacity_plan.Consumer) -> bool:
            need = ','.join('%s:%d' % item for item in sorted(
                self.root_resources.get(consumer.uuid, {}).items()))
            return not need or host.uuid in fitting[need]

        return room


def _host_name(providers: list[dict], root: str) -> str:
    """The compute node's name, from its GPU providers' names."""
    for rp in providers:
        match = _DEVICE_NAME.match(rp['name'])
        if match:
            return match.group('node')
    return root
