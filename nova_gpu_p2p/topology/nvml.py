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

"""The ``nvml`` backend: the sysfs PCI tree, plus NVLink from NVML.

The PCI tree, NUMA nodes and ACS always come from sysfs. NVML only adds
which GPU pairs NVLink joins, and it sees only GPUs bound to the NVIDIA
driver: on a virtualization host they are usually bound to vfio-pci, so a
missing or failing NVML is reported as a finding, never as an error.
"""

from collections.abc import Iterator
import contextlib
import dataclasses
import itertools
import types

from oslo_log import log as logging

from nova_gpu_p2p import exception
from nova_gpu_p2p import pci_address
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import consumer_gpus
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs

LOG = logging.getLogger(__name__)

NVML_UNAVAILABLE = (
    'NVML is not available (%s), so NVLink is not reported and GPU pairs '
    'are classed by the PCI tree alone; NVML sees only GPUs bound to the '
    'NVIDIA driver, never those bound to vfio-pci')


def bus_id_address(bus_id: bytes | str) -> str:
    """An NVML bus ID as sysfs spells it.

    NVML writes the domain with 8 hex digits (``00000000:81:00.0``), and
    older pynvml releases return bytes.
    """
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode('ascii')
    return pci_address.from_nvml(bus_id)


@contextlib.contextmanager
def session() -> Iterator[types.ModuleType]:
    """pynvml, initialised for the block; raises NvmlUnavailable."""
    try:
        import pynvml
    except ImportError as exc:
        raise exception.NvmlUnavailable(str(exc))
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise exception.NvmlUnavailable(str(exc))
    try:
        yield pynvml
    finally:
        # A failed shutdown must not lose a finished answer.
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def devices(nvml: types.ModuleType) -> list[tuple[object, str]]:
    """Handle and address of each GPU NVML sees; one it can't is skipped.

    Raises ``nvml.NVMLError`` when NVML cannot count its GPUs.
    """
    found = []
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            address = bus_id_address(
                nvml.nvmlDeviceGetPciInfo(handle).busId)
        except (nvml.NVMLError, ValueError) as exc:
            LOG.debug('NVML GPU %d skipped: %s', index, exc)
            continue
        found.append((handle, address))
    return found


def brands(nvml: types.ModuleType,
           known: set[str]) -> dict[str, str]:
    """NVML's brand of each GPU it sees and sysfs knows, by address.

    A GPU NVML cannot brand is left out: the PCI ID database and the
    device judge it. A value :data:`consumer_gpus.NVML_BRANDS` lacks is
    kept as ``NVML brand N``, which the rule knows no more than a capture's
    unknown name: it fails closed, one rule for both.
    """
    names = {getattr(nvml, 'NVML_BRAND_' + key): name
             for key, name in consumer_gpus.NVML_BRANDS.items()
             if hasattr(nvml, 'NVML_BRAND_' + key)}
    if not hasattr(nvml, 'nvmlDeviceGetBrand'):
        return {}
    try:
        found = devices(nvml)
    except nvml.NVMLError as exc:
        LOG.debug('NVML cannot count GPUs: %s', exc)
        return {}
    result = {}
    for handle, address in found:
        try:
            value = nvml.nvmlDeviceGetBrand(handle)
        except nvml.NVMLError as exc:
            LOG.debug('NVML cannot brand %s: %s', address, exc)
            continue
        if address in known:
            result[address] = names.get(value, 'NVML brand %s' % value)
    return result


def read_brands(topology: model.HostTopology) -> dict[str, str]:
    """:func:`brands` in a session of its own; none without NVML."""
    try:
        with session() as pynvml:
            return brands(pynvml, {g.address for g in topology.gpus()})
    except exception.NvmlUnavailable:
        return {}


class NvmlBackend(sysfs.SysfsBackend):
    """The sysfs topology with ``nvlink_pairs`` and GPU brands from NVML."""

    capabilities = backends.Capabilities()

    def discover(self) -> model.HostTopology:
        topology = super().discover()
        try:
            with session() as pynvml:
                pairs = _NvLinks(pynvml, topology).pairs()
                found = brands(pynvml,
                               {g.address for g in topology.gpus()})
        except exception.NvmlUnavailable as exc:
            return _add_finding(topology, NVML_UNAVAILABLE % exc)
        return dataclasses.replace(topology, nvlink_pairs=pairs,
                                   gpu_brands=found)


def _add_finding(topology: model.HostTopology,
                 finding: str) -> model.HostTopology:
    return dataclasses.replace(topology,
                               findings=topology.findings + (finding,))


class _NvLinks:
    """Active NVLinks of the GPUs NVML sees; any NVML error skips a link."""

    def __init__(self, nvml: types.ModuleType,
                 topology: model.HostTopology) -> None:
        self.nvml = nvml
        self.topology = topology

    def pairs(self) -> frozenset[frozenset[str]]:
        """GPU pairs joined directly or through NVSwitches.

        Every GPU with an active link to an NVSwitch reaches every other
        such GPU over the switch fabric. Only GPUs sysfs knows are kept:
        the rules work on sysfs' GPUs.
        """
        known = {gpu.address for gpu in self.topology.gpus()}
        pairs: set[frozenset[str]] = set()
        on_switch: set[str] = set()
        for handle, address in self._devices():
            for link in range(self.nvml.NVML_NVLINK_MAX_LINKS):
                remote = self._remote(handle, address, link)
                if remote is None:
                    continue
                peer, is_switch = remote
                if is_switch:
                    on_switch.add(address)
                elif peer != address:
                    pairs.add(frozenset((address, peer)))
        pairs.update(frozenset(pair)
                     for pair in itertools.combinations(on_switch, 2))
        return frozenset(pair for pair in pairs if pair <= known)

    def _devices(self) -> list[tuple[object, str]]:
        try:
            return devices(self.nvml)
        except self.nvml.NVMLError as exc:
            LOG.debug('NVML cannot count GPUs: %s', exc)
            return []

    def _remote(self, handle: object, address: str,
                link: int) -> tuple[str, bool] | None:
        """The far end of an active link and whether it is an NVSwitch."""
        nvml = self.nvml
        try:
            if (nvml.nvmlDeviceGetNvLinkState(handle, link)
                    != nvml.NVML_FEATURE_ENABLED):
                return None
            peer = bus_id_address(
                nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
        except (nvml.NVMLError, ValueError) as exc:
            LOG.debug('%s NVLink %d skipped: %s', address, link, exc)
            return None
        is_switch = self._is_switch(handle, address, link, peer)
        return None if is_switch is None else (peer, is_switch)

    def _is_switch(self, handle: object, address: str, link: int,
                   peer: str) -> bool | None:
        """Whether the far end is an NVSwitch; None: neither that nor a GPU.

        Where NVML cannot tell (older drivers and bindings lack the call),
        sysfs can: an NVSwitch is an NVIDIA function that is no GPU.
        """
        nvml = self.nvml
        remote_type = getattr(nvml, 'nvmlDeviceGetNvLinkRemoteDeviceType',
                              None)
        if remote_type is not None:
            try:
                kind = remote_type(handle, link)
            except nvml.NVMLError as exc:
                LOG.debug('%s NVLink %d: NVML cannot say what is at its '
                          'far end: %s', address, link, exc)
            else:
                if kind == nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                    return True
                if kind == nvml.NVML_NVLINK_DEVICE_TYPE_GPU:
                    return False
                return None
        function = self.topology.functions.get(peer)
        if function is None or function.vendor != model.NVIDIA_VENDOR_ID:
            return None
        return not function.is_nvidia_gpu
