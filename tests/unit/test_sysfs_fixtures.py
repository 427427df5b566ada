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

"""Tests of the sysfs tree generator and of the corpus' own consistency.

The sysfs backend's tests trust these trees to look like Linux's, and the
corpus answers to be right; both are checked here with parsing written
independently of the backend.
"""

import itertools
import os
import re
import shutil
import struct
import tempfile

import fixtures

from tests.fixtures import hosts
from tests.fixtures import sysfs_builder as b
from tests.unit import base

_ADDRESS = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
_ROOT_COMPLEX = re.compile(r'^pci([0-9a-f]{4}):([0-9a-f]{2})$')
_RESOURCE_LINE = re.compile(r'^0x[0-9a-f]{16} 0x[0-9a-f]{16} 0x[0-9a-f]{16}$')
_ORDER = {c: i for i, c in enumerate(hosts.CLASSES)}


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _config(path: str) -> bytes:
    with open(os.path.join(path, 'config'), 'rb') as f:
        return f.read()


def _u16(data: bytes, offset: int) -> int:
    return struct.unpack_from('<H', data, offset)[0]


def _pcie_type(config: bytes) -> int | None:
    """Port type from the PCIe capability, walking the capability list."""
    if not _u16(config, 0x06) & 0x10:
        return None
    pointer = config[0x34]
    while pointer:
        if config[pointer] == 0x10:
            return (_u16(config, pointer + 2) >> 4) & 0xf
        pointer = config[pointer + 1]
    return None


def _ext_caps(config: bytes) -> dict[int, int]:
    """Extended capability ID -> offset, walking the list from 0x100."""
    caps: dict[int, int] = {}
    offset = 0x100
    while offset:
        header = struct.unpack_from('<I', config, offset)[0]
        if not header:
            break
        caps[header & 0xffff] = offset
        offset = header >> 20
    return caps


def _tree(root: str) -> dict[str, object]:
    """Every path under root: file bytes, link target, or None for dirs."""
    result: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            key = os.path.relpath(path, root)
            if os.path.islink(path):
                result[key] = ('link', os.readlink(path))
            elif os.path.isdir(path):
                result[key] = None
            else:
                with open(path, 'rb') as f:
                    result[key] = f.read()
    return result


class _Function:
    """One function of a built tree, read back from its files."""

    def __init__(self, root: str, address: str) -> None:
        self.address = address
        self.link = os.path.join(root, 'bus', 'pci', 'devices', address)
        self.path = os.path.realpath(self.link)
        parts = os.path.relpath(self.path, root).split(os.sep)
        self.parts = parts
        self.root_complex = parts[1]
        self.parent = parts[-2] if _ADDRESS.match(parts[-2]) else None
        self.vendor = int(_read(os.path.join(self.path, 'vendor')), 16)
        self.device = int(_read(os.path.join(self.path, 'device')), 16)
        self.class_code = int(_read(os.path.join(self.path, 'class')), 16)
        self.numa_node = int(_read(os.path.join(self.path, 'numa_node')))
        self.config = _config(self.path)
        self.domain = int(address[:4], 16)
        self.bus = int(address[5:7], 16)
        self.slot = int(address[8:10], 16)
        self.fn = int(address[11])

    @property
    def is_bridge(self) -> bool:
        return self.class_code >> 8 == 0x0604

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == 0x10de and self.class_code >> 16 == 0x03

    def _acs_register(self, at: int) -> int | None:
        offset = _ext_caps(self.config).get(0x000d)
        return None if offset is None else _u16(self.config, offset + at)

    @property
    def acs_capability(self) -> int | None:
        return self._acs_register(4)

    @property
    def acs_control(self) -> int | None:
        return self._acs_register(6)

    @property
    def acs_routes_up(self) -> bool:
        """Request Redirect or Egress Control, implemented and enabled."""
        return bool((self.acs_control or 0) & (self.acs_capability or 0)
                    & (b.ACS_P2P_REQUEST_REDIRECT | b.ACS_P2P_EGRESS_CONTROL))


def _functions(root: str) -> dict[str, _Function]:
    devices = os.path.join(root, 'bus', 'pci', 'devices')
    return {a: _Function(root, a) for a in sorted(os.listdir(devices))}


def _tree_class(functions: dict[str, _Function], a: str, c: str,
                route: bool) -> str:
    """The class of a GPU pair, read off the built tree by path walking.

    Written apart from the corpus so that a typo in a hand-written matrix,
    or a generator bug, shows up as a disagreement.
    """
    fa, fc = functions[a], functions[c]
    if fa.root_complex != fc.root_complex:
        if fa.numa_node == fc.numa_node and fa.numa_node >= 0:
            return 'NODE'
        return 'SYS'
    up_a, up_c = fa.parts[2:-1], fc.parts[2:-1]
    common = 0
    while (common < min(len(up_a), len(up_c))
           and up_a[common] == up_c[common]):
        common += 1
    if common == 0:
        return 'PHB'
    path = up_a[common - 1:] + up_c[common:]
    types = [(_pcie_type(functions[p].config), p) for p in path]
    switches = {p for t, p in types if t == b.PCIE_UPSTREAM}
    cls = 'PIX' if len(switches) <= 1 else 'PXB'
    redirect = any(t == b.PCIE_DOWNSTREAM and functions[p].acs_routes_up
                   for t, p in types)
    if route and redirect:
        return 'PHB'
    return cls


class TestCorpusTrees(base.TestCase):
    """Every corpus host, built once, read back file by file."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.base = tempfile.mkdtemp(prefix='sysfs-fixtures-',
                                    dir=b.scratch_dir())
        cls.functions: dict[str, dict[str, _Function]] = {}
        for name, host in hosts.HOSTS.items():
            root = os.path.join(cls.base, name)
            b.build(host, root)
            cls.functions[name] = _functions(root)
        # ACS cases read as root; the others only differ in what is read.
        cls.acs_functions: dict[str, dict[str, _Function]] = {}
        for name, case in hosts.ACS_CASES.items():
            if not case.unprivileged:
                root = os.path.join(cls.base, name)
                b.build(case.host, root)
                cls.acs_functions[name] = _functions(root)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.base, ignore_errors=True)
        super().tearDownClass()

    def root(self, name: str) -> str:
        return os.path.join(self.base, name)

    def test_corpus_names(self):
        self.assertEqual(set(hosts.HOSTS), set(hosts.EXPECTED))
        self.assertLessEqual(
            {'pcie-8gpu-4switch-2socket', 'hgx-8gpu-nvswitch-2numa',
             'four-numa-7gpu', 'epyc-4gpu-per-root-complex',
             'acs-redirect-switch', 'mixed-vendors-nic',
             'gpu-on-cpuless-node', 'large-16gpu-8numa'},
            set(hosts.HOSTS))

    def test_bus_links_resolve_to_function_dirs(self):
        for name, functions in self.functions.items():
            root = os.path.realpath(self.root(name))
            for address, f in functions.items():
                target = os.readlink(f.link)
                self.assertFalse(os.path.isabs(target), target)
                self.assertTrue(target.startswith('../../../devices/pci'),
                                target)
                self.assertTrue(f.path.startswith(root + os.sep))
                self.assertEqual(address, os.path.basename(f.path))
                self.assertEqual('devices', f.parts[0])
                self.assertRegex(f.root_complex, _ROOT_COMPLEX)
                for entry in ('vendor', 'device', 'class', 'config',
                              'resource', 'numa_node', 'local_cpulist'):
                    self.assertTrue(
                        os.path.isfile(os.path.join(f.path, entry)),
                        '%s %s has no %s' % (name, address, entry))
                self.assertEqual(
                    os.path.join(root, 'bus', 'pci'),
                    os.path.realpath(os.path.join(f.path, 'subsystem')))

    def test_nesting_follows_bus_numbers(self):
        for name, functions in self.functions.items():
            for address, f in functions.items():
                domain, bus = _ROOT_COMPLEX.match(f.root_complex).groups()
                self.assertEqual(int(domain, 16), f.domain, address)
                if f.parent is None:
                    self.assertEqual(int(bus, 16), f.bus, address)
                    continue
                parent = functions[f.parent]
                self.assertTrue(parent.is_bridge, f.parent)
                primary, secondary, subordinate = parent.config[0x18:0x1b]
                self.assertEqual(secondary, f.bus, address)
                self.assertEqual(parent.bus, primary, f.parent)
                if f.is_bridge:
                    self.assertLessEqual(f.config[0x1a], subordinate)
                    self.assertGreater(f.config[0x19], secondary)
                self.assertEqual(
                    int(_read(os.path.join(parent.path,
                                           'secondary_bus_number'))),
                    secondary)

    def test_config_space_parses_back(self):
        for name, functions in self.functions.items():
            slots: dict[tuple[int, int, int], int] = {}
            for f in functions.values():
                key = (f.domain, f.bus, f.slot)
                slots[key] = slots.get(key, 0) + 1
            for address, f in functions.items():
                c = f.config
                self.assertEqual(b.CONFIG_SIZE, len(c))
                self.assertEqual((f.vendor, f.device),
                                 struct.unpack_from('<HH', c, 0))
                self.assertEqual(f.class_code, c[0x09] | c[0x0a] << 8
                                 | c[0x0b] << 16)
                self.assertEqual(1 if f.is_bridge else 0, c[0x0e] & 0x7f)
                multifunction = f.fn == 0 and slots[
                    (f.domain, f.bus, f.slot)] > 1
                self.assertEqual(multifunction, bool(c[0x0e] & 0x80),
                                 '%s %s' % (name, address))
                port = _pcie_type(c)
                parent = functions[f.parent] if f.parent else None
                if parent is None:
                    expected = ({b.PCIE_ROOT_PORT} if f.is_bridge
                                else {b.PCIE_RC_ENDPOINT, None})
                elif not f.is_bridge:
                    expected = {b.PCIE_ENDPOINT}
                elif _pcie_type(parent.config) == b.PCIE_UPSTREAM:
                    expected = {b.PCIE_DOWNSTREAM}
                else:
                    expected = {b.PCIE_UPSTREAM}
                self.assertIn(port, expected, '%s %s' % (name, address))
                if port is None:
                    self.assertEqual(0, c[0x34])
                    self.assertEqual({}, _ext_caps(c))
                    continue
                self.assertEqual(0x40, c[0x34])
                self.assertEqual(2, _u16(c, 0x42) & 0xf)
                caps = _ext_caps(c)
                self.assertEqual(0x100, caps[0x0001])
                if 0x000d in caps:
                    self.assertIn(port, (b.PCIE_ROOT_PORT,
                                         b.PCIE_DOWNSTREAM))
                    self.assertEqual(0x148, caps[0x000d])
                    self.assertEqual(0x005f, _u16(c, 0x14c))

    def test_switch_ports_have_acs_by_default(self):
        functions = self.functions['hgx-8gpu-nvswitch-2numa']
        for f in functions.values():
            if _pcie_type(f.config) == b.PCIE_DOWNSTREAM:
                self.assertEqual(0, f.acs_control, f.address)
            elif _pcie_type(f.config) == b.PCIE_ROOT_PORT:
                self.assertIsNone(f.acs_control, f.address)

    def test_acs_registers(self):
        functions = self.functions['acs-redirect-switch']
        self.assertEqual(
            {'0000:00:01.0': 0x001d, '0000:02:00.0': 0x001d,
             '0000:02:01.0': 0x001d, '0000:02:02.0': 0x0000,
             '0000:02:03.0': 0x0000},
            {a: f.acs_control for a, f in functions.items()
             if f.acs_control is not None})
        self.assertEqual('0000:02:00.0',
                         functions['0000:03:00.0'].parent)

    def test_amd_dummy_host_bridge(self):
        functions = self.functions['epyc-4gpu-per-root-complex']
        dummy = functions['0000:20:01.0']
        self.assertEqual(0x060000, dummy.class_code)
        self.assertIsNone(_pcie_type(dummy.config))
        self.assertEqual(0x80, dummy.config[0x0e])
        port = functions['0000:20:01.1']
        self.assertEqual(b.PCIE_ROOT_PORT, _pcie_type(port.config))
        self.assertEqual('0000:20:01.1', functions['0000:21:00.1'].parent)
        self.assertEqual(0x040300, functions['0000:21:00.1'].class_code)
        self.assertEqual(0x80, functions['0000:21:00.0'].config[0x0e])

    def test_host_bridge_on_every_root_complex(self):
        for name, host in hosts.HOSTS.items():
            for rc in host.root_complexes:
                f = self.functions[name]['%04x:%02x:00.0' % (rc.domain,
                                                             rc.bus)]
                self.assertEqual(0x060000, f.class_code)
                self.assertEqual(rc.name, f.root_complex)
                self.assertIsNone(f.parent)

    def test_resource_files(self):
        for name, functions in self.functions.items():
            ranges = []
            for address, f in functions.items():
                lines = _read(os.path.join(f.path, 'resource')).splitlines()
                self.assertEqual(17 if f.is_bridge else 13, len(lines))
                previous64 = False
                for index, line in enumerate(lines):
                    self.assertRegex(line, _RESOURCE_LINE)
                    start, end, flags = (int(x, 16) for x in line.split())
                    if previous64:
                        self.assertEqual((0, 0, 0), (start, end, flags))
                    previous64 = index < 6 and bool(flags & 0x00100000)
                    if index < 6 and flags:
                        self.assertTrue(flags & 0x200)
                        self.assertGreater(end, start)
                        ranges.append((start, end, address))
                        if f.parent:
                            window = (15 if flags & 0x2000 and
                                      flags & 0x00100000 else 14)
                            self._assert_inside(functions, f.parent,
                                                window, start, end)
            ranges.sort()
            for (_, end, a), (start, _, c) in zip(ranges, ranges[1:]):
                self.assertLess(end, start, '%s: %s and %s overlap'
                                % (name, a, c))

    def _assert_inside(self, functions, bridge, window, start, end):
        while bridge:
            line = _read(os.path.join(functions[bridge].path,
                                      'resource')).splitlines()[window]
            low, high, _ = (int(x, 16) for x in line.split())
            self.assertTrue(low <= start and end <= high, bridge)
            bridge = functions[bridge].parent

    def test_iommu_group_and_driver_links(self):
        for name, functions in self.functions.items():
            root = os.path.realpath(self.root(name))
            groups = set()
            for address, f in functions.items():
                group = os.path.realpath(os.path.join(f.path,
                                                      'iommu_group'))
                self.assertEqual(os.path.join(root, 'kernel', 'iommu_groups'),
                                 os.path.dirname(group))
                groups.add(os.path.basename(group))
                self.assertEqual(f.path, os.path.realpath(
                    os.path.join(group, 'devices', address)))
                driver = os.path.join(f.path, 'driver')
                if os.path.islink(driver):
                    target = os.path.realpath(driver)
                    self.assertTrue(os.path.isdir(target))
                    self.assertEqual(os.path.join(root, 'bus', 'pci',
                                                  'drivers'),
                                     os.path.dirname(target))
                    self.assertEqual(f.path, os.path.realpath(
                        os.path.join(target, address)))
                if f.is_nvidia_gpu and name != 'four-numa-7gpu':
                    self.assertEqual('vfio-pci', os.path.basename(
                        os.readlink(driver)))
            self.assertEqual(
                groups, set(os.listdir(os.path.join(root, 'kernel',
                                                    'iommu_groups'))))
        # The GPU's audio function shares its group; unbound means no link.
        mixed = self.functions['mixed-vendors-nic']
        self.assertEqual(
            os.readlink(os.path.join(mixed['0000:03:00.0'].path,
                                     'iommu_group')),
            os.readlink(os.path.join(mixed['0000:03:00.1'].path,
                                     'iommu_group')))
        self.assertFalse(os.path.lexists(
            os.path.join(mixed['0000:06:00.1'].path, 'driver')))
        self.assertEqual('nvidia', os.path.basename(os.readlink(
            os.path.join(self.functions['four-numa-7gpu'][
                '0000:c1:00.0'].path, 'driver'))))

    def test_gpus_and_nics_match_expected(self):
        for name, expected in hosts.EXPECTED.items():
            functions = self.functions[name]
            gpus = [f for f in functions.values() if f.is_nvidia_gpu]
            self.assertEqual(
                [(g.address, g.numa_node, g.root_complex)
                 for g in expected.gpus],
                [(f.address, f.numa_node if f.numa_node >= 0 else None,
                  f.root_complex) for f in gpus], name)
            self.assertEqual(
                list(expected.nics),
                [a for a, f in functions.items()
                 if f.class_code >> 16 == 0x02], name)

    def test_expected_links_cover_every_pair(self):
        for name, expected in list(hosts.EXPECTED.items()) + [
                (name, case.expected)
                for name, case in hosts.ACS_CASES.items()]:
            pairs = {frozenset(p) for p in itertools.combinations(
                expected.addresses, 2)}
            self.assertEqual(pairs, set(expected.links), name)
            self.assertLessEqual(set(expected.links.values()),
                                 set(hosts.CLASSES))
            for pair, cls in (expected.routed_links or {}).items():
                self.assertGreaterEqual(_ORDER[cls],
                                        _ORDER[expected.links[pair]])

    def test_acs_case_registers(self):
        functions = self.acs_functions['acs-egress-control']
        self.assertEqual(
            {'0000:02:00.0': (0x007f, 0x0020),
             '0000:02:01.0': (0x005f, 0x0000),
             '0000:02:02.0': (0x005f, 0x0000)},
            {a: (f.acs_capability, f.acs_control)
             for a, f in functions.items() if f.acs_control is not None})
        self.assertEqual(
            [b.PCIE_DOWNSTREAM] * 2,
            [_pcie_type(functions[a].config)
             for a in ('0000:07:00.0', '0000:07:01.0')])

    def test_expected_links_agree_with_tree(self):
        tables = [(name, expected, self.functions[name])
                  for name, expected in hosts.EXPECTED.items()]
        tables += [(name, hosts.ACS_CASES[name].expected, functions)
                   for name, functions in self.acs_functions.items()]
        for name, expected, functions in tables:
            for a, c in itertools.combinations(expected.addresses, 2):
                for policy in ('ignore', 'route'):
                    self.assertEqual(
                        expected.link(a, c, policy),
                        _tree_class(functions, a, c, policy == 'route'),
                        '%s %s %s %s' % (name, a, c, policy))
        self.assertEqual('PHB', hosts.EXPECTED['acs-redirect-switch'].link(
            '0000:03:00.0', '0000:06:00.0'))
        self.assertEqual('PIX', hosts.EXPECTED['acs-redirect-switch'].link(
            '0000:05:00.0', '0000:06:00.0'))

    def test_numa_files(self):
        for name, host in hosts.HOSTS.items():
            base = os.path.join(self.root(name), 'devices', 'system', 'node')
            ids = ','.join(str(n.id) for n in host.numa_nodes)
            online = _read(os.path.join(base, 'online')).strip()
            self.assertEqual(
                b.parse_cpulist(ids), b.parse_cpulist(online))
            self.assertEqual(online, _read(os.path.join(base, 'possible'))
                             .strip())
            cpus = {}
            for node in host.numa_nodes:
                path = os.path.join(base, 'node%d' % node.id)
                text = _read(os.path.join(path, 'cpulist'))
                self.assertTrue(text.endswith('\n'))
                cpus[node.id] = b.parse_cpulist(text)
                self.assertEqual(b.parse_cpulist(node.cpus), cpus[node.id])
                self.assertEqual(
                    ' '.join(str(d) for d in node.distances) + '\n',
                    _read(os.path.join(path, 'distance')))
            every = frozenset().union(*cpus.values())
            for f in self.functions[name].values():
                local = b.parse_cpulist(_read(os.path.join(f.path,
                                                           'local_cpulist')))
                self.assertEqual(
                    every if f.numa_node < 0 else cpus[f.numa_node], local)
        cpuless = os.path.join(self.root('gpu-on-cpuless-node'), 'devices',
                               'system', 'node')
        self.assertEqual('\n', _read(os.path.join(cpuless, 'node1',
                                                  'cpulist')))
        self.assertEqual('0\n', _read(os.path.join(cpuless, 'has_cpu')))
        self.assertEqual('20 10\n', _read(os.path.join(cpuless, 'node1',
                                                       'distance')))
        gpu = self.functions['gpu-on-cpuless-node']['0001:01:00.0']
        self.assertEqual(-1, gpu.numa_node)
        self.assertEqual('pci0001:00', gpu.root_complex)

    def test_large_host_function_count(self):
        count = len(self.functions['large-16gpu-8numa'])
        self.assertTrue(450 <= count <= 550, count)
        self.assertEqual(16, len(hosts.EXPECTED['large-16gpu-8numa'].gpus))


class TestBuild(base.TestCase):

    def tmp(self) -> str:
        return self.useFixture(
            fixtures.TempDir(rootdir=b.scratch_dir())).path

    def test_unprivileged_config_is_first_64_bytes(self):
        host = hosts.HOSTS['acs-redirect-switch']
        full, short = self.tmp(), self.tmp()
        b.build(host, full)
        b.build(host, short, unprivileged=True)
        full_functions = _functions(full)
        for address, f in _functions(short).items():
            self.assertEqual(64, len(f.config))
            self.assertEqual(full_functions[address].config[:64], f.config)

    def test_deterministic(self):
        for name in ('hgx-8gpu-nvswitch-2numa', 'epyc-4gpu-per-root-complex'):
            first, second = self.tmp(), self.tmp()
            b.build(hosts.HOSTS[name], first)
            b.build(hosts.HOSTS[name], second)
            self.assertEqual(_tree(first), _tree(second), name)

    def test_fixture_and_addresses(self):
        host = hosts.HOSTS['pcie-2level-switch-pxb']
        root = self.useFixture(b.SysfsTree(host)).root
        for address, path in b.addresses(host).items():
            self.assertEqual(
                os.path.realpath(os.path.join(root, path)),
                os.path.realpath(os.path.join(root, 'bus', 'pci',
                                              'devices', address)))

    def test_iommu_off(self):
        host = b.Host(b.numa_nodes('0-7'),
                      (b.root_complex(0, 0, b.nvidia_gpu()),), iommu=False)
        root = self.tmp()
        b.build(host, root)
        self.assertEqual([], os.listdir(os.path.join(root, 'kernel',
                                                     'iommu_groups')))
        self.assertFalse(os.path.lexists(os.path.join(
            root, 'bus', 'pci', 'devices', '0000:01:00.0', 'iommu_group')))

    def test_bad_descriptions(self):
        nodes = b.numa_nodes('0-7')
        for host in (
                b.Host(nodes, (b.root_complex(0, 1, b.nvme()),)),
                b.Host(nodes, (b.root_complex(0, 0), b.root_complex(0, 0))),
                b.Host(nodes, (b.root_complex(0, 0, b.switch(b.nvme())),
                               b.root_complex(0x02, 0, b.nvme()))),
                b.Host(nodes, (b.root_complex(0xfe, 0, b.switch(
                    b.nvme(), b.nvme())),)),
                b.Host(nodes, (b.root_complex(0, 0, fillers=300),))):
            self.assertRaises(ValueError, b.build, host, self.tmp())

    def test_cpu_formats(self):
        self.assertEqual('0-2,5,8-9', b.cpulist({0, 1, 2, 5, 8, 9}))
        self.assertEqual('', b.cpulist(set()))
        self.assertEqual(frozenset({0, 1, 2, 5}), b.parse_cpulist('0-2,5\n'))
        self.assertEqual('00000000,ffffffff',
                         b.cpumask(frozenset(range(32)), 64))
        self.assertEqual('ff', b.cpumask(frozenset(range(8)), 8))
        self.assertEqual('ff,00000000',
                         b.cpumask(frozenset(range(32, 40)), 40))
