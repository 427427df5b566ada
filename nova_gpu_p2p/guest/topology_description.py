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

"""What the guest is told about its devices' host topology, via fw_cfg.

Our layout puts each placed device on its own root port of an expander
bus, so inside the guest every pair of them is ``PHB`` or farther, and
NCCL there uses neither P2P nor GPUDirect RDMA, whatever the host has.
The description tells a guest agent, for each placed device, where the
guest finds it (the expander bus's busNr and the root port's slot, which
our XML fixes), what it is, and the host PCIe path above it, so that the
agent can hand NCCL a topology with the host's shape.

It never names host PCI addresses or anything about other instances: the
host switches are opaque IDs (``s0``, ``s1``, ... in the order this guest
meets them), with the host's link speed and width as NCCL reads them
on the host: each the lower of the function's own and its port's
(:mod:`..topology.nccl_links`). ``cpu``, where the host's is known, is the
host CPU's identity as NCCL reads it (:mod:`..topology.host_cpu`): the
agent writes it whatever CPU model the guest runs.

Format version 1 (JSON; see ``doc/source/guest-topology.rst``)::

    {"version": 1,
     "devices": [{"bus_nr": 254, "slot": 0, "role": "gpu",
                  "vendor": "0x10de", "class": "0x030200", "clique": 0,
                  "numa_node": 0, "switches": ["s0"],
                  "link_speed": "32.0 GT/s PCIe", "link_width": 16}, ...],
     "switches": {"s0": {"link_speed": "32.0 GT/s PCIe",
                         "link_width": 16}},
     "pairs": [[0, 1, "PIX"], ...],
     "cpu": {"vendor": "GenuineIntel", "familyid": 6, "modelid": 143}}

``pairs`` gives the host link class of every pair of devices (indexes
into ``devices``), ACS and NVLink included. libvirt passes the entry to
QEMU without escaping commas, so the JSON travels base64-encoded.
"""

import base64
import itertools
import json

from nova_gpu_p2p import exception
from nova_gpu_p2p.guest import devices as devices_mod
from nova_gpu_p2p.guest import expander_buses
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import nccl_links

FORMAT_VERSION = 1
#: The fw_cfg file the guest reads under /sys/firmware/qemu_fw_cfg/by_name.
ENTRY_NAME = 'opt/org.openstack.nova-gpu-p2p/topology'
#: The largest entry text we emit: 16 GPUs and 8 NICs need about a third of
#: it, and Linux takes at most 128 KiB in one QEMU argument.
MAX_ENTRY_SIZE = 32 * 1024


def _switches_above(topology: model.HostTopology,
                    address: str) -> list[model.PCIFunction]:
    """The host switches above a device, nearest the root first.

    A switch is named by its upstream port, whose link is the switch's
    link towards the root.
    """
    return [f for f in reversed(topology.ancestors(address))
            if f.port_type is model.PortType.UPSTREAM]


def describe(buses: expander_buses.BusLayout,
             devices: tuple[devices_mod.GuestDevice, ...],
             cliques: dict[str, int], host: host_gpus.HostGPUs,
             acs_policy: link_class.AcsPolicy,
             host_cpu: dict | None = None) -> dict:
    """The description of the devices ``buses`` placed, as plain data.

    Only devices the host topology knows are ever placed, so each has a
    host function to describe.
    """
    topology = host.topology
    kinds = {d.address: d.kind for d in devices}
    switch_ids: dict[str, str] = {}
    switches: dict[str, dict] = {}
    described = []
    placed = [port.device for bus in buses.buses for port in bus.ports]
    for bus in buses.buses:
        for port in bus.ports:
            function = topology.functions[port.device]
            ids = []
            for switch in _switches_above(topology, port.device):
                if switch.address not in switch_ids:
                    switch_ids[switch.address] = 's%d' % len(switch_ids)
                    switches[switch_ids[switch.address]] = (
                        nccl_links.nccl_link(topology, switch))
                ids.append(switch_ids[switch.address])
            described.append({
                'bus_nr': bus.bus_nr, 'slot': port.slot,
                'role': kinds[port.device].value,
                'vendor': '0x%04x' % function.vendor,
                'class': '0x%06x' % function.class_code,
                'clique': cliques.get(port.device),
                'numa_node': bus.guest_node, 'switches': ids,
                **nccl_links.nccl_link(topology, function)})
    pairs = [[i, j, host.link(placed[i], placed[j], acs_policy).name]
             for i, j in itertools.combinations(range(len(placed)), 2)]
    description = {'version': FORMAT_VERSION, 'devices': described,
                   'switches': switches, 'pairs': pairs}
    if host_cpu is not None:
        description['cpu'] = dict(host_cpu)
    return description


def encode(description: dict) -> str:
    """The fw_cfg entry text: compact JSON, base64 (no commas for QEMU).

    :raises DescriptionTooLarge: beyond :data:`MAX_ENTRY_SIZE`.
    """
    text = base64.b64encode(json.dumps(
        description, sort_keys=True, separators=(',', ':')).encode()
    ).decode('ascii')
    if len(text) > MAX_ENTRY_SIZE:
        raise exception.DescriptionTooLarge(
            'the guest topology description takes %d bytes, '
            'more than %d' % (len(text), MAX_ENTRY_SIZE))
    return text


def decode(text: str) -> dict:
    """The description back from an entry text (tests, the guest side)."""
    return json.loads(base64.b64decode(text, validate=True))
