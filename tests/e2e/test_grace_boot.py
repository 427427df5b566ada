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

"""An aarch64 Grace guest boots and reads its generic-initiator nodes.

The GH200 corpus host's guest and a GB200 guest with two GPUs of one
Grace (four cells per GPU: eight would pass the 16 NUMA nodes Debian's
arm64 kernel allows), as our driver plans them
(:mod:`tests.fixtures.grace_guest`), are translated by the stack's
libvirtd (``virsh domxml-to-native``); libvirt writes
``acpi-generic-initiator`` objects only for a PCI hostdev, so the
resulting QEMU command line is run by the stack's ``qemu-system-aarch64``
itself (TCG, UEFI from AAVMF), with the vfio-pci GPU replaced by an
emulated PCIe device (virtio-rng) of the same id on the same root port,
so that every generic initiator still names it. The guest is Debian sid's
arm64 kernel with a busybox initramfs (:mod:`guest_image`'s ``/init``),
both from the ``.deb`` files ``tools/e2e/setup-stack.sh sid`` caches in
the chroot; it prints ``has_generic_initiator``, every node's distances
and every PCI function's ``numa_node``, then powers off.

What the guest must see, because the plan promised it: the nodes of the
hostdevs' ``<acpi nodeset>`` as its generic-initiator nodes, each
stand-in's ``numa_node`` that of its expander bus, the ``<distances>`` of
every cell. The same guest with one generic initiator left out must
show the difference. Stacks older than libvirt 11.8 / QEMU 9.0 skip.
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from lxml import etree
import testtools
from testtools import content

from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import sysfs
from tests.e2e import guest_domain
from tests.e2e import guest_image
from tests.e2e import test_domxml_to_native
from tests.e2e import test_grace_xml
from tests.fixtures import grace_guest
from tests.fixtures import qemu_argv
from tests.fixtures import stack

QEMU = 'qemu-system-aarch64'
#: Where ``setup-stack.sh sid`` caches the arm64 packages, in the chroot.
CACHE = '/var/cache/nova-gpu-p2p/arm64'
KERNEL_DEB = 'linux-binary-*-arm64_*_arm64.deb'
BUSYBOX_DEB = 'busybox-static_*_arm64.deb'
AAVMF_VARS = '/usr/share/AAVMF/AAVMF_VARS.fd'
CMDLINE = ('console=ttyAMA0 acpi=force loglevel=4 panic=-1 rdinit=/init '
           'nokaslr mitigations=off')
#: A TCG boot of the arm64 kernel under AAVMF to the report: 15-20 s
#: measured on a two-core machine at load 7-15; the limit is for worse.
BOOT_TIMEOUT_S = 480.0
#: After the report, how long the guest may take to power off by itself.
POWEROFF_GRACE_S = 30.0
POLL_S = 0.5
LOG_TAIL = 4000
#: Options of the translated command line that take no value.
FLAGS = ('-S', '-no-user-config', '-nodefaults', '-no-shutdown')
#: Flags left out to run QEMU without libvirtd: the paused start, and
#: staying alive after the guest powers off (the monitor's chardev and
#: object and the master key's secret go too).
DROPPED = ('-S', '-no-shutdown')


def _missing() -> str | None:
    """Why the stack cannot boot the guest; None when it can."""
    here = stack.current()
    if here.which(QEMU) is None:
        return '%s not found in %s stack' % (QEMU, here.describe())
    for pattern in (AAVMF_VARS, os.path.join(CACHE, KERNEL_DEB),
                    os.path.join(CACHE, BUSYBOX_DEB)):
        if not glob.glob(here.path(pattern)):
            return ('no %s in %s stack: run tools/e2e/setup-stack.sh sid'
                    % (pattern, here.describe()))
    return None


def _qemu_version() -> tuple[int, int, int]:
    output = subprocess.run(stack.current().command(QEMU, '--version'),
                            capture_output=True, text=True, check=True,
                            timeout=60).stdout
    match = re.search(r'version (\d+)\.(\d+)\.(\d+)', output)
    return tuple(int(part) for part in match.groups())


def _extract(deb: str, member: str, directory: str) -> str:
    """The file of the package matching ``member`` (a glob), unpacked."""
    unpacked = os.path.join(directory, 'unpacked')
    subprocess.run(['dpkg-deb', '-x', deb, unpacked], check=True,
                   timeout=300)
    (path,) = glob.glob(os.path.join(unpacked, member))
    return path


def runnable(argv: str, replace: dict[str, str], files: dict[str, str],
             leave_out: tuple[str, int] | None = None) -> list[str]:
    """libvirt's QEMU command line, run by hand with stand-ins.

    :param replace: the hostdev's id -> the emulated device standing in.
    :param files: ``kernel``, ``initrd``, ``console``, ``vars`` (the UEFI
        variable store), as the stack sees them.
    :param leave_out: (device id, node): the generic initiator not given.
    """
    words = shlex.split(argv)
    words = words[[i for i, w in enumerate(words) if w.endswith(QEMU)][0]:]
    result = [words[0]]
    position = 1
    while position < len(words):
        option = words[position]
        if option in FLAGS:
            position += 1
            if option not in DROPPED:
                result.append(option)
            continue
        value = words[position + 1]
        position += 2
        if option == '-chardev':
            continue
        if value.startswith('{'):
            spec = qemu_argv.parse_device(value)
            kind = spec.get('qom-type')
            if kind in ('secret', 'monitor-qmp'):
                continue
            if (kind == 'acpi-generic-initiator' and leave_out
                    == (spec['pci-dev'], spec['node'])):
                continue
            if spec.get('node-name') == 'libvirt-pflash1-storage':
                value = json.dumps(dict(spec, filename=files['vars']))
            if spec.get('id') in replace:
                value = json.dumps({
                    'driver': replace[spec['id']], 'id': spec['id'],
                    'bus': spec['bus'], 'addr': spec['addr']})
        result += [option, value]
    return result + ['-kernel', files['kernel'], '-initrd', files['initrd'],
                     '-append', CMDLINE, '-serial', 'file:' + files['console']]


class _Image:
    """The arm64 kernel and initramfs: unpacked once per test process."""

    workdir: str | None = None
    kernel = initrd = ''

    @classmethod
    def get(cls) -> str:
        """The work directory (in the stack's root, as seen here)."""
        if cls.workdir is None:
            here = stack.current()
            workdir = tempfile.mkdtemp(prefix='nova-gpu-p2p-grace-',
                                       dir=here.scratch_dir())
            (kernel_deb,) = glob.glob(here.path(os.path.join(CACHE,
                                                             KERNEL_DEB)))
            (busybox_deb,) = glob.glob(here.path(os.path.join(CACHE,
                                                              BUSYBOX_DEB)))
            cls.kernel = os.path.join(workdir, 'vmlinuz')
            shutil.move(_extract(kernel_deb, 'usr/lib/modules/*/vmlinuz',
                                 workdir), cls.kernel)
            busybox = os.path.join(workdir, 'busybox')
            shutil.move(_extract(busybox_deb, 'usr/bin/busybox', workdir),
                        busybox)
            shutil.rmtree(os.path.join(workdir, 'unpacked'))
            cls.initrd = guest_image.build_initramfs(workdir, busybox, None)
            cls.workdir = workdir
        return cls.workdir


def planned(xml: str) -> dict:
    """What the plan promises the guest.

    Its generic-initiator nodes, the node of each expander bus (by bus
    number: the guest's root bus ``pci0000:BB``) and the distances.
    """
    root = etree.fromstring(xml.encode())
    initiators = set()
    for hostdev in root.iterfind('devices/hostdev'):
        initiators |= set(sysfs.parse_cpulist(
            hostdev.find('acpi').get('nodeset')))
    return {'initiators': initiators,
            'device_nodes': {
                int(bus.find('target').get('busNr')):
                    int(bus.find('target/node').text)
                for bus in root.iterfind(
                    "devices/controller[@model='pcie-expander-bus']")},
            'distances': guest_domain.cell_distances(root)}


class GraceBootTest(testtools.TestCase):
    """Grace guests under TCG, stand-ins for their GPUs."""

    def setUp(self) -> None:
        super().setUp()
        test_domxml_to_native.need_stack(self)
        libvirt = stack.libvirt_version()
        if libvirt < min_versions.LIBVIRT_GENERIC_INITIATOR[:2]:
            self.skipTest('libvirt %d.%d predates generic initiators (11.8)'
                          % libvirt)
        missing = _missing()
        if missing is not None:
            if os.environ.get(stack.REQUIRE_TOOLS) == '1':
                self.fail('%s (%s=1)' % (missing, stack.REQUIRE_TOOLS))
            self.skipTest(missing)
        if _qemu_version() < min_versions.QEMU_GENERIC_INITIATOR:
            self.skipTest('QEMU %d.%d.%d predates acpi-generic-initiator '
                          '(9.0)' % _qemu_version())

    def translate(self, host: str, cells_per_gpu: int = 8) -> None:
        """The driver's guest for ``host``, through the stack's libvirtd."""
        gpus, cells = test_grace_xml.GUESTS[host]
        self.xml = grace_guest.domain_xml(
            host.replace('-one-grace', ''), gpus, cells, virt_type='qemu',
            options=plan_mod.Options(grace_cells_per_gpu=cells_per_gpu))
        self.addDetail('domain', content.text_content(self.xml))
        translation = stack.translate(self.xml.encode())
        self.assertIsNone(translation.refused_by, translation.output)
        self.argv = translation.output
        self.plan = planned(self.xml)

    def boot(self, name: str, leave_out: tuple[str, int] | None = None
             ) -> guest_image.GuestReport:
        """Run the guest to its report; the report."""
        here = stack.current()
        workdir = _Image.get()
        console = os.path.join(workdir, name + '.log')
        variables = os.path.join(workdir, name + '_VARS.fd')
        shutil.copyfile(here.path(AAVMF_VARS), variables)
        hostdevs = [d['id'] for d in qemu_argv.parse_devices(self.argv)
                    if d.get('driver') == 'vfio-pci']
        argv = runnable(self.argv, dict.fromkeys(hostdevs, 'virtio-rng-pci'),
                        {'kernel': here.inside(_Image.kernel),
                         'initrd': here.inside(_Image.initrd),
                         'console': here.inside(console),
                         'vars': here.inside(variables)}, leave_out)
        self.addDetail('%s QEMU' % name, content.text_content(
            shlex.join(argv)))
        start = time.monotonic()
        with open(os.path.join(workdir, name + '.qemu'), 'w+') as log:
            qemu = subprocess.Popen(here.command(*argv), stdout=log,
                                    stderr=subprocess.STDOUT)
            self.addCleanup(_stop, qemu)
            text = self._wait(qemu, console, start)
            log.seek(0)
            qemu_output = log.read()
        seconds = time.monotonic() - start
        self.addDetail('%s console (tail)' % name,
                       content.text_content(text[-LOG_TAIL:]))
        report = guest_image.parse_report(text)
        self.assertIsNotNone(report, '%s: no report in %.0f s (QEMU: %s); '
                             'console tail:\n%s' % (
                                 name, seconds, qemu_output.strip(),
                                 text[-LOG_TAIL:]))
        sys.stderr.write('\n%s: %.1f s to the report:\n%s\n' % (
            name, seconds, '\n'.join(report.lines)))
        self.addDetail('%s boot seconds' % name,
                       content.text_content('%.1f' % seconds))
        return report

    def _wait(self, qemu: subprocess.Popen, console: str, start: float
              ) -> str:
        """The console once QEMU has exited (or the guest reported)."""
        reported_at = None
        while True:
            text = ''
            if os.path.exists(console):
                with open(console, errors='replace') as log:
                    text = log.read()
            if qemu.poll() is not None:
                return text
            now = time.monotonic()
            if guest_image.END in text:
                reported_at = reported_at or now
                if now - reported_at > POWEROFF_GRACE_S:
                    return text
            elif now - start > BOOT_TIMEOUT_S:
                return text
            time.sleep(POLL_S)

    def seen(self, report: guest_image.GuestReport) -> dict:
        """What the guest read, in :func:`planned`'s terms."""
        stand_ins = [f for f in report.functions if (f.vendor, f.device)
                     == (guest_domain.STAND_IN_VENDOR,
                         guest_domain.STAND_IN_DEVICE)]
        initiators = sysfs.parse_cpulist(report.generic_initiators)
        return {'initiators': set(initiators),
                'device_nodes': {f.root_bus: f.numa_node
                                 for f in stand_ins},
                'distances': report.distances}

    def test_gh200(self) -> None:
        self.translate('gh200')
        self.assertEqual(self.plan, self.seen(self.boot('gh200')))

    def test_gh200_one_initiator_fewer(self) -> None:
        """Without one initiator object the guest lacks that node."""
        self.translate('gh200')
        node = max(self.plan['initiators'])
        hostdev = [d['id'] for d in qemu_argv.parse_devices(self.argv)
                   if d.get('driver') == 'vfio-pci'][0]
        seen = self.seen(self.boot('gh200-less', (hostdev, node)))
        self.assertNotEqual(self.plan, seen)
        self.assertEqual(self.plan['initiators'] - {node},
                         seen['initiators'])

    def test_gb200_two_gpus(self) -> None:
        """Two GPUs of one Grace, four cells each: 9 nodes.

        Eight cells each would make 17 nodes, past the 16 Debian's arm64
        kernel allows (``ACPI: SRAT: Too many proximity domains``).
        """
        self.translate('gb200-tray-one-grace', cells_per_gpu=4)
        self.assertEqual(2, len(self.plan['device_nodes']))
        self.assertEqual(self.plan, self.seen(self.boot('gb200')))


def _stop(qemu: subprocess.Popen) -> None:
    if qemu.poll() is None:
        qemu.kill()
        qemu.wait(timeout=60)


def tearDownModule() -> None:
    if _Image.workdir:
        shutil.rmtree(_Image.workdir, ignore_errors=True)
