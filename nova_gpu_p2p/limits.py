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

"""Limits and feature minimums, each with the release that brought it.

One place to answer "which libvirt/QEMU does this feature need, and why":
the guest config, the traits and ``nova-gpu-p2p check`` all read these.
Versions are ``(major, minor, micro)`` as Nova's ``Host.has_min_version``
takes them.
"""

#: QEMU's vfio-pci ``x-nv-gpudirect-clique`` is a 4-bit field of the
#: vendor capability it adds (hw/vfio/pci-quirks.c): IDs 0-15.
MAX_CLIQUE_ID = 15

#: libvirt 8.2.0 added ``<qemu:override>``, through which the clique
#: property reaches vfio-pci without a qemu:commandline -set hack.
LIBVIRT_QEMU_OVERRIDE = (8, 2, 0)
#: libvirt 6.5.0 added ``<sysinfo type='fwcfg'>``, which carries the guest
#: topology description.
LIBVIRT_FWCFG = (6, 5, 0)
#: QEMU 2.4 added named user fw_cfg files (``-fw_cfg name=opt/...``).
QEMU_FWCFG = (2, 4, 0)
#: NUMA-bound PCIe expander buses as this driver writes them.
LIBVIRT_NUMA_AFFINITY = (9, 0, 0)
QEMU_NUMA_AFFINITY = (7, 2, 0)
#: libvirt 9.0 (Debian 12) refuses the UEFI domain XML Nova 34 writes;
#: 11.3 (bookworm-backports) is the oldest release seen to accept it.
LIBVIRT_UEFI_XML_REFUSED_BELOW = (9, 1, 0)
LIBVIRT_UEFI_XML_TESTED = (11, 3, 0)
