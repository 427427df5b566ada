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

"""How good a guest layout is, judged from its domain XML alone.

The benchmark compares strategies (Nova's stock XML, the QEMU wrapper
script, the KubeVirt sidecar recipe, this driver) by what the guest would
actually get, so every number here comes from the emitted XML parsed
back (and the QEMU command line libvirt makes of it), and the host's
truth comes from the hand-written oracle (:data:`hosts.EXPECTED`) and the
host's topology, never from the planner's own variables. XML libvirt
refuses gives the guest nothing: it scores zero (``refused``).

Reading rules, as the guest sees them:

* a GPU's clique is the ``x-nv-gpudirect-clique`` of its ``vfio-pci``
  ``-device`` in the QEMU command line (:func:`argv_cliques`: what QEMU
  is told, after libvirt, and after a wrapper); without one, that of the
  ``<qemu:device>`` whose alias is the hostdev's alias; neither, no
  clique;
* a device's guest NUMA node is the ``<target><node>`` of the
  ``pcie-expander-bus`` its root port sits on; a device on the root bus
  (including one without a guest address: libvirt puts it on a root port
  of ``pcie-root``) has none, so it never matches its host node;
* a guest node matches a host node when ``<numatune><memnode>`` binds that
  guest cell to it; a ``<node>`` naming no guest cell matches nothing;
* two devices share a bus when they sit below the same expander bus; two
  devices on the root bus do not count: the guest cannot tell they are
  close to each other, since that bus also holds every other device;
* NCCL in the guest classifies a pair from the guest's sysfs tree, which
  :func:`guest_tree` lays out from the XML as q35 firmware numbers it
  (the root bus is host bridge ``pci0000:00`` on no NUMA node, an
  expander bus with busNr B is host bridge ``pci0000:BB`` on the node of
  its ``<node>``, buses below either numbered depth-first in slot order,
  from 1 and from B+1); with the guest agent, from the topology file the
  agent writes too (:mod:`lab.nccl_paths`).
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import contextlib
import dataclasses
import io
import itertools
import os
import tempfile

from lxml import etree

from lab import nccl_paths
from lab import pci_xml
from nova_gpu_p2p.guest import topology_description
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from tests.fixtures import hosts
from tests.fixtures import qemu_argv
from tests.fixtures import qemu_override

#: P2P capable at the default ``[gpu_p2p] p2p_level`` (PXB), judged with
#: the default ``acs_policy = route`` (hosts.EXPECTED's routed links).
P2P_CLASSES = frozenset(('PIX', 'PXB'))
EXPANDER_BUS = 'pcie-expander-bus'
#: The metrics, in the order the benchmark prints them.
METRICS = ('p2p_enabled', 'p2p_false', 'numa_match', 'gpu_nic_bus',
           'nccl_host_class')
#: Metrics whose goal is 0%: a hit is a fault.
GOAL_NONE = frozenset(('p2p_false',))
#: Guest sysfs ``class`` of passthrough devices, by role; bridges.
GUEST_CLASSES = {'gpu': '0x030200', 'nic': '0x020000'}
PCI_BRIDGE_CLASS = '0x060400'
#: Writes NCCL's topology file for a guest: its sysfs root (with the
#: fw_cfg entry) -> XML text; see :func:`nccl_with_agent`.
Agent = Callable[[str], str]


@dataclasses.dataclass(frozen=True)
class HostTruth:
    """What the host really is, for the devices a guest may get."""

    #: GPU host address -> host NUMA node (None: unknown).
    gpu_node: Mapping[str, int | None]
    #: GPU host address -> host root complex.
    gpu_root_complex: Mapping[str, str]
    #: NIC host address -> host NUMA node (None: unknown).
    nic_node: Mapping[str, int | None]
    #: NIC host address -> host root complex.
    nic_root_complex: Mapping[str, str]
    #: GPU pairs that are P2P capable on the host.
    p2p_pairs: frozenset[frozenset[str]]
    #: Host class in NCCL's terms (NODE is PHB, NV is NVL) of every
    #: GPU-GPU and GPU-NIC pair, ACS routed as ``acs_policy = route``.
    nccl_links: Mapping[frozenset[str], str] = dataclasses.field(
        default_factory=dict)

    @property
    def node(self) -> dict[str, int | None]:
        return {**self.gpu_node, **self.nic_node}


def host_truth(expected: hosts.Expected,
               nics: Mapping[str, tuple[int | None, str]],
               nvlink_pairs: Iterable[frozenset[str]] = (),
               gpu_nic_links: Mapping[frozenset[str], str] | None = None
               ) -> HostTruth:
    """The truth from the oracle, plus NIC facts the oracle lacks.

    :param nics: NIC address -> (host NUMA node, root complex), from the
        host's topology (hosts.EXPECTED lists NIC addresses only).
    :param nvlink_pairs: GPU pairs joined by NVLink; none on a host read
        from sysfs alone.
    :param gpu_nic_links: the host class (nvidia-smi terms, ACS routed)
        of GPU-NIC pairs, from the host's topology; GPU-NIC pairs left
        out are not scored by ``nccl_host_class``.
    """
    pairs = {frozenset((a, b))
             for a, b in itertools.combinations(expected.addresses, 2)
             if expected.link(a, b) in P2P_CLASSES}
    pairs.update(frozenset(p) for p in nvlink_pairs)
    if expected.consumer:
        # GeForce P2P in a VM reaches a mirror, not the peer: however
        # near, no pair is capable, and a clique among them is false.
        pairs = set()
    links = {frozenset((a, b)): expected.link(a, b)
             for a, b in itertools.combinations(expected.addresses, 2)}
    links.update((frozenset(p), 'NV') for p in nvlink_pairs)
    links.update(gpu_nic_links or {})
    return HostTruth(
        gpu_node={g.address: g.numa_node for g in expected.gpus},
        gpu_root_complex={g.address: g.root_complex for g in expected.gpus},
        nic_node={a: nics[a][0] for a in expected.nics if a in nics},
        nic_root_complex={a: nics[a][1] for a in expected.nics if a in nics},
        p2p_pairs=frozenset(pairs),
        nccl_links=nccl_paths.host_classes(links))


@dataclasses.dataclass(frozen=True)
class PlacedDevice:
    """One passthrough device as the guest sees it."""

    #: Host PCI address, ``dddd:bb:ss.f``.
    address: str
    #: Controller index of the expander bus it sits below; None: root bus.
    expander_bus: int | None
    #: The expander bus's ``<node>``; None on the root bus.
    guest_node: int | None
    #: Its x-nv-gpudirect-clique; None: none.
    clique: int | None


@dataclasses.dataclass(frozen=True)
class GuestView:
    devices: tuple[PlacedDevice, ...]
    #: Guest cell -> host NUMA nodes its memory is bound to.
    cell_host_nodes: Mapping[int, frozenset[int]]

    def device(self, address: str) -> PlacedDevice | None:
        return next((d for d in self.devices if d.address == address), None)


def _node_set(text: str) -> frozenset[int]:
    nodes = set()
    for part in text.split(','):
        low, _, high = part.strip().partition('-')
        nodes.update(range(int(low), int(high or low) + 1))
    return frozenset(nodes)


def _expander_bus_of(bus: int | None,
                     controllers: Mapping[int, etree._Element]
                     ) -> int | None:
    """The expander bus above guest bus ``bus``; None: the root bus."""
    seen = set()
    while bus is not None and bus not in seen:
        seen.add(bus)
        controller = controllers.get(bus)
        if controller is None or controller.get('model') == 'pcie-root':
            return None
        if controller.get('model') == EXPANDER_BUS:
            return bus
        address = controller.find('address')
        bus = (pci_xml.number(address.get('bus')) if address is not None
               else None)
    return None


def argv_cliques(argv: str) -> dict[str, int]:
    """Host address -> x-nv-gpudirect-clique of each ``vfio-pci``."""
    found = {}
    for device in qemu_argv.parse_devices(argv):
        clique = device.get(qemu_override.CLIQUE_PROPERTY)
        host = device.get('host')
        if device.get('driver') == 'vfio-pci' and isinstance(
                host, str) and isinstance(clique, int):
            found[host if host.count(':') == 2 else '0000:' + host] = clique
    return found


def parse(xml: etree._Element,
          cliques: Mapping[str, int] | None = None) -> GuestView:
    """Read the guest's view of its passthrough devices from the XML.

    :param cliques: host address -> clique, as QEMU's command line gives
        them (:func:`argv_cliques`); None: from ``<qemu:override>``.
    """
    controllers = {int(c.get('index')): c for c in xml.iterfind(
        "./devices/controller[@type='pci']") if c.get('index') is not None}
    by_alias = qemu_override.cliques_by_alias(xml)
    devices = []
    sources = [(dev, dev.find('./source/address'))
               for dev in xml.iterfind("./devices/hostdev[@type='pci']")]
    sources += [(dev, dev.find("./source/address[@type='pci']"))
                for dev in xml.iterfind(
                    "./devices/interface[@type='hostdev']")]
    for dev, source in sources:
        if source is None:
            continue
        guest = dev.find('./address')
        bus = _expander_bus_of(
            pci_xml.number(guest.get('bus')) if guest is not None else None,
            controllers)
        node = None
        if bus is not None:
            text = controllers[bus].findtext('./target/node')
            node = int(text) if text is not None else None
        address = pci_xml.address(source)
        if cliques is not None:
            clique = cliques.get(address)
        else:
            alias = dev.find('alias')
            clique = (by_alias.get(alias.get('name')) if alias is not None
                      else None)
        devices.append(PlacedDevice(address=address, expander_bus=bus,
                                    guest_node=node, clique=clique))
    cells = {int(memnode.get('cellid')): _node_set(memnode.get('nodeset'))
             for memnode in xml.iterfind('./numatune/memnode')}
    return GuestView(devices=tuple(sorted(devices, key=lambda d: d.address)),
                     cell_host_nodes=cells)


def topology_truth(expected: hosts.Expected,
                   topology: model.HostTopology) -> HostTruth:
    """:func:`host_truth` with the NIC facts read from the host topology.

    GPU-NIC classes are the host's link classes, ACS routed as
    ``acs_policy = route``.
    """
    nics = [a for a in expected.nics if a in topology.functions]
    return host_truth(expected, {
        a: (topology.functions[a].numa_node,
            topology.functions[a].root_complex) for a in nics},
        gpu_nic_links={
            frozenset((g, n)): link_class.effective_class(
                topology, g, n, link_class.AcsPolicy.ROUTE).name
            for g in expected.addresses for n in nics})


@dataclasses.dataclass(frozen=True)
class Share:
    """``hits`` of ``total``; no share where there is nothing to count."""

    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None

    def __str__(self) -> str:
        if not self.total:
            return 'n/a'
        return '%3.0f%% (%d/%d)' % (100.0 * self.hits / self.total,
                                    self.hits, self.total)

    def as_dict(self) -> dict:
        return {'hits': self.hits, 'total': self.total, 'share': self.value}


def _same_clique(a: PlacedDevice, b: PlacedDevice) -> bool:
    return a.clique is not None and a.clique == b.clique


def node_matches(device: PlacedDevice, host_node: int | None,
                 view: GuestView) -> bool:
    """Whether the guest puts the device on the cell of its host node."""
    if device.guest_node is None or host_node is None:
        return False
    return host_node in view.cell_host_nodes.get(device.guest_node, ())


def metrics(view: GuestView, truth: HostTruth) -> dict[str, Share]:
    """The four decision-quality shares of one guest (see module doc).

    * ``p2p_enabled``: of the guest's GPU pairs that are P2P capable on
      the host, those in one clique (goal: all);
    * ``p2p_false``: of the pairs that are not, those in one clique all
      the same: the guest driver would try P2P that the host cannot do
      (goal: none);
    * ``numa_match``: of the passthrough devices with a known host node,
      those whose guest node is bound to that host node (goal: all);
    * ``gpu_nic_bus``: of the GPU/NIC pairs that share a host root
      complex, those below one expander bus in the guest.
    """
    gpus = [d for d in view.devices if d.address in truth.gpu_node]
    nics = [d for d in view.devices if d.address in truth.nic_node]
    capable = [(a, b) for a, b in itertools.combinations(gpus, 2)
               if frozenset((a.address, b.address)) in truth.p2p_pairs]
    incapable = [(a, b) for a, b in itertools.combinations(gpus, 2)
                 if frozenset((a.address, b.address)) not in truth.p2p_pairs]
    node = truth.node
    known = [d for d in view.devices if node.get(d.address) is not None]
    close = [(g, n) for g in gpus for n in nics
             if truth.gpu_root_complex[g.address]
             == truth.nic_root_complex[n.address]]
    return {
        'p2p_enabled': Share(sum(_same_clique(a, b) for a, b in capable),
                             len(capable)),
        'p2p_false': Share(sum(_same_clique(a, b) for a, b in incapable),
                           len(incapable)),
        'numa_match': Share(sum(node_matches(d, node[d.address], view)
                                for d in known), len(known)),
        'gpu_nic_bus': Share(
            sum(g.expander_bus is not None
                and g.expander_bus == n.expander_bus for g, n in close),
            len(close)),
    }


@dataclasses.dataclass(frozen=True)
class GuestFunction:
    """Where the guest finds a passthrough device."""

    #: Its guest PCI address, as the guest's firmware numbers buses.
    address: str
    #: busNr of the expander bus above it; None: the root bus.
    bus_nr: int | None
    #: Slot of the root port it sits on, on that bus; None: none.
    port_slot: int | None


def _symlink(target: str, link: str) -> None:
    """A relative link; the first one stays where an address repeats.

    Real libvirt refuses a repeated address; hand-written test XML may
    have one.
    """
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.lexists(link):
        os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


class _GuestTree:
    """The sysfs tree a q35 guest shows for the domain's PCI layout."""

    def __init__(self, xml: etree._Element, root: str) -> None:
        self.root = root
        self.controllers = {
            int(c.get('index')): c for c in xml.iterfind(
                "./devices/controller[@type='pci']")
            if c.get('index') is not None}
        #: Controller index -> (directory, bus number, NUMA node).
        self.buses: dict[int, tuple[str, int, int]] = {}
        self.root_next = 1
        self.used_root_slots: set[int] = set()
        self._number(xml)

    def _children(self, index: int) -> list[tuple[tuple, int]]:
        found = []
        for child, controller in self.controllers.items():
            address = controller.find('address')
            if (controller.get('model') not in ('pcie-root', EXPANDER_BUS)
                    and address is not None
                    and pci_xml.number(address.get('bus')) == index):
                slot = pci_xml.number(address.get('slot'))
                function = pci_xml.number(address.get('function'))
                found.append(((slot, function), child))
        return sorted(found)

    def _number(self, xml: etree._Element) -> None:
        """Bus numbers as firmware gives them: depth-first, slot order."""
        expanders = [i for i, c in self.controllers.items()
                     if c.get('model') == EXPANDER_BUS]
        tops = [(0, 'pci0000:00', 0, -1)]
        for index in expanders:
            target = self.controllers[index].find('target')
            bus_nr = int(target.get('busNr'))
            node = target.findtext('node')
            tops.append((index, 'pci0000:%02x' % bus_nr, bus_nr,
                         int(node) if node is not None else -1))
        self.used_root_slots = {
            pci_xml.number(a.get('slot'))
            for a in xml.iterfind('./devices//address')
            if a.get('type') == 'pci' and pci_xml.number(a.get('bus')) == 0
            and a.getparent().tag != 'source'}
        for index, name, bus, node in tops:
            directory = os.path.join('devices', name)
            self.buses[index] = (directory, bus, node)
            self._bus_dir(directory, bus)
            following = self._walk(index, bus + 1)
            if index == 0:
                self.root_next = following

    def _walk(self, index: int, following: int) -> int:
        directory, bus, node = self.buses[index]
        for (slot, function), child in self._children(index):
            path = self.function(directory, bus, slot, function,
                                 PCI_BRIDGE_CLASS, node)
            self.buses[child] = (path, following, node)
            self._bus_dir(path, following)
            following = self._walk(child, following + 1)
        return following

    def _bus_dir(self, directory: str, bus: int) -> None:
        name = '0000:%02x' % bus
        path = os.path.join(self.root, directory, 'pci_bus', name)
        os.makedirs(path, exist_ok=True)
        _symlink(path, os.path.join(self.root, 'class', 'pci_bus', name))

    def function(self, directory: str, bus: int, slot: int, function: int,
                 class_code: str, node: int) -> str:
        address = '0000:%02x:%02x.%x' % (bus, slot, function)
        path = os.path.join(directory, address)
        os.makedirs(os.path.join(self.root, path), exist_ok=True)
        for name, value in (('class', class_code), ('numa_node', node)):
            with open(os.path.join(self.root, path, name), 'w') as f:
                f.write('%s\n' % value)
        _symlink(os.path.join(self.root, path),
                 os.path.join(self.root, 'bus', 'pci', 'devices', address))
        return path

    def auto_root_port(self) -> int:
        """A pcie-root-port libvirt adds for a device without address.

        Libvirt puts them as functions 0-7 of free slots of the root bus.
        """
        added = len([i for i in self.buses if i < 0])
        slots = sorted(set(range(1, 32)) - self.used_root_slots)
        path = self.function(self.buses[0][0], 0, slots[added // 8],
                             added % 8, PCI_BRIDGE_CLASS, -1)
        index = -1 - added
        self.buses[index] = (path, self.root_next, -1)
        self._bus_dir(path, self.root_next)
        self.root_next += 1
        return index

    def expander_and_port(self, index: int) -> tuple[int | None, int | None]:
        """busNr of the expander bus above bus ``index``, root port slot."""
        controller = self.controllers.get(index)
        if controller is None or controller.get('model') != 'pcie-root-port':
            return None, None
        address = controller.find('address')
        parent = self.controllers.get(pci_xml.number(address.get('bus')))
        if parent is None or parent.get('model') != EXPANDER_BUS:
            return None, None
        return (int(parent.find('target').get('busNr')),
                pci_xml.number(address.get('slot')))


def guest_tree(xml: etree._Element, root: str,
               roles: Mapping[str, str]) -> dict[str, GuestFunction]:
    """Write, under ``root``, the sysfs tree the guest of ``xml`` shows.

    Only what NCCL reads: each bridge and passthrough device's directory
    with ``class`` and ``numa_node``, ``bus/pci/devices`` and
    ``class/pci_bus`` links. A device without a guest address gets a root
    port of its own on the root bus, as libvirt gives it.

    :param roles: host address -> ``gpu`` or ``nic`` (``class`` written).
    :returns: host address -> where the guest finds that device.
    """
    tree = _GuestTree(xml, root)
    found = {}
    for device, host in pci_xml.passthrough(xml):
        guest = device.find('./address')
        if guest is None:
            bus, slot, function = tree.auto_root_port(), 0, 0
        else:
            bus, slot, function = (pci_xml.number(guest.get(name)) for name in
                                   ('bus', 'slot', 'function'))
        directory, number, node = tree.buses[bus]
        tree.function(directory, number, slot, function,
                      GUEST_CLASSES.get(roles.get(host), '0xff0000'), node)
        found[host] = GuestFunction(
            '0000:%02x:%02x.%x' % (number, slot, function),
            *tree.expander_and_port(bus))
    return found


def _roles(truth: HostTruth) -> dict[str, str]:
    return {**{a: 'nic' for a in truth.nic_node},
            **{a: 'gpu' for a in truth.gpu_node}}


def _nccl_share(truth: HostTruth, guest: Mapping[str, GuestFunction],
                sysfs_root: str, topo_xml: str | None = None) -> Share:
    """Pairs whose class NCCL finds in the guest is the host's."""
    gpus = sorted(a for a in guest if a in truth.gpu_node)
    nics = sorted(a for a in guest if a in truth.nic_node)
    found = nccl_paths.pair_types([guest[a].address for a in gpus],
                                  [guest[a].address for a in nics],
                                  sysfs_root, topo_xml)
    pairs = [p for p in itertools.chain(itertools.combinations(gpus, 2),
                                        itertools.product(gpus, nics))
             if frozenset(p) in truth.nccl_links]
    return Share(sum(found[frozenset(guest[a].address for a in p)]
                     == truth.nccl_links[frozenset(p)] for p in pairs),
                 len(pairs))


def nccl_host_class(xml: etree._Element, truth: HostTruth) -> Share:
    """The guest's GPU-GPU and GPU-NIC pairs NCCL sees as on the host.

    NCCL there classifies them from the guest's sysfs alone.
    """
    with tempfile.TemporaryDirectory() as root:
        return _nccl_share(truth, guest_tree(xml, root, _roles(truth)),
                           root)


def fw_cfg_description(xml: etree._Element) -> dict | None:
    """The guest topology description in the domain's fw_cfg, or None."""
    for entry in xml.iterfind("./sysinfo[@type='fwcfg']/entry"):
        if entry.get('name') == topology_description.ENTRY_NAME:
            return topology_description.decode(entry.text)
    return None


def nccl_with_agent(xml: str | bytes, truth: HostTruth,
                    agent: Agent) -> Share:
    """:func:`nccl_host_class` with the guest agent's topology file.

    The agent runs on the tree firmware makes from the description
    (:mod:`guest_sysfs`: described devices only); NCCL reads its file,
    then the guest's whole tree (:func:`guest_tree`, every device) for
    devices the file lacks. Both trees number buses alike, so a device
    has one address in both. Without a description the guest has no
    agent input: the plain tree.
    """
    from tests.fixtures import guest_sysfs

    element = _element(xml)
    description = fw_cfg_description(element)
    if description is None:
        return nccl_host_class(element, truth)
    with tempfile.TemporaryDirectory() as root:
        whole, described = (os.path.join(root, name)
                            for name in ('whole', 'described'))
        guest = guest_tree(element, whole, _roles(truth))
        guest_sysfs.build(described, description)
        return _nccl_share(truth, guest, whole, agent(described))


def run_guest_agent(sysfs_root: str) -> str:
    """The guest agent's NCCL topology for a guest tree (an :data:`Agent`).

    :raises RuntimeError: the agent failed (its messages attached).
    """
    from nova_gpu_p2p_guest import cli

    output = os.path.join(sysfs_root, 'nccl-topology.xml')
    messages = io.StringIO()
    with contextlib.redirect_stdout(messages), \
            contextlib.redirect_stderr(messages):
        status = cli.main(['--sysfs-root', sysfs_root, '--output', output])
    if status != 0:
        raise RuntimeError('guest agent: exit %d: %s'
                           % (status, messages.getvalue().strip()))
    with open(output) as f:
        return f.read()


def _element(xml: str | bytes | etree._Element) -> etree._Element:
    if isinstance(xml, str):
        xml = xml.encode('utf-8')
    return etree.fromstring(xml) if isinstance(xml, bytes) else xml


def refused(shares: Mapping[str, Share]) -> dict[str, Share]:
    """Scores of XML libvirt refused: the guest never starts.

    Each metric whose goal is all scores none of the same total. A
    metric whose goal is none (:data:`GOAL_NONE`) has nothing to count:
    a zero there would read as perfect, and pooled it would flatter the
    strategy.
    """
    return {name: Share(0, 0 if name in GOAL_NONE else share.total)
            for name, share in shares.items()}


def evaluate(xml: str | bytes, truth: HostTruth,
             cliques: Mapping[str, int] | None = None,
             accepted: bool = True) -> dict[str, Share]:
    """:func:`metrics` and :func:`nccl_host_class` of a domain XML.

    :param cliques: the GPUs' cliques from QEMU's command line
        (:func:`argv_cliques`); None: read from the XML.
    :param accepted: False where libvirt refused the XML: every metric
        scores zero of the same total.
    """
    element = _element(xml)
    shares = {**metrics(parse(element, cliques), truth),
              'nccl_host_class': nccl_host_class(element, truth)}
    return shares if accepted else refused(shares)
