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

The benchmark compares strategies (Nova's stock XML, a wrapper that puts
every GPU in clique 0, a sidecar that adds one expander bus per host NUMA
node, this driver) by what the guest would actually get, so every number
here comes from the emitted XML parsed back, and the host's truth comes
from the hand-written oracle (:data:`hosts.EXPECTED`) and the host's
topology, never from the planner's own variables.

Reading rules, as the guest sees them:

* a GPU's clique is the ``x-nv-gpudirect-clique`` of the
  ``<qemu:device>`` whose alias is the hostdev's alias; no override, no
  clique;
* a device's guest NUMA node is the ``<target><node>`` of the
  ``pcie-expander-bus`` its root port sits on; a device on the root bus
  (including one without a guest address: libvirt puts it on a root port
  of ``pcie-root``) has none, so it never matches its host node;
* a guest node matches a host node when ``<numatune><memnode>`` binds that
  guest cell to it; a ``<node>`` naming no guest cell matches nothing;
* two devices share a bus when they sit below the same expander bus; two
  devices on the root bus do not count: the guest cannot tell they are
  close to each other, since that bus also holds every other device.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import itertools

from lxml import etree

from nova_gpu_p2p.tests.fixtures import hosts
from nova_gpu_p2p.tests.fixtures import qemu_override

#: P2P capable at the default ``[gpu_p2p] p2p_level`` (PXB), judged with
#: the default ``acs_policy = route`` (hosts.EXPECTED's routed links).
P2P_CLASSES = frozenset(('PIX', 'PXB'))
EXPANDER_BUS = 'pcie-expander-bus'
#: The metrics, in the order the benchmark prints them.
METRICS = ('p2p_enabled', 'p2p_false', 'numa_match', 'gpu_nic_bus')


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

    @property
    def node(self) -> dict[str, int | None]:
        return {**self.gpu_node, **self.nic_node}


def host_truth(expected: hosts.Expected,
               nics: Mapping[str, tuple[int | None, str]],
               nvlink_pairs: Iterable[frozenset[str]] = ()) -> HostTruth:
    """The truth from the oracle, plus NIC facts the oracle lacks.

    :param nics: NIC address -> (host NUMA node, root complex), from the
        host's topology (hosts.EXPECTED lists NIC addresses only).
    :param nvlink_pairs: GPU pairs joined by NVLink; none on a host read
        from sysfs alone.
    """
    pairs = {frozenset((a, b))
             for a, b in itertools.combinations(expected.addresses, 2)
             if expected.link(a, b) in P2P_CLASSES}
    pairs.update(frozenset(p) for p in nvlink_pairs)
    return HostTruth(
        gpu_node={g.address: g.numa_node for g in expected.gpus},
        gpu_root_complex={g.address: g.root_complex for g in expected.gpus},
        nic_node={a: nics[a][0] for a in expected.nics if a in nics},
        nic_root_complex={a: nics[a][1] for a in expected.nics if a in nics},
        p2p_pairs=frozenset(pairs))


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


def _hex(text: str | None) -> int:
    return int(text, 16) if text is not None else 0


def _pci_address(element: etree._Element) -> str:
    return '%04x:%02x:%02x.%x' % tuple(
        _hex(element.get(name))
        for name in ('domain', 'bus', 'slot', 'function'))


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
        bus = _hex(address.get('bus')) if address is not None else None
    return None


def parse(xml: etree._Element) -> GuestView:
    """Read the guest's view of its passthrough devices from the XML."""
    controllers = {int(c.get('index')): c for c in xml.iterfind(
        "./devices/controller[@type='pci']") if c.get('index') is not None}
    cliques = qemu_override.cliques_by_alias(xml)
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
            _hex(guest.get('bus')) if guest is not None else None,
            controllers)
        node = None
        if bus is not None:
            text = controllers[bus].findtext('./target/node')
            node = int(text) if text is not None else None
        alias = dev.find('alias')
        devices.append(PlacedDevice(
            address=_pci_address(source), expander_bus=bus, guest_node=node,
            clique=cliques.get(alias.get('name')) if alias is not None
            else None))
    cells = {int(memnode.get('cellid')): _node_set(memnode.get('nodeset'))
             for memnode in xml.iterfind('./numatune/memnode')}
    return GuestView(devices=tuple(sorted(devices, key=lambda d: d.address)),
                     cell_host_nodes=cells)


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


def evaluate(xml: str | bytes, truth: HostTruth) -> dict[str, Share]:
    """:func:`metrics` of a domain XML document."""
    if isinstance(xml, str):
        xml = xml.encode('utf-8')
    return metrics(parse(etree.fromstring(xml)), truth)
