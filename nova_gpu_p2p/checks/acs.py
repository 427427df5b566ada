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

"""ACS on PCIe switch ports between GPUs: what it does to P2P, and costs.

A downstream port with P2P Request Redirect or Egress Control sends P2P
between the GPUs below it up through the root complex; a port whose
config space could not be read counts as one (fail closed).
"""

from collections.abc import Iterable
import itertools

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model

#: How check_acs names what a port enables.
_ROUTE_NAMES = {
    link_class.AcsRoute.REQUEST_REDIRECT: 'P2P Request Redirect',
    link_class.AcsRoute.EGRESS_CONTROL: 'P2P Egress Control',
}


def _acs_ecap_fix(topology: model.HostTopology, ports: list[str]) -> str:
    """The kernel parameter, or the ports' ACS control without redirect.

    The value to write is this host's; how to write it is in the docs.
    """
    settings = ', '.join(
        '%s to 0x%04x' % (port, topology.functions[port].acs.control
                          & ~model.Acs.REDIRECT_BITS)
        for port in ports)
    return ('if your security model allows P2P between these devices '
            'without the IOMMU seeing it, turn the redirect off: boot '
            'with pci=disable_acs_redir=%s (their IOMMU groups may then '
            'merge), or for a test set the ACS control register of %s '
            '(%s); or keep it and accept PHB'
            % (';'.join(ports), settings,
               result.see(result.Doc.ACS_REDIRECT)))


def _acs_cost(topology: model.HostTopology,
              pairs: Iterable[tuple[str, str]],
              acs_policy: link_class.AcsPolicy,
              level: link_class.LinkClass) -> str:
    """What the policy makes of pairs whose traffic ACS sends up."""
    if acs_policy is not link_class.AcsPolicy.ROUTE:
        return ('; acs_policy=ignore still counts them as switch-local, so '
                'cliques hold pairs whose P2P traffic is in fact routed')
    lost = sorted(
        '%s-%s' % pair for pair in pairs
        if link_class.p2p_capable(topology, *pair, level,
                                  link_class.AcsPolicy.IGNORE)
        and not link_class.p2p_capable(topology, *pair, level,
                                       link_class.AcsPolicy.ROUTE))
    return ('; acs_policy=route counts those pairs as PHB%s'
            % (', so at p2p_level %s these pairs share no clique: %s'
               % (level.name, ', '.join(lost)) if lost else ''))


def _unknown_acs(topology: model.HostTopology,
                 pairs: list[tuple[str, str]],
                 acs_policy: link_class.AcsPolicy,
                 level: link_class.LinkClass) -> result.Check:
    """One line for every port whose ACS could not be read."""
    message = ('PCI config space could not be read, so ACS is unknown and '
               'counted as P2P Request Redirect on (fail closed)')
    if not pairs:
        return result.success('ACS', message + ', which changes nothing '
                              'here: no two GPUs share a PCIe switch')
    message += (': P2P between %d GPU pairs behind a PCIe switch is taken '
                'to go up through the root complex' % len(pairs))
    return result.warning(
        'ACS',
        message + _acs_cost(topology, pairs, acs_policy, level),
        'let nova-compute\'s privsep daemon start (it needs CAP_SYS_ADMIN; '
        'see the privsep-helper lines in its log), and run as root (sudo '
        'nova-gpu-p2p check) to see the ACS settings (%s)'
        % result.see(result.Doc.ACS_UNKNOWN))


def check_acs(topology: model.HostTopology,
              acs_policy: link_class.AcsPolicy,
              level: link_class.LinkClass) -> list[result.Check]:
    """ACS that sends P2P between GPUs up, or is unknown; what it costs."""
    gpus = [g.address for g in topology.gpus()]
    if len(gpus) < 2:
        return []
    by_port: dict[str, set[str]] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    routes: dict[str, tuple[link_class.AcsRoute, ...]] = {}
    unknown: list[tuple[str, str]] = []
    for a, b in itertools.combinations(gpus, 2):
        if link_class.pcie_class(topology, a, b) >= link_class.LinkClass.PHB:
            continue  # through the root complex anyway
        found = link_class.routing_ports(topology, a, b)
        if any(link_class.AcsRoute.UNKNOWN in why for why in found.values()):
            unknown.append((a, b))
        for port, why in found.items():
            if link_class.AcsRoute.UNKNOWN in why:
                continue
            by_port.setdefault(port, set()).update((a, b))
            pairs.setdefault(port, []).append((a, b))
            routes[port] = why
    checks = []
    if unknown or not topology.config_space_read:
        checks.append(_unknown_acs(topology, unknown, acs_policy, level))
    for port in sorted(by_port):
        below = sorted(g for g in by_port[port]
                       if port in {f.address
                                   for f in topology.ancestors(g)})
        peers = sorted(by_port[port] - set(below))
        message = ('switch downstream port %s has ACS %s on: P2P between '
                   '%s and %s %s through the root complex' % (
                       port, ' and '.join(_ROUTE_NAMES[r]
                                          for r in routes[port]),
                       ', '.join(below), ', '.join(peers) or 'each other',
                       'is blocked or goes up'
                       if link_class.AcsRoute.EGRESS_CONTROL in routes[port]
                       else 'goes up'))
        checks.append(result.warning(
            port,
            message + _acs_cost(topology, pairs[port], acs_policy, level),
            _acs_ecap_fix(topology, [port])))
    if not checks:
        return [result.success('ACS', 'no P2P Request Redirect or Egress '
                               'Control between GPUs behind a PCIe switch')]
    return checks
