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

"""The KubeVirt sidecar recipe of "Optimizing GPU accelerated VMs with
KubeVirt", applied to the domain XML Nova wrote.

The recipe's hook takes the domain XML and returns it with, per host
NUMA node, a ``pcie-expander-bus`` (``pxb-pcie``) on the root bus whose
``<target><node>`` is that node's number, and each passthrough device of
the node moved onto a ``pcie-root-port`` of its own on that bus. Its
``busNr`` is chosen "carefully": the bus and the root ports' secondary
buses up to the next expander bus (or 254) belong to it, so the buses are
given from the top down, each as many numbers as it needs. Devices whose
host node is unknown stay where they were; nothing else changes (no
cliques: the recipe is about NUMA).

The recipe writes the *host* node number into ``<node>``: right only
where guest node N is host node N. Where Nova fitted guest cell 0 onto
host node 1, the guest is told the wrong node, or a node it does not
have, which libvirt refuses. Written with lxml from the recipe, not with
this project's code.
"""

from collections.abc import Mapping
import itertools

from lxml import etree

from lab import pci_xml

#: The highest bus number an expander bus's hierarchy may use.
TOP_BUS = 254
#: The recipe's example puts its first expander bus in slot 0x0a.
FIRST_SLOT = 0x0a
PCI_SLOTS = 32


def _pci_address(bus: int, slot: int) -> etree._Element:
    return etree.Element('address', type='pci', domain='0x0000',
                         bus='0x%02x' % bus, slot='0x%02x' % slot,
                         function='0x0')


def _free_root_slots(root: etree._Element) -> list[int]:
    used = {int(a.get('slot'), 16) for a in root.iterfind('./devices//address')
            if a.get('type') == 'pci' and int(a.get('bus', '0'), 16) == 0
            and a.getparent().tag != 'source'}
    return [s for s in range(FIRST_SLOT, PCI_SLOTS) if s not in used]


def apply(domain_xml: str | bytes, host_node: Mapping[str, int | None]
          ) -> str:
    """The recipe's XML: an expander bus per host node, ``<node>`` = it.

    :param host_node: host PCI address -> host NUMA node, as the operator
        reads it from the host (``/sys/bus/pci/devices/*/numa_node``).
    """
    if isinstance(domain_xml, str):
        domain_xml = domain_xml.encode()
    root = etree.fromstring(domain_xml)
    devices = root.find('./devices')
    by_node: dict[int, list[etree._Element]] = {}
    for device, address in pci_xml.passthrough(root):
        node = host_node.get(address)
        if node is not None:
            by_node.setdefault(node, []).append(device)
    indexes = [int(c.get('index')) for c in
               root.iterfind("./devices/controller[@type='pci']")]
    next_index = itertools.count(max(indexes, default=0) + 1)
    slots = iter(_free_root_slots(root))
    top = TOP_BUS
    for node, members in sorted(by_node.items()):
        bus_nr = top - len(members)
        top = bus_nr - 1
        pxb = etree.SubElement(devices, 'controller', type='pci',
                               index=str(next(next_index)),
                               model='pcie-expander-bus')
        etree.SubElement(pxb, 'model', name='pxb-pcie')
        target = etree.SubElement(pxb, 'target', busNr=str(bus_nr))
        etree.SubElement(target, 'node').text = str(node)
        pxb.append(_pci_address(0, next(slots)))
        for slot, device in enumerate(members):
            index = next(next_index)
            port = etree.SubElement(devices, 'controller', type='pci',
                                    index=str(index), model='pcie-root-port')
            etree.SubElement(port, 'model', name='pcie-root-port')
            port.append(_pci_address(int(pxb.get('index')), slot))
            old = device.find('./address')
            if old is not None:
                device.remove(old)
            device.append(_pci_address(index, 0))
    return etree.tostring(root, encoding='unicode')
