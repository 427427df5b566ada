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

"""The ``sysfs`` backend: the host's PCI tree as Linux shows it.

Works while the GPUs are bound to vfio-pci, when neither the NVIDIA driver
nor NVML can see them. Everything is read under ``[gpu_p2p] sysfs_root``.
Bridges' config space needs privileges only in the host's own ``/sys``:
there it is read by address, all bridges in one call to nova-compute's
privsep daemon (:func:`read_host_configs`); any other tree is read
directly, unprivileged.
"""

from collections.abc import Callable
import dataclasses
import errno
import os
import re

from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import input_file
from oslo_log import log as logging

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p import exception
from nova_gpu_p2p import native_thread
from nova_gpu_p2p import pci_address
from nova_gpu_p2p import privsep
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_config

LOG = logging.getLogger(__name__)

_ROOT_COMPLEX = re.compile(r'^pci[0-9a-f]{4}:[0-9a-f]{2}$')
_IORESOURCE_MEM = 0x00000200
_IORESOURCE_MEM_64 = 0x00100000
_BAR_LINES = 6
#: The kernel's largest CPU count (NR_CPUS with x86's MAXSMP).
MAX_CPUS = 8192
_CPU_RANGE = re.compile(r'\s*([0-9]+)(?:-([0-9]+))?\s*')
UNREADABLE_CONFIG = (
    'PCI config space beyond 64 bytes could not be read (nova-compute\'s '
    'privsep daemon is not available, or not root): ACS settings are '
    'unknown and treated as P2P Request Redirect on, so with acs_policy = '
    'route GPUs behind a PCIe switch count as PHB at best; switch port '
    'types are inferred from the tree. Let nova-compute\'s privsep daemon '
    'start (it needs CAP_SYS_ADMIN), or run the CLI with sudo')
NO_ANSWER = (
    '%s: PCI config space reads all 0xff (the device does not answer: '
    'gone, in reset or powered off): its ACS settings are unknown and '
    'treated as P2P Request Redirect on; find out why it does not answer '
    '(dmesg, lspci -vvv -s ADDRESS) and run discovery again')

ConfigReader = Callable[[str, int], bytes]
#: Config space by address: bytes, None for a device that vanished, or
#: why it could not be read.
Configs = dict[str, bytes | str | None]


def _read(path: str) -> str:
    return input_file.read_text(path, input_file.MAX_ATTRIBUTE).strip()


#: What the kernel writes, and a capture holds: NUMA node IDs (the
#: kernel's NODES_SHIFT allows 1024 nodes), IOMMU group numbers, ACPI
#: SLIT distances (one byte each).
MAX_NUMA_NODE = 4095
MAX_IOMMU_GROUP = 2 ** 31 - 1
MAX_DISTANCE = 255


def _bounded_text(text: str, high: int, low: int, where: str) -> int:
    """ASCII decimal, ``low`` to ``high``; ValueError naming ``where``."""
    value = ascii_decimal.parse(text.removeprefix('-'))
    if value is not None and text.startswith('-'):
        value = -value
    if value is None or not low <= value <= high:
        raise ValueError('%s: %s is not a number from %d to %d'
                         % (where, errors.quoted(text), low, high))
    return value


def _bounded(path: str, high: int, low: int) -> int:
    return _bounded_text(_read(path), high, low, path)


def _hex(path: str, bits: int) -> int:
    """A hex attribute (vendor, device, class) of at most ``bits`` bits."""
    value = int(_read(path), 16)
    if not 0 <= value < 1 << bits:
        raise ValueError('%s holds %#x, not a %d-bit value'
                         % (path, value, bits))
    return value


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` as Linux writes CPU lists; empty for none.

    Raises ValueError naming the first part that is not ``N`` or ``N-M``
    with ``N <= M <`` :data:`MAX_CPUS`, which the kernel never writes but
    a static topology file may: ``31-0`` would otherwise read as no CPU
    at all, and ``0-99999999999`` take the host's memory.

    Not Nova's ``nova.virt.hardware.parse_cpu_spec``: its grammar is an
    operator's (``^`` exclusions, no bound) and it raises Nova's Invalid;
    and importing it brings ``nova.objects`` and eventlet (seconds) into
    ``nova-gpu-p2p``'s commands, whose topology never imports Nova.
    """
    cpus: set[int] = set()
    for part in text.split(','):
        if not part.strip():
            continue
        match = _CPU_RANGE.fullmatch(part)
        if match is not None:
            first = int(match.group(1))
            last = int(match.group(2) or first)
        if match is None or not first <= last < MAX_CPUS:
            raise ValueError("%s is not a CPU or a range of CPUs (N or "
                             "N-M, N <= M < %d)"
                             % (errors.quoted(part.strip()), MAX_CPUS))
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def parse_bars64(text: str) -> tuple[int, ...]:
    """Sizes of the 64-bit memory BARs in a sysfs ``resource`` file."""
    sizes = []
    for line in text.splitlines()[:_BAR_LINES]:
        start, end, flags = (int(field, 16) for field in line.split())
        if (flags & _IORESOURCE_MEM and flags & _IORESOURCE_MEM_64
                and end > start):
            sizes.append(end - start + 1)
    return tuple(sizes)


#: PCIe links are at most 32 lanes wide; the kernel writes the 6-bit
#: field as read, so a device that does not answer (config space all
#: ones) shows 63.
MAX_LINK_WIDTH = 32


def _link(path: str) -> dict[str, str | int | None]:
    """The PCIe link above a function; None where sysfs has no answer.

    Functions without a PCIe capability have no such files; the kernel
    writes ``Unknown`` speed and width 0 where the link is down or odd,
    and 63 lanes where the device does not answer.
    """
    try:
        speed = _read(os.path.join(path, 'max_link_speed'))
        width = int(_read(os.path.join(path, 'max_link_width')))
    except (OSError, ValueError):
        return {'link_speed': None, 'link_width': None}
    return {'link_speed': speed if 'GT/s' in speed else None,
            'link_width': width if 0 < width <= MAX_LINK_WIDTH else None}


def _subsystem(path: str) -> dict[str, int | None]:
    """Who built the board and which it is; None where sysfs has no answer.

    Read for every function, though only GPUs' are judged by them: the
    kernel writes both files for every PCI function.
    """
    try:
        vendor = _hex(os.path.join(path, 'subsystem_vendor'), 16)
        device = _hex(os.path.join(path, 'subsystem_device'), 16)
        return {'subsystem_vendor': vendor, 'subsystem_device': device}
    except (OSError, ValueError):
        return {'subsystem_vendor': None, 'subsystem_device': None}


def _link_name(path: str) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except FileNotFoundError:
        return None


def read_config_direct(path: str, size: int) -> bytes:
    return input_file.read_head(path, size)


def read_pci_config(path: str, size: int) -> bytes:
    """Config space in a tree other than the host's /sys: read directly.

    Unprivileged: a copy of a host's tree (tests, offline analysis,
    ``--sysfs-root``) holds whatever was written there.
    """
    return read_config_direct(path, size)


def read_host_configs(addresses: list[str],
                      via_daemon: bool | None = None) -> Configs:
    """Config space of the host's own PCI functions, by address.

    Through nova-compute's sys_admin privsep daemon, at most
    :data:`privsep.MAX_BATCH` addresses a round trip; as root (the CLI
    under sudo), the same checked read in this process. ``via_daemon``
    overrides that choice (the benchmark).
    """
    if via_daemon is None:
        via_daemon = os.geteuid() != 0
    result: Configs = {}
    for start in range(0, len(addresses), privsep.MAX_BATCH):
        batch = addresses[start:start + privsep.MAX_BATCH]
        if via_daemon:
            # The privsep client works only on the eventlet hub's thread.
            result.update(native_thread.on_hub(
                privsep.read_pci_configs, batch, pci_config.EXTENDED_SIZE))
        else:
            result.update(privsep.read_configs(
                privsep.SYS, batch, pci_config.EXTENDED_SIZE))
    return result


class SysfsBackend(backends.TopologyBackend):
    """Reads ``bus/pci/devices``, ``devices/pci*`` and ``devices/system``."""

    capabilities = backends.Capabilities(bindings=True)

    def __init__(self, conf, read_config: ConfigReader | None = None):
        super().__init__(conf)
        self.root = conf.gpu_p2p.sysfs_root
        self.read_config = read_config
        self._unanswered: list[str] = []

    def discover(self) -> model.HostTopology:
        devices = os.path.join(self.root, 'bus', 'pci', 'devices')
        try:
            entries = sorted(os.listdir(devices))
        except OSError as exc:
            raise exception.TopologyError(
                'cannot list PCI devices in %s: %s' % (devices, exc))
        self._refuse_size(devices, len(entries), 0)
        functions: dict[str, model.PCIFunction] = {}
        self._config_ok = True
        self._unanswered = []
        skipped: dict[str, OSError | ValueError] = {}
        located: dict[str, tuple[str, int]] = {}
        for address in entries:
            try:
                located[address] = self._locate(devices, address)
            except (OSError, ValueError) as exc:
                skipped[address] = exc
        # Only bridges carry what config space tells us: port type, ACS.
        configs = self._read_configs({
            address: path for address, (path, class_code) in located.items()
            if class_code >> 8 == model.BRIDGE_CLASS})
        for address, (path, class_code) in located.items():
            try:
                functions[address] = self._function(address, path,
                                                    class_code, configs)
            except (OSError, ValueError) as exc:
                skipped[address] = exc
        findings = ['%s skipped: %s' % (address, skipped[address])
                    for address in sorted(skipped)]
        try:
            model.refuse_parent_loops(functions)
        except ValueError as exc:
            raise exception.TopologyError('PCI devices in %s: %s' % (
                devices, exc))
        for address in sorted(functions):
            if self._orphaned(functions, address):
                findings.append('%s skipped: a bridge above it vanished '
                                'during the scan' % address)
                del functions[address]
        functions = _infer_port_types(functions)
        self._refuse_size(devices, len(functions),
                          sum(f.is_nvidia_gpu for f in functions.values()))
        if not self._config_ok:
            findings.append(UNREADABLE_CONFIG)
        findings.extend(NO_ANSWER % address
                        for address in sorted(self._unanswered))
        return model.HostTopology(
            functions=functions,
            numa_nodes=self._numa_nodes(findings),
            config_space_read=self._config_ok,
            findings=tuple(findings))

    @staticmethod
    def _refuse_size(devices: str, functions: int, gpus: int) -> None:
        problem = model.size_problem(functions, gpus)
        if problem:
            raise exception.TopologyError('PCI devices in %s: %s' % (
                devices, problem))

    @staticmethod
    def _orphaned(functions, address) -> bool:
        parent = functions[address].parent
        while parent is not None:
            if parent not in functions:
                return True
            parent = functions[parent].parent
        return False

    @staticmethod
    def _locate(devices: str, address: str) -> tuple[str, int]:
        """A function's directory and class code (is it a bridge?)."""
        # One readlink, not realpath's lstat of every path component: this
        # runs for every function of the host on each periodic update.
        link = os.path.join(devices, address)
        path = os.path.normpath(os.path.join(devices, os.readlink(link)))
        return path, _hex(os.path.join(path, 'class'), 24)

    def _read_configs(self, bridges: dict[str, str]) -> Configs:
        """Config space of the bridges (address: directory) at once.

        The host's own /sys: one privileged call for all of them. Another
        tree, or a reader the caller gave: one read per bridge, until the
        first that fails (the others would fail alike).
        """
        if (self.read_config is None
                and os.path.realpath(self.root) == privsep.SYS):
            try:
                return read_host_configs(sorted(bridges))
            except Exception as exc:  # privsep failures come in many kinds
                LOG.debug('privileged read of config space failed: %s', exc)
                return {}
        read = self.read_config or read_pci_config
        configs: Configs = {}
        for address in sorted(bridges):
            config = os.path.join(bridges[address], 'config')
            try:
                configs[address] = read(config, pci_config.EXTENDED_SIZE)
            except FileNotFoundError:
                configs[address] = None
            except Exception as exc:  # privsep failures come in many kinds
                configs[address] = str(exc)
                break
        return configs

    def _function(self, address: str, path: str, class_code: int,
                  configs: Configs) -> model.PCIFunction:
        parts = path.split(os.sep)
        try:
            root_complex = next(p for p in parts if _ROOT_COMPLEX.match(p))
        except StopIteration:
            raise ValueError('%s is not under a devices/pciDDDD:BB '
                             'directory' % path)
        parent = parts[-2] if pci_address.is_sysfs(parts[-2]) else None
        numa_node = _bounded(os.path.join(path, 'numa_node'),
                             MAX_NUMA_NODE, -1)
        group = _link_name(os.path.join(path, 'iommu_group'))
        iommu_group = (None if group is None
                       else _bounded_text(group, MAX_IOMMU_GROUP, 0, path))
        facts = (self._config_facts(path, address, configs)
                 if class_code >> 8 == model.BRIDGE_CLASS
                 else pci_config.ConfigFacts(port_type=None, acs=None))
        return model.PCIFunction(
            address=address,
            vendor=_hex(os.path.join(path, 'vendor'), 16),
            device=_hex(os.path.join(path, 'device'), 16),
            class_code=class_code,
            parent=parent,
            root_complex=root_complex,
            numa_node=numa_node if numa_node >= 0 else None,
            driver=_link_name(os.path.join(path, 'driver')),
            iommu_group=iommu_group,
            bars64=parse_bars64(_read(os.path.join(path, 'resource'))),
            port_type=facts.port_type or model.PortType.ENDPOINT,
            acs=facts.acs,
            acs_known=facts.acs_known,
            iommu=_link_name(os.path.join(path, 'iommu')),
            **_link(path), **_subsystem(path))

    def _config_facts(self, path: str, address: str,
                      configs: Configs) -> pci_config.ConfigFacts:
        config = os.path.join(path, 'config')
        # Absent: not asked for, after an earlier read failed.
        data = configs.get(address, '')
        if data is None:
            # The device vanished: skip it, not config reads.
            raise FileNotFoundError(errno.ENOENT, 'no such device any more',
                                    config)
        if isinstance(data, bytes) and len(data) > 64:
            if not pci_config.answered(data):
                self._unanswered.append(address)
            return pci_config.parse(data)
        if isinstance(data, str) and data:
            LOG.debug('privileged read of %s failed: %s', config, data)
        self._config_ok = False
        return pci_config.UNREAD

    def _numa_nodes(self, findings: list[str]) -> tuple[model.NumaNode, ...]:
        base = os.path.join(self.root, 'devices', 'system', 'node')
        try:
            names = [n for n in os.listdir(base)
                     if re.fullmatch('node[0-9]+', n)]
        except OSError:
            findings.append('no NUMA information in %s: one node assumed'
                            % base)
            return ()
        names.sort(key=lambda n: int(n[4:]))
        initiators = self._generic_initiators(base, findings)
        read: dict[int, model.NumaNode] = {}
        for position, name in enumerate(names):
            node_dir = os.path.join(base, name)
            try:
                node = model.NumaNode(
                    id=int(name[4:]),
                    cpus=parse_cpulist(
                        _read(os.path.join(node_dir, 'cpulist'))),
                    distances=tuple(
                        _bounded_text(d, MAX_DISTANCE, 0, node_dir)
                        for d in _read(
                            os.path.join(node_dir, 'distance')).split()),
                    generic_initiator=int(name[4:]) in initiators)
            except (OSError, ValueError) as exc:
                findings.append('NUMA %s skipped: %s' % (name, exc))
                continue
            if len(node.distances) != len(names):
                findings.append(
                    'NUMA %s skipped: %d distances for %d nodes'
                    % (name, len(node.distances), len(names)))
                continue
            read[position] = node
        # Each distance list is by node position: keep the kept nodes'.
        return tuple(
            dataclasses.replace(node, distances=tuple(
                node.distances[kept] for kept in read))
            for node in read.values())

    @staticmethod
    def _generic_initiators(base: str, findings: list[str]) -> frozenset[int]:
        """The ACPI Generic Initiator nodes (Linux 5.10 and later).

        Absent on kernels before 5.10 and on hosts without any: none.
        """
        path = os.path.join(base, 'has_generic_initiator')
        try:
            return parse_cpulist(_read(path))
        except FileNotFoundError:
            return frozenset()
        except (OSError, ValueError) as exc:
            findings.append('%s unreadable, no generic initiator node '
                            'assumed: %s' % (path, exc))
            return frozenset()


def _infer_port_types(functions: dict[str, model.PCIFunction]
                      ) -> dict[str, model.PCIFunction]:
    """Fill in bridge roles config space did not give, from the tree.

    PCIe allows one shape: a bridge directly under a root complex is a root
    port; below a root port or a switch downstream port, a bridge is a
    switch upstream port; below an upstream port, a downstream port.
    """
    below = {
        None: model.PortType.ROOT_PORT,
        model.PortType.ROOT_PORT: model.PortType.UPSTREAM,
        model.PortType.DOWNSTREAM: model.PortType.UPSTREAM,
        model.PortType.UPSTREAM: model.PortType.DOWNSTREAM,
    }
    result: dict[str, model.PCIFunction] = {}

    def resolve(address: str) -> model.PCIFunction:
        if address in result:
            return result[address]
        function = functions[address]
        if function.is_bridge and function.port_type is \
                model.PortType.ENDPOINT:
            parent_type = (resolve(function.parent).port_type
                           if function.parent else None)
            function = dataclasses.replace(
                function,
                port_type=below.get(parent_type, model.PortType.PCI_BRIDGE))
        result[address] = function
        return function

    for address in functions:
        resolve(address)
    return result
