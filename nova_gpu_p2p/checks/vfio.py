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

"""What VFIO needs to pass a GPU through: the IOMMU, and vfio-pci.

Drivers and IOMMU groups come from sysfs whatever topology backend is
configured.
"""

import os

from nova_gpu_p2p_guest import input_file

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import grace
from nova_gpu_p2p.topology import model

#: Drivers VFIO accepts next to vfio-pci in an IOMMU group it uses.
VFIO_GROUP_DRIVERS = frozenset(['vfio-pci', 'pci-stub', 'pcieport'])


def _cmdline_iommu(root: str) -> str:
    try:
        words = input_file.read_text(
            os.path.join(root, 'proc', 'cmdline'),
            input_file.MAX_ATTRIBUTE, errors='replace').split()
    except OSError:
        return ''
    flags = [w for w in words if 'iommu' in w]
    return (' (kernel command line: %s)' % ' '.join(flags) if flags
            else ' (no iommu option on the kernel command line)')


def check_iommu(topology: model.HostTopology, sysfs_root: str | None,
                root: str = '/') -> result.Check:
    """VFIO needs the IOMMU on; without it no GPU can be passed through.

    :param sysfs_root: where to look for ``kernel/iommu_groups``; None for
        a captured topology, judged by its GPUs' groups alone.
    """
    fix = ('enable VT-d / AMD-Vi (IOMMU) in the firmware setup and boot '
           'with intel_iommu=on iommu=pt (Intel) or iommu=pt (AMD) on the '
           'kernel command line (%s)' % result.see(result.Doc.IOMMU))
    groups = None
    if sysfs_root is not None:
        try:
            groups = len(os.listdir(os.path.join(sysfs_root, 'kernel',
                                                 'iommu_groups')))
        except OSError:
            groups = 0
        if not groups:
            return result.failure(
                'IOMMU', 'off: %s is empty%s' % (
                    os.path.join(sysfs_root, 'kernel', 'iommu_groups'),
                    _cmdline_iommu(root)), fix)
    gpus = topology.gpus()
    without = [g.address for g in gpus if g.iommu_group is None]
    if without:
        return result.failure(
            'IOMMU', 'no IOMMU group for %s%s'
            % (', '.join(without), _cmdline_iommu(root)), fix)
    if groups is None:
        return result.success('IOMMU', 'on: every NVIDIA GPU is in an '
                              'IOMMU group')
    return result.success('IOMMU', 'on: %d groups, every NVIDIA GPU in '
                          'one' % groups)


def _bind_fix(gpu: model.PCIFunction) -> str:
    if grace.is_grace_gpu(gpu):
        return ('bind it to nvgrace_gpu_vfio_pci: modprobe '
                'nvgrace-gpu-vfio-pci, then driverctl set-override %s '
                'nvgrace_gpu_vfio_pci, and list it with "managed": "no" in '
                '[pci] device_spec (%s)' % (
                    gpu.address, result.see(result.Doc.GRACE)))
    return ('bind it to vfio-pci: driverctl set-override %s vfio-pci, or '
            'vfio-pci.ids=%04x:%04x on the kernel command line with the '
            'nvidia and nouveau drivers blacklisted (%s)' % (
                gpu.address, gpu.vendor, gpu.device,
                result.see(result.Doc.VFIO_PCI)))


def check_bindings(topology: model.HostTopology,
                   idle_on_nvidia: bool = False) -> list[result.Check]:
    """Each NVIDIA GPU, and what shares its IOMMU group, ready for VFIO.

    :param idle_on_nvidia: the GPUs wait on ``nvidia`` between guests, as
        Fabric Manager's shared NVSwitch mode needs; libvirt moves them to
        vfio-pci and back (managed hostdevs).
    """
    checks = []
    ready = []
    drivers = ('vfio-pci', 'nvidia') if idle_on_nvidia else ('vfio-pci',)
    groups: dict[int, list[model.PCIFunction]] = {}
    for function in topology.functions.values():
        if function.iommu_group is not None:
            groups.setdefault(function.iommu_group, []).append(function)
    for gpu in topology.gpus():
        if grace.is_grace_gpu(gpu) and gpu.driver == 'vfio-pci':
            checks.append(result.failure(
                gpu.address, 'a Grace GPU bound to vfio-pci: the guest '
                'gets no access to its coherent memory, which only '
                'nvgrace_gpu_vfio_pci exposes', _bind_fix(gpu)))
        elif gpu.driver in drivers or gpu.driver == grace.VFIO_DRIVER:
            ready.append(gpu.address)
        elif gpu.driver is None:
            checks.append(result.warning(
                gpu.address,
                'bound to no driver: libvirt binds it to vfio-pci at '
                'guest start (managed hostdev), but any driver loaded '
                'later may take it first', _bind_fix(gpu)))
        else:
            checks.append(result.failure(
                gpu.address,
                'bound to %s, not vfio-pci: each guest start must first '
                'take it from the host driver, which fails while anything '
                'on the host (nvidia-persistenced, a CUDA process) holds '
                'it' % gpu.driver, _bind_fix(gpu)))
        if gpu.iommu_group is None:
            continue
        others = sorted(
            (f for f in groups.get(gpu.iommu_group, ())
             if f.address != gpu.address and f.driver is not None
             and f.driver not in VFIO_GROUP_DRIVERS
             and not f.driver.startswith('vfio')),
            key=lambda f: f.address)
        if others:
            checks.append(result.failure(
                gpu.address,
                'IOMMU group %d also holds %s: VFIO refuses a group with '
                'a device on a host driver' % (
                    gpu.iommu_group, ', '.join(
                        '%s (%s)' % (f.address, f.driver) for f in others)),
                'bind those to vfio-pci too (driverctl set-override '
                'ADDRESS vfio-pci)'))
    if ready and idle_on_nvidia:
        checks.insert(0, result.success(
            'vfio-pci', '%d of %d NVIDIA GPUs bound to nvidia (idle: Fabric '
            'Manager needs them there between servers, and libvirt moves '
            'them to vfio-pci at guest start) or vfio-pci (in a guest)'
            % (len(ready), len(topology.gpus()))))
    elif ready:
        checks.insert(0, result.success(
            'vfio-pci', '%d of %d NVIDIA GPUs bound to %s' % (
                len(ready), len(topology.gpus()),
                'vfio-pci or ' + grace.VFIO_DRIVER
                if any(topology.functions[a].driver == grace.VFIO_DRIVER
                       for a in ready) else 'vfio-pci')))
    return checks
