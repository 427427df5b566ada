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

"""The decision, recorded in the domain's ``<metadata>`` and in the log.

``virsh dumpxml`` then explains itself: the clique of each GPU, the
expander bus and guest cell of each device, the hole size, and why
anything fell back to Nova's layout.
"""

from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.guest import plan as plan_mod


def _placement(plan: plan_mod.GuestPlan) -> list[dict[str, str]]:
    """One attribute dict per device, in address order."""
    rows = []
    for device in sorted(plan.devices, key=lambda d: d.address):
        row = {'address': device.address, 'kind': device.kind.value}
        if device.numa_node is not None:
            row['host_numa_node'] = str(device.numa_node)
        if device.root_complex is not None:
            row['root_complex'] = device.root_complex
        if device.address in plan.cliques:
            row['clique'] = str(plan.cliques[device.address])
        placed = plan.buses.port_of(device.address)
        if placed is not None:
            bus, port = placed
            row['expander_bus'] = str(bus.index)
            row['root_port'] = str(port.index)
            row['guest_node'] = str(bus.guest_node)
        initiators = plan.grace.nodeset(device.address)
        if initiators is not None:
            row['initiator_nodes'] = initiators
        rows.append(row)
    return rows


class DecisionRecord(vconfig.LibvirtConfigObject):
    """``<gpu_p2p:decision>`` under the domain's ``<metadata>``."""

    def __init__(self, plan: plan_mod.GuestPlan) -> None:
        super().__init__(root_name='decision', ns_prefix='gpu_p2p',
                         ns_uri=libvirt_config.GPU_P2P_NS)
        self.plan = plan

    def _child(self, parent, name: str, attributes: dict[str, str]):
        # Children inherit the root's namespace declaration: cheaper than
        # Nova's _new_node, which declares it again on every element.
        return etree.SubElement(
            parent, '{%s}%s' % (libvirt_config.GPU_P2P_NS, name), attributes)

    def format_dom(self):
        plan = self.plan
        root = super().format_dom()
        clique = plan.request.clique
        self._child(root, 'request', {
            'clique': (str(clique.clique_id) if clique.clique_id is not None
                       else clique.mode.value),
            'numa_affinity': plan.request.numa_affinity.value})
        for row in _placement(plan):
            self._child(root, 'device', row)
        for bus in plan.buses.buses:
            self._child(root, 'expander_bus', {
                'index': str(bus.index), 'bus_nr': str(bus.bus_nr),
                'guest_node': str(bus.guest_node),
                'host_numa_node': str(bus.host_numa_node),
                'host_group': bus.host_group})
        if plan.hole64 is not None and plan.hole64.size:
            self._child(root, 'pcihole64', {
                'size_kib': str(plan.hole64.size // 1024),
                'needed_kib': str(plan.hole64.needed // 1024)})
        for note in plan.notes:
            self._child(root, 'note', {}).text = note
        for item in plan.lost:
            self._child(root, 'lost', {}).text = item
        return root


def summary(plan: plan_mod.GuestPlan) -> str:
    """One line for the INFO log with the same content as the record."""
    parts = []
    for row in _placement(plan):
        text = row['address']
        if 'clique' in row:
            text += ' clique %s' % row['clique']
        if 'expander_bus' in row:
            text += ' on expander bus %s (guest node %s)' % (
                row['expander_bus'], row['guest_node'])
        if 'initiator_nodes' in row:
            text += ', memory on guest nodes %s' % row['initiator_nodes']
        parts.append(text)
    line = 'GPU P2P layout: %s' % ('; '.join(parts) or 'no devices')
    if plan.buses.buses:
        line += '. Expander buses: %s' % ', '.join(
            'index %d busNr %d node %d (%s)' % (
                b.index, b.bus_nr, b.guest_node, b.host_group)
            for b in plan.buses.buses)
    if plan.hole64 is not None and plan.hole64.size:
        line += '. pcihole64 %d GiB' % (plan.hole64.size >> 30)
    if plan.notes:
        line += '. Fallbacks: %s' % ' | '.join(plan.notes)
    if plan.lost:
        line += '. Lost: %s' % ' | '.join(plan.lost)
    return line
