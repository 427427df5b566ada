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

"""libvirt and QEMU: which versions this host runs, and what they allow.

The versions are asked of libvirtd as the driver would see them; what
each feature needs is in :mod:`nova_gpu_p2p.min_versions`.
"""

from collections.abc import Callable
import dataclasses
import importlib
import subprocess

from oslo_utils import versionutils

from nova_gpu_p2p.checks import result
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import grace
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits as traits_mod

Version = min_versions.Version

VIRSH_VERSION = ('virsh', '-c', 'qemu:///system', 'version', '--daemon')

#: Row titles: what each row judges, unique in a report.
OVERRIDE_TITLE = 'libvirt: clique IDs'
UEFI_XML_TITLE = 'libvirt: UEFI guest XML'
NUMA_AFFINITY_TITLE = 'QEMU: NUMA affinity'
GRACE_TITLE = 'libvirt and QEMU: Grace GPUs'


def parse_version(text: str | None) -> Version | None:
    """``11.3.0``, ``9.0`` or ``QEMU 10.0.2`` as a tuple; None if none.

    The number is the last word, as virsh prints it after the product.
    """
    words = (text or '').split()
    try:
        parts = versionutils.convert_version_to_tuple(words[-1])
    except (IndexError, ValueError):
        return None
    if not 2 <= len(parts) <= 3:
        return None
    return (parts + (0,))[:3]


def version_text(version: Version) -> str:
    return '.'.join(str(part) for part in version)


def newer_than_tested(version: Version, newest: Version) -> bool:
    """A release (major.minor) after the newest one the e2e suite ran on."""
    return version[:2] > newest[:2]


def parse_virsh_version(output: str
                        ) -> tuple[Version | None, Version | None]:
    """libvirt and QEMU versions from ``virsh version [--daemon]``.

    The daemon's version is what the driver sees (``getLibVersion`` asks
    the daemon); the client library's is used only when that is missing.
    virsh is a command, not the driver's connection, so Nova's
    ``Host.has_min_version`` cannot be asked here.
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
                return HostVersions(min_versions.unpack(conn.getLibVersion()),
                                    min_versions.unpack(conn.getVersion()))
            finally:
                conn.close()
        except Exception as exc:  # libvirt.libvirtError, without importing
            return HostVersions(None, None, 'libvirt-python: %s' % exc)
    try:
        completed = run(list(VIRSH_VERSION), capture_output=True,
                        text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return HostVersions(None, None, '%s: %s' % (VIRSH_VERSION[0], exc))
    libvirt_version, qemu = parse_virsh_version(completed.stdout)
    error = None
    if completed.returncode != 0 or libvirt_version is None or qemu is None:
        output = completed.stderr or completed.stdout or ''
        lines = output.strip().splitlines()
        error = '"%s" exited %d: %s' % (
            ' '.join(VIRSH_VERSION), completed.returncode,
            lines[-1] if lines else 'no output')
    return HostVersions(libvirt_version, qemu, error)


def check_versions(versions: HostVersions, topology: model.HostTopology,
                   has_cliques: bool) -> list[result.Check]:
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
        checks.append(result.warning(
            'libvirt',
            'version unknown (%s): clique IDs need %s, '
            'CUSTOM_GPU_NUMA_AFFINITY needs %s'
            % (versions.error or 'not found',
               version_text(min_versions.LIBVIRT_QEMU_OVERRIDE),
               version_text(min_versions.LIBVIRT_NUMA_AFFINITY)), how))
    else:
        checks.append(_check_override(libvirt, has_cliques))
        checks.append(_check_uefi_xml(libvirt))
    if qemu is None:
        checks.append(result.warning(
            'QEMU',
            'version unknown (%s): CUSTOM_GPU_NUMA_AFFINITY needs %s'
            % (versions.error or 'not found',
               version_text(min_versions.QEMU_NUMA_AFFINITY)), how))
    if libvirt is not None and qemu is not None:
        checks.append(_check_numa_affinity(libvirt, qemu, topology))
        if grace.discover(topology).gpus:
            checks.append(_check_grace(libvirt, qemu))
    return checks


def _check_grace(libvirt: Version, qemu: Version) -> result.Check:
    """Grace GPUs' memory cells: libvirt 11.8 and QEMU 9.0."""
    have = 'QEMU %s with libvirt %s' % (version_text(qemu),
                                        version_text(libvirt))
    needs = 'libvirt %s and QEMU %s' % (
        version_text(min_versions.LIBVIRT_GENERIC_INITIATOR),
        version_text(min_versions.QEMU_GENERIC_INITIATOR))
    if (libvirt >= min_versions.LIBVIRT_GENERIC_INITIATOR
            and qemu >= min_versions.QEMU_GENERIC_INITIATOR):
        return result.success(GRACE_TITLE, '%s gives Grace GPUs their '
                              'memory\'s NUMA cells (needs %s)'
                              % (have, needs))
    return result.failure(
        GRACE_TITLE, '%s cannot give Grace GPUs their memory\'s NUMA cells '
        '(ACPI generic initiators need %s): their builds are refused here'
        % (have, needs), 'upgrade libvirt and QEMU (%s)'
        % result.see(result.Doc.GRACE))


def _check_override(libvirt: Version, has_cliques: bool) -> result.Check:
    needs = version_text(min_versions.LIBVIRT_QEMU_OVERRIDE)
    subject = OVERRIDE_TITLE
    have = 'libvirt %s' % version_text(libvirt)
    if libvirt >= min_versions.LIBVIRT_QEMU_OVERRIDE:
        return result.success(subject, '%s supports <qemu:override>, which '
                              'clique IDs need (%s or later)' % (have, needs))
    consequence = ('guests asking for hw:gpu_p2p_clique get no clique ID '
                   '(required: rescheduled)')
    return result.Check(
        result.Code.FAILURE if has_cliques else result.Code.WARNING, subject,
        '%s is too old for <qemu:override>, which clique IDs need (%s or '
        'later): %s' % (have, needs, consequence if has_cliques else
                        'this host has no GPU clique, so nothing is lost '
                        'now'),
        'upgrade libvirt to %s or later (%s)'
        % (needs, result.see(result.Doc.OLD_LIBVIRT)))


def _check_uefi_xml(libvirt: Version) -> result.Check:
    subject = UEFI_XML_TITLE
    have = 'libvirt %s' % version_text(libvirt)
    tested = version_text(min_versions.LIBVIRT_UEFI_XML_TESTED)
    if libvirt < min_versions.LIBVIRT_UEFI_XML_REFUSED_BELOW:
        return result.warning(
            subject,
            have + ' refuses the UEFI guest XML Nova 34 writes (<os '
            'firmware=\'efi\'> with <loader secure=\'no\'/>: "loader '
            'attribute \'secure\' cannot be specified when firmware '
            'autoselection is enabled"); large-BAR GPUs need UEFI guests',
            'install libvirt %s or later (%s)'
            % (tested, result.see(result.Doc.UEFI_XML)))
    if libvirt < min_versions.LIBVIRT_UEFI_XML_TESTED:
        return result.success(
            subject, '%s: UEFI guest XML of Nova 34 not tested with this '
            'release (9.0 refuses it, %s accepts it): boot one '
            'hw_firmware_type=uefi image to be sure' % (have, tested))
    newest = version_text(min_versions.LIBVIRT_NEWEST_TESTED)
    if newer_than_tested(libvirt, min_versions.LIBVIRT_NEWEST_TESTED):
        return result.success(
            subject, '%s is newer than the newest release tested (%s and %s '
            'accept the UEFI guest XML of Nova 34): boot one '
            'hw_firmware_type=uefi image to be sure' % (have, tested,
                                                        newest))
    return result.success(subject, '%s accepts the UEFI guest XML of Nova '
                          '34 (tested with %s and %s)' % (have, tested,
                                                          newest))


def _check_numa_affinity(libvirt: Version, qemu: Version,
                         topology: model.HostTopology) -> result.Check:
    subject = NUMA_AFFINITY_TITLE
    have = 'QEMU %s with libvirt %s' % (version_text(qemu),
                                        version_text(libvirt))
    needs = 'libvirt %s and QEMU %s' % (
        version_text(min_versions.LIBVIRT_NUMA_AFFINITY),
        version_text(min_versions.QEMU_NUMA_AFFINITY))
    if traits_mod.numa_affinity(topology, libvirt, qemu):
        untested = [
            '%s %s' % (name, version_text(newest)) for name, version, newest
            in (('libvirt', libvirt, min_versions.LIBVIRT_NEWEST_TESTED),
                ('QEMU', qemu, min_versions.QEMU_NEWEST_TESTED))
            if newer_than_tested(version, newest)]
        return result.success(subject, '%s binds PCIe expander buses to '
                              'NUMA nodes: reports %s (needs %s)%s'
                              % (have, traits_mod.GPU_NUMA_AFFINITY, needs,
                                 '; newer than the newest tested (%s)'
                                 % ', '.join(untested) if untested else ''))
    if (libvirt < min_versions.LIBVIRT_NUMA_AFFINITY
            or qemu < min_versions.QEMU_NUMA_AFFINITY):
        return result.warning(
            subject,
            '%s: this host does not report %s (needs %s): flavors that '
            'require it do not land here'
            % (have, traits_mod.GPU_NUMA_AFFINITY, needs),
            'upgrade libvirt and QEMU (%s)'
            % result.see(result.Doc.OLD_LIBVIRT))
    if not topology.gpus():
        return result.success(subject, '%s can bind PCIe expander buses to '
                              'NUMA nodes (needs %s); this host has no '
                              'NVIDIA GPU, so it reports no %s'
                              % (have, needs, traits_mod.GPU_NUMA_AFFINITY))
    return result.warning(
        subject, '%s: no NVIDIA GPU with a known NUMA node, so no %s'
        % (have, traits_mod.GPU_NUMA_AFFINITY), 'see the NUMA line below')
