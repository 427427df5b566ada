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

"""The instance's passthrough devices, as plain data the rules read.

The driver builds these from the hostdevs Nova put in the guest config
and the cached host topology; nothing here knows about Nova.
"""

import dataclasses
import enum

from nova_gpu_p2p.topology import model


class DeviceKind(str, enum.Enum):
    """What ``[gpu_p2p] align_device_types`` selects by."""

    GPU = 'gpu'
    NIC = 'nic'
    OTHER = 'other'


@dataclasses.dataclass(frozen=True)
class GuestDevice:
    """One PCI function passed through to the guest."""

    #: Host PCI address, ``dddd:bb:ss.f``.
    address: str
    kind: DeviceKind
    #: Whether QEMU accepts ``x-nv-gpudirect-clique`` on it.
    nvidia_gpu: bool = False
    #: Host NUMA node; None where the host reports none.
    numa_node: int | None = None
    #: Host PCIe root complex (``pci0000:00``); None where unknown.
    root_complex: str | None = None
    #: Sizes in bytes of its 64-bit BARs.
    bars64: tuple[int, ...] = ()
    #: Whether the host topology knows it at all.
    known: bool = True
    #: An NVSwitch, passed through with a whole board's GPUs (Fabric
    #: Manager's full passthrough mode).
    nvswitch: bool = False


def describe(address: str, topology: model.HostTopology,
             network: bool = False) -> GuestDevice:
    """What the topology says about one of the instance's devices.

    ``network`` marks a device Nova attaches as ``<interface
    type='hostdev'>``: an SR-IOV VF or PF is a NIC whatever its class.
    """
    function = topology.functions.get(address)
    if function is None:
        return GuestDevice(address=address,
                           kind=DeviceKind.NIC if network
                           else DeviceKind.OTHER,
                           known=False)
    if function.is_gpu:
        kind = DeviceKind.GPU
    elif function.is_nic or network:
        kind = DeviceKind.NIC
    else:
        kind = DeviceKind.OTHER
    return GuestDevice(address=address, kind=kind,
                       nvidia_gpu=function.is_nvidia_gpu,
                       numa_node=function.numa_node,
                       root_complex=function.root_complex,
                       bars64=function.bars64,
                       nvswitch=function.is_nvswitch)


def aligned(device: GuestDevice, types: frozenset[str]) -> bool:
    """Whether ``align_device_types`` moves this device with its locality.

    NVSwitches move with the GPUs, onto their root complex's or NUMA
    node's expander bus: the guest's Fabric Manager and NVIDIA driver
    expect the board's switches beside its GPUs, not alone on the root
    bus. Their kind stays ``other``: the guest agent counts only GPUs as
    GPUs (NCCL's P2P pairs).
    """
    if device.nvswitch and DeviceKind.GPU.value in types:
        return True
    return 'all' in types or device.kind.value in types
