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

"""The order the driver reports PCI devices in: GPU groups first free.

Where Nova claims GPUs without placement (a cold migration's, resize's or
evacuation's ``ResourceTracker._move_claim``, see
:mod:`nova_gpu_p2p.scheduler.move_claims`), ``PciDeviceStats`` takes the
first free pools in pool order, in the NUMA cells Nova fitted. Each GPU
is a pool of its own, and Nova's PCI tracker appends the pool of a
device it meets for the first time in the order of the driver's
``pci_passthrough_devices``. Reported with each NUMA node's GPUs grouped
by the host's nested groups (Fabric Manager partitions, smallest inside
larger; else P2P cliques), then by address, the first free GPUs of an
empty node are one group of every size the groups have.

What the report order cannot change, all of it Nova's: a device the
tracker already knows keeps its pool where it is; a restarted
nova-compute adds the free devices it reads from its database in address
order; a freed device's pool goes to the end. Nova sorts its pools by
their number of keys, though, and device_spec tags are pool keys: with
the order tags ``topology --device-spec`` prints (:func:`ranks`), the
pools keep this order after every restart and every free.

Pure functions over plain data.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

#: ``vendor_id`` of NVIDIA devices in Nova's device dicts.
NVIDIA_VENDOR = '10de'
#: Sorts after every PCI address: GPUs in no group of a size come last.
UNGROUPED = '~'


def group_keys(groups: Iterable[Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """Each grouped GPU's sort key: its groups, largest first.

    :param groups: sets of GPU addresses (Fabric Manager partitions, or
        cliques): nested, as a board's partitions are.

    A key names, for each group size, largest first, the group of that
    size holding the GPU by its first address (:data:`UNGROUPED` where
    none does; the lowest such address where several do), so that sorting
    by key keeps every group of every size together, smaller ones in
    the order of the larger ones they are in.
    """
    groups = [sorted(address.lower() for address in group)
              for group in groups if group]
    sizes = sorted({len(group) for group in groups}, reverse=True)
    first: dict[tuple[str, int], str] = {}
    for group in sorted(groups):
        for address in group:
            first.setdefault((address, len(group)), group[0])
    gpus = {address for address, _ in first}
    return {gpu: tuple(first.get((gpu, size), UNGROUPED) for size in sizes)
            for gpu in gpus}


def _numa(device: Mapping[str, Any]) -> tuple[bool, int]:
    """A NUMA node to sort by; devices without one after the others."""
    node = device.get('numa_node')
    return (node is None, node if isinstance(node, int) else 0)


def ordered(devices: Sequence[Mapping[str, Any]],
            keys: Mapping[str, Sequence[str]]) -> list[Mapping[str, Any]]:
    """The devices, the NVIDIA GPUs of ``keys`` regrouped in their places.

    :param devices: Nova's ``pci_passthrough_devices`` entries (dicts with
        ``address``, ``vendor_id``, ``numa_node``).
    :param keys: :func:`group_keys`.

    The GPUs take the positions GPUs had, sorted by NUMA node, then key,
    then address; every other device keeps its position, so the relative
    order of everything else is Nova's.
    """
    def is_gpu(device: Mapping[str, Any]) -> bool:
        return (str(device.get('vendor_id', '')).lower() == NVIDIA_VENDOR
                and str(device.get('address', '')).lower() in keys)

    gpus = iter(sorted((device for device in devices if is_gpu(device)),
                       key=lambda device: _sort_key(device, keys)))
    return [next(gpus) if is_gpu(device) else device for device in devices]


def _sort_key(device: Mapping[str, Any], keys: Mapping[str, Sequence[str]]):
    """NUMA node, then groups (:func:`group_keys`), then address."""
    address = str(device['address']).lower()
    return _numa(device), tuple(keys[address]), address


def ranks(numa_nodes: Mapping[str, int | None],
          groups: Iterable[Sequence[str]]) -> dict[str, int]:
    """Each GPU's place in :func:`ordered`'s order, from 0.

    :param numa_nodes: GPU address -> its NUMA node (None: unknown), for
        every GPU to rank; those in no group come after their node's
        grouped ones.
    :param groups: as :func:`group_keys` takes them.

    What the device_spec order tags carry
    (:func:`nova_gpu_p2p.device_spec_tags.order_tags`): Nova sorts its
    pools by their number of keys on every ``add_device``, so a GPU with
    more tags comes later whatever order the tracker met its devices in
    (a restart's database order, a freed device's pool appended).
    """
    keys = group_keys(groups)
    depth = max((len(key) for key in keys.values()), default=0)
    keys.update({address.lower(): (UNGROUPED,) * depth
                 for address in numa_nodes if address.lower() not in keys})
    devices = [{'address': address.lower(), 'numa_node': node}
               for address, node in numa_nodes.items()]
    return {str(device['address']): rank for rank, device in enumerate(
        sorted(devices, key=lambda device: _sort_key(device, keys)))}
