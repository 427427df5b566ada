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

"""The link class of a GPU pair, in ``nvidia-smi topo -m`` terms.

The rule, computed from the PCI tree alone (NVLink comes from NVML):

* ``NV``: the pair is joined by NVLink.
* ``PIX``: the path between them crosses at most one PCIe switch.
* ``PXB``: it crosses several switches but no host bridge.
* ``PHB``: it crosses the host bridge of their shared root complex.
* ``NODE``: they hang off different root complexes of one NUMA node.
* ``SYS``: they are in different NUMA nodes.

With ``acs_policy = route``, ACS P2P Request Redirect or P2P Egress Control
enabled on a switch downstream port in the path forces the pair's requests
up to the root complex (or blocks them), so the pair is ``PHB`` at best. So
does a downstream port whose ACS could not be read: Linux turns Request
Redirect on whenever the IOMMU is on, and an unknown must not give a clique
that the hardware routes through the root complex (fail closed). ACS on a
root port changes nothing: traffic between root ports crosses the root
complex anyway.
"""

import enum
import functools

from nova_gpu_p2p.topology import model


@functools.total_ordering
class LinkClass(enum.Enum):
    """Nearest first; the order is what ``p2p_level`` compares against."""

    NV = 0
    PIX = 1
    PXB = 2
    PHB = 3
    NODE = 4
    SYS = 5

    def __lt__(self, other: 'LinkClass') -> bool:
        return self.value < other.value


class AcsPolicy(str, enum.Enum):
    ROUTE = 'route'
    IGNORE = 'ignore'


class AcsRoute(str, enum.Enum):
    """Why a switch downstream port sends peer traffic up, not across."""

    REQUEST_REDIRECT = 'request_redirect'
    EGRESS_CONTROL = 'egress_control'
    #: Config space unreadable: counted as Request Redirect on.
    UNKNOWN = 'unknown'


def _switch_of(bridge: model.PCIFunction) -> str | None:
    """The switch a bridge belongs to, named by its upstream port."""
    if bridge.port_type is model.PortType.UPSTREAM:
        return bridge.address
    if bridge.port_type is model.PortType.DOWNSTREAM:
        return bridge.parent
    return None


def _path(topology: model.HostTopology, a: str,
          b: str) -> tuple[list[model.PCIFunction], model.PCIFunction | None]:
    """Bridges between two functions of one root complex.

    Returns the bridges below the point where the two branches meet, and
    that meeting bridge (None where they meet only at the host bridge).
    """
    up_a = topology.ancestors(a)
    up_b = topology.ancestors(b)
    shared = {f.address for f in up_a} & {f.address for f in up_b}
    path = [f for f in up_a + up_b if f.address not in shared]
    meet = next((f for f in up_a if f.address in shared), None)
    return path, meet


def pcie_class(topology: model.HostTopology, a: str, b: str) -> LinkClass:
    """The pair's class from the PCI tree, ignoring ACS and NVLink."""
    fa, fb = topology.functions[a], topology.functions[b]
    if fa.root_complex != fb.root_complex:
        # Unknown nodes (firmware says -1) may be far apart: not NODE.
        if fa.numa_node is not None and fa.numa_node == fb.numa_node:
            return LinkClass.NODE
        return LinkClass.SYS
    path, meet = _path(topology, a, b)
    if meet is None:
        return LinkClass.PHB
    switches = {_switch_of(f) for f in path + [meet]} - {None}
    return LinkClass.PIX if len(switches) <= 1 else LinkClass.PXB


def port_routes(port: model.PCIFunction) -> tuple[AcsRoute, ...]:
    """What makes a switch downstream port route peer traffic up.

    Empty for other functions, and for a downstream port read without ACS
    or with neither bit enabled.
    """
    if port.port_type is not model.PortType.DOWNSTREAM:
        return ()
    if not port.acs_known:
        return (AcsRoute.UNKNOWN,)
    if port.acs is None:
        return ()
    routes = ((AcsRoute.REQUEST_REDIRECT, port.acs.request_redirect),
              (AcsRoute.EGRESS_CONTROL, port.acs.egress_control))
    return tuple(route for route, enabled in routes if enabled)


def routing_ports(topology: model.HostTopology, a: str,
                  b: str) -> dict[str, tuple[AcsRoute, ...]]:
    """Switch downstream ports between a and b that route P2P up, and why.

    In address order; empty where ACS lets the pair's traffic across.
    """
    path, _meet = _path(topology, a, b)
    found = {f.address: port_routes(f) for f in path}
    return {port: found[port] for port in sorted(found) if found[port]}


def effective_class(topology: model.HostTopology, a: str, b: str,
                    acs_policy: AcsPolicy = AcsPolicy.ROUTE) -> LinkClass:
    """The class that decides P2P: NVLink first, then PCIe with ACS."""
    if frozenset((a, b)) in topology.nvlink_pairs:
        return LinkClass.NV
    link = pcie_class(topology, a, b)
    if (acs_policy is AcsPolicy.ROUTE and link < LinkClass.PHB
            and routing_ports(topology, a, b)):
        return LinkClass.PHB
    return link


def p2p_capable(topology: model.HostTopology, a: str, b: str,
                level: LinkClass,
                acs_policy: AcsPolicy = AcsPolicy.ROUTE) -> bool:
    """Whether the pair counts as P2P capable at ``p2p_level``.

    An operator's static P2P answer for the pair wins over the tree.
    """
    override = topology.p2p_overrides.get(frozenset((a, b)))
    if override is not None:
        return override
    return effective_class(topology, a, b, acs_policy) <= level
