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

"""The smallest Linux guest that can say what it sees: kernel + busybox.

The guest is Debian's own kernel (``linux-image-amd64``, whose PCI, ACPI
and NUMA code is built in) and an initramfs built here from
``busybox-static`` and the kernel's ``qemu_fw_cfg`` module: its ``/init``
prints every PCI function's address, IDs, ``numa_node`` and sysfs path,
every NUMA node's distances and CPUs, and the driver's fw_cfg topology
entry, between marker lines, and powers off. No disk image, no network,
nothing downloaded: CI needs only the distribution's packages.

The initramfs is written in Python (cpio ``newc``), not with ``cpio``
from a directory, because it needs a ``/dev/console`` device node, which
only root may create in a directory.
"""

import dataclasses
import glob
import os
import re
import shutil
import stat

#: Marker lines of the guest's report on its serial console.
BEGIN = 'NOVA-GPU-P2P-E2E-BEGIN'
END = 'NOVA-GPU-P2P-E2E-END'
PCI = 'E2E-PCI'
NODE = 'E2E-NODE'
ACPI = 'E2E-ACPI'
FW_CFG = 'E2E-FWCFG'
#: Per PCIe function: its link as Linux shows it, fields split by '|'.
LINK = 'E2E-LINK'
#: The guest's generic-initiator nodes (``has_generic_initiator``).
GI = 'E2E-GI'
#: Where the guest reads the driver's topology description.
FW_CFG_ENTRY = ('/sys/firmware/qemu_fw_cfg/by_name/'
                'opt/org.openstack.nova-gpu-p2p/topology/raw')

#: Firmware pairs (code, variables template) the ``ovmf`` package ships.
OVMF_CANDIDATES = (
    ('/usr/share/OVMF/OVMF_CODE_4M.fd', '/usr/share/OVMF/OVMF_VARS_4M.fd'),
    ('/usr/share/OVMF/OVMF_CODE.fd', '/usr/share/OVMF/OVMF_VARS.fd'),
)
SEABIOS = '/usr/share/seabios/bios-256k.bin'
#: SeaBIOS before 1.17 writes ACPI tables of its own (RSDP, a SRAT from
#: QEMU's NUMA configuration, no SLIT) where QEMU gives none, as for a
#: domain without ``<acpi/>``; 1.17 writes none. Seen with Debian's
#: 1.16.2 (QEMU 7.2 and 10.0) and 1.16.3 (QEMU 11.1, issue 37) against
#: 1.17.0 (QEMU 11.1): the guest then finds no RSDP.
SEABIOS_OWN_ACPI_BELOW = (1, 17, 0)
#: The version a SeaBIOS build carries in its image: Debian's
#: "1.17.0-debian-1.17.0-1", upstream's "rel-1.16.3-0-g...".
SEABIOS_VERSION = re.compile(rb'(?:rel-)?(\d+)\.(\d+)\.(\d+)-[\w.+~-]*\0')
BUSYBOX_CANDIDATES = ('/bin/busybox', '/usr/bin/busybox')
KERNEL_GLOB = '/boot/vmlinuz-*'
#: Kernel command line: serial console, nothing on the screen, no time
#: lost on what this guest does not use.
CMDLINE = ('console=ttyS0,115200 earlyprintk=serial,ttyS0 loglevel=4 '
           'panic=-1 rdinit=/init nokaslr mitigations=off tsc=unstable')

INIT = r'''#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev
/bin/busybox mount -t devtmpfs dev /dev 2>/dev/null
exec 0</dev/console 1>/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
echo %(begin)s
for d in /sys/bus/pci/devices/*; do
  echo "%(pci)s $(basename $d) $(cat $d/vendor) $(cat $d/device)" \
       "$(cat $d/class) $(cat $d/numa_node) $(readlink -f $d)"
  [ -e $d/max_link_speed ] && echo "%(link)s $(basename $d)" \
       "$(cat $d/max_link_speed)|$(cat $d/max_link_width)|" \
       "$(cat $d/current_link_speed)|$(cat $d/current_link_width)"
done
for n in /sys/devices/system/node/node*; do
  [ -d "$n" ] || continue
  echo "%(node)s ${n##*/node} $(cat $n/cpulist) :" $(cat $n/distance)
done
echo %(acpi)s $(ls /sys/firmware/acpi/tables 2>/dev/null)
echo %(gi)s $(cat /sys/devices/system/node/has_generic_initiator)
[ -e /lib/qemu_fw_cfg.ko ] && insmod /lib/qemu_fw_cfg.ko
echo "%(fw_cfg)s $(cat %(fw_cfg_entry)s 2>/dev/null)"
echo %(end)s
sync
poweroff -f
sleep 5
echo o > /proc/sysrq-trigger
''' % {'begin': BEGIN, 'end': END, 'pci': PCI, 'node': NODE, 'acpi': ACPI,
       'fw_cfg': FW_CFG, 'fw_cfg_entry': FW_CFG_ENTRY, 'link': LINK,
       'gi': GI}


class MissingTool(Exception):
    """A package the boot test needs is not installed here."""


def find_kernel() -> str:
    """Debian's newest installed kernel image, readable by QEMU."""
    kernels = sorted(glob.glob(KERNEL_GLOB), key=_version_key)
    kernels = [k for k in kernels if os.access(k, os.R_OK)]
    if not kernels:
        raise MissingTool('no readable %s (linux-image-amd64)' % KERNEL_GLOB)
    return kernels[-1]


def _version_key(path: str) -> list:
    return [int(part) if part.isdigit() else part
            for part in re.split(r'(\d+)', path)]


def find_fw_cfg_module(kernel: str) -> str:
    """The ``qemu_fw_cfg`` module of that kernel (Debian builds it so)."""
    version = os.path.basename(kernel)[len('vmlinuz-'):]
    path = os.path.join('/lib/modules', version, 'kernel', 'drivers',
                        'firmware', 'qemu_fw_cfg.ko')
    if not os.access(path, os.R_OK):
        raise MissingTool('no readable %s (linux-image-amd64)' % path)
    return path


def find_ovmf(root: str = '/') -> tuple[str, str]:
    """OVMF's code and variable-store template (package ``ovmf``).

    :param root: the stack's root directory; the paths returned are the
        stack's own (inside its chroot).
    """
    def present(path: str) -> bool:
        return os.path.exists(os.path.join(root, path.lstrip('/')))

    for code, template in OVMF_CANDIDATES:
        if present(code) and present(template):
            return code, template
    raise MissingTool('no OVMF firmware in %s under %s (ovmf)' % (
        ', '.join(code for code, _ in OVMF_CANDIDATES), root))


def seabios_version(path: str) -> tuple[int, int, int]:
    """The version of the SeaBIOS image at ``path`` (package ``seabios``)."""
    try:
        with open(path, 'rb') as image:
            match = SEABIOS_VERSION.search(image.read())
    except OSError as exc:
        raise MissingTool('no SeaBIOS at %s (seabios): %s' % (path, exc))
    if match is None:
        raise MissingTool('no version string in the SeaBIOS image %s'
                          % path)
    return tuple(int(part) for part in match.groups())


def find_busybox() -> str:
    """A statically linked busybox: the initramfs has no C library."""
    for path in BUSYBOX_CANDIDATES:
        if os.path.exists(path):
            with open(path, 'rb') as binary:
                head = binary.read(4096)
            if head[:4] == b'\x7fELF' and b'ld-linux' not in head:
                return path
    raise MissingTool('no static busybox in %s (busybox-static)'
                      % ', '.join(BUSYBOX_CANDIDATES))


def _cpio_entry(name: str, mode: int, data: bytes = b'',
                rdev: tuple[int, int] = (0, 0), ino: int = 0) -> bytes:
    """One cpio ``newc`` record, padded to four bytes."""
    encoded = name.encode() + b'\0'
    header = '070701' + ''.join('%08x' % value for value in (
        ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
        len(encoded), 0))
    record = header.encode() + encoded
    record += b'\0' * (-len(record) % 4)
    record += data + b'\0' * (-len(data) % 4)
    return record


def build_initramfs(directory: str, busybox: str,
                    fw_cfg_module: str | None) -> str:
    """Write ``initramfs.cpio`` into ``directory``; return its path.

    Without ``fw_cfg_module`` the guest reads no fw_cfg entry.
    """
    with open(busybox, 'rb') as binary:
        busybox_data = binary.read()
    module = []
    if fw_cfg_module is not None:
        with open(fw_cfg_module, 'rb') as module_file:
            module = [('lib/qemu_fw_cfg.ko', stat.S_IFREG | 0o644,
                       module_file.read(), (0, 0))]
    entries = [
        ('dev', stat.S_IFDIR | 0o755, b'', (0, 0)),
        ('dev/console', stat.S_IFCHR | 0o600, b'', (5, 1)),
        ('proc', stat.S_IFDIR | 0o755, b'', (0, 0)),
        ('sys', stat.S_IFDIR | 0o755, b'', (0, 0)),
        ('bin', stat.S_IFDIR | 0o755, b'', (0, 0)),
        ('bin/busybox', stat.S_IFREG | 0o755, busybox_data, (0, 0)),
        ('lib', stat.S_IFDIR | 0o755, b'', (0, 0)),
        *module,
        ('init', stat.S_IFREG | 0o755, INIT.encode(), (0, 0)),
    ]
    path = os.path.join(directory, 'initramfs.cpio')
    with open(path, 'wb') as archive:
        for ino, (name, mode, data, rdev) in enumerate(entries, 1):
            archive.write(_cpio_entry(name, mode, data, rdev, ino))
        archive.write(_cpio_entry('TRAILER!!!', 0))
    os.chmod(path, 0o644)
    return path


@dataclasses.dataclass
class PciFunction:
    """One line of the guest's PCI report."""

    address: str
    vendor: int
    device: int
    pci_class: int
    numa_node: int
    #: The function's sysfs path, host bridge first: /sys/devices/pci...
    path: str

    @property
    def root_bus(self) -> int:
        """Bus number of the root bus (``pci0000:BB``) it hangs under."""
        return int(self.path.split('/')[3].split(':')[1], 16)

    @property
    def parents(self) -> list[str]:
        """PCI addresses from the root bus down, itself last."""
        return [part for part in self.path.split('/')[4:] if ':' in part]


@dataclasses.dataclass
class GuestReport:
    """What the guest printed between the markers."""

    functions: list[PciFunction]
    #: Guest node -> its distances to nodes 0.., as the guest's SLIT says.
    distances: dict[int, list[int]]
    #: Guest node -> its CPU list, as the guest's sysfs says.
    node_cpus: dict[int, str]
    #: The ACPI tables the guest found (/sys/firmware/acpi/tables).
    acpi_tables: list[str]
    #: The fw_cfg topology entry the guest read; None: it found none.
    fw_cfg: str | None
    lines: list[str]
    #: PCIe function -> (max_link_speed, max_link_width,
    #: current_link_speed, current_link_width) as its sysfs shows them.
    links: dict[str, tuple[str, str, str, str]] = dataclasses.field(
        default_factory=dict)
    #: The guest's generic-initiator nodes, as its sysfs lists them.
    generic_initiators: str = ''


def parse_report(console: str) -> GuestReport | None:
    """The guest's report from its serial log; None if incomplete."""
    text = console.replace('\r', '')
    begin = text.find(BEGIN + '\n')
    end = text.find(END, begin)
    if begin < 0 or end < 0:
        return None
    lines = text[begin:end].splitlines()[1:]
    functions = []
    distances = {}
    node_cpus = {}
    acpi_tables: list[str] = []
    fw_cfg = None
    links = {}
    generic_initiators = ''
    for line in lines:
        words = line.split()
        if words[:1] == [LINK] and len(words) > 2:
            fields = [f.strip() for f in line.split(None, 2)[2].split('|')]
            if len(fields) == 4:
                links[words[1]] = tuple(fields)
            continue
        if words[:1] == [PCI] and len(words) == 7:
            functions.append(PciFunction(
                address=words[1], vendor=int(words[2], 16),
                device=int(words[3], 16), pci_class=int(words[4], 16),
                numa_node=int(words[5]), path=words[6]))
        elif words[:1] == [NODE] and ':' in words:
            colon = words.index(':')
            node = int(words[1])
            node_cpus[node] = ' '.join(words[2:colon])
            distances[node] = [int(w) for w in words[colon + 1:]]
        elif words[:1] == [ACPI]:
            acpi_tables = words[1:]
        elif words[:1] == [FW_CFG]:
            fw_cfg = words[1] if len(words) == 2 else None
        elif words[:1] == [GI]:
            generic_initiators = ' '.join(words[1:])
    return GuestReport(functions=functions, distances=distances,
                       node_cpus=node_cpus, acpi_tables=acpi_tables,
                       fw_cfg=fw_cfg, lines=lines, links=links,
                       generic_initiators=generic_initiators)


def which(name: str) -> str:
    """The tool's path; MissingTool names it when it is not installed."""
    path = shutil.which(name)
    if path is None:
        raise MissingTool('%s not found' % name)
    return path
