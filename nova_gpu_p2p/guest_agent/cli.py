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

"""``nova-gpu-p2p-guest``: NCCL inside the guest sees the host's topology.

Runs in the guest (``python3 -m nova_gpu_p2p.guest_agent``). It reads the
topology description the driver passes through QEMU fw_cfg (format
version 1, ``doc/source/guest-topology.rst``), finds each described GPU
and NIC in the guest's sysfs, and writes the NCCL XML topology that NCCL
loads before it looks at the guest's PCI tree
(``/var/run/nvidia-topologyd/virtualTopology.xml``, or ``NCCL_TOPO_FILE``).

Standard library only, Python 3.8 or later, and nothing else of
nova_gpu_p2p: ``pip install --no-deps`` of the package's wheel must be
enough in a guest image, which has neither Nova nor oslo. So the few
helpers it shares in spirit with the rest of the package (the PCI
address check, reading sysfs files) are its own copies, on purpose.

What NCCL does with the file (NVIDIA/nccl, ``src/graph``, 2026):

* ``xml.cc`` ``ncclTopoGetXmlFromFile`` / ``xmlLoadSub`` / ``xmlGetNode``:
  a hand-written parser. No ``<?xml?>`` declaration, attributes separated
  by one space, values quoted with no entities and shorter than 254
  characters, only spaces and line breaks between elements. ``<system
  version="1">`` holds ``<cpu>`` elements, which hold ``<pci>`` (and
  ``<nic>``); ``<pci>`` holds ``<pci>``, ``<gpu>``, ``<nic>``.
* ``topo.cc`` ``ncclTopoGetSystem``: the file is loaded first; then
  ``ncclTopoFillGpu`` / ``ncclTopoFillNet`` look the rank's GPU and each
  network device up by ``busid`` (lower case ``dddd:bb:dd.f``,
  ``int64ToBusId``) among the file's ``<pci>`` nodes, and
  ``ncclTopoGetXmlFromSys`` (``xml.cc``) only fills attributes the file
  does not give, and climbs sysfs only for a node without a parent: a
  device found in the file keeps the file's parents and ``link_speed`` /
  ``link_width``. A ``<pci>`` node that sysfs does not have (our switches)
  is kept as it is; ``ncclTopoTrimXml`` then drops every branch without a
  device NCCL uses.
* ``topo.cc`` ``ncclTopoAddPci``: ``class`` ``0x060400`` is a switch,
  ``link_speed`` (``kvDictPciGen``, Linux's ``max_link_speed`` text) and
  ``link_width`` give its bandwidth; ``ncclTopoAddCpu`` needs ``arch``, on
  x86 ``vendor``, and for Intel ``familyid`` and ``modelid``
  (``ncclTopoGetXmlFromCpu`` fills them from CPUID when missing, but only
  for CPUs it walks to).
* ``paths.cc`` ``ncclTopoSetPaths``: a path through one switch is
  ``PIX``, through a switch-to-switch link ``PXB``, through a CPU ``PHB``,
  between CPUs ``SYS``; ``ncclTopoCheckP2p`` uses P2P at ``PXB`` or closer
  (``NCCL_P2P_LEVEL``), ``ncclTopoCheckGdr`` GPUDirect RDMA likewise
  (``NCCL_NET_GDR_LEVEL``).

So the file gives each guest NUMA node a ``<cpu>``, under it one
synthetic ``<pci>`` switch per host switch level, and the guest's GPUs and
NICs (their real guest bus IDs) under the switches they share on the host.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

FORMAT_VERSION = 1
ENTRY_NAME = 'opt/org.openstack.nova-gpu-p2p/topology'
DEFAULT_OUTPUT = '/var/run/nvidia-topologyd/virtualTopology.xml'
NO_TOPOLOGY = 'no GPU P2P topology for this instance'
PROG = 'nova-gpu-p2p-guest'

ROLES = ('gpu', 'nic', 'other')
HOST_CLASSES = ('NV', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS')
#: NCCL's path types (``src/include/graph.h``) that the PCI tree decides.
NCCL_PATH = {'PIX': 4, 'PXB': 5, 'PHB': 8, 'SYS': 9}
#: A host link class in NCCL's terms: nvidia-smi's NODE (across root
#: complexes of one NUMA node) is NCCL's PHB. NV has none: NCCL finds
#: NVLink itself, through NVML.
NCCL_OF_HOST = {'PIX': 'PIX', 'PXB': 'PXB', 'PHB': 'PHB', 'NODE': 'PHB',
                'SYS': 'SYS'}
#: NCCL's ``p2pLevel`` and ``netGdrLevel`` defaults.
NCCL_DEFAULT_LEVEL = 'PXB'
#: NCCL's parser refuses a value of MAX_STR_LEN - 1 = 254 characters.
MAX_VALUE = 253
#: Synthetic switch bus IDs are in PCI domain ffff. A QEMU q35 guest has
#: one PCI segment, 0000, expander buses included, so no bus ID that NCCL
#: reads from the guest's sysfs can be one of them (public clouds' topology
#: files use ffff:ff:xx.0 the same way). NCCL keys its switch nodes by bus
#: ID, so each host switch level gets its own.
SYNTHETIC_DOMAIN = 0xffff
PCI_BRIDGE_CLASS = '0x060400'

_BDF = re.compile(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z')
_HEX = re.compile(r'0x[0-9a-fA-F]{1,8}\Z')
_CPUMAP = re.compile(r'[0-9a-f]+(,[0-9a-f]+)*\Z')
_LINK_SPEED = re.compile(r'[0-9]+(\.[0-9]+)? GT/s( PCIe)?\Z')
_SAFE_VALUE = re.compile(r'[A-Za-z0-9 ._:/,+-]*\Z')


class Problem(Exception):
    """What stops the agent: one line, exit status 2."""


# --- reading the entry ----------------------------------------------------

def fw_cfg_dir(sysfs_root: str) -> str:
    return os.path.join(sysfs_root, 'firmware', 'qemu_fw_cfg')


def entry_path(sysfs_root: str) -> str:
    return os.path.join(fw_cfg_dir(sysfs_root), 'by_name',
                        *ENTRY_NAME.split('/'), 'raw')


def load_module(directory: str) -> None:
    """``modprobe qemu_fw_cfg``, for a kernel that has it as a module.

    Without a QEMU fw_cfg device the module loads and the directory stays
    absent: that guest has no entry. Where modprobe fails, nobody can tell.
    """
    search = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin',
                              '/sbin'])
    modprobe = shutil.which('modprobe', path=search)
    if modprobe is None:
        reason = 'modprobe not found'
    else:
        try:
            result = subprocess.run(
                [modprobe, 'qemu_fw_cfg'], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            reason = str(exc)
        else:
            if result.returncode == 0:
                for _ in range(20):
                    if os.path.isdir(directory):
                        break
                    time.sleep(0.05)
                return
            lines = result.stderr.strip().splitlines()
            reason = (lines[-1] if lines
                      else 'exit status %d' % result.returncode)
    raise Problem('cannot read fw_cfg: %s is absent and "modprobe '
                  'qemu_fw_cfg" failed (%s); load the qemu_fw_cfg kernel '
                  'module (CONFIG_FW_CFG_SYSFS) or give --fw-cfg FILE'
                  % (directory, reason))


def read_entry(sysfs_root: str, fw_cfg: Optional[str],
               load=load_module) -> Optional[bytes]:
    """The entry's bytes, or None where the instance has none."""
    if fw_cfg is not None:
        path = fw_cfg
    else:
        directory = fw_cfg_dir(sysfs_root)
        if (not os.path.isdir(directory)
                and os.path.abspath(sysfs_root) == '/sys'):
            load(directory)
        path = entry_path(sysfs_root)
    try:
        with open(path, 'rb') as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        if fw_cfg is not None:
            raise Problem('cannot read %s: no such file' % fw_cfg)
        return None
    except OSError as exc:
        raise Problem('cannot read %s: %s' % (path, exc.strerror or exc))


# --- the description ------------------------------------------------------

def _is_int(value, low: int, high: int) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and low <= value <= high)


def _require(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise Problem('bad topology description: %s: %s' % (where, what))


def _check_link(link, where: str) -> None:
    _require(isinstance(link, dict), where, 'not an object')
    speed, width = link.get('link_speed'), link.get('link_width')
    _require(speed is None or (isinstance(speed, str)
                               and _SAFE_VALUE.match(speed)
                               and len(speed) <= 64),
             where, '"link_speed" must be null or Linux max_link_speed text')
    _require(width is None or _is_int(width, 0, 64), where,
             '"link_width" must be null or an integer from 0 to 64')


def _check_device(device, index: int, switches: dict) -> None:
    where = 'device %d' % index
    _require(isinstance(device, dict), where, 'not an object')
    _require(_is_int(device.get('bus_nr'), 1, 255), where,
             '"bus_nr" must be an integer from 1 to 255')
    _require(_is_int(device.get('slot'), 0, 31), where,
             '"slot" must be an integer from 0 to 31')
    _require(device.get('role') in ROLES, where,
             '"role" must be one of %s' % ', '.join(ROLES))
    for key in ('vendor', 'class'):
        value = device.get(key)
        _require(isinstance(value, str) and _HEX.match(value), where,
                 '"%s" must be a hex string such as 0x10de' % key)
    _require(_is_int(device.get('numa_node'), 0, 4095), where,
             '"numa_node" must be an integer from 0 to 4095')
    clique = device.get('clique')
    _require(clique is None or _is_int(clique, 0, 15), where,
             '"clique" must be null or an integer from 0 to 15')
    ids = device.get('switches')
    _require(isinstance(ids, list) and all(
        isinstance(s, str) and s in switches for s in ids), where,
        '"switches" must list IDs of "switches"')
    _require(len(set(ids)) == len(ids), where, '"switches" repeats an ID')
    _check_link(device, where)


def check_description(description) -> dict:
    """``description`` itself, once it is a version 1 description."""
    _require(isinstance(description, dict), 'top level', 'not an object')
    version = description.get('version')
    _require(_is_int(version, 0, 1 << 31), 'top level',
             'no integer "version"')
    if version != FORMAT_VERSION:
        raise Problem('the topology description is version %d; this agent '
                      'knows version %d only: upgrade nova-gpu-p2p in the '
                      'image' % (version, FORMAT_VERSION))
    switches = description.get('switches')
    _require(isinstance(switches, dict), 'top level',
             '"switches" must be an object')
    for name, link in switches.items():
        _check_link(link, 'switch %s' % name)
    devices = description.get('devices')
    _require(isinstance(devices, list) and devices, 'top level',
             '"devices" must be a list of at least one device')
    places = set()
    for index, device in enumerate(devices):
        _check_device(device, index, switches)
        place = (device['bus_nr'], device['slot'])
        _require(place not in places, 'device %d' % index,
                 'a second device on expander bus %d slot %d' % place)
        places.add(place)
    pairs = description.get('pairs')
    _require(isinstance(pairs, list), 'top level',
             '"pairs" must be a list')
    for pair in pairs:
        _require(isinstance(pair, list) and len(pair) == 3
                 and _is_int(pair[0], 0, len(devices) - 1)
                 and _is_int(pair[1], 0, len(devices) - 1)
                 and pair[0] != pair[1] and pair[2] in HOST_CLASSES,
                 'pair %s' % json.dumps(pair),
                 'must be [i, j, class] with two device indexes and one of '
                 + ', '.join(HOST_CLASSES))
    return description


def parse_entry(data: bytes) -> dict:
    """The checked description from the fw_cfg entry's bytes."""
    text = data.strip(b'\0 \t\r\n')
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise Problem('bad topology description: not base64')
    try:
        description = json.loads(decoded.decode('utf-8'))
    except (UnicodeDecodeError, ValueError):
        raise Problem('bad topology description: not JSON')
    return check_description(description)


# --- the guest's sysfs ----------------------------------------------------

def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding='ascii', errors='replace') as f:
            return f.read().strip()
    except OSError:
        return None


class Found:
    """A described device as the guest sees it."""

    def __init__(self, index: int, device: dict, address: str,
                 ids: Dict[str, str]):
        self.index = index
        self.device = device
        self.address = address
        self.ids = ids


def _name(index: int, device: dict) -> str:
    return 'device %d (%s on expander bus %d slot %d)' % (
        index, device['role'], device['bus_nr'], device['slot'])


def find_device(sysfs_root: str, index: int, device: dict) -> Found:
    """The function below the device's root port, checked.

    The expander bus with busNr B is the guest's host bridge pci0000:BB and
    the device's root port is 0000:BB:SS.0 below it. The device is
    function 0 of the bus below that port: listed, not computed, whatever
    numbers firmware gave the buses.
    """
    bus, slot = device['bus_nr'], device['slot']
    name = _name(index, device)
    port = os.path.join(sysfs_root, 'devices', 'pci0000:%02x' % bus,
                        '0000:%02x:%02x.0' % (bus, slot))
    try:
        below = sorted(n for n in os.listdir(port)
                       if _BDF.match(n) and n.endswith(':00.0'))
    except OSError:
        raise Problem('%s not found: the guest has no root port %s'
                      % (name, port))
    if not below:
        raise Problem('%s not found: nothing below root port %s'
                      % (name, port))
    address = below[0]
    directory = os.path.join(port, address)
    ids = {}
    for key in ('vendor', 'device', 'subsystem_vendor', 'subsystem_device',
                'class'):
        value = _read(os.path.join(directory, key))
        if value is not None and _HEX.match(value):
            ids[key] = value.lower()
    for key in ('vendor', 'class'):
        if key not in ids or int(ids[key], 16) != int(device[key], 16):
            raise Problem('%s: %s has %s %s, the description says %s'
                          % (name, address, key, ids.get(key, 'unknown'),
                             device[key]))
    return Found(index, device, address, ids)


def cpu_type(proc_root: str) -> List[Tuple[str, str]]:
    """``arch``, ``vendor``, ``familyid``, ``modelid`` as NCCL writes them.

    From the first processor of ``/proc/cpuinfo``; nothing where it cannot
    tell (NCCL then asks CPUID itself). NCCL computes the family as
    CPUID's base family plus the extended family shifted by 4, where Linux
    adds the two: the same number for the families NCCL looks at (Intel 6,
    Zhaoxin 7), converted here all the same.
    """
    text = _read(os.path.join(proc_root, 'cpuinfo')) or ''
    fields = {}
    for line in text.split('\n\n')[0].splitlines():
        key, _, value = line.partition(':')
        fields.setdefault(key.strip(), value.strip())
    vendor = fields.get('vendor_id')
    if vendor is not None:
        if vendor == 'Shanghai':
            vendor = '  Shanghai  '
        try:
            family = int(fields.get('cpu family', ''))
            model = int(fields.get('model', ''))
        except ValueError:
            return [('arch', 'x86_64')]
        if family >= 0xf:
            family = 0xf + ((family - 0xf) << 4)
        if not _SAFE_VALUE.match(vendor):
            return [('arch', 'x86_64')]
        return [('arch', 'x86_64'), ('vendor', vendor),
                ('familyid', str(family)), ('modelid', str(model))]
    if 'CPU implementer' in fields:
        return [('arch', 'arm64')]
    if fields.get('cpu', '').upper().startswith('POWER'):
        return [('arch', 'ppc64')]
    return []


def cpu_affinity(sysfs_root: str, node: int) -> Optional[str]:
    value = _read(os.path.join(sysfs_root, 'devices', 'system', 'node',
                               'node%d' % node, 'cpumap'))
    if value and _CPUMAP.match(value) and len(value) <= MAX_VALUE:
        return value
    return None


# --- the tree NCCL is to see ----------------------------------------------

Key = Tuple
DEVICE, SWITCH = 'device', 'switch'


class Tree:
    """Guest NUMA nodes, host switch levels and devices, as NCCL nodes.

    ``parent`` maps a node to the switch above it, None for the CPU.
    Switches are keyed per NUMA node: a switch is one NCCL node under one
    CPU.
    """

    def __init__(self, description: dict):
        self.devices = description['devices']
        self.parent = {}  # type: Dict[Key, Optional[Key]]
        for index, device in enumerate(self.devices):
            above = None  # type: Optional[Key]
            for switch in device['switches']:
                key = (SWITCH, device['numa_node'], switch)
                self.parent.setdefault(key, above)
                above = key
            self.parent[(DEVICE, index)] = above
        self.expected = {}  # type: Dict[Tuple[int, int], str]
        for i, j, host_class in description['pairs']:
            if host_class in NCCL_OF_HOST:
                self.expected[min(i, j), max(i, j)] = NCCL_OF_HOST[host_class]

    def above(self, key: Key) -> List[Key]:
        chain = []
        node = self.parent[key]
        while node is not None:
            chain.append(node)
            node = self.parent[node]
        return chain

    def meeting(self, i: int, j: int):
        """(switch where i and j meet or None, i's chain, j's chain)."""
        up_i, up_j = self.above((DEVICE, i)), self.above((DEVICE, j))
        for switch in up_i:
            if switch in up_j:
                return switch, up_i, up_j
        return None, up_i, up_j

    def nccl_class(self, i: int, j: int) -> str:
        """The pair's path type as ``ncclTopoSetPaths`` computes it."""
        if self.devices[i]['numa_node'] != self.devices[j]['numa_node']:
            return 'SYS'
        switch, up_i, up_j = self.meeting(i, j)
        if switch is None:
            return 'PHB'
        crossed = up_i.index(switch) + up_j.index(switch) + 1
        return 'PIX' if crossed == 1 else 'PXB'

    def mismatches(self) -> List[Tuple[int, int, str, str]]:
        return [(i, j, want, self.nccl_class(i, j))
                for (i, j), want in sorted(self.expected.items())
                if self.nccl_class(i, j) != want]

    def reconcile(self) -> List[Tuple[int, int, str, str]]:
        """Cut switch links until no pair is closer than on the host.

        Where ACS sends a pair's traffic through the root complex, the
        host's class is PHB though the two share a switch. Such a pair must
        not look closer to NCCL than it is: the link into the switch where
        the two meet is cut on one side (the child then hangs off the CPU),
        whichever side leaves fewer pairs unlike the host. Returns the
        pairs still unlike the host (NCCL sees them farther, or a host
        class the guest's NUMA nodes cannot show).
        """
        while True:
            closer = [(i, j) for i, j, want, got in self.mismatches()
                      if NCCL_PATH[got] < NCCL_PATH[want]
                      and self.meeting(i, j)[0] is not None]
            if not closer:
                return self.mismatches()
            i, j = closer[0]
            switch, up_i, up_j = self.meeting(i, j)
            options = []
            for index, chain in ((i, up_i), (j, up_j)):
                at = chain.index(switch)
                child = chain[at - 1] if at else (DEVICE, index)
                self.parent[child], kept = None, self.parent[child]
                options.append((len(self.mismatches()), len(options), child))
                self.parent[child] = kept
            self.parent[min(options)[2]] = None


# --- NCCL's XML -----------------------------------------------------------

def _element(name: str, attrs: Sequence[Tuple[str, str]]) -> str:
    for key, value in attrs:
        if len(value) > MAX_VALUE or not _SAFE_VALUE.match(value):
            raise Problem('cannot write %s="%s" for NCCL' % (key, value))
    return '<%s%s' % (name, ''.join(' %s="%s"' % kv for kv in attrs))


def _link_attrs(link: dict) -> List[Tuple[str, str]]:
    attrs = []
    speed, width = link.get('link_speed'), link.get('link_width')
    if speed is not None and _LINK_SPEED.match(speed):
        attrs.append(('link_speed', speed))
    if width:
        attrs.append(('link_width', str(width)))
    return attrs


def render(tree: Tree, found: List[Found], switches: dict, sysfs_root: str,
           proc_root: str) -> str:
    """NCCL's topology XML for ``tree``, in the shape NCCL dumps it."""
    by_index = {f.index: f for f in found}
    children = {}  # type: Dict[Optional[Key], List[Key]]
    wanted = set()
    for index in range(len(tree.devices)):
        wanted.add((DEVICE, index))
        wanted.update(tree.above((DEVICE, index)))
    for key in sorted(wanted, key=_order(tree)):
        children.setdefault(tree.parent[key], []).append(key)
    synthetic = {}  # type: Dict[Key, str]

    def busid(key: Key) -> str:
        if key not in synthetic:
            n = len(synthetic)
            synthetic[key] = '%04x:%02x:%02x.0' % (SYNTHETIC_DOMAIN,
                                                   n // 32, n % 32)
        return synthetic[key]

    lines = ['<system version="%d" name="nova-gpu-p2p">'
             % FORMAT_VERSION]
    kind = cpu_type(proc_root)

    def emit(key: Key, depth: int) -> None:
        pad = ' ' * (2 * depth)
        if key[0] == SWITCH:
            attrs = [('busid', busid(key)), ('class', PCI_BRIDGE_CLASS)]
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
        affinity = cpu_affinity(sysfs_root, node)
        if affinity:
            attrs.append(('affinity', affinity))
        lines.append('  ' + _element('cpu', attrs + kind) + '>')
        for key in tops:
            if _numa(tree, key) == node:
                emit(key, 2)
        lines.append('  </cpu>')
    lines.append('</system>')
    return '\n'.join(lines) + '\n'


def _numa(tree: Tree, key: Key) -> int:
    return key[1] if key[0] == SWITCH else tree.devices[key[1]]['numa_node']


def _order(tree: Tree):
    """Children in the order their first device is described."""
    first = {}  # type: Dict[Key, int]
    for index in range(len(tree.devices)):
        for key in [(DEVICE, index)] + tree.above((DEVICE, index)):
            first.setdefault(key, index)
    return lambda key: (first[key], key[0] == DEVICE)


# --- --env ----------------------------------------------------------------

def _plain_class(devices: list, i: int, j: int) -> str:
    """What NCCL sees in the guest without the file: one CPU per node."""
    same = devices[i]['numa_node'] == devices[j]['numa_node']
    return 'PHB' if same else 'SYS'


def level_for(description: dict, roles: Tuple[str, str]) -> Optional[str]:
    """The NCCL level that alone gives the host's decisions, or None.

    For the pairs of ``roles`` (GPU-GPU: P2P, GPU-NIC: GPUDirect RDMA),
    NCCL's default allows a pair at PXB or closer. Without the file, a
    guest pair is PHB (same guest node) or SYS; a level is equivalent
    where exactly the pairs the host allows are at or under it.
    ``NCCL_DEFAULT_LEVEL`` when no pair needs more.
    """
    devices = description['devices']
    pairs = []
    for i, j, host_class in description['pairs']:
        if host_class == 'NV' or sorted(
                (devices[i]['role'], devices[j]['role'])) != sorted(roles):
            continue
        allowed = NCCL_PATH[NCCL_OF_HOST[host_class]] <= NCCL_PATH['PXB']
        pairs.append((allowed, _plain_class(devices, i, j)))
    if not any(allowed for allowed, _ in pairs):
        return NCCL_DEFAULT_LEVEL
    for level in ('PHB', 'SYS'):
        if all(allowed == (NCCL_PATH[plain] <= NCCL_PATH[level])
               for allowed, plain in pairs):
            return level
    return None


def env_lines(description: dict, output: str) -> List[str]:
    lines = []
    if output != '-':
        lines.append('NCCL_TOPO_FILE=%s' % output)
    settings = []
    for variable, roles in (('NCCL_P2P_LEVEL', ('gpu', 'gpu')),
                            ('NCCL_NET_GDR_LEVEL', ('gpu', 'nic'))):
        level = level_for(description, roles)
        if level is None:
            lines.append('# %s: no level alone gives the host\'s choices; '
                         'use the topology file' % variable)
        elif level != NCCL_DEFAULT_LEVEL:
            settings.append('%s=%s' % (variable, level))
    if settings:
        lines.append('# or, without the topology file: '
                     + ' '.join(settings))
    return lines


# --- writing --------------------------------------------------------------

def write_atomic(path: str, text: str) -> None:
    """``text`` at ``path`` whole or not at all: temp file, os.replace."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix='.%s.' % os.path.basename(path), dir=directory)
        with os.fdopen(fd, 'w', encoding='ascii') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise Problem('cannot write %s: %s' % (path, exc.strerror or exc))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


# --- command line ---------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=(
            'Write the NCCL topology file for this instance\'s GPUs and '
            'NICs from the host topology the cloud passes through QEMU '
            'fw_cfg (%s).' % ENTRY_NAME))
    parser.add_argument(
        '--sysfs-root', metavar='DIR', default='/sys',
        help='read DIR as /sys (default: /sys; the qemu_fw_cfg module is '
             'loaded when needed only there)')
    parser.add_argument(
        '--fw-cfg', metavar='FILE',
        help='read the fw_cfg entry text from FILE instead of sysfs')
    parser.add_argument(
        '--proc-root', metavar='DIR', default='/proc',
        help='read DIR as /proc, for the CPU type (default: /proc)')
    parser.add_argument(
        '--output', metavar='FILE', default=DEFAULT_OUTPUT,
        help='where to write the NCCL topology, "-" for standard output '
             '(default: %s)' % DEFAULT_OUTPUT)
    parser.add_argument(
        '--env', action='store_true',
        help='print the NCCL environment settings for this topology '
             'instead of writing it')
    return parser


def run(args: argparse.Namespace) -> int:
    data = read_entry(args.sysfs_root, args.fw_cfg)
    status = sys.stderr if (args.env or args.output == '-') else sys.stdout
    if data is None:
        print(NO_TOPOLOGY, file=status)
        return 0
    description = parse_entry(data)
    found = [find_device(args.sysfs_root, index, device)
             for index, device in enumerate(description['devices'])]
    if args.env:
        for line in env_lines(description, args.output):
            print(line)
        return 0
    tree = Tree(description)
    unlike = tree.reconcile()
    text = render(tree, found, description['switches'], args.sysfs_root,
                  args.proc_root)
    if args.output == '-':
        sys.stdout.write(text)
    else:
        write_atomic(args.output, text)
    for i, j, want, got in unlike:
        print('note: NCCL sees %s between %s and %s, the host %s' % (
            got, found[i].address, found[j].address, want), file=sys.stderr)
    gpus = sum(1 for d in description['devices'] if d['role'] == 'gpu')
    nics = sum(1 for d in description['devices'] if d['role'] == 'nic')
    if args.output != '-':
        print('wrote the NCCL topology of %s and %s to %s'
              % (_count(gpus, 'GPU'), _count(nics, 'NIC'), args.output),
              file=status)
    return 0


def _count(number: int, noun: str) -> str:
    return '%d %s%s' % (number, noun, '' if number == 1 else 's')


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except Problem as exc:
        print('%s: %s' % (PROG, exc), file=sys.stderr)
    except Exception as exc:  # never a traceback in a boot-time unit
        print('%s: unexpected error: %s: %s'
              % (PROG, type(exc).__name__, exc), file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
