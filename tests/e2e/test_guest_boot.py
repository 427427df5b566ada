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

"""A real guest boots Nova's P2P domain and reads its own NUMA placement.

Nova's in-process cloud builds a two-cell guest with four GPUs, two per
host NUMA node, through our driver (:mod:`guest_domain`). The domain is
then started by the real libvirtd and QEMU of this machine, with each
passthrough GPU replaced by an emulated PCIe device (virtio-rng) at the
same guest ``<address>``: that is the only change about the devices; the
other changes adapt the run to a CI machine (TCG, one host NUMA node, two
CPUs, no disk image) and each test attaches the full list. The guest is
Debian's kernel with a busybox initramfs (:mod:`guest_image`) that prints
its sysfs and powers off.

What the guest must see, because the layout promised it: every stand-in's
``numa_node`` is the ``<node>`` of its expander bus, and the guest's NUMA
distances are the host's (copied into ``<distances>``); libvirt reports
the vCPU pinning Nova asked for. The same guest without ACPI is booted
too, to record why expander buses need ACPI.

The stack (libvirtd, QEMU, OVMF, SeaBIOS) is this machine's or the
chroot ``tools/e2e/setup-stack.sh sid`` made (:mod:`stack`), whose
firmware is then the one booted; the kernel and busybox are this
machine's. Needs root and ``setup-stack.sh``; skipped without them,
unless ``NOVA_GPU_P2P_REQUIRE_TOOLS=1``.
"""

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import fixtures
from lxml import etree
import testtools
from testtools import content

from lab import nccl_paths
from nova_gpu_p2p.guest import root_port_links
from nova_gpu_p2p.guest import topology_description
from nova_gpu_p2p import min_versions
from nova_gpu_p2p_guest import cli
from tests.e2e import guest_domain
from tests.e2e import guest_image
from tests.fixtures import guest_sysfs
from tests.fixtures import stack

REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
SETUP_HINT = 'run tools/e2e/setup-stack.sh as root'
#: A TCG boot of Debian's kernel to the report takes 10-20 s on two
#: cores; the limit leaves room for a loaded CI machine.
BOOT_TIMEOUT_S = 180.0
#: A guest whose console has not grown for this long before its report
#: is stuck (an empty console: before its kernel; seen under OVMF on a
#: slow day: a kernel that stops after its PCI scan): destroyed and
#: booted again. A normal boot prints something every few seconds.
SILENT_TIMEOUT_S = 45.0
#: What a guest kernel prints when TCG stops delivering a vCPU's timer
#: ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks ... timer
#: wakeup didn't happen"): seen under OVMF on QEMU 10.0 on a slow day,
#: where the guest never reaches its report; destroyed and booted again.
STALLED = 'detected stalls on CPUs'
#: After the report, how long the guest may take to power off by itself.
POWEROFF_GRACE_S = 15.0
POLL_S = 0.5
LOG_TAIL = 4000
#: Boots of one domain before a missing report fails the test.
BOOT_ATTEMPTS = 5


def _virsh(*args: str, check: bool = True, timeout: float = 60
           ) -> subprocess.CompletedProcess:
    process = subprocess.run(stack.current().virsh(*args),
                             capture_output=True, text=True,
                             timeout=timeout)
    if check and process.returncode:
        raise RuntimeError('virsh %s failed: %s' % (
            ' '.join(args), (process.stderr or process.stdout).strip()))
    return process


def stack_missing() -> str | None:
    """Why this machine cannot boot the guest; None when it can."""
    here = stack.current()
    try:
        for tool in ('virsh', 'qemu-system-x86_64'):
            if here.which(tool) is None:
                raise guest_image.MissingTool('%s not found in %s stack' % (
                    tool, here.describe()))
        guest_image.find_fw_cfg_module(guest_image.find_kernel())
        guest_image.find_ovmf(here.root)
        guest_image.find_busybox()
        guest_image.seabios_version(here.path(guest_image.SEABIOS))
    except guest_image.MissingTool as exc:
        return str(exc)
    try:
        version = _virsh('version', check=False, timeout=30)
    except (subprocess.TimeoutExpired, RuntimeError) as exc:
        return 'libvirtd does not answer in %s stack: %s' % (
            here.describe(), exc)
    if version.returncode:
        return 'libvirtd not reachable in %s stack: %s' % (
            here.describe(), version.stderr.strip()[:200])
    return None


@dataclasses.dataclass
class Boot:
    """One guest's run: what it printed, what libvirt said, how long."""

    name: str
    changes: list[str]
    report: guest_image.GuestReport
    console: str
    #: vCPU -> host CPUs, from ``virsh vcpupin`` of the running domain.
    live_pins: dict[int, list[int]]
    #: The running domain's XML, as libvirt reports it.
    live_xml: etree._Element
    #: The XML the test gave libvirt.
    booted_xml: etree._Element
    seconds: float


class _Shared:
    """Nova's XML and the initramfs: built once per test process."""

    lock = threading.Lock()
    captured: guest_domain.Captured | None = None
    workdir: str | None = None
    #: This machine's kernel, copied in: a chroot's QEMU sees no /boot.
    kernel: str | None = None
    initrd: str | None = None
    #: Whether the changes from Nova's XML were printed yet.
    changes_shown = False

    @classmethod
    def nova(cls) -> guest_domain.Captured:
        with cls.lock:
            if cls.captured is None:
                cls.captured = guest_domain.capture()
            return cls.captured

    @classmethod
    def image(cls) -> tuple[str, str, str]:
        """The work directory, kernel and initramfs, in the stack's view."""
        here = stack.current()
        with cls.lock:
            if cls.workdir is None:
                # Where the stack's QEMU can read (inside its chroot).
                workdir = tempfile.mkdtemp(prefix='nova-gpu-p2p-e2e-',
                                           dir=here.scratch_dir())
                # QEMU runs as libvirt-qemu: it must reach the kernel, the
                # initramfs and the console log in here.
                os.chmod(workdir, 0o755)
                kernel = guest_image.find_kernel()
                cls.kernel = os.path.join(workdir, os.path.basename(kernel))
                shutil.copyfile(kernel, cls.kernel)
                os.chmod(cls.kernel, 0o644)
                cls.initrd = guest_image.build_initramfs(
                    workdir, guest_image.find_busybox(),
                    guest_image.find_fw_cfg_module(kernel))
                cls.workdir = workdir
            return (here.inside(cls.workdir), here.inside(cls.kernel),
                    here.inside(cls.initrd))


def _parse_vcpupin(text: str) -> dict[int, list[int]]:
    pins = {}
    for line in text.splitlines():
        match = re.match(r'\s*(\d+)\s+([\d,\-^]+)\s*$', line)
        if match:
            pins[int(match.group(1))] = guest_domain.cpu_set(match.group(2))
    return pins


def _root_port_slot(address: str) -> int:
    return int(address.split(':')[2].split('.')[0], 16)


class GuestBootTest(testtools.TestCase):
    """Boots of Nova's two-cell P2P guest, stand-ins for the GPUs."""

    def setUp(self) -> None:
        super().setUp()
        self.captured = _Shared.nova()
        self.nova_xml = etree.fromstring(self.captured.xml)
        self.placements = guest_domain.placements(self.nova_xml)

    def _need_stack(self) -> None:
        missing = stack_missing()
        if missing is None:
            return
        message = '%s: %s' % (missing, SETUP_HINT)
        if os.environ.get(REQUIRE_TOOLS) == '1':
            self.fail('%s=1 but %s' % (REQUIRE_TOOLS, message))
        self.skipTest(message)

    def _mapping(self) -> guest_domain.HostMapping:
        return guest_domain.HostMapping(self.captured.host_node_cpus,
                                        guest_domain.host_nodes())

    def boot(self, name: str, ovmf: bool = False, acpi: bool = True
             ) -> Boot:
        """Start the domain, check its pinning paused, run it to the end."""
        self._need_stack()
        here = stack.current()
        workdir, kernel, initrd = _Shared.image()
        name = 'nova-gpu-p2p-e2e-%s-%d' % (name, os.getpid())
        domain = guest_domain.bootable(
            self.captured.xml, self._mapping(), name, workdir,
            kernel, initrd, guest_image.CMDLINE,
            ovmf=guest_image.find_ovmf(here.root) if ovmf else None,
            acpi=acpi)
        # The files as this process sees them (the stack may be chrooted).
        console_log = here.path(domain.console_log)
        workdir = here.path(workdir)
        changes = '\n'.join('  - %s' % change for change in domain.changes)
        self.addDetail('changes from Nova\'s XML',
                       content.text_content(changes))
        if not _Shared.changes_shown:
            _Shared.changes_shown = True
            sys.stderr.write('\nBooting Nova\'s XML with these changes:\n%s\n'
                             % changes)
        path = os.path.join(workdir, name + '.xml')
        with open(path, 'w') as xml_file:
            xml_file.write(domain.xml)
        self.addCleanup(_virsh, 'destroy', name, check=False)
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            for stale in (console_log,
                          os.path.join(workdir, name + '_VARS.fd')):
                if os.path.exists(stale):
                    os.unlink(stale)
            start = time.monotonic()
            _virsh('create', here.inside(path), '--paused')
            live_pins = _parse_vcpupin(_virsh('vcpupin', name).stdout)
            live_xml = etree.fromstring(_virsh('dumpxml', name).stdout)
            _virsh('resume', name)
            console = self._wait(name, console_log, start)
            seconds = time.monotonic() - start
            self.addDetail('guest console, attempt %d (tail)' % attempt,
                           content.text_content(console[-LOG_TAIL:]))
            report = guest_image.parse_report(console)
            if report is not None:
                break
            # A guest stuck (silent, or its CPUs stalled: above), or
            # QEMU 10.0 under multi-threaded TCG aborting early in
            # the guest kernel ("iotlb_to_section: Assertion `section_index
            # < d->map.sections_nb' failed", or "msix_table_mmio_write:
            # Assertion `addr + size <= ...' failed" in its log, the domain
            # "crashed"), more often on a loaded machine; the same domain
            # then boots. Try again; every console is kept.
            _virsh('destroy', name, check=False)
        if report is None:
            self.fail('%s: the guest printed no complete report in %.0f s;'
                      ' console tail:\n%s' % (name, seconds,
                                              console[-LOG_TAIL:]))
        self.addDetail('guest report', content.text_content(
            '\n'.join(report.lines)))
        self.addDetail('boot seconds', content.text_content(
            '%.1f' % seconds))
        return Boot(name=name, changes=domain.changes, report=report,
                    console=console, live_pins=live_pins, live_xml=live_xml,
                    booted_xml=etree.fromstring(domain.xml),
                    seconds=seconds)

    def _wait(self, name: str, console_log: str, start: float) -> str:
        """The console, once the guest is off (or has reported and hangs).

        A guest silent for :data:`SILENT_TIMEOUT_S`, or whose kernel
        reports stalled CPUs (:data:`STALLED`), is destroyed and its
        console returned, so that :meth:`boot` tries again.
        """
        reported_at = None
        grew_at, size = start, 0
        while True:
            console = ''
            if os.path.exists(console_log):
                with open(console_log, errors='replace') as log:
                    console = log.read()
            state = _virsh('domstate', name, check=False)
            # A transient domain is gone once it is shut off.
            if state.returncode or 'shut off' in state.stdout:
                return console
            now = time.monotonic()
            if guest_image.END in console:
                reported_at = reported_at or now
                if now - reported_at > POWEROFF_GRACE_S:
                    _virsh('destroy', name, check=False)
                    return console
            if len(console) != size:
                grew_at, size = now, len(console)
            stalled = STALLED in console or now - grew_at > SILENT_TIMEOUT_S
            if stalled and guest_image.END not in console:
                _virsh('destroy', name, check=False)
                return console
            if now - start > BOOT_TIMEOUT_S:
                _virsh('destroy', name, check=False)
                self.fail('%s still running after %.0f s; console tail:\n%s'
                          % (name, BOOT_TIMEOUT_S, console[-LOG_TAIL:]))
            time.sleep(POLL_S)

    # What the guest sees.

    def stand_ins(self, boot: Boot
                  ) -> dict[guest_domain.Placement, guest_image.PciFunction]:
        """Each placement's stand-in, found by expander bus and root port.

        A pxb-pcie with ``busNr`` B is the guest's root bus ``pci0000:B``;
        its root ports sit on bus B at the slots of the XML, and the
        stand-in is the function right under its root port.
        """
        found = {}
        for placement in self.placements:
            matches = [
                f for f in boot.report.functions
                if (f.vendor, f.device) == (guest_domain.STAND_IN_VENDOR,
                                            guest_domain.STAND_IN_DEVICE)
                and f.root_bus == placement.bus_nr
                and len(f.parents) == 2
                and _root_port_slot(f.parents[0]) == placement.port_slot]
            self.assertEqual(
                1, len(matches),
                'stand-in of %s (guest %s, busNr %s, root port slot %s): '
                'guest shows %s' % (
                    placement.host_device, placement.guest_address,
                    placement.bus_nr, placement.port_slot,
                    [f.address for f in matches]))
            found[placement] = matches[0]
        return found

    def _summary(self, boot: Boot, found: dict) -> str:
        devices = ', '.join('%s->%s numa_node %d (promised %s)' % (
            p.host_device, f.address, f.numa_node, p.guest_node)
            for p, f in found.items())
        return ('%s: %.1f s; %s; guest distances %s; ACPI tables %s'
                % (boot.name, boot.seconds, devices,
                   [boot.report.distances[n]
                    for n in sorted(boot.report.distances)],
                   ' '.join(boot.report.acpi_tables) or 'none'))

    def _record(self, text: str) -> None:
        self.addDetail('summary', content.text_content(text))
        sys.stderr.write('\n%s\n' % text)

    def assert_promises_kept(self, boot: Boot) -> None:
        found = self.stand_ins(boot)
        self._record(self._summary(boot, found))
        for placement, function in found.items():
            self.assertEqual(
                placement.guest_node, function.numa_node,
                '%s: the layout put it on expander bus %s (<node>%s</node>)'
                ', the guest reads numa_node %d at %s' % (
                    placement.host_device, placement.bus_nr,
                    placement.guest_node, function.numa_node, function.path))
        cells = guest_domain.guest_cells(self.nova_xml)
        self.assertEqual(
            cells, {node: guest_domain.cpu_set(cpus)
                    for node, cpus in boot.report.node_cpus.items()},
            'guest NUMA nodes and their CPUs')
        self.assertEqual(guest_domain.cell_distances(self.nova_xml),
                         boot.report.distances, 'guest NUMA distances')
        host_cells = self.captured.host_cells
        self.assertEqual(
            {cell: [self.captured.host_distances[host][other]
                    for other in host_cells]
             for cell, host in enumerate(host_cells)},
            boot.report.distances, 'guest distances against the host\'s')
        # libvirt runs the vCPUs where Nova's (mapped) <vcpupin> says.
        asked = guest_domain.vcpu_pins(boot.booted_xml)
        self.assertEqual(guest_domain.VCPUS, len(asked), 'pinned vCPUs')
        self.assertEqual(asked, boot.live_pins, 'virsh vcpupin')
        self.assertEqual(asked, guest_domain.vcpu_pins(boot.live_xml),
                         'virsh dumpxml <cputune>')
        self.assertEqual(
            [m.get('nodeset') for m in boot.booted_xml.iterfind(
                './numatune/memnode')],
            [m.get('nodeset') for m in boot.live_xml.iterfind(
                './numatune/memnode')], 'virsh dumpxml <numatune>')
        # The guest reads the topology description the driver wrote.
        (entry,) = self.nova_xml.findall(
            './sysinfo[@type="fwcfg"]/entry[@name="%s"]'
            % topology_description.ENTRY_NAME)
        self.assertEqual(entry.text, boot.report.fw_cfg,
                         'the fw_cfg entry read in the guest')

    def assert_root_ports_at_host_links(self, boot: Boot) -> None:
        """Each stand-in's root port reads the host link in guest sysfs.

        The corpus host's L40S cards are Gen4 x16 on Gen5 root ports: the
        link NCCL reads on the host is 16 GT/s x16, and the driver sets
        each guest root port to it (QEMU's own default is x32), so that
        NCCL and nvidia-smi without the guest agent read the host's.
        """
        wanted = guest_domain.port_links(self.nova_xml)
        self.assertEqual(
            {p.host_device: {'x-speed': '16', 'x-width': '16'}
             for p in self.placements}, wanted,
            'root port overrides in Nova\'s XML')
        seen = []
        for placement, function in self.stand_ins(boot).items():
            port = function.parents[0]
            link = boot.report.links.get(port)
            seen.append('%s: root port %s %s' % (placement.host_device, port,
                                                 link))
            self.assertEqual(('16.0 GT/s PCIe', '16'),
                             link[:2] if link else None,
                             'max_link_speed/width of guest root port %s'
                             % port)
        self._record('%s: guest root port links %s'
                     % (boot.name, '; '.join(seen)))

    # The tests.

    def test_layout_as_nova_built_it(self) -> None:
        """The XML booted below is the one the promises are read from.

        Two guest cells, each with stand-ins on its own expander bus; the
        cells' distances are the host's between the nodes Nova chose; each
        cell's vCPUs are pinned to CPUs of the host node its memory is on
        (Nova's fake host, before the mapping onto this machine).
        """
        nodes = {p.guest_node for p in self.placements}
        self.assertEqual({0, 1}, nodes, self.placements)
        self.assertEqual(guest_domain.GPUS, len(self.placements))
        host_cells = self.captured.host_cells
        self.assertEqual(
            {cell: [self.captured.host_distances[host_cells[cell]][
                host_cells[other]] for other in range(len(host_cells))]
             for cell in range(len(host_cells))},
            guest_domain.cell_distances(self.nova_xml))
        # Not Linux's default 10/20: a copied SLIT is told apart.
        self.assertNotEqual(20, guest_domain.cell_distances(
            self.nova_xml)[0][1])
        pins = guest_domain.vcpu_pins(self.nova_xml)
        for cell, vcpus in guest_domain.guest_cells(self.nova_xml).items():
            host_node = host_cells[cell]
            for vcpu in vcpus:
                self.assertTrue(
                    set(pins[vcpu]) <= set(
                        self.captured.host_node_cpus[host_node]),
                    'vCPU %d of cell %d pinned to %s, not on host node %d'
                    % (vcpu, cell, pins[vcpu], host_node))

    def assert_nccl_sees_the_host(self, boot: Boot) -> None:
        """The guest agent, on what this guest read and sees, for NCCL.

        The guest's own report (its sysfs paths, NUMA nodes and the fw_cfg
        entry it read) is laid out as a sysfs tree, with each stand-in
        given the vendor and class of the device it stands for; the agent
        writes NCCL's topology from it, and NCCL's rules
        (:mod:`lab.nccl_paths`) must then give every
        GPU-GPU and GPU-NIC pair its host class.
        """
        description = topology_description.decode(boot.report.fw_cfg)
        devices = description['devices']
        index = {(d['bus_nr'], d['slot']): i for i, d in enumerate(devices)}
        address = {}
        for placement, function in self.stand_ins(boot).items():
            address[function.address] = index[
                (placement.bus_nr, placement.port_slot)]
        functions = []
        for f in boot.report.functions:
            vendor, class_code = f.vendor, f.pci_class
            if f.address in address:
                device = devices[address[f.address]]
                vendor = int(device['vendor'], 16)
                class_code = int(device['class'], 16)
            functions.append((f.path, vendor, f.device, class_code,
                              f.numa_node))
        root = self.useFixture(fixtures.TempDir()).path
        guest_sysfs.replay(root, functions, {
            node: guest_domain.cpu_set(cpus)
            for node, cpus in boot.report.node_cpus.items()})
        entry = os.path.join(root, 'entry')
        with open(entry, 'w') as f:
            f.write(boot.report.fw_cfg)
        output = os.path.join(root, 'virtualTopology.xml')
        self.assertEqual(0, cli.main([
            '--sysfs-root', root, '--fw-cfg', entry, '--output', output]))
        guest = {i: a for a, i in address.items()}
        gpus = [guest[i] for i, d in enumerate(devices)
                if d['role'] == 'gpu']
        nics = [guest[i] for i, d in enumerate(devices)
                if d['role'] == 'nic']
        expected = {
            frozenset((guest[i], guest[j])): nccl_paths.nccl_class(cls)
            for i, j, cls in description['pairs']
            if 'gpu' in (devices[i]['role'], devices[j]['role'])
            and {devices[i]['role'], devices[j]['role']} <= {'gpu', 'nic'}}
        with open(output) as f:
            seen = nccl_paths.pair_types(gpus, nics, sysfs_root=root,
                                         topo_xml=f.read())
        self._record('%s: NCCL pairs with the agent %s, host %s' % (
            boot.name, sorted(seen.values()), sorted(expected.values())))
        self.assertEqual(expected, seen)

    def test_seabios(self) -> None:
        boot = self.boot('seabios')
        self.assert_promises_kept(boot)
        self.assert_root_ports_at_host_links(boot)
        self.assert_nccl_sees_the_host(boot)

    def test_ovmf(self) -> None:
        self.assert_promises_kept(self.boot('ovmf', ovmf=True))

    def test_root_port_speeds_this_qemu_accepts(self) -> None:
        """QEMU 9.2 and later take 32 GT/s on a root port; older refuse it.

        The driver picks its ``x-speed`` by the QEMU version
        (:mod:`nova_gpu_p2p.guest.root_port_links`); this stack's QEMU must
        accept what it picks for a Gen5 link, and refuse 32 GT/s exactly
        where the driver does not use it. A paused QEMU still running after
        a few seconds accepted its command line.
        """
        self._need_stack()
        here = stack.current()
        text = subprocess.run(here.command('qemu-system-x86_64', '--version'),
                              capture_output=True, text=True,
                              timeout=60).stdout
        version = tuple(int(n) for n in re.search(
            r'version (\d+)\.(\d+)\.(\d+)', text).groups())

        def accepts(speed: str) -> bool:
            # coreutils' timeout, in the stack's root: exit status 124 is
            # a QEMU that started (Python's own timeout is eventlet's here,
            # and would leave QEMU running under nsenter).
            argv = here.command(
                'timeout', '8', 'qemu-system-x86_64', '-machine',
                'q35,accel=tcg', '-nodefaults', '-display', 'none', '-S',
                '-device',
                'pcie-root-port,id=rp,chassis=1,x-speed=%s,x-width=16'
                % speed)
            process = subprocess.run(argv, capture_output=True, text=True,
                                     timeout=120)
            self.addDetail('qemu x-speed=%s' % speed, content.text_content(
                'exit %d: %s' % (process.returncode, process.stderr)))
            return process.returncode == 124

        gen5 = root_port_links.port_link(
            {'link_speed': '32.0 GT/s PCIe', 'link_width': 16}, version)
        takes_32 = accepts('32')
        # Each accepted probe waits its timeout: ask once per value.
        picked = takes_32 if gen5.speed == '32' else accepts(gen5.speed)
        self._record('QEMU %s: x-speed=32 %s; the driver writes %s for a '
                     'Gen5 x16 link' % ('.'.join(map(str, version)),
                                        'accepted' if takes_32 else
                                        'refused', gen5))
        self.assertEqual(version >= min_versions.QEMU_PCIE_GEN5, takes_32)
        self.assertTrue(picked)

    def test_without_acpi(self) -> None:
        """Why ``<acpi/>`` matters: without it the guest sees neither.

        QEMU then builds no ACPI tables, and what the guest sees depends
        on the stack's SeaBIOS (:data:`guest_image.SEABIOS_OWN_ACPI_BELOW`):
        an older one writes its own minimal tables (a SRAT from QEMU's NUMA
        configuration, but no SLIT and no proximity for the expander
        buses), so the guest keeps its NUMA nodes but reads ``numa_node``
        -1 for every stand-in and Linux's default distances; 1.17 writes
        none ("ACPI BIOS Error (bug): A valid RSDP was not found"), so the
        guest has no ACPI, one NUMA node and no expander bus at all.
        """
        here = stack.current()
        seabios = guest_image.seabios_version(here.path(guest_image.SEABIOS))
        boot = self.boot('no-acpi', acpi=False)
        own_tables = seabios < guest_image.SEABIOS_OWN_ACPI_BELOW
        note = ('ACPI off under SeaBIOS %s, which %s' % (
            '.'.join(map(str, seabios)),
            'writes its own minimal ACPI tables' if own_tables
            else 'writes no ACPI tables'))
        self.assertNotIn('SLIT', boot.report.acpi_tables, note)
        self.assertNotEqual(guest_domain.cell_distances(self.nova_xml),
                            boot.report.distances, note)
        if own_tables:
            found = self.stand_ins(boot)
            self._record(self._summary(boot, found) + ' (%s: recorded)'
                         % note)
            self.assertEqual([-1] * len(found),
                             [f.numa_node for f in found.values()], note)
            self.assertEqual(sorted(guest_domain.guest_cells(self.nova_xml)),
                             sorted(boot.report.node_cpus), note)
            return
        stand_ins = [f for f in boot.report.functions
                     if (f.vendor, f.device) == (
                         guest_domain.STAND_IN_VENDOR,
                         guest_domain.STAND_IN_DEVICE)]
        self._record('%s: %.1f s; stand-ins seen %s; guest nodes %s, '
                     'distances %s; ACPI tables %s (%s: recorded)' % (
                         boot.name, boot.seconds,
                         [f.path for f in stand_ins],
                         boot.report.node_cpus, boot.report.distances,
                         ' '.join(boot.report.acpi_tables) or 'none', note))
        self.assertEqual([], boot.report.acpi_tables, note)
        self.assertEqual([0], sorted(boot.report.node_cpus), note)
        buses = {p.bus_nr for p in self.placements}
        self.assertEqual([], [f.path for f in stand_ins
                              if f.root_bus in buses], note)


def tearDownModule() -> None:
    if _Shared.workdir:
        shutil.rmtree(_Shared.workdir, ignore_errors=True)
