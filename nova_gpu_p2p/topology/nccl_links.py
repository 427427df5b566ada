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

"""The PCIe link NCCL reads for a function on the host: its and its port's.

NCCL's ``ncclTopoGetXmlFromSys`` (NVIDIA/nccl v2.30.7
``src/graph/xml.cc`` lines 679-689 and 711-718) takes a device's
``max_link_speed`` and ``max_link_width`` and the same two files one level
up (``../``: the root port or switch downstream port above it), and keeps
the lower of each: a Gen5 card in a Gen4 slot is a Gen4 link to NCCL. It
does so for every ``<pci>`` node it walks: devices and switch upstream
ports alike. From 2.30.7 a GPU's link comes from NVML's current
generation and width instead (lines 663-676 and 703-708), which is the
negotiated link: the same lower of the two. The guest must be told these
values, not each function's own maximum, or its NCCL computes other
bandwidths than the host's.
"""

import re

from nova_gpu_p2p.topology import model

_GTS = re.compile(r'^\s*([0-9]+(?:\.[0-9]+)?) GT/s')


def gts(speed: str | None) -> float | None:
    """The GT/s of a ``max_link_speed`` text, as NCCL's ``sscanf`` reads it.

    None where it reads none (``Unknown``, empty, absent).
    """
    match = _GTS.match(speed or '')
    return float(match.group(1)) if match else None


def lower_speed(device: str | None, port: str | None) -> str | None:
    """NCCL's pick: the port's text where it is slower, else the device's.

    An unreadable speed counts as infinitely fast (NCCL's ``FLT_MAX``), so
    the other side's wins; where both are unreadable the device's text
    stays (NCCL then falls back to 60 per lane, ``kvDictPciGen``).
    """
    device_gts, port_gts = gts(device), gts(port)
    if port_gts is not None and (device_gts is None or port_gts < device_gts):
        return port
    return device


def lower_width(device: int | None, port: int | None) -> int | None:
    """The lower width; None where either is unknown.

    NCCL reads an unknown width as 0, ``min`` keeps the 0, and a 0 is read
    as x16 when bandwidths are computed (``topo.cc`` line 655): unknown,
    here None, which the guest agent leaves for NCCL to read itself.
    """
    if device is None or port is None:
        return None
    return min(device, port)


def nccl_link(topology: model.HostTopology,
              function: model.PCIFunction) -> dict:
    """``link_speed`` and ``link_width`` as NCCL reads them for ``function``.

    The port above is the function's parent bridge; a function on the
    root bus has none (its ``../`` is the host bridge directory, which has
    no link files) and keeps its own.
    """
    parent = (topology.functions.get(function.parent)
              if function.parent is not None else None)
    if parent is None:
        return {'link_speed': function.link_speed,
                'link_width': function.link_width}
    return {'link_speed': lower_speed(function.link_speed, parent.link_speed),
            'link_width': lower_width(function.link_width,
                                      parent.link_width)}
