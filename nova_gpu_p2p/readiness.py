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

"""Is this compute host ready for GPU P2P guests? (``nova-gpu-p2p check``)

Each function here turns plain facts (versions, files under a root
directory, a :class:`~nova_gpu_p2p.topology.model.HostTopology`) into
:class:`Check` lines, so that every verdict and its fix can be tested
without a real host; the CLI only gathers the facts and prints the lines.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import enum
import glob
import importlib
import itertools
import json
import os
import re
import subprocess

from nova_gpu_p2p import device_spec
from nova_gpu_p2p import limits
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p import traits as traits_mod

Version = tuple[int, int, int]

#: Drivers VFIO accepts next to vfio-pci in an IOMMU group it uses.
VFIO_GROUP_DRIVERS = frozenset(['vfio-pci', 'pci-stub', 'pcieport'])
#: Where distributions put OVMF; descriptors are what libvirt's firmware
#: autoselection (``<os firmware='efi'>``, as Nova 34 writes) reads.
FIRMWARE_DESCRIPTOR_DIRS = ('usr/share/qemu/firmware', 'etc/qemu/firmware')
OVMF_CODE_FILES = (
    'usr/share/OVMF/OVMF_CODE_4M.fd',
    'usr/share/OVMF/OVMF_CODE.fd',
    'usr/share/edk2/ovmf/OVMF_CODE.fd',
    'usr/share/edk2/x64/OVMF_CODE.4m.fd',
    'usr/share/qemu/ovmf-x86_64-code.bin',
)
VIRSH_VERSION = ('virsh', '-c', 'qemu:///system', 'version', '--daemon')
_VERSION = re.compile(r'(\d+)\.(\d+)(?:\.(\d+))?')


class Status(str, enum.Enum):
    OK = 'OK'
    WARN = 'WARN'
    FAIL = 'FAIL'


@dataclasses.dataclass(frozen=True)
class Check:
    """One line of the report: a verdict on one subject, and its fix."""

    status: Status
    subject: str
    message: str
    fix: str | None = None

    def line(self) -> str:
        text = '%-4s %s: %s' % (self.status.value, self.subject,
                                self.message)
        if self.fix:
            text += '; fix: ' + self.fix
        return text

    def to_dict(self) -> dict:
        return {'status': self.status.value, 'subject': self.subject,
                'message': self.message, 'fix': self.fix}


def exit_status(checks: Iterable[Check]) -> int:
    """1 where anything failed: scripts and config management stop there."""
    return 1 if any(c.status is Status.FAIL for c in checks) else 0


# Versions.

def parse_version(text: str | None) -> Version | None:
    """``11.3.0``, ``9.0`` or ``QEMU 10.0.2`` as a tuple; None if none."""
    match = _VERSION.search(text or '')
    if not match:
        return None
    return (int(match.group(1)), int(match.group(2)),
            int(match.group(3) or 0))


def version_text(version: Version) -> str:
    return '.'.join(str(part) for part in version)


def parse_virsh_version(output: str
                        ) -> tuple[Version | None, Version | None]:
    """libvirt and QEMU versions from ``virsh version [--daemon]``.

    The daemon's version is what the driver sees (``getLibVersion`` asks
    the daemon); the client library's is used only when that is missing.
    """
    fields = {}
    for line in output.splitlines():
        key, sep, value = line.partition(':')
        if sep:
            fields[key.strip()] = value.strip()
    libvirt = parse_version(fields.get('Running against daemon')
                            or fields.get('Using library'))
    hypervisor = fields.get('Running hypervisor', '')
    qemu = (parse_version(hypervisor) if hypervisor.startswith('QEMU')
            else None)
    return libvirt, qemu


@dataclasses.dataclass(frozen=True)
class HostVersions:
    libvirt: Version | None
    qemu: Version | None
    #: Why a version is missing: the probe's error.
    error: str | None = None


def _split(number: int) -> Version:
    """libvirt's packed 1000000 * major + 1000 * minor + micro."""
    return number // 1000000, number // 1000 % 1000, number % 1000


def probe_versions(
        import_module: Callable = importlib.import_module,
        run: Callable = subprocess.run) -> HostVersions:
    """Ask libvirtd, through libvirt-python if importable, else virsh.

    nova-compute hosts have libvirt-python, but the CLI may run from a
    virtualenv without it; virsh is on every libvirt host.
    """
    try:
        libvirt = import_module('libvirt')
    except ImportError:
        pass
    else:
        try:
            conn = libvirt.openReadOnly('qemu:///system')
            try:
                return HostVersions(_split(conn.getLibVersion()),
                                    _split(conn.getVersion()))
            finally:
                conn.close()
        except Exception as exc:  # libvirt.libvirtError, without importing
            return HostVersions(None, None, 'libvirt-python: %s' % exc)
    try:
        result = run(list(VIRSH_VERSION), capture_output=True, text=True,
                     timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return HostVersions(None, None, '%s: %s' % (VIRSH_VERSION[0], exc))
    libvirt_version, qemu = parse_virsh_version(result.stdout)
    error = None
    if result.returncode != 0 or libvirt_version is None or qemu is None:
        lines = (result.stderr or result.stdout or '').strip().splitlines()
        error = '"%s" exited %d: %s' % (
            ' '.join(VIRSH_VERSION), result.returncode,
            lines[-1] if lines else 'no output')
    return HostVersions(libvirt_version, qemu, error)


def check_versions(versions: HostVersions, topology: model.HostTopology,
                   has_cliques: bool) -> list[Check]:
    """What each feature needs of libvirt and QEMU, and what this host has.

    :param has_cliques: whether the host has a GPU clique, so that guests
        will be asked for clique IDs.
    """
    libvirt, qemu = versions.libvirt, versions.qemu
    checks = []
    how = ('start libvirtd (systemctl status libvirtd virtqemud), run this '
           'as root or a member of the libvirt group, check with "%s", or '
           'give --libvirt-version and --qemu-version'
           % ' '.join(VIRSH_VERSION))
    if libvirt is None:
        checks.append(Check(
            Status.WARN, 'libvirt',
            'version unknown (%s): clique IDs need %s, '
            'CUSTOM_GPU_NUMA_AFFINITY needs %s'
            % (versions.error or 'not found',
               version_text(limits.LIBVIRT_QEMU_OVERRIDE),
               version_text(limits.LIBVIRT_NUMA_AFFINITY)), how))
    else:
        checks.append(_check_override(libvirt, has_cliques))
        checks.append(_check_uefi_xml(libvirt))
    if qemu is None:
        checks.append(Check(
            Status.WARN, 'QEMU',
            'version unknown (%s): CUSTOM_GPU_NUMA_AFFINITY needs %s'
            % (versions.error or 'not found',
               version_text(limits.QEMU_NUMA_AFFINITY)), how))
    if libvirt is not None and qemu is not None:
        checks.append(_check_numa_affinity(libvirt, qemu, topology))
    return checks


def _check_override(libvirt: Version, has_cliques: bool) -> Check:
    needs = version_text(limits.LIBVIRT_QEMU_OVERRIDE)
    subject = 'libvirt %s' % version_text(libvirt)
    if libvirt >= limits.LIBVIRT_QEMU_OVERRIDE:
        return Check(Status.OK, subject, '<qemu:override> for clique IDs '
                     '(needs %s)' % needs)
    consequence = ('guests asking for hw:gpu_p2p_clique get no clique ID '
                   '(required: rescheduled)')
    return Check(
        Status.FAIL if has_cliques else Status.WARN, subject,
        'too old for <qemu:override>, which clique IDs need (%s or later): '
        '%s' % (needs, consequence if has_cliques else
                'this host has no GPU clique, so nothing is lost now'),
        'upgrade libvirt to %s or later (Debian 12: apt-get install -t '
        'bookworm-backports libvirt-daemon-system qemu-system-x86)' % needs)


def _check_uefi_xml(libvirt: Version) -> Check:
    subject = 'libvirt %s' % version_text(libvirt)
    tested = version_text(limits.LIBVIRT_UEFI_XML_TESTED)
    if libvirt < limits.LIBVIRT_UEFI_XML_REFUSED_BELOW:
        return Check(
            Status.WARN, subject,
            'refuses the UEFI guest XML Nova 34 writes (<os firmware=\'efi\'> '
            'with <loader secure=\'no\'/>: "loader attribute \'secure\' '
            'cannot be specified when firmware autoselection is enabled"); '
            'large-BAR GPUs need UEFI guests',
            'install libvirt %s or later (Debian 12: apt-get install -t '
            'bookworm-backports libvirt-daemon-system qemu-system-x86 ovmf)'
            % tested)
    if libvirt < limits.LIBVIRT_UEFI_XML_TESTED:
        return Check(Status.OK, subject,
                     'UEFI guest XML of Nova 34 not tested with this '
                     'release (9.0 refuses it, %s accepts it): boot one '
                     'hw_firmware_type=uefi image to be sure' % tested)
    return Check(Status.OK, subject, 'accepts the UEFI guest XML of Nova '
                 '34 (tested with %s)' % tested)


def _check_numa_affinity(libvirt: Version, qemu: Version,
                         topology: model.HostTopology) -> Check:
    subject = 'QEMU %s' % version_text(qemu)
    needs = 'libvirt %s and QEMU %s' % (
        version_text(limits.LIBVIRT_NUMA_AFFINITY),
        version_text(limits.QEMU_NUMA_AFFINITY))
    if traits_mod.numa_affinity(topology, libvirt, qemu):
        return Check(Status.OK, subject, 'NUMA-bound PCIe expander buses: '
                     'reports %s (needs %s)'
                     % (traits_mod.GPU_NUMA_AFFINITY, needs))
    if (libvirt < limits.LIBVIRT_NUMA_AFFINITY
            or qemu < limits.QEMU_NUMA_AFFINITY):
        return Check(
            Status.WARN, subject,
            'with libvirt %s this host does not report %s (needs %s): '
            'flavors that require it do not land here'
            % (version_text(libvirt), traits_mod.GPU_NUMA_AFFINITY, needs),
            'upgrade libvirt and QEMU (Debian 12: apt-get install -t '
            'bookworm-backports libvirt-daemon-system qemu-system-x86)')
    if not topology.gpus():
        return Check(Status.OK, subject, 'NUMA-bound PCIe expander buses '
                     '(needs %s), but no NVIDIA GPU to report %s for'
                     % (needs, traits_mod.GPU_NUMA_AFFINITY))
    return Check(
        Status.WARN, subject,
        'no NVIDIA GPU with a known NUMA node, so no %s'
        % traits_mod.GPU_NUMA_AFFINITY,
        'see the NUMA line below')


# Guest firmware.

def _descriptors(root: str) -> list[tuple[str, str]]:
    """(descriptor, executable) of each x86_64 UEFI firmware descriptor."""
    found = []
    for directory in FIRMWARE_DESCRIPTOR_DIRS:
        for path in sorted(glob.glob(os.path.join(root, directory,
                                                  '*.json'))):
            try:
                with open(path) as f:
                    data = json.load(f)
                executable = data['mapping']['executable']['filename']
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if 'uefi' not in data.get('interface-types', ()):
                continue
            if not any(t.get('architecture') == 'x86_64'
                       for t in data.get('targets', ())
                       if isinstance(t, dict)):
                continue
            secure = 'secure-boot' in data.get('features', ())
            found.append((secure, path, executable))
    # Plain UEFI first: what Nova's <loader secure='no'/> selects.
    return [(path, executable) for _, path, executable in sorted(found)]


def check_firmware(root: str = '/') -> Check:
    """OVMF where libvirt's firmware autoselection finds it.

    GPUs with BARs of tens of GiB need UEFI guests; Nova 34 asks libvirt to
    pick the firmware, which reads QEMU's firmware descriptors.
    """
    fix = ('apt-get install ovmf (RHEL: edk2-ovmf), then restart '
           'libvirtd or virtqemud')
    usable = [(d, exe) for d, exe in _descriptors(root)
              if os.path.exists(os.path.join(root, exe.lstrip('/')))]
    if usable:
        return Check(Status.OK, 'guest firmware',
                     'UEFI (OVMF) for large-BAR GPUs: %s (%s)' % (
                         usable[0][1], os.path.basename(usable[0][0])))
    code = [p for p in OVMF_CODE_FILES
            if os.path.exists(os.path.join(root, p))]
    if code:
        return Check(Status.WARN, 'guest firmware',
                     '/%s is there but no QEMU firmware descriptor '
                     '(/usr/share/qemu/firmware/*.json) names it: libvirt '
                     'cannot autoselect UEFI for <os firmware=\'efi\'>'
                     % code[0], fix)
    return Check(Status.WARN, 'guest firmware',
                 'no UEFI firmware (OVMF): large-BAR GPUs need UEFI guests '
                 '(hw_firmware_type=uefi); BIOS guests still boot', fix)


# IOMMU and driver binding.

def _cmdline_iommu(root: str) -> str:
    try:
        with open(os.path.join(root, 'proc', 'cmdline')) as f:
            words = f.read().split()
    except OSError:
        return ''
    flags = [w for w in words if 'iommu' in w]
    return (' (kernel command line: %s)' % ' '.join(flags) if flags
            else ' (no iommu option on the kernel command line)')


def check_iommu(topology: model.HostTopology, sysfs_root: str | None,
                root: str = '/') -> Check:
    """VFIO needs the IOMMU on; without it no GPU can be passed through.

    :param sysfs_root: where to look for ``kernel/iommu_groups``; None for
        a captured topology, judged by its GPUs' groups alone.
    """
    fix = ('enable VT-d / AMD-Vi (IOMMU) in the firmware setup and boot '
           'with intel_iommu=on iommu=pt (Intel) or iommu=pt (AMD) on the '
           'kernel command line (GRUB_CMDLINE_LINUX, update-grub, reboot)')
    groups = None
    if sysfs_root is not None:
        try:
            groups = len(os.listdir(os.path.join(sysfs_root, 'kernel',
                                                 'iommu_groups')))
        except OSError:
            groups = 0
        if not groups:
            return Check(Status.FAIL, 'IOMMU',
                         'off: %s is empty%s' % (
                             os.path.join(sysfs_root, 'kernel',
                                          'iommu_groups'),
                             _cmdline_iommu(root)), fix)
    gpus = topology.gpus()
    without = [g.address for g in gpus if g.iommu_group is None]
    if without:
        return Check(Status.FAIL, 'IOMMU',
                     'no IOMMU group for %s%s' % (', '.join(without),
                                                  _cmdline_iommu(root)),
                     fix)
    if groups is None:
        return Check(Status.OK, 'IOMMU', 'on: every NVIDIA GPU is in an '
                     'IOMMU group')
    return Check(Status.OK, 'IOMMU', 'on: %d groups, every NVIDIA GPU in '
                 'one' % groups)


def _bind_fix(gpu: model.PCIFunction) -> str:
    return ('bind it to vfio-pci: driverctl set-override %s vfio-pci, or '
            'vfio-pci.ids=%04x:%04x on the kernel command line with the '
            'nvidia and nouveau drivers blacklisted' % (
                gpu.address, gpu.vendor, gpu.device))


def check_bindings(topology: model.HostTopology) -> list[Check]:
    """Each NVIDIA GPU, and what shares its IOMMU group, ready for VFIO."""
    checks = []
    ready = []
    groups: dict[int, list[model.PCIFunction]] = {}
    for function in topology.functions.values():
        if function.iommu_group is not None:
            groups.setdefault(function.iommu_group, []).append(function)
    for gpu in topology.gpus():
        if gpu.driver == 'vfio-pci':
            ready.append(gpu.address)
        elif gpu.driver is None:
            checks.append(Check(
                Status.WARN, gpu.address,
                'bound to no driver: libvirt binds it to vfio-pci at '
                'guest start (managed hostdev), but any driver loaded '
                'later may take it first', _bind_fix(gpu)))
        else:
            checks.append(Check(
                Status.FAIL, gpu.address,
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
            checks.append(Check(
                Status.FAIL, gpu.address,
                'IOMMU group %d also holds %s: VFIO refuses a group with '
                'a device on a host driver' % (
                    gpu.iommu_group, ', '.join(
                        '%s (%s)' % (f.address, f.driver) for f in others)),
                'bind those to vfio-pci too (driverctl set-override '
                'ADDRESS vfio-pci)'))
    if ready:
        checks.insert(0, Check(
            Status.OK, 'vfio-pci', '%d of %d NVIDIA GPUs bound to vfio-pci'
            % (len(ready), len(topology.gpus()))))
    return checks


# Topology: ACS, NUMA, cliques.

#: How check_acs names what a port enables.
_ROUTE_NAMES = {
    link_class.AcsRoute.REQUEST_REDIRECT: 'P2P Request Redirect',
    link_class.AcsRoute.EGRESS_CONTROL: 'P2P Egress Control',
}


def _acs_ecap_fix(topology: model.HostTopology, ports: list[str]) -> str:
    settings = []
    for port in ports:
        acs = topology.functions[port].acs
        settings.append('setpci -s %s ECAP_ACS+6.w=%04x' % (
            port, acs.control & ~model.Acs.REDIRECT_BITS))
    return ('if your security model allows P2P between these devices '
            'without the IOMMU seeing it, turn the redirect off: boot '
            'with pci=disable_acs_redir=%s (their IOMMU groups may then '
            'merge), or for a test %s; or keep it and accept PHB'
            % (';'.join(ports), ', '.join(settings)))


def _acs_cost(topology: model.HostTopology,
              pairs: Iterable[tuple[str, str]],
              acs_policy: link_class.AcsPolicy,
              level: link_class.LinkClass) -> str:
    """What the policy makes of pairs whose traffic ACS sends up."""
    if acs_policy is not link_class.AcsPolicy.ROUTE:
        return ('; acs_policy=ignore still counts them as switch-local, so '
                'cliques hold pairs whose P2P traffic is in fact routed')
    lost = sorted(
        '%s-%s' % pair for pair in pairs
        if link_class.p2p_capable(topology, *pair, level,
                                  link_class.AcsPolicy.IGNORE)
        and not link_class.p2p_capable(topology, *pair, level,
                                       link_class.AcsPolicy.ROUTE))
    return ('; acs_policy=route counts those pairs as PHB%s'
            % (', so at p2p_level %s these pairs share no clique: %s'
               % (level.name, ', '.join(lost)) if lost else ''))


def _unknown_acs(topology: model.HostTopology,
                 pairs: list[tuple[str, str]],
                 acs_policy: link_class.AcsPolicy,
                 level: link_class.LinkClass) -> Check:
    """One line for every port whose ACS could not be read."""
    message = ('PCI config space could not be read, so ACS is unknown and '
               'counted as P2P Request Redirect on (fail closed)')
    if not pairs:
        return Check(Status.OK, 'ACS', message + ', which changes nothing '
                     'here: no two GPUs share a PCIe switch')
    message += (': P2P between %d GPU pairs behind a PCIe switch is taken '
                'to go up through the root complex' % len(pairs))
    return Check(
        Status.WARN, 'ACS',
        message + _acs_cost(topology, pairs, acs_policy, level),
        'let nova-compute\'s privsep daemon start (it needs CAP_SYS_ADMIN; '
        'see the privsep-helper lines in its log), and run as root (sudo '
        'nova-gpu-p2p check) to see the ACS settings')


def check_acs(topology: model.HostTopology,
              acs_policy: link_class.AcsPolicy,
              level: link_class.LinkClass) -> list[Check]:
    """ACS that sends P2P between GPUs up, or is unknown; what it costs."""
    gpus = [g.address for g in topology.gpus()]
    if len(gpus) < 2:
        return []
    by_port: dict[str, set[str]] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    routes: dict[str, tuple[link_class.AcsRoute, ...]] = {}
    unknown: list[tuple[str, str]] = []
    for a, b in itertools.combinations(gpus, 2):
        if link_class.pcie_class(topology, a, b) >= link_class.LinkClass.PHB:
            continue  # through the root complex anyway
        found = link_class.routing_ports(topology, a, b)
        if any(link_class.AcsRoute.UNKNOWN in why for why in found.values()):
            unknown.append((a, b))
        for port, why in found.items():
            if link_class.AcsRoute.UNKNOWN in why:
                continue
            by_port.setdefault(port, set()).update((a, b))
            pairs.setdefault(port, []).append((a, b))
            routes[port] = why
    checks = []
    if unknown or not topology.config_space_read:
        checks.append(_unknown_acs(topology, unknown, acs_policy, level))
    for port in sorted(by_port):
        below = sorted(g for g in by_port[port]
                       if port in {f.address
                                   for f in topology.ancestors(g)})
        peers = sorted(by_port[port] - set(below))
        message = ('switch downstream port %s has ACS %s on: P2P between '
                   '%s and %s %s through the root complex' % (
                       port, ' and '.join(_ROUTE_NAMES[r]
                                          for r in routes[port]),
                       ', '.join(below), ', '.join(peers) or 'each other',
                       'is blocked or goes up'
                       if link_class.AcsRoute.EGRESS_CONTROL in routes[port]
                       else 'goes up'))
        checks.append(Check(
            Status.WARN, port,
            message + _acs_cost(topology, pairs[port], acs_policy, level),
            _acs_ecap_fix(topology, [port])))
    if not checks:
        return [Check(Status.OK, 'ACS', 'no P2P Request Redirect or Egress '
                      'Control between GPUs behind a PCIe switch')]
    return checks


def check_numa(topology: model.HostTopology) -> list[Check]:
    """GPUs that cannot get a NUMA-bound guest expander bus."""
    checks = []
    cpus = {node.id: node.cpus for node in topology.numa_nodes}
    unknown = [g.address for g in topology.gpus() if g.numa_node is None]
    if unknown:
        checks.append(Check(
            Status.WARN, 'NUMA',
            'firmware reports no NUMA node (-1) for %s: counted as SYS to '
            'every other GPU, and left on the guest root bus under '
            'hw:gpu_numa_affinity' % ', '.join(unknown),
            'update the system firmware or enable its NUMA / SRAT '
            'settings (for example NPS or SNC) so the ACPI tables give '
            'each root complex a proximity domain'))
    cpuless = [g for g in topology.gpus() if g.numa_node is not None
               and g.numa_node in cpus and not cpus[g.numa_node]]
    for gpu in cpuless:
        checks.append(Check(
            Status.WARN, gpu.address,
            'on NUMA node %d, which has no CPUs: no guest NUMA cell can be '
            'on that node, so hw:gpu_numa_affinity leaves it on the guest '
            'root bus' % gpu.numa_node,
            'check the firmware\'s NUMA settings; keep this GPU out of '
            'NUMA-affine flavors'))
    return checks


def check_nvswitch(topology: model.HostTopology) -> list[Check]:
    """NVSwitch fabric the PCIe-only backends cannot see."""
    switches = sorted(
        f.address for f in topology.functions.values()
        if f.vendor == model.NVIDIA_VENDOR_ID and not f.is_gpu
        and f.base_class == 0x06 and not f.is_bridge)
    if not switches or topology.nvlink_pairs or topology.p2p_overrides:
        return []
    return [Check(
        Status.WARN, 'NVSwitch',
        '%d NVSwitch functions (%s) but no NVLink in the topology: '
        'cliques follow PCIe only, and are smaller than the fabric allows'
        % (len(switches), ', '.join(switches)),
        'set [gpu_p2p] topology_backend = static with the '
        '"nvidia-smi topo -p2p r" matrix in static_topology_file')]


def _traits_text(found: Iterable[str]) -> str:
    return ' '.join(sorted(found)) or '(none)'


def no_gpu(topology: model.HostTopology, sysfs_root: str | None) -> Check:
    """FAIL: no NVIDIA GPU; where they were looked for, and why that may be.

    :param sysfs_root: the sysfs tree the GPUs were looked for in (every
        backend but ``static``, whose file always lists some, finds them
        there); None for a capture.
    """
    if sysfs_root is None:
        where = 'the capture'
        fix = ('capture the GPU host: sudo nova-gpu-p2p capture --output '
               'FILE')
    else:
        where = os.path.join(sysfs_root, 'bus', 'pci', 'devices')
        fix = ('sysfs lists GPUs whatever driver they are bound to (nvidia, '
               'vfio-pci or none): if "lspci -nn -d 10de:" lists some, %s '
               'is not this host\'s sysfs (--sysfs-root, [gpu_p2p] '
               'sysfs_root); if it lists none, the host does not see them: '
               'check that they are seated and powered, and the '
               'firmware\'s PCIe settings' % sysfs_root)
    others = [f for f in topology.functions.values()
              if f.vendor == model.NVIDIA_VENDOR_ID]
    message = 'no NVIDIA GPU found in %s' % where
    if others:
        message += (' (%d other NVIDIA PCI functions, such as NVSwitches '
                    'or audio)' % len(others))
    return Check(Status.FAIL, 'GPUs', message + ': nothing for P2P flavors '
                 'to use', fix)


def check_p2p_level(topology: model.HostTopology,
                    level: link_class.LinkClass,
                    acs_policy: link_class.AcsPolicy,
                    clique_map: Mapping[str, int] | None = None,
                    extra_traits: Iterable[str] = (),
                    sysfs_root: str | None = '/sys') -> list[Check]:
    """The cliques ``p2p_level`` gives, and what another level would give.

    :param extra_traits: traits decided elsewhere (NUMA affinity), to show
        the whole set the host would report.
    :param sysfs_root: where GPUs were looked for, see :func:`no_gpu`.
    """
    gpus = topology.gpus()
    if not gpus:
        return [no_gpu(topology, sysfs_root)]
    result = cliques_mod.assign(topology, level, acs_policy, clique_map)
    groups = [g for g in result.groups
              if len(g) > 1 and result.ids[g[0]] is not None]
    largest = result.largest()
    alone = sorted(a for a, i in result.ids.items() if i is None)
    found = traits_mod.p2p_traits(topology, result) | set(extra_traits)
    others = []
    nearest_with_clique = None
    for other in link_class.LinkClass:
        if other is level or (other is link_class.LinkClass.NV
                              and not topology.nvlink_pairs):
            continue
        size = cliques_mod.assign(topology, other, acs_policy,
                                  clique_map).largest()
        if size >= 2 and other > level and nearest_with_clique is None:
            nearest_with_clique = other
        if size != largest:
            others.append('at %s: %d' % (other.name, size))
    subject = 'p2p_level %s' % level.name
    message = ('%d clique%s, largest %d GPUs; %d of %d GPUs in no clique; '
               'traits: %s' % (len(groups), '' if len(groups) == 1 else 's',
                               largest, len(alone), len(gpus),
                               _traits_text(found)))
    if others:
        message += '; largest clique %s' % ', '.join(others)
    if len(gpus) < 2:
        return [Check(Status.OK, subject, 'one NVIDIA GPU, no peer: no '
                      'clique; traits: %s' % _traits_text(found))]
    if largest >= 2:
        return [Check(Status.OK, subject, message)]
    fix = ('raise [gpu_p2p] p2p_level to %s if P2P over that path is fast '
           'enough for your workloads' % nearest_with_clique.name
           if nearest_with_clique is not None else
           'no level gives a clique: check the ACS lines above')
    return [Check(Status.WARN, subject, message + ': P2P flavors do not '
                  'land here', fix)]


def check_findings(findings: Iterable[str]) -> list[Check]:
    """What discovery found odd; the ACS line covers unreadable config."""
    return [Check(Status.WARN, 'discovery', finding)
            for finding in findings if finding != sysfs.UNREADABLE_CONFIG]


# Scheduling: GPUs in placement, each with its clique.

@dataclasses.dataclass(frozen=True)
class PciSettings:
    """The ``[pci]`` options of nova.conf that scheduling by clique needs."""

    report_in_placement: bool
    #: ``[pci] device_spec`` values, in order.
    device_specs: tuple[str, ...] = ()


def check_placement(topology: model.HostTopology,
                    result: cliques_mod.Cliques,
                    pci: PciSettings) -> list[Check]:
    """Whether nova-scheduler can give a ``required`` server one clique here.

    It can only when the GPUs are in placement, and it learns each GPU's
    clique from the ``gpu_p2p_clique`` tag of the GPU's device_spec entry
    (the trait there shows the clique in placement). With GPUs in
    placement Nova rewrites each GPU provider's traits from that entry, so
    the entry is judged as the provider and the pools will be.
    """
    if not pci.report_in_placement:
        if result.largest() < 2:
            return []
        return [Check(
            Status.WARN, 'placement',
            '[pci] report_in_placement is off, so the GPUs are not in '
            'placement: nova-scheduler cannot give a '
            'hw:gpu_p2p_clique=required server GPUs of one clique here; '
            'this host refuses GPUs that are not one clique and the build '
            'is rescheduled',
            'set [pci] report_in_placement = True and the [pci] '
            'device_spec lines of "nova-gpu-p2p topology --device-spec", '
            'restart nova-compute, then [filter_scheduler] '
            'pci_in_placement = True for nova-api, nova-conductor and '
            'nova-scheduler (see "Scheduling required flavors")')]
    functions = topology.functions
    spec_tags = device_spec.configured_tags(
        pci.device_specs, [(a, functions[a].vendor, functions[a].device)
                           for a in result.ids])
    problems = device_spec.problems(
        result.ids,
        {address: device_spec.entry_traits(tags)
         for address, tags in spec_tags.items()},
        spec_tags)
    checks = []
    for problem in problems:
        # "GPU <address> is in ... but ...: <what to do>"
        message, _, fix = problem.partition(': ')
        checks.append(Check(Status.WARN, '[pci] device_spec', message, fix))
    if checks:
        return checks
    in_cliques = [a for a, clique in result.ids.items() if clique is not None]
    offered = [a for a in in_cliques if a in spec_tags]
    return [Check(
        Status.OK, 'placement',
        '[pci] report_in_placement on: %d of %d GPUs in cliques offered by '
        '[pci] device_spec, each with its clique trait and %s tag'
        % (len(offered), len(in_cliques), device_spec.CLIQUE_TAG))]


def host_checks(topology: model.HostTopology, versions: HostVersions,
                level: link_class.LinkClass,
                acs_policy: link_class.AcsPolicy,
                clique_map: Mapping[str, int] | None = None,
                sysfs_root: str | None = '/sys',
                root: str = '/',
                bindings: model.HostTopology | None = None,
                pci: PciSettings | None = None) -> list[Check]:
    """Every check, in the order an operator fixes things.

    :param bindings: where driver and IOMMU group facts come from when the
        topology backend does not read sysfs (static, nvml); defaults to
        ``topology``.
    :param pci: nova.conf's ``[pci]`` settings; None when no nova.conf
        was read, and then scheduling is not judged.
    """
    bindings = bindings if bindings is not None else topology
    result = cliques_mod.assign(topology, level, acs_policy, clique_map)
    numa_traits: set[str] = set()
    if versions.libvirt is not None and versions.qemu is not None:
        numa_traits = traits_mod.numa_affinity(topology, versions.libvirt,
                                               versions.qemu)
    checks = check_versions(versions, topology, result.largest() >= 2)
    checks.append(check_firmware(root))
    checks.append(check_iommu(bindings, sysfs_root, root))
    checks.extend(check_bindings(bindings))
    checks.extend(check_acs(topology, acs_policy, level))
    checks.extend(check_numa(topology))
    checks.extend(check_nvswitch(topology))
    checks.extend(check_p2p_level(topology, level, acs_policy, clique_map,
                                  numa_traits, sysfs_root))
    if pci is not None:
        checks.extend(check_placement(topology, result, pci))
    checks.extend(check_findings(topology.findings + result.findings))
    return checks
