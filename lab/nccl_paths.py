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

"""The path type NCCL gives a GPU-GPU or GPU-NIC pair, for tests.

Tests of what a guest's NCCL sees must be judged by NCCL's rules, not by
ours (:mod:`nova_gpu_p2p.topology.link_class`), so this module redoes, in
a few lines each, what NCCL does (NVIDIA/nccl, ``src/graph``, 2026):

* Building the XML tree (``xml.cc``). ``ncclTopoGetSystem`` (``topo.cc``)
  first loads ``NCCL_TOPO_FILE`` or
  ``/var/run/nvidia-topologyd/virtualTopology.xml``
  (``ncclTopoGetXmlFromFile``: ``<system version="1">``, ``<cpu
  numaid>`` children, nested ``<pci busid class>`` nodes). For each GPU
  (``ncclTopoFillGpu``) and NIC (``ncclTopoFillNet``) it finds the
  ``<pci>`` node of that bus ID anywhere in the tree
  (``ncclTopoGetPciNode``: an exact, lower-case ``busid`` match) or makes
  a new one, and calls ``ncclTopoGetXmlFromSys``: that reads ``class``
  from sysfs where the device has a sysfs path
  (``ncclOsGetPciPath``: ``realpath`` of
  ``/sys/class/pci_bus/DDDD:BB/../../DDDD:BB:SS.F``), and only when the
  node has no parent yet (not from the file) walks sysfs up: it drops
  path components two at a time, so a switch's downstream port is
  skipped and the parent is the switch's upstream port, and stops at the
  first component that is not a bus ID (the host bridge
  ``pciDDDD:BB``), where the parent is the ``<cpu>`` whose ``numaid`` is
  the device's ``numa_node`` (-1 included). A device directly on a root
  port, or on the root bus, thus hangs off the CPU node; so do two
  devices on two root ports of one host bridge. It then goes on with the
  parent's own parent in the same way.
* The graph (``ncclTopoGetSystemFromXml``, ``ncclTopoAddCpu``,
  ``ncclTopoAddPci``, ``topo.cc``): a ``<pci>`` with a ``<gpu>`` below it
  is a GPU, one with a ``<nic>`` a NIC; otherwise one whose ``class``
  is a PCI bridge (``0x060400``), or any class not in ``kvDictPciClass``,
  is a PCI switch node, and a ``<pci>`` of GPU or NIC class that is no
  rank's GPU or NIC is left out. Each node is joined to its parent by a
  ``LINK_PCI``; every pair of CPU nodes by a ``LINK_SYS``
  (``ncclTopoConnectCpus``). Broadcom PEX Gen4/Gen5 switches in base mode
  have their sub-switches merged into them (``ncclTopoFlattenBcmSwitches``,
  ``getBcmGen``).
* Path types (``ncclTopoSetPaths``, ``paths.cc``): a breadth-first
  search from each GPU or NIC, where a step's type is its link's type
  (``LINK_PCI`` is ``PATH_PIX``), ``PATH_PXB`` for a PCI-to-PCI step,
  ``PATH_PHB`` for a PCI step into or out of a CPU, and ``PATH_SYS`` for
  CPU to CPU; a path's type is the largest of its steps', and the best
  path wins. So: ``PIX`` through one switch, ``PXB`` through several
  without a CPU, ``PHB`` through one CPU node (one NUMA node, however
  many host bridges: nvidia-smi's ``NODE`` is NCCL's ``PHB``), ``SYS``
  across CPU nodes. P2P needs ``PXB`` or closer (``ncclTopoCheckP2p``,
  ``p2pLevel = PATH_PXB``), and so does GPUDirect RDMA
  (``ncclTopoCheckGdr``, ``netGdrLevel = PATH_PXB``).

* Links and bandwidths (v2.30.7, cited by line): a ``<pci>`` node's
  ``link_speed`` and ``link_width``, where neither the file nor an earlier
  step set them, are the lower of the device's ``max_link_*`` and its
  port's ``../max_link_*`` (``xml.cc`` 679-689, 711-718); a GPU's come
  from NVML's current generation and width instead (663-676, 703-708),
  here ``nvml_links``. A link's GB/s is width x per-lane code / 80, width
  0 read as 16 and an unknown speed as 60 (``topo.cc`` 649-658,
  ``kvDictPciGen`` 545-556, a prefix match: ``xml.h`` 425-438). CPU to CPU
  is ``ncclTopoGetInterCpuBw`` (``topo.cc`` 60-83) by the ``<cpu>``'s
  ``arch``/``vendor``/``familyid``/``modelid`` (744-751); the attributes
  the file leaves out come from CPUID of the machine NCCL runs on
  (``xml.cc`` 504-558), here ``cpuid``. A path's bandwidth is its
  slowest link, and of two paths of one type the faster wins
  (``paths.cc`` 71, 96-99). NICs: NCCL's IB plugin names a port by its
  PCI path with the function and device digits zeroed
  (``src/transport/net_ib/init.cc`` 66-70), so the ports of a dual-port
  NIC are one ``<pci>`` and one NIC node with one link, and one ``NET``
  node per port joined to it at the port's speed (``topo.cc`` 443-444).

Left out, because no test here needs them: NVLink and C2C (``NVL``,
``NVB``, ``C2C``), PXN, Broadcom ``pcilink`` peer links, trimming of
unused branches (``ncclTopoTrimXml``), which changes no path between the
devices kept.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import itertools
import os
import re
from xml.etree import ElementTree

#: ``topoPathTypeStr`` (topo.cc), indexed by the ``PATH_*`` values of
#: src/include/graph.h.
PATH_TYPES = ('LOC', 'NVL', 'NVB', 'C2C', 'PIX', 'PXB', 'P2C', 'PXN', 'PHB',
              'SYS', 'NET', 'DIS')
PATH_LOC, PATH_PIX, PATH_PXB, PATH_PHB, PATH_SYS, PATH_DIS = (
    PATH_TYPES.index(name)
    for name in ('LOC', 'PIX', 'PXB', 'PHB', 'SYS', 'DIS'))
#: ``LINK_*`` (topo.h): a link's type is the path type of that one step.
LINK_LOC, LINK_PCI, LINK_SYS = 0, 4, 9
NET = 'NET'
#: ``LOC_BW`` (topo.h): a path's bandwidth before its first link.
LOC_BW = 5000.0
#: ``kvDictPciGen`` (topo.cc 545-556): prefix, 100 Mb/s per lane.
PCI_GEN = (('2.5 GT/s', 15), ('5 GT/s', 30), ('8 GT/s', 60),
           ('16 GT/s', 120), ('32 GT/s', 240), ('2.5 GT/s PCIe', 15),
           ('5.0 GT/s PCIe', 30), ('8.0 GT/s PCIe', 60),
           ('16.0 GT/s PCIe', 120), ('32.0 GT/s PCIe', 240),
           ('64.0 GT/s PCIe', 480))
PCI_GEN_DEFAULT = 60
#: Node types (topo.h).
GPU, PCI, NVS, CPU, NIC = 'GPU', 'PCI', 'NVS', 'CPU', 'NIC'
#: ``kvDictPciClass`` (topo.cc): a prefix match, PCI when none matches.
PCI_CLASSES = (('0x060400', PCI), ('0x080100', PCI), ('0x068000', NVS),
               ('0x068001', CPU), ('0x03', GPU), ('0x02', NIC))
#: ``NCCL_TOPO_XML_VERSION`` (xml.h).
XML_VERSION = 1
#: nvidia-smi ``topo -m`` classes (our link classes) in NCCL's terms.
FROM_NVIDIA_SMI = {'NV': 'NVL', 'PIX': 'PIX', 'PXB': 'PXB', 'PHB': 'PHB',
                   'NODE': 'PHB', 'SYS': 'SYS'}
_BDF = re.compile(r'^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.'
                  r'[0-9a-fA-F]$')


def nccl_class(nvidia_smi_class: str) -> str:
    """An nvidia-smi (or :class:`LinkClass`) name in NCCL's terms."""
    return FROM_NVIDIA_SMI[nvidia_smi_class]


def pci_type(class_code: str) -> str:
    return next((kind for prefix, kind in PCI_CLASSES
                 if class_code.startswith(prefix)), PCI)


def link_bw(speed: str | None, width: str | None) -> float:
    """A ``<pci>`` node's link in GB/s (``topo.cc`` 649-658)."""
    try:
        lanes = int(width or '0', 0)
    except ValueError:
        lanes = _strtol(width)
    lanes = lanes or 16
    code = next((value for prefix, value in PCI_GEN
                 if (speed or '').startswith(prefix)), PCI_GEN_DEFAULT)
    return lanes * code / 80.0


def inter_cpu_bw(cpu: ElementTree.Element) -> float:
    """``ncclTopoGetInterCpuBw`` (``topo.cc`` 60-83, model 744-751)."""
    arch = cpu.get('arch')
    if arch == 'ppc64':
        return 32.0
    if arch == 'arm64':
        return 6.0
    if arch != 'x86_64':
        return LOC_BW
    vendor = cpu.get('vendor')
    if vendor == 'GenuineIntel':
        family = int(cpu.get('familyid') or 0)
        model = int(cpu.get('modelid') or 0)
        if family == 6 and model >= 0xcf:
            return 40.0
        if family == 6 and model >= 0x8f:
            return 22.0
        if family == 6 and model >= 0x55:
            return 10.0
        return 6.0
    if vendor == 'AuthenticAMD':
        return 16.0
    if vendor in ('CentaurHauls', '  Shanghai  '):
        yongfeng = (int(cpu.get('familyid') or 0) == 7
                    and int(cpu.get('modelid') or 0) == 0x5b)
        return 9.0 if yongfeng else 6.0
    return LOC_BW


def ib_busid(busid: str) -> str:
    """The bus ID NCCL's IB plugin gives a port (net_ib/init.cc 66-70).

    The function digit, and with ``NCCL_IB_MERGE_VFS`` (on by default)
    the device digits, are zeroed: ports and VFs of one NIC are one.
    """
    return busid[:-4] + '00.0'


def _bcm_gen(device: int, level: int) -> int:
    """``getBcmGen`` (topo.cc): a Broadcom PEX switch in base mode."""
    if device & 0xfffffffffffff000 == 0x1000c0101000a000:
        return 4
    if device & 0xfffffffffffff000 == 0x1000c03010000000 | level * 0x1000:
        return 5
    return 0


def _int_device(pci: ElementTree.Element) -> int:
    """``ncclTopoGetIntDevice``: vendor, device and subsystem IDs."""
    value = 0
    for name, shift in (('vendor', 48), ('device', 32),
                        ('subsystem_vendor', 16), ('subsystem_device', 0)):
        if pci.get(name):
            value += int(pci.get(name), 0) << shift
    return value


class Topology:
    """NCCL's topology of one machine, as ``ncclTopoGetSystem`` builds it.

    :param sysfs_root: where ``/sys`` is (a tree made by a test), or None
        for a machine without one.
    :param topo_xml: the text of NCCL's topology file, as loaded before
        detection, or None where there is no file.
    """

    def __init__(self, sysfs_root: str | None = None,
                 topo_xml: str | None = None,
                 cpuid: Mapping[str, str] | None = None,
                 nvml_links: Mapping[str, tuple[str, str]] | None = None
                 ) -> None:
        """Where NCCL reads from.

        :param cpuid: ``arch``, ``vendor``, ``familyid``, ``modelid`` of
            the machine NCCL runs on (CPUID), for ``<cpu>`` nodes that
            lack them.
        :param nvml_links: ``{busid: (link_speed, link_width)}``: what
            NVML says of each GPU (NCCL 2.30.7); None: NCCL 2.30.4 and
            earlier, which read GPUs' links from sysfs too.
        """
        self.sysfs_root = sysfs_root
        self.cpuid = dict(cpuid or {})
        self.nvml_links = nvml_links
        if topo_xml is None:
            self.system = ElementTree.Element(
                'system', version=str(XML_VERSION))
        else:
            self.system = ElementTree.fromstring(topo_xml)
            if (self.system.tag != 'system'
                    or self.system.get('version') != str(XML_VERSION)):
                raise ValueError('NCCL needs <system version="%d">, not '
                                 '<%s version=%r>' % (
                                     XML_VERSION, self.system.tag,
                                     self.system.get('version')))
        self.parents = {child: parent for parent in self.system.iter()
                        for child in parent}
        #: ``<pci>`` nodes not in the tree yet (xmlAddNode with no parent).
        self.orphans: list[ElementTree.Element] = []

    # -- the XML tree (xml.cc) ------------------------------------------

    def add_gpu(self, busid: str) -> None:
        """``ncclTopoFillGpu``: a rank's GPU at PCI address ``busid``."""
        self._fill(busid, '0x03', 'gpu')

    def add_nic(self, busid: str, net_gbs: float | None = None) -> None:
        """``ncclTopoFillNet``: a network device of PCI address ``busid``.

        With ``net_gbs`` it is an IB plugin port of that speed (GB/s): it
        joins the ``<pci>`` of :func:`ib_busid` and adds a ``<net>``.
        """
        if net_gbs is None:
            self._fill(busid, '0x02', 'nic')
            return
        nic = self._fill(ib_busid(busid.lower()), '0x02', 'nic')
        ElementTree.SubElement(nic, 'net', name=busid.lower(),
                               speed=str(int(net_gbs * 8000)))

    def _fill(self, busid: str, class_code: str, tag: str
              ) -> ElementTree.Element:
        node = self._pci_node(busid.lower())
        node.attrib.setdefault('class', class_code)
        self._from_sys(node)
        if node.find(tag) is None:
            ElementTree.SubElement(node, tag)
        return node.find(tag)

    def _pci_node(self, busid: str) -> ElementTree.Element:
        """``ncclTopoGetPciNode``: the node of that bus ID, or a new one."""
        for node in itertools.chain(self.system.iter('pci'), self.orphans):
            if node.get('busid') == busid:
                return node
        node = ElementTree.Element('pci', busid=busid)
        self.orphans.append(node)
        return node

    def _sys_path(self, busid: str) -> str | None:
        """``ncclOsGetPciPath``; None where sysfs does not have it."""
        if self.sysfs_root is None:
            return None
        path = os.path.realpath(os.path.join(
            self.sysfs_root, 'class', 'pci_bus', busid[:7], '..', '..',
            busid))
        return path if os.path.isdir(path) else None

    @staticmethod
    def _read(path: str, name: str) -> str:
        try:
            with open(os.path.join(path, name)) as f:
                return f.read().strip()
        except OSError:
            return ''

    def _cpu(self, numaid: str) -> ElementTree.Element:
        for cpu in self.system.findall('cpu'):
            if cpu.get('numaid') == numaid:
                return cpu
        return ElementTree.SubElement(self.system, 'cpu', numaid=numaid)

    def _parent_from_sys(self, path: str) -> ElementTree.Element:
        """The walk up of ``ncclTopoGetXmlFromSys``: two levels at a time.

        The parent is the bus ID two path components up (a switch's
        upstream port), or the CPU of the device's ``numa_node`` as soon
        as a component is not a bus ID (the host bridge).
        """
        numaid = self._read(path, 'numa_node')
        parts = path.split('/')
        for up in (1, 2):
            name = parts[-1 - up]
            if not _BDF.match(name):
                return self._cpu(numaid)
            if up == 2:
                return self._pci_node(name)
        raise AssertionError('unreachable')

    def _links_from_sys(self, node: ElementTree.Element,
                        path: str | None) -> None:
        """``link_speed``/``link_width`` the file does not give.

        NVML's for a GPU (xml.cc 663-676, 703-708), else the lower of the
        device's and ``../`` (679-689, 711-718), else empty (691-697).
        """
        nvml = (self.nvml_links or {}).get(node.get('busid'))
        gpu = node.get('class', '').startswith('0x03')
        if 'link_speed' not in node.attrib:
            if gpu and nvml is not None:
                node.set('link_speed', nvml[0])
            elif path is not None:
                device = self._read(path, 'max_link_speed')
                port = self._read(os.path.join(path, '..'), 'max_link_speed')
                node.set('link_speed', port if _gts(port) < _gts(device)
                         else device)
            else:
                node.set('link_speed', '')
        if 'link_width' not in node.attrib:
            if gpu and nvml is not None:
                node.set('link_width', nvml[1])
            elif path is not None:
                node.set('link_width', str(min(
                    _strtol(self._read(path, 'max_link_width')),
                    _strtol(self._read(os.path.join(path, '..'),
                                       'max_link_width')))))
            else:
                node.set('link_width', '')

    def _from_sys(self, node: ElementTree.Element) -> None:
        """``ncclTopoGetXmlFromSys``: attributes, then the parent chain."""
        path = self._sys_path(node.get('busid'))
        if path is not None:
            class_code = self._read(path, 'class')
            if class_code:
                node.set('class', class_code)
            for name in ('vendor', 'device', 'subsystem_vendor',
                         'subsystem_device'):
                if name not in node.attrib and self._read(path, name):
                    node.set(name, self._read(path, name))
        self._links_from_sys(node, path)
        parent = self.parents.get(node)
        if parent is None:
            parent = (self._parent_from_sys(path) if path is not None
                      else self._cpu('-1'))
            # Keep PCI sub devices ordered by bus ID (xml.cc).
            index = next((i for i, sub in enumerate(parent)
                          if sub.get('busid') is not None
                          and node.get('busid') < sub.get('busid')),
                         len(parent))
            parent.insert(index, node)
            self.parents[node] = parent
            if node in self.orphans:
                self.orphans.remove(node)
        if parent.tag == 'pci':
            self._from_sys(parent)

    def to_xml(self) -> str:
        """The tree as NCCL would dump it (``NCCL_TOPO_DUMP_FILE``)."""
        return ElementTree.tostring(self.system, encoding='unicode')

    # -- the graph (topo.cc) and its paths (paths.cc) -------------------

    def graph(self) -> tuple[dict, dict]:
        """Nodes (key -> type) and links (key -> [(key, type, GB/s)])."""
        kinds: dict[tuple, str] = {}
        links: dict[tuple, list] = {}
        devices: dict[tuple, int] = {}

        def connect(a, b, link, bw):
            links.setdefault(a, []).append((b, link, bw))
            links.setdefault(b, []).append((a, link, bw))

        def add_pci(pci, parent):
            class_code = pci.get('class')
            if class_code is None:
                raise ValueError('NCCL refuses <pci busid=%r> without a '
                                 'class ("Attribute class of node pci not '
                                 'found")' % pci.get('busid'))
            kind = pci_type(class_code)
            bw = link_bw(pci.get('link_speed'), pci.get('link_width'))
            key = None
            if pci.find('gpu') is not None:
                key = (GPU, pci.get('busid'))
                kinds[key] = GPU
                connect(key, parent, LINK_PCI, bw)
                key = None
            nic = pci.find('nic')
            if nic is not None:
                key = (NIC, pci.get('busid'))
                kinds[key] = NIC
                for net in nic.findall('net'):
                    net_key = (NET, net.get('name'))
                    kinds[net_key] = NET
                    connect(key, net_key, LINK_LOC,
                            int(net.get('speed')) / 8000.0)
            elif kind == PCI:
                key = (PCI, pci.get('busid'))
                kinds[key] = PCI
                devices[key] = _int_device(pci)
                for sub in pci.findall('pci'):
                    add_pci(sub, key)
            if key is not None:
                connect(key, parent, LINK_PCI, bw)

        cpus = []
        for cpu in self.system.findall('cpu'):
            for name, value in self.cpuid.items():
                cpu.attrib.setdefault(name, value)
            key = (CPU, int(cpu.get('numaid')))
            kinds[key] = CPU
            cpus.append((key, cpu))
            links.setdefault(key, [])
            for pci in cpu.findall('pci'):
                add_pci(pci, key)
        _flatten_bcm_switches(kinds, links, devices)
        for (a, cpu), (b, _) in itertools.combinations(cpus, 2):
            # ncclTopoConnectCpus (topo.cc 277-279): the first CPU's rate.
            connect(a, b, LINK_SYS, inter_cpu_bw(cpu))
        return kinds, links

    def paths(self, base: tuple, graph: tuple[dict, dict] | None = None
              ) -> dict[tuple, tuple[int, float]]:
        """``ncclTopoSetPaths`` (paths.cc 44-120): type and GB/s to all.

        Empty where ``base`` is no node of the graph.
        """
        kinds, links = graph or self.graph()
        if base not in kinds:
            return {}
        best = {base: (PATH_LOC, LOC_BW, 0)}
        frontier = [base]
        while frontier:
            following = []
            for node in frontier:
                # No path goes on through another GPU (paths.cc 77-81).
                if node != base and kinds[node] == GPU:
                    continue
                path_type, path_bw, count = best[node]
                for remote, link, link_bw_ in links[node]:
                    bw = min(path_bw, link_bw_)
                    step = link
                    if kinds[node] == PCI and kinds[remote] == PCI:
                        step = PATH_PXB
                    ends = (kinds[node], kinds[remote])
                    if link == LINK_PCI and CPU in ends:
                        step = PATH_PHB
                    step = max(path_type, step)
                    old_type, old_bw, old_count = best.get(
                        remote, (PATH_DIS, 0.0, 0))
                    if (step < old_type
                            or (step == old_type and old_bw < bw)
                            or (step == old_type and old_bw == bw
                                and old_count > count + 1)):
                        best[remote] = (step, bw, count + 1)
                        if remote not in following:
                            following.append(remote)
            frontier = following
        return {node: found[:2] for node, found in best.items()}

    def path_types(self, base: tuple,
                   graph: tuple[dict, dict] | None = None
                   ) -> dict[tuple, int]:
        """The best path type from ``base`` to every node."""
        return {node: found[0]
                for node, found in self.paths(base, graph).items()}

    def path_type(self, a: tuple, b: tuple) -> str:
        """The type of the path between two ``(GPU|NIC, busid)`` nodes."""
        return PATH_TYPES[self.path_types(a).get(b, PATH_DIS)]


def _flatten_bcm_switches(kinds: dict, links: dict, devices: dict) -> None:
    """``ncclTopoFlattenBcmSwitches``: sub-switches merged into the top."""
    restart = True
    while restart:
        restart = False
        for switch in [k for k in kinds if kinds[k] == PCI]:
            gen = _bcm_gen(devices[switch], 0)
            if not gen:
                continue
            subs = [remote for remote, _, _ in links[switch]
                    if kinds[remote] == PCI
                    and _bcm_gen(devices[remote], 1) == gen]
            links[switch] = [link for link in links[switch]
                             if link[0] not in subs]
            for sub in subs:
                for remote, link, bw in links.pop(sub):
                    if remote == switch:
                        continue
                    links[switch].append((remote, link, bw))
                    links[remote] = [(switch if r == sub else r, t, b)
                                     for r, t, b in links[remote]]
                del kinds[sub]
            devices[switch] |= 0xffff
            restart = True
            break


def _gts(speed: str) -> float:
    """``sscanf("%f GT/s")`` as NCCL reads it: unreadable is FLT_MAX."""
    match = re.match(r'\s*([0-9]+(?:\.[0-9]*)?)', speed or '')
    return float(match.group(1)) if match else float('inf')


def _strtol(text: str) -> int:
    """``strtol(text, NULL, 0)``: 0 where it reads no number."""
    match = re.match(r'\s*(-?[0-9]+)', text or '')
    return int(match.group(1)) if match else 0


def pair_types(gpus: Iterable[str], nics: Iterable[str] = (),
               sysfs_root: str | None = None,
               topo_xml: str | None = None) -> dict[frozenset[str], str]:
    """NCCL's path type of every GPU-GPU and GPU-NIC pair.

    :param gpus: the GPUs' PCI addresses (every one a rank's GPU).
    :param nics: the NICs' PCI addresses.
    :param sysfs_root: the machine's ``/sys`` (see :class:`Topology`).
    :param topo_xml: NCCL's topology file, where there is one.
    :returns: ``{frozenset((a, b)): 'PIX' | 'PXB' | 'PHB' | 'SYS' | ...}``
        keyed by the addresses as given.
    """
    gpus, nics = list(gpus), list(nics)
    topology = Topology(sysfs_root, topo_xml)
    for gpu in gpus:
        topology.add_gpu(gpu)
    for nic in nics:
        topology.add_nic(nic)
    found = {}
    graph = topology.graph()
    for i, gpu in enumerate(gpus):
        types = topology.path_types((GPU, gpu.lower()), graph)
        for other, kind in ([(g, GPU) for g in gpus[i + 1:]]
                            + [(n, NIC) for n in nics]):
            found[frozenset((gpu, other))] = PATH_TYPES[
                types.get((kind, other.lower()), PATH_DIS)]
    return found


def host_classes(links: Mapping[frozenset[str], str]
                 ) -> dict[frozenset[str], str]:
    """nvidia-smi classes of pairs (our link classes) in NCCL's terms."""
    return {pair: nccl_class(cls) for pair, cls in links.items()}
