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

"""NCCL's topology XML for the tree NCCL is to see.

The file gives each guest NUMA node a ``<cpu>``, under it one synthetic
``<pci>`` switch per host switch level, and the guest's GPUs and NICs
(their real guest bus IDs) under the switches they share on the host;
written in the shape NCCL dumps it, which its parser reads (:mod:`.nccl`).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import guest_sysfs
from nova_gpu_p2p_guest import nccl
from nova_gpu_p2p_guest import nccl_tree

#: Synthetic switch bus IDs are in PCI domain ffff. A QEMU q35 guest has
#: one PCI segment, 0000, expander buses included, so no bus ID that NCCL
#: reads from the guest's sysfs can be one of them (public clouds' topology
#: files use ffff:ff:xx.0 the same way). NCCL keys its switch nodes by bus
#: ID, so each host switch level gets its own.
SYNTHETIC_DOMAIN = 0xffff


def _element(name: str, attrs: Sequence[Tuple[str, str]]) -> str:
    for key, value in attrs:
        if len(value) > nccl.MAX_VALUE or not nccl.SAFE_VALUE.match(value):
            raise errors.Problem('cannot write %s=%s for NCCL'
                                 % (key, errors.quoted(value)))
    return '<%s%s' % (name, ''.join(' %s="%s"' % kv for kv in attrs))


def _link_attrs(link: dict) -> List[Tuple[str, str]]:
    attrs = []
    speed, width = link.get('link_speed'), link.get('link_width')
    if speed is not None and nccl.LINK_SPEED.match(speed):
        attrs.append(('link_speed', speed))
    if width:
        attrs.append(('link_width', str(width)))
    return attrs


def cpu_attrs(cpu: Optional[dict], proc_root: str) -> List[Tuple[str, str]]:
    """The ``<cpu>`` identity: the host's where the description has it.

    NCCL's socket-to-socket bandwidth follows the CPU model; a guest with
    a named CPU model reports that model's CPUID, not the host's, so the
    host's, from the description, wins over the guest's ``/proc/cpuinfo``.
    """
    if cpu is None:
        return guest_sysfs.cpu_type(proc_root)
    return [('arch', 'x86_64'), ('vendor', cpu['vendor']),
            ('familyid', str(cpu['familyid'])),
            ('modelid', str(cpu['modelid']))]


def render(tree: nccl_tree.Tree, found: List[guest_sysfs.Found],
           switches: dict, sysfs_root: str, proc_root: str,
           cpu: Optional[dict] = None) -> str:
    """NCCL's topology XML for ``tree``, in the shape NCCL dumps it."""
    by_index = {f.index: f for f in found}
    children: Dict[Optional[nccl_tree.Key], List[nccl_tree.Key]] = {}
    wanted = set()
    for index in range(len(tree.devices)):
        wanted.add((nccl_tree.DEVICE, index))
        wanted.update(tree.above((nccl_tree.DEVICE, index)))
    for key in sorted(wanted, key=_order(tree)):
        children.setdefault(tree.parent[key], []).append(key)
    synthetic: Dict[nccl_tree.Key, str] = {}

    def busid(key: nccl_tree.Key) -> str:
        if key not in synthetic:
            n = len(synthetic)
            synthetic[key] = '%04x:%02x:%02x.0' % (SYNTHETIC_DOMAIN,
                                                   n // 32, n % 32)
        return synthetic[key]

    lines = ['<system version="%d" name="nova-gpu-p2p">'
             % nccl.XML_VERSION]
    kind = cpu_attrs(cpu, proc_root)

    def emit(key: nccl_tree.Key, depth: int) -> None:
        pad = ' ' * (2 * depth)
        if key[0] == nccl_tree.SWITCH:
            attrs = [('busid', busid(key)),
                     ('class', nccl.PCI_BRIDGE_CLASS)]
            attrs += _link_attrs(switches[key[2]])
        else:
            device = by_index[key[1]]
            attrs = [('busid', device.address)]
            attrs += [(k, device.ids[k]) for k in (
                'class', 'vendor', 'device', 'subsystem_vendor',
                'subsystem_device') if k in device.ids]
            attrs += _link_attrs(device.device)
        below = children.get(key, [])
        if not below:
            lines.append(pad + _element('pci', attrs) + '/>')
            return
        lines.append(pad + _element('pci', attrs) + '>')
        for child in below:
            emit(child, depth + 1)
        lines.append(pad + '</pci>')

    tops = children.get(None, [])
    for node in sorted({_numa(tree, key) for key in tops}):
        attrs = [('numaid', str(node))]
        affinity = guest_sysfs.cpu_affinity(sysfs_root, node)
        if affinity:
            attrs.append(('affinity', affinity))
        lines.append('  ' + _element('cpu', attrs + kind) + '>')
        for key in tops:
            if _numa(tree, key) == node:
                emit(key, 2)
        lines.append('  </cpu>')
    lines.append('</system>')
    return '\n'.join(lines) + '\n'


def _numa(tree: nccl_tree.Tree, key: nccl_tree.Key) -> int:
    if key[0] == nccl_tree.SWITCH:
        return key[1]
    return tree.devices[key[1]]['numa_node']


def _order(tree: nccl_tree.Tree):
    """Children in the order their first device is described."""
    first: Dict[nccl_tree.Key, int] = {}
    for index in range(len(tree.devices)):
        device = (nccl_tree.DEVICE, index)
        for key in [device] + tree.above(device):
            first.setdefault(key, index)
    return lambda key: (first[key], key[0] == nccl_tree.DEVICE)
