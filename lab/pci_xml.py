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

"""Reading a libvirt domain's passthrough devices, for every module here that
scores or rewrites domain XML (ours, Nova's, the baselines')."""

import itertools

from lxml import etree


def number(text: str | None) -> int:
    """A PCI address attribute as libvirt writes it (``0x02``); 0 if absent."""
    return int(text, 16) if text is not None else 0


def address(element: etree._Element) -> str:
    """``dddd:bb:ss.f`` of an ``<address>`` element."""
    return '%04x:%02x:%02x.%x' % tuple(
        number(element.get(name))
        for name in ('domain', 'bus', 'slot', 'function'))


def passthrough(root: etree._Element) -> list[tuple[etree._Element, str]]:
    """Each PCI hostdev and hostdev interface, with its host address."""
    found = []
    for device in itertools.chain(
            root.iterfind("./devices/hostdev[@type='pci']"),
            root.iterfind("./devices/interface[@type='hostdev']")):
        source = device.find('./source/address')
        if source is not None and source.get('type', 'pci') == 'pci':
            found.append((device, address(source)))
    return found
