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

"""Guest PCIe expander buses: which device goes where, and the numbers.

The rule:

1. Devices are grouped by host root complex (``expander_bus_grouping =
   root_complex``) or host NUMA node (``numa``). A device whose host NUMA
   node is unknown, or is not one Nova mapped a guest cell to, is not
   placed (the caller decides whether that is a warning or a refusal).
2. Each group gets one ``pcie-expander-bus`` (pxb-pcie) whose ``<node>``
   is the guest cell Nova mapped to the group's host NUMA node, and one
   ``pcie-root-port`` per device below it, in slots 0, 1, 2, ...; the
   device sits in slot 0 of its root port. Groups are ordered by guest
   cell, then by first device address; devices by address.
3. Bus numbers (``busNr``) count down from the top of the 0-255 range: an
   expander with N root ports owns N+1 bus numbers, its own and one per
   port, so the first expander with one port gets 254 (libvirt's own
   default) and each next one ends just below the previous one.
4. Controller indexes are the lowest ones Nova's controllers leave free,
   an expander before its root ports: libvirt fills any gap in the
   indexes with a root port of its own.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import enum
import functools

from nova_gpu_p2p import exception
from nova_gpu_p2p.guest import devices as devices_mod

#: pxb-pcie bus numbers are allocated downward from here (exclusive).
BUS_NUMBER_LIMIT = 256
#: Slots on one PCI bus.
SLOTS_PER_BUS = 32


class Grouping(str, enum.Enum):
    ROOT_COMPLEX = 'root_complex'
    NUMA = 'numa'


@dataclasses.dataclass(frozen=True)
class RootPort:
    #: libvirt controller index of the pcie-root-port.
    index: int
    #: Its slot on the expander bus.
    slot: int
    #: Host address of the device plugged into it.
    device: str


@dataclasses.dataclass(frozen=True)
class ExpanderBus:
    #: libvirt controller index of the pcie-expander-bus.
    index: int
    bus_nr: int
    #: Guest NUMA cell (``<target><node>``).
    guest_node: int
    host_numa_node: int
    #: Root complex name, or ``node N`` when grouping by NUMA node.
    host_group: str
    ports: tuple[RootPort, ...]


@dataclasses.dataclass(frozen=True)
class BusLayout:
    buses: tuple[ExpanderBus, ...] = ()
    #: Host address -> why that device stays where Nova put it.
    unplaced: dict[str, str] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def _ports(self) -> dict[str, tuple[ExpanderBus, RootPort]]:
        return {port.device: (bus, port)
                for bus in self.buses for port in bus.ports}

    def port_of(self, address: str) -> tuple[ExpanderBus, RootPort] | None:
        return self._ports.get(address)


def _free_indexes(used: Iterable[int]) -> Iterable[int]:
    used = set(used)
    index = 0
    while True:
        if index not in used:
            yield index
        index += 1


def _group_key(device: devices_mod.GuestDevice,
               grouping: Grouping) -> str:
    if grouping is Grouping.NUMA or device.root_complex is None:
        return 'node %d' % device.numa_node
    return device.root_complex


def layout(devices: Sequence[devices_mod.GuestDevice],
           guest_cell_of: Mapping[int, int],
           grouping: Grouping,
           used_indexes: Iterable[int]) -> BusLayout:
    """Apply the rule above.

    :param devices: the devices to place (already filtered by
        ``align_device_types``).
    :param guest_cell_of: host NUMA node -> guest cell, as Nova mapped them.
    :param used_indexes: PCI controller indexes Nova's config already uses
        (``pcie-root`` is 0 even where Nova leaves it implicit).
    """
    groups: dict[str, list[devices_mod.GuestDevice]] = {}
    unplaced = {}
    for device in sorted(devices, key=lambda d: d.address):
        if not device.known:
            unplaced[device.address] = (
                'the host GPU topology does not list %s' % device.address)
        elif device.numa_node is None:
            unplaced[device.address] = (
                'the host reports no NUMA node for %s' % device.address)
        elif device.numa_node not in guest_cell_of:
            unplaced[device.address] = (
                '%s is on host NUMA node %d, where this instance has no '
                'guest NUMA cell (cells are on host nodes %s)' % (
                    device.address, device.numa_node,
                    ', '.join(str(n) for n in sorted(guest_cell_of))))
        else:
            groups.setdefault(_group_key(device, grouping), []).append(device)
    ordered = sorted(groups.items(), key=lambda item: (
        guest_cell_of[item[1][0].numa_node], item[1][0].address))

    indexes = _free_indexes(set(used_indexes) | {0})
    top = BUS_NUMBER_LIMIT
    buses = []
    for key, members in ordered:
        if len(members) > SLOTS_PER_BUS:
            raise exception.GuestLayoutError(
                '%d devices under %s: one expander bus has '
                'only %d slots' % (len(members), key,
                                   SLOTS_PER_BUS))
        bus_nr = top - 1 - len(members)
        index = next(indexes)
        ports = tuple(RootPort(index=next(indexes), slot=slot,
                               device=device.address)
                      for slot, device in enumerate(members))
        if bus_nr <= ports[-1].index:
            raise exception.GuestLayoutError(
                'not enough PCI bus numbers for %d expander '
                'buses' % len(ordered))
        buses.append(ExpanderBus(
            index=index, bus_nr=bus_nr,
            guest_node=guest_cell_of[members[0].numa_node],
            host_numa_node=members[0].numa_node,
            host_group=key, ports=ports))
        top = bus_nr
    return BusLayout(buses=tuple(buses), unplaced=unplaced)
