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

"""Guest root ports at the host's link speed and width.

QEMU's ``pcie-root-port`` reports a 16 GT/s x32 link by default
(``x-speed``/``x-width``; 2.5 GT/s x1 on machine types up to 3.1), and a
guest's Linux shows ``min`` of it and the device's own link, which is
what NCCL and ``nvidia-smi`` read there without the guest agent: every
Gen5 device reads as Gen4, every device in a slower host slot as faster
than it is. Setting each root port to the host link of the device on it
(as NCCL reads that link on the host: :mod:`..topology.nccl_links`) makes
the guest's own sysfs right. libvirt has no XML for these properties:
they go through ``<qemu:override>`` on the controller's alias.

QEMU accepts ``2_5``, ``5``, ``8`` and ``16`` GT/s, and from 9.2 also
``32`` and ``64``; widths 1, 2, 4, 8, 12, 16 and 32. An older QEMU gets
the nearest speed it accepts (the agent's topology file then covers what
it cannot say).
"""

import dataclasses

from nova_gpu_p2p.guest import expander_buses
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import nccl_links

#: QEMU's ``PCIELinkSpeed`` values, GT/s -> property text.
_SPEEDS = {2.5: '2_5', 5.0: '5', 8.0: '8', 16.0: '16', 32.0: '32',
           64.0: '64'}
_SPEEDS_BEFORE_9_2 = (2.5, 5.0, 8.0, 16.0)
#: QEMU's ``PCIELinkWidth`` values.
_WIDTHS = (1, 2, 4, 8, 12, 16, 32)


@dataclasses.dataclass(frozen=True)
class PortLink:
    """The ``x-speed``/``x-width`` of one root port, and what they stand for.

    ``exact`` is False where this QEMU cannot show the host's link.
    """

    speed: str | None
    width: str | None
    exact: bool = True


def _nearest(value: float, accepted) -> float:
    return min(accepted, key=lambda a: (abs(a - value), a))


def port_link(link: dict, qemu_version: tuple[int, int, int]
              ) -> PortLink | None:
    """The root port setting for a device whose host link is ``link``.

    ``link`` is ``{"link_speed", "link_width"}`` as the description
    carries it. None where the host link is unknown: QEMU's defaults stay.
    """
    speed_gts = nccl_links.gts(link.get('link_speed'))
    width = link.get('link_width')
    if speed_gts is None and not width:
        return None
    accepted = (tuple(_SPEEDS) if qemu_version >= min_versions.QEMU_PCIE_GEN5
                else _SPEEDS_BEFORE_9_2)
    speed = width_text = None
    exact = True
    if speed_gts is not None:
        chosen = _nearest(speed_gts, accepted)
        exact = chosen == speed_gts
        speed = _SPEEDS[chosen]
    if width:
        chosen_width = _nearest(width, _WIDTHS)
        exact = exact and chosen_width == width
        width_text = str(chosen_width)
    return PortLink(speed, width_text, exact)


def port_links(buses: expander_buses.BusLayout, topology,
               qemu_version: tuple[int, int, int]
               ) -> tuple[dict[int, PortLink], str | None]:
    """Each placed device's root port (by index) at its host link.

    With a line for the decision record where this QEMU shows the
    nearest link it accepts rather than the host's.
    """
    links = {}
    inexact = []
    for bus in buses.buses:
        for port in bus.ports:
            host_link = nccl_links.nccl_link(
                topology, topology.functions[port.device])
            link = port_link(host_link, qemu_version)
            if link is None:
                continue
            links[port.index] = link
            if not link.exact:
                inexact.append('%s (%s x%s)' % (
                    port.device, host_link['link_speed'],
                    host_link['link_width']))
    if not inexact:
        return links, None
    return links, (
        'the guest root ports of %s show the nearest link QEMU %s accepts '
        '(32 and 64 GT/s need QEMU %s); the guest agent\'s topology file '
        'gives NCCL the host\'s' % (
            ', '.join(inexact), min_versions.text(qemu_version),
            min_versions.text(min_versions.QEMU_PCIE_GEN5)))
