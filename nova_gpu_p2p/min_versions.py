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

"""libvirt and QEMU feature minimums, each with the release that brought it.

One place to answer "which libvirt/QEMU does this feature need, and why":
the guest config, the traits and ``nova-gpu-p2p check`` all read these.
Versions are ``(major, minor, micro)`` tuples, the form Nova's
``Host.has_min_version`` takes and its own ``MIN_LIBVIRT_VERSION`` and
``MIN_QEMU_VERSION`` use. Nova 33 and 34 need libvirt 8.0.0 and QEMU
6.2.0 to start at all; a minimum below that is stated for the record but
never binds on a host that runs Nova.
"""

from oslo_utils import versionutils

Version = tuple[int, int, int]


def text(version: tuple[int, ...]) -> str:
    """``(11, 8, 0)`` as ``11.8.0``, as messages name versions."""
    return '.'.join(map(str, version))


def unpack(version: int) -> Version:
    """libvirt's packed version (1000000 * major + 1000 * minor + micro).

    As a tuple rather than ``Host.has_min_version``'s yes or no: the guest
    plan, the traits and ``check`` compare it with these minimums as plain
    data and name the host's versions in what they report.
    """
    return versionutils.convert_version_to_tuple(
        versionutils.convert_version_to_str(version))


#: libvirt 8.2.0 added ``<qemu:override>`` (its ``<qemu:frontend>``
#: properties), through which the clique ID reaches vfio-pci without a
#: ``qemu:commandline`` ``-set`` hack. Above Nova's 8.0.0, so it binds.
LIBVIRT_QEMU_OVERRIDE = (8, 2, 0)
#: libvirt 6.5.0 added ``<sysinfo type='fwcfg'>``, which carries the guest
#: topology description (below Nova's minimum).
LIBVIRT_FWCFG = (6, 5, 0)
#: libvirt writes an fwcfg entry with a value as ``-fw_cfg
#: name=...,string=...``: QEMU 2.4 added named user fw_cfg files
#: (``file=``), 2.5 the ``string=`` form (below Nova's minimum).
QEMU_FWCFG = (2, 5, 0)
#: QEMU 9.2 added 32 and 64 GT/s to ``pcie-root-port``'s ``x-speed``
#: (PCIe Gen5 and Gen6); older QEMU accepts up to 16 GT/s, and a guest
#: root port then shows a Gen5 host link as Gen4.
QEMU_PCIE_GEN5 = (9, 2, 0)
#: What the guest XML for NUMA affinity needs: libvirt 1.3.4 added
#: ``pcie-expander-bus`` with ``<target busNr>`` and ``<node>`` (1.2.19
#: ``pcie-root-port``, 1.1.2 ``<pcihole64>``, 3.9.0 guest cell
#: ``<distances>``); QEMU 2.6 added ``pxb-pcie`` with ``numa_node`` (2.10
#: ``-numa dist``). All are older than Nova's own minimums, libvirt 8.0.0
#: and QEMU 6.2.0 (nova/virt/libvirt/driver.py, Nova 33 and 34), which
#: are therefore the binding ones.
LIBVIRT_NUMA_AFFINITY = (8, 0, 0)
QEMU_NUMA_AFFINITY = (6, 2, 0)
#: Grace GPUs' memory as guest NUMA cells: QEMU 9.0 added the
#: ``acpi-generic-initiator`` object (``pci-dev``, ``node``), libvirt
#: 11.8.0 writes one per node of a PCI hostdev's ``<acpi nodeset>``.
LIBVIRT_GENERIC_INITIATOR = (11, 8, 0)
QEMU_GENERIC_INITIATOR = (9, 0, 0)
#: Not a feature minimum but an observation: libvirt 9.0 (Debian 12)
#: refuses the UEFI domain XML Nova 34 writes (``<os firmware='efi'>``
#: with ``<loader secure='no'/>``); 11.3 (bookworm-backports) is the
#: oldest release seen to accept it.
LIBVIRT_UEFI_XML_REFUSED_BELOW = (9, 1, 0)
LIBVIRT_UEFI_XML_TESTED = (11, 3, 0)
#: The newest stack the e2e suite runs against real libvirtd and QEMU in
#: CI (``tools/e2e/setup-stack.sh sid``: Debian sid's libvirt 12.8 and
#: QEMU 11.1, with SeaBIOS 1.17 and OVMF 2026.08); the others are
#: bookworm's 9.0 / 7.2 and bookworm-backports' 11.3 / 10.0. ``check``
#: says when a host runs a newer release than these.
LIBVIRT_NEWEST_TESTED = (12, 8, 0)
QEMU_NEWEST_TESTED = (11, 1, 0)
