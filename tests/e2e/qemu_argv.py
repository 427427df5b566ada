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

"""What QEMU would be told, checked against what the domain XML asks.

``virsh domxml-to-native qemu-argv`` makes libvirtd translate a domain
into the QEMU command line it would run, so a wrong or ignored element
shows there without a GPU or a guest. This module is pure (no libvirt):

* :func:`expectations` reads the domain XML: each PCI hostdev's source
  address, clique (through its ``<qemu:override>`` alias), root port and
  expander bus, each expander's busNr and guest node, and the host nodes
  Nova bound each guest cell to;
* :func:`parse_devices` reads the ``-device`` arguments libvirt printed;
* :func:`argv_problems` compares the two: per GPU a ``vfio-pci`` with
  ``host=`` its source and the clique, per expander a ``pxb-pcie`` with
  ``bus_nr`` and ``numa_node``, each ``vfio-pci`` on the root port (by
  slot) of the expected ``pxb-pcie``;
* :func:`topology_problems` and :func:`clique_problems` judge the XML
  against the corpus host itself, so XML that is wrong but consistent
  with its own command line still fails;
* :func:`adapt_for_this_host` makes the only two changes libvirtd needs
  on a one-node machine without /dev/vfio (see :data:`ADAPTATIONS`).
"""

import collections.abc
import dataclasses
import itertools
import json
import shlex

from lxml import etree

from tests.fixtures import qemu_override

#: Link classes at or under the default ``[gpu_p2p] p2p_level`` (PXB).
P2P_CLASSES = frozenset(('NV', 'PIX', 'PXB'))
#: What :func:`adapt_for_this_host` changes, for logs and test details.
ADAPTATIONS = (
    '<numatune> host nodesets mapped to node 0 (libvirtd checks them '
    'against this machine: "NUMA node N is unavailable")',
    '<driver name="vfio"/> added to PCI hostdevs without a driver (Nova '
    'leaves it out; without /dev/vfio libvirt says "invalid PCI '
    'passthrough type \'default\'")',
)


def _address(element: etree._Element | None) -> str | None:
    if element is None:
        return None
    return '%04x:%02x:%02x.%x' % tuple(
        int(element.get(name, '0'), 16)
        for name in ('domain', 'bus', 'slot', 'function'))


@dataclasses.dataclass(frozen=True)
class Expander:
    """A pcie-expander-bus controller."""

    index: int
    bus_nr: int
    node: int | None


@dataclasses.dataclass(frozen=True)
class Hostdev:
    """A PCI hostdev and where the XML puts it."""

    source: str
    alias: str | None
    clique: int | None
    #: Guest bus (controller index) of the device; None: libvirt picks.
    bus: int | None
    #: Index of that controller when it is a pcie-root-port.
    root_port: int | None = None
    #: Slot of that root port on its parent bus.
    root_port_slot: int | None = None
    #: Index of the pcie-expander-bus the root port sits on.
    expander: int | None = None


@dataclasses.dataclass
class Expectations:
    """What one domain XML asks of libvirt and QEMU."""

    hostdevs: dict[str, Hostdev]
    expanders: dict[int, Expander]
    #: Guest cell -> host NUMA nodes Nova bound its memory to.
    cell_host_nodes: dict[int, frozenset[int]]
    #: Problems found in the XML itself (dangling references...).
    problems: list[str]


def _nodeset(text: str) -> frozenset[int]:
    nodes = set()
    for part in text.split(','):
        if '-' in part:
            low, high = part.split('-')
            nodes.update(range(int(low), int(high) + 1))
        elif part.strip():
            nodes.add(int(part))
    return frozenset(nodes)


def expectations(domain_xml: str | bytes) -> Expectations:
    """Read what the domain asks for; never the decision record.

    The ``<gpu_p2p:decision>`` metadata is our driver's own account and
    would agree with any mistake it made; only elements libvirt acts on
    are read here.
    """
    if isinstance(domain_xml, str):
        domain_xml = domain_xml.encode()
    root = etree.fromstring(domain_xml)
    problems = []
    controllers = {int(c.get('index')): c for c in
                   root.findall('./devices/controller[@type="pci"]')}
    expanders = {}
    for index, controller in controllers.items():
        if controller.get('model') != 'pcie-expander-bus':
            continue
        target = controller.find('./target')
        bus_nr = target.get('busNr') if target is not None else None
        node = target.findtext('./node') if target is not None else None
        if bus_nr is None:
            problems.append('pcie-expander-bus %d has no busNr' % index)
            continue
        expanders[index] = Expander(
            index, int(bus_nr), int(node) if node is not None else None)
    cliques = qemu_override.cliques_by_alias(root)
    hostdevs = {}
    for element in root.findall('./devices/hostdev[@type="pci"]'):
        source = _address(element.find('./source/address'))
        alias_element = element.find('./alias')
        alias = (alias_element.get('name')
                 if alias_element is not None else None)
        guest = element.find('./address[@type="pci"]')
        bus = int(guest.get('bus'), 16) if guest is not None else None
        hostdev = Hostdev(source, alias, cliques.pop(alias, None), bus)
        port = controllers.get(bus) if bus is not None else None
        if bus is not None and port is None:
            problems.append('hostdev %s on guest bus %d: no such controller'
                            % (source, bus))
        if port is not None and port.get('model') == 'pcie-root-port':
            parent = port.find('./address[@type="pci"]')
            parent_bus = (int(parent.get('bus'), 16)
                          if parent is not None else None)
            hostdev = dataclasses.replace(
                hostdev, root_port=bus,
                root_port_slot=(int(parent.get('slot'), 16)
                                if parent is not None else None),
                expander=parent_bus if parent_bus in expanders else None)
        hostdevs[source] = hostdev
    for alias in cliques:
        problems.append('clique for alias %s, which names no PCI hostdev'
                        % alias)
    cells = {}
    for memnode in root.findall('./numatune/memnode'):
        cells[int(memnode.get('cellid'))] = _nodeset(memnode.get('nodeset'))
    return Expectations(hostdevs, expanders, cells, problems)


def _value(text: str) -> int | str | bool:
    if text in ('on', 'true'):
        return True
    if text in ('off', 'false'):
        return False
    try:
        return int(text, 0)
    except ValueError:
        return text


def parse_device(arg: str) -> dict:
    """One ``-device`` argument: JSON (libvirt 8+) or ``driver,k=v``."""
    if arg.startswith('{'):
        return json.loads(arg)
    driver, _, rest = arg.partition(',')
    device = {'driver': driver}
    # ",," escapes a comma inside a value.
    for item in rest.replace(',,', '\0').split(','):
        if item:
            key, _, value = item.partition('=')
            device[key] = _value(value.replace('\0', ','))
    return device


def parse_devices(argv: str) -> list[dict]:
    """Every ``-device`` of a ``domxml-to-native qemu-argv`` output."""
    words = shlex.split(argv)
    return [parse_device(words[i + 1]) for i, word in enumerate(words[:-1])
            if word == '-device']


def _host(device: dict) -> str | None:
    host = device.get('host')
    if not isinstance(host, str):
        return None
    return host if host.count(':') == 2 else '0000:' + host


def _slot(device: dict) -> int | None:
    addr = device.get('addr')
    if isinstance(addr, int):
        return addr
    if isinstance(addr, str):
        return int(addr.split('.')[0], 16)
    return None


def argv_problems(expected: Expectations,
                  devices: collections.abc.Sequence[dict]) -> list[str]:
    """Where QEMU's devices differ from what the domain XML asked."""
    problems = []
    by_id = {d['id']: d for d in devices if 'id' in d}
    vfio = collections.defaultdict(list)
    for device in devices:
        if device.get('driver') == 'vfio-pci':
            vfio[_host(device)].append(device)
    pxbs = [d for d in devices if d.get('driver') == 'pxb-pcie']
    pxb_by_nr = collections.defaultdict(list)
    for pxb in pxbs:
        pxb_by_nr[pxb.get('bus_nr')].append(pxb)
    for expander in expected.expanders.values():
        found = pxb_by_nr.get(expander.bus_nr, [])
        if len(found) != 1:
            problems.append(
                'expander bus %d (busNr %d): %d pxb-pcie with bus_nr %d; '
                'pxb-pcie bus_nr in QEMU: %s' % (
                    expander.index, expander.bus_nr, len(found),
                    expander.bus_nr, sorted(p.get('bus_nr') for p in pxbs)))
        elif found[0].get('numa_node') != expander.node:
            problems.append(
                'pxb-pcie bus_nr %d: numa_node %s, the XML says <node>%s'
                % (expander.bus_nr, found[0].get('numa_node'),
                   expander.node))
    wanted_nrs = {e.bus_nr for e in expected.expanders.values()}
    for pxb in pxbs:
        if pxb.get('bus_nr') not in wanted_nrs:
            problems.append('pxb-pcie %s with bus_nr %s: no such expander '
                            'bus in the XML' % (pxb.get('id'),
                                                pxb.get('bus_nr')))
    for source, hostdev in sorted(expected.hostdevs.items()):
        found = vfio.pop(source, [])
        if len(found) != 1:
            problems.append('hostdev %s: %d vfio-pci with host=%s'
                            % (source, len(found), source))
            continue
        device = found[0]
        clique = device.get(qemu_override.CLIQUE_PROPERTY)
        if clique != hostdev.clique:
            problems.append('vfio-pci %s: %s=%s, the XML asks %s' % (
                source, qemu_override.CLIQUE_PROPERTY, clique, hostdev.clique))
        problems.extend(_bus_problems(expected, hostdev, device, by_id))
    for source, extra in sorted(vfio.items(), key=lambda i: str(i[0])):
        problems.append('vfio-pci host=%s (%d): no such hostdev in the XML'
                        % (source, len(extra)))
    return problems


def _bus_problems(expected: Expectations, hostdev: Hostdev, device: dict,
                  by_id: dict[str, dict]) -> list[str]:
    """The chain vfio-pci -> root port -> pxb-pcie, as the XML says."""
    source = hostdev.source
    port = by_id.get(device.get('bus'))
    pxb = by_id.get(port.get('bus')) if port is not None else None
    on_pxb = pxb is not None and pxb.get('driver') == 'pxb-pcie'
    if hostdev.expander is None:
        if on_pxb:
            return ['vfio-pci %s: under pxb-pcie bus_nr %s, the XML puts '
                    'it on no expander bus' % (source, pxb.get('bus_nr'))]
        return []
    want = expected.expanders[hostdev.expander]
    if port is None or port.get('driver') != 'pcie-root-port':
        return ['vfio-pci %s: bus %s is %s, not a pcie-root-port' % (
            source, device.get('bus'),
            port.get('driver') if port is not None else 'no device')]
    problems = []
    if not on_pxb or pxb.get('bus_nr') != want.bus_nr:
        problems.append(
            'vfio-pci %s: root port %s sits on %s, the XML puts it under '
            'the pxb-pcie with bus_nr %d' % (
                source, port.get('id'), port.get('bus') if not on_pxb
                else 'pxb-pcie bus_nr %s' % pxb.get('bus_nr'),
                want.bus_nr))
    if _slot(port) != hostdev.root_port_slot:
        problems.append(
            'vfio-pci %s: on the root port in slot %s, the XML puts it on '
            'the one in slot %s (controller %s)' % (
                source, _slot(port), hostdev.root_port_slot,
                hostdev.root_port))
    return problems


def topology_problems(
        expected: Expectations,
        host_node: collections.abc.Mapping[str, int | None],
        root_complex: collections.abc.Mapping[str, str],
        affinity: str) -> list[str]:
    """The XML's placement against the host's real device locality.

    ``host_node`` and ``root_complex`` come from the corpus host, not
    from the XML: a device put under the wrong guest node is caught even
    when the XML and QEMU's command line agree about it. ``affinity`` is
    the flavor's ``hw:gpu_numa_affinity``.
    """
    problems = []
    if affinity == 'none':
        if expected.expanders:
            problems.append('hw:gpu_numa_affinity none, yet expander buses '
                            '%s' % sorted(expected.expanders))
        return problems
    groups = collections.defaultdict(set)
    for source, hostdev in sorted(expected.hostdevs.items()):
        node = host_node.get(source)
        cells = sorted(c for c, nodes in expected.cell_host_nodes.items()
                       if node in nodes)
        if hostdev.expander is None:
            if cells:
                problems.append(
                    '%s (host node %s) stays off the expander buses, yet '
                    'guest cell %s is bound to its node' % (
                        source, node, cells[0]))
            continue
        guest = expected.expanders[hostdev.expander].node
        groups[hostdev.expander].add(root_complex.get(source))
        if guest not in cells:
            problems.append(
                '%s is on host node %s, placed under guest node %s, whose '
                'memory Nova bound to host nodes %s' % (
                    source, node, guest, sorted(
                        expected.cell_host_nodes.get(guest, ()))))
    for index, complexes in sorted(groups.items()):
        if len(complexes) != 1:
            problems.append('expander bus %d holds devices of root '
                            'complexes %s' % (index, sorted(complexes)))
    for a, b in itertools.combinations(sorted(groups), 2):
        if groups[a] == groups[b]:
            problems.append('expander buses %d and %d both hold root '
                            'complex %s' % (a, b, sorted(groups[a])[0]))
    return problems


def clique_problems(
        expected: Expectations, clique: str,
        gpus: collections.abc.Collection[str],
        link: collections.abc.Callable[[str, str], str],
        consumer: bool = False) -> list[str]:
    """The cliques against ``hw:gpu_p2p_clique`` and the host's links.

    :param gpus: the host's NVIDIA display-class functions.
    :param link: the corpus' link class of two GPUs (``PIX``..``SYS``).
    :param consumer: the GPUs are GeForce or TITAN cards: no clique at all,
        whatever the flavor asks.
    """
    problems = []
    got = {s: h.clique for s, h in expected.hostdevs.items()}
    mine = sorted(s for s in got if s in gpus)
    for source in sorted(set(got) - set(mine)):
        if got[source] is not None:
            problems.append('clique %s on %s, not an NVIDIA GPU'
                            % (got[source], source))
    if consumer:
        problems.extend('clique %s on %s, a consumer GPU' % (got[s], s)
                        for s in mine if got[s] is not None)
    elif clique == 'none':
        problems.extend('clique %s on %s, the flavor asks none'
                        % (got[s], s) for s in mine if got[s] is not None)
    elif clique.isdigit():
        problems.extend('clique %s on %s, the flavor asks %s'
                        % (got[s], s, clique) for s in mine
                        if got[s] != int(clique))
    else:
        peers = {s: [t for t in mine if t != s and link(s, t) in P2P_CLASSES]
                 for s in mine}
        for source in mine:
            if not peers[source] and got[source] is not None:
                problems.append('clique %s on %s, which has no P2P peer '
                                'in the guest' % (got[source], source))
        for a, b in itertools.combinations(mine, 2):
            near = link(a, b) in P2P_CLASSES
            if near and (got[a] is None or got[a] != got[b]):
                problems.append('%s and %s are %s, yet cliques %s and %s'
                                % (a, b, link(a, b), got[a], got[b]))
            if not near and got[a] is not None and got[a] == got[b]:
                problems.append('%s and %s are %s, yet share clique %s'
                                % (a, b, link(a, b), got[a]))
    return problems


def adapt_for_this_host(domain_xml: str | bytes) -> bytes:
    """A copy libvirtd on a one-node machine without /dev/vfio accepts.

    Exactly :data:`ADAPTATIONS`, nothing else: every element the checks
    read is left as Nova and our driver wrote it.
    """
    if isinstance(domain_xml, str):
        domain_xml = domain_xml.encode()
    root = etree.fromstring(domain_xml)
    for element in root.iterfind('./numatune/*[@nodeset]'):
        element.set('nodeset', '0')
    for hostdev in root.iterfind('./devices/hostdev[@type="pci"]'):
        if hostdev.find('./driver') is None:
            source = hostdev.find('./source')
            source.addnext(etree.Element('driver', name='vfio'))
    return etree.tostring(root)
