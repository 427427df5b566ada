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
"""

from collections.abc import Callable
import dataclasses
import os
import re

from oslo_log import log as logging

from nova_gpu_p2p import privsep
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_config

LOG = logging.getLogger(__name__)

_ROOT_COMPLEX = re.compile(r'^pci[0-9a-f]{4}:[0-9a-f]{2}$')
_ADDRESS = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
_IORESOURCE_MEM = 0x00000200
_IORESOURCE_MEM_64 = 0x00100000
_BAR_LINES = 6
UNREADABLE_CONFIG = (
    'PCI config space beyond 64 bytes could not be read (nova-compute\'s '
    'privsep daemon is not available, or not root): ACS settings are '
    'unknown and treated as P2P Request Redirect on, so with acs_policy = '
    'route GPUs behind a PCIe switch count as PHB at best; switch port '
    'types are inferred from the tree. Let nova-compute\'s privsep daemon '
    'start (it needs CAP_SYS_ADMIN), or run the CLI with sudo')

ConfigReader = Callable[[str, int], bytes]


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def _hex(path: str) -> int:
    return int(_read(path), 16)


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` as Linux writes CPU lists; empty for none."""
    cpus: set[int] = set()
    for part in text.strip().split(','):
        if not part:
            continue
        first, _, last = part.partition('-')
        cpus.update(range(int(first), int(last or first) + 1))
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


def _link_name(path: str) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except FileNotFoundError:
        return None


def read_config_direct(path: str, size: int) -> bytes:
    with open(path, 'rb') as f:
        return f.read(size)


def read_pci_config(path: str, size: int) -> bytes:
    """As root (the CLI under sudo), read directly; else through privsep."""
    if os.geteuid() == 0:
        return read_config_direct(path, size)
    return privsep.read_pci_config(path, size)


class SysfsBackend(backends.TopologyBackend):
    """Reads ``bus/pci/devices``, ``devices/pci*`` and ``devices/system``."""

    def __init__(self, conf, read_config: ConfigReader | None = None):
        super().__init__(conf)
        self.root = conf.gpu_p2p.sysfs_root
        self.read_config = read_config or read_pci_config

    def discover(self) -> model.HostTopology:
        devices = os.path.join(self.root, 'bus', 'pci', 'devices')
        try:
            entries = sorted(os.listdir(devices))
        except OSError as exc:
            raise backends.TopologyError(
                'cannot list PCI devices in %s: %s' % (devices, exc))
        findings: list[str] = []
        functions: dict[str, model.PCIFunction] = {}
        self._config_ok = True
        for address in entries:
            try:
                functions[address] = self._function(devices, address)
            except (OSError, ValueError) as exc:
                findings.append('%s skipped: %s' % (address, exc))
        for address in sorted(functions):
            if self._orphaned(functions, address):
                findings.append('%s skipped: a bridge above it vanished '
                                'during the scan' % address)
                del functions[address]
        functions = _infer_port_types(functions)
        if not self._config_ok:
            findings.append(UNREADABLE_CONFIG)
        return model.HostTopology(
            functions=functions,
            numa_nodes=self._numa_nodes(findings),
            config_space_read=self._config_ok,
            findings=tuple(findings))

    @staticmethod
    def _orphaned(functions, address) -> bool:
        parent = functions[address].parent
        while parent is not None:
            if parent not in functions:
                return True
            parent = functions[parent].parent
        return False

    def _function(self, devices: str, address: str) -> model.PCIFunction:
        # One readlink, not realpath's lstat of every path component: this
        # runs for every function of the host on each periodic update.
        link = os.path.join(devices, address)
        path = os.path.normpath(os.path.join(devices, os.readlink(link)))
        parts = path.split(os.sep)
        try:
            root_complex = next(p for p in parts if _ROOT_COMPLEX.match(p))
        except StopIteration:
            raise ValueError('%s is not under a devices/pciDDDD:BB '
                             'directory' % path)
        parent = parts[-2] if _ADDRESS.match(parts[-2]) else None
        numa_node = int(_read(os.path.join(path, 'numa_node')))
        iommu_group = _link_name(os.path.join(path, 'iommu_group'))
        class_code = _hex(os.path.join(path, 'class'))
        # Only bridges carry what config space tells us: port type, ACS.
        facts = (self._config_facts(path, address)
                 if class_code >> 8 == model.BRIDGE_CLASS
                 else pci_config.ConfigFacts(port_type=None, acs=None))
        return model.PCIFunction(
            address=address,
            vendor=_hex(os.path.join(path, 'vendor')),
            device=_hex(os.path.join(path, 'device')),
            class_code=class_code,
            parent=parent,
            root_complex=root_complex,
            numa_node=numa_node if numa_node >= 0 else None,
            driver=_link_name(os.path.join(path, 'driver')),
            iommu_group=int(iommu_group) if iommu_group else None,
            bars64=parse_bars64(_read(os.path.join(path, 'resource'))),
            port_type=facts.port_type or model.PortType.ENDPOINT,
            acs=facts.acs,
            acs_known=facts.acs_known)

    def _config_facts(self, path: str,
                      address: str) -> pci_config.ConfigFacts:
        config = os.path.join(path, 'config')
        if self._config_ok:
            try:
                data = self.read_config(config, pci_config.EXTENDED_SIZE)
                if len(data) > 64:
                    return pci_config.parse(data)
            except FileNotFoundError:
                raise  # the device vanished: skip it, not config reads
            except Exception as exc:  # privsep failures come in many kinds
                LOG.debug('privileged read of %s failed: %s', config, exc)
            self._config_ok = False
        return pci_config.UNREAD

    def _numa_nodes(self, findings: list[str]) -> tuple[model.NumaNode, ...]:
        base = os.path.join(self.root, 'devices', 'system', 'node')
        try:
            names = [n for n in os.listdir(base)
                     if re.match(r'^node\d+$', n)]
        except OSError:
            findings.append('no NUMA information in %s: one node assumed'
                            % base)
            return ()
        nodes = []
        for name in sorted(names, key=lambda n: int(n[4:])):
            node_dir = os.path.join(base, name)
            try:
                nodes.append(model.NumaNode(
                    id=int(name[4:]),
                    cpus=parse_cpulist(
                        _read(os.path.join(node_dir, 'cpulist'))),
                    distances=tuple(int(d) for d in _read(
                        os.path.join(node_dir, 'distance')).split())))
            except (OSError, ValueError) as exc:
                findings.append('NUMA %s skipped: %s' % (name, exc))
        return tuple(nodes)


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
