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

"""``nova-gpu-p2p check``: each verdict, then the command over the corpus.

The expected statuses per corpus host are written out by hand from the
host descriptions in :mod:`tests.fixtures.hosts`.
"""

import dataclasses
import glob
import json
import os
import subprocess

import fixtures
from oslo_upgradecheck import upgradecheck

from nova_gpu_p2p.checks import acs
from nova_gpu_p2p.checks import firmware
from nova_gpu_p2p.checks import guest_links
from nova_gpu_p2p.checks import host
from nova_gpu_p2p.checks import numa
from nova_gpu_p2p.checks import nvswitch
from nova_gpu_p2p.checks import p2p_level
from nova_gpu_p2p.checks import placement
from nova_gpu_p2p.checks import result
from nova_gpu_p2p.checks import versions
from nova_gpu_p2p.checks import vfio
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.unit import base
from tests.unit import test_cli

OK, WARN, FAIL = (result.Code.SUCCESS, result.Code.WARNING,
                  result.Code.FAILURE)
GPU_CLASS = 0x030200
BRIDGE = 0x060400
REDIRECT = model.Acs(capability=0x5f, control=0x1d)
DESCRIPTOR = {
    'interface-types': ['uefi'],
    'mapping': {'device': 'flash', 'executable': {
        'filename': '/usr/share/OVMF/OVMF_CODE_4M.fd', 'format': 'raw'}},
    'targets': [{'architecture': 'x86_64', 'machines': ['pc-q35-*']}],
    'features': ['acpi-s3'],
}


def fn(address, parent=None, rc='pci0000:00', numa=0, driver='vfio-pci',
       group=None, vendor=model.NVIDIA_VENDOR_ID, class_code=GPU_CLASS,
       port_type=model.PortType.ENDPOINT, acs=None, device=0x2330,
       acs_known=True):
    return model.PCIFunction(
        address=address, vendor=vendor, device=device,
        class_code=class_code, parent=parent, root_complex=rc,
        numa_node=numa, driver=driver, iommu_group=group,
        port_type=port_type, acs=acs, acs_known=acs_known)


def bridge(address, port_type, parent=None, acs=None, acs_known=True):
    return fn(address, parent, driver='pcieport', vendor=0x1000,
              class_code=BRIDGE, port_type=port_type, acs=acs,
              acs_known=acs_known)


def topo(*functions, **kwargs):
    return model.HostTopology(
        functions={f.address: f for f in functions}, **kwargs)


def switch_host(acs_a=REDIRECT, acs_b=None, config_space_read=True):
    """Root port, one switch, GPU A behind port 02:00.0, B behind 02:01.0.

    Without ``config_space_read``, no bridge's ACS is known.
    """
    known = config_space_read
    return topo(
        bridge('0000:00:01.0', model.PortType.ROOT_PORT, acs_known=known),
        bridge('0000:01:00.0', model.PortType.UPSTREAM, '0000:00:01.0',
               acs_known=known),
        bridge('0000:02:00.0', model.PortType.DOWNSTREAM, '0000:01:00.0',
               acs_a if known else None, acs_known=known),
        bridge('0000:02:01.0', model.PortType.DOWNSTREAM, '0000:01:00.0',
               acs_b if known else None, acs_known=known),
        fn('0000:03:00.0', '0000:02:00.0', group=3),
        fn('0000:04:00.0', '0000:02:01.0', group=4),
        numa_nodes=(model.NumaNode(0, frozenset({0, 1}), (10,)),),
        config_space_read=config_space_read)


def two_rc_host():
    """Two GPUs on root ports of two root complexes of node 0: NODE."""
    return topo(fn('0000:01:00.0', rc='pci0000:00', group=1),
                fn('0000:41:00.0', rc='pci0000:40', group=2))


class TestResult(base.TestCase):

    def test_an_oslo_upgradecheck_result(self):
        check = result.failure('IOMMU', 'off', 'turn it on')
        self.assertIsInstance(check, upgradecheck.Result)
        self.assertEqual((upgradecheck.Code.FAILURE, 'off; fix: turn it on'),
                         (check.code, check.details))
        self.assertEqual(('IOMMU', 'off', 'turn it on'),
                         (check.subject, check.message, check.fix))
        fine = result.success('vfio-pci', 'fine')
        self.assertEqual((OK, 'fine', None),
                         (fine.code, fine.details, fine.fix))
        self.assertEqual(WARN, result.warning('a', 'b').code)

    def test_equal_by_content(self):
        self.assertEqual(result.warning('a', 'b', 'c'),
                         result.Check(WARN, 'a', 'b', 'c'))
        self.assertNotEqual(result.warning('a', 'b', 'c'),
                            result.failure('a', 'b', 'c'))
        self.assertNotEqual(result.warning('a', 'b'),
                            result.warning('a', 'b', 'c'))

    def test_doc_sections_exist(self):
        """Every section a message names is in the troubleshooting guide."""
        # troubleshooting.rst and its pages by symptom area.
        lines = []
        for path in glob.glob(os.path.join(
                test_cli.REPO, 'doc', 'source', 'troubleshooting*.rst')):
            with open(path) as f:
                lines += f.read().splitlines()
        titles = {title for title, underline in zip(lines, lines[1:])
                  if underline and set(underline) == {'='}
                  and len(underline) >= len(title)}
        for section in result.Doc:
            self.assertIn(section.value, titles)
        self.assertEqual('see troubleshooting: IOMMU off',
                         result.see(result.Doc.IOMMU))


class TestVersions(base.TestCase):

    def test_parse_version(self):
        self.assertEqual((11, 3, 0), versions.parse_version('11.3.0'))
        self.assertEqual((9, 0, 0), versions.parse_version('9.0'))
        self.assertEqual((10, 0, 2), versions.parse_version('QEMU 10.0.2'))
        self.assertIsNone(versions.parse_version('unknown'))
        self.assertIsNone(versions.parse_version(None))

    def test_parse_virsh_version_prefers_the_daemon(self):
        out = ('Compiled against library: libvirt 11.3.0\n'
               'Using library: libvirt 11.3.0\n'
               'Using API: QEMU 11.3.0\n'
               'Running hypervisor: QEMU 10.0.2\n'
               'Running against daemon: 9.0.0\n')
        self.assertEqual(((9, 0, 0), (10, 0, 2)),
                         versions.parse_virsh_version(out))

    def test_parse_virsh_version_without_daemon_line(self):
        out = ('Using library: libvirt 8.0.0\n'
               'Running hypervisor: QEMU 6.2.0\n')
        self.assertEqual(((8, 0, 0), (6, 2, 0)),
                         versions.parse_virsh_version(out))

    def test_parse_virsh_version_other_hypervisor(self):
        self.assertEqual(((9, 0, 0), None), versions.parse_virsh_version(
            'Using library: libvirt 9.0.0\nRunning hypervisor: Xen 4.17\n'))
        self.assertEqual((None, None), versions.parse_virsh_version('error\n'))


class FakeConn:
    closed = False

    def getLibVersion(self):
        return 11003000

    def getVersion(self):
        return 10000002

    def close(self):
        self.closed = True


class TestProbeVersions(base.TestCase):

    def no_libvirt(self, name):
        raise ImportError(name)

    def virsh(self, rc=0, stdout='', stderr='', exc=None):
        calls = []

        def run(argv, **kwargs):
            calls.append(argv)
            if exc:
                raise exc
            return subprocess.CompletedProcess(argv, rc, stdout, stderr)
        return run, calls

    def test_libvirt_python_first(self):
        conn = FakeConn()

        class Module:
            @staticmethod
            def openReadOnly(uri):
                self.assertEqual('qemu:///system', uri)
                return conn

        run, calls = self.virsh()
        found = versions.probe_versions(lambda name: Module, run)
        self.assertEqual(versions.HostVersions((11, 3, 0), (10, 0, 2)), found)
        self.assertTrue(conn.closed)
        self.assertEqual([], calls)

    def test_libvirt_python_cannot_connect(self):
        class Module:
            @staticmethod
            def openReadOnly(uri):
                raise RuntimeError('Failed to connect socket')

        found = versions.probe_versions(lambda name: Module)
        self.assertIsNone(found.libvirt)
        self.assertIn('Failed to connect socket', found.error)

    def test_virsh_when_no_bindings(self):
        run, calls = self.virsh(stdout='Using library: libvirt 11.3.0\n'
                                       'Running hypervisor: QEMU 10.0.2\n'
                                       'Running against daemon: 11.3.0\n')
        found = versions.probe_versions(self.no_libvirt, run)
        self.assertEqual(versions.HostVersions((11, 3, 0), (10, 0, 2)), found)
        self.assertEqual([list(versions.VIRSH_VERSION)], calls)

    def test_virsh_fails(self):
        run, _ = self.virsh(rc=1, stdout='Using library: libvirt 9.0.0\n',
                            stderr='error: failed to connect to the '
                                   'hypervisor\n')
        found = versions.probe_versions(self.no_libvirt, run)
        self.assertEqual((9, 0, 0), found.libvirt)
        self.assertIsNone(found.qemu)
        self.assertIn('exited 1: error: failed to connect', found.error)

    def test_virsh_missing(self):
        run, _ = self.virsh(exc=FileNotFoundError(2, 'No such file'))
        found = versions.probe_versions(self.no_libvirt, run)
        self.assertEqual((None, None), (found.libvirt, found.qemu))
        self.assertIn('virsh: ', found.error)

    def test_virsh_no_output(self):
        run, _ = self.virsh(rc=1)
        self.assertIn('no output',
                      versions.probe_versions(self.no_libvirt, run).error)


class TestCheckVersions(base.TestCase):

    def statuses(self, checks):
        return [(c.code, c.subject) for c in checks]

    def assert_tested_stack(self, libvirt: str, qemu: str, checks) -> None:
        """A tested stack's three checks: OK, and nothing said of newer."""
        self.assertEqual([(OK, 'libvirt: clique IDs'),
                          (OK, 'libvirt: UEFI guest XML'),
                          (OK, 'QEMU: NUMA affinity')], self.statuses(checks))
        self.assertEqual(
            ['libvirt %s supports <qemu:override>, which clique IDs need '
             '(8.2.0 or later)' % libvirt,
             'libvirt %s accepts the UEFI guest XML of Nova 34 (tested with '
             '11.3.0 and 12.8.0)' % libvirt,
             'QEMU %s with libvirt %s binds PCIe expander buses to NUMA '
             'nodes: reports CUSTOM_GPU_NUMA_AFFINITY (needs libvirt 8.0.0 '
             'and QEMU 6.2.0)' % (qemu, libvirt)],
            [c.message for c in checks])

    def test_current_stack(self):
        checks = versions.check_versions(
            versions.HostVersions((11, 3, 0), (10, 0, 2)), two_rc_host(), True)
        self.assert_tested_stack('11.3.0', '10.0.2', checks)

    def test_newest_tested_stack(self):
        # Debian sid's libvirt 12.8 and QEMU 11.1 (tools/e2e/setup-stack.sh
        # sid): tested, nothing said about being newer.
        checks = versions.check_versions(
            versions.HostVersions((12, 8, 0), (11, 1, 3)), two_rc_host(),
            True)
        self.assert_tested_stack('12.8.0', '11.1.3', checks)

    def test_newer_than_tested(self):
        checks = versions.check_versions(
            versions.HostVersions((13, 0, 0), (12, 0, 0)), two_rc_host(),
            True)
        self.assertEqual([OK, OK, OK], [c.code for c in checks])
        self.assertEqual('libvirt 13.0.0 is newer than the newest release '
                         'tested (11.3.0 and 12.8.0 accept the UEFI guest '
                         'XML of Nova 34): boot one hw_firmware_type=uefi '
                         'image to be sure', checks[1].message)
        self.assertTrue(checks[2].message.endswith(
            '; newer than the newest tested (libvirt 12.8.0, QEMU 11.1.0)'),
            checks[2].message)

    def test_parse_newest_tested_versions(self):
        out = ('Compiled against library: libvirt 12.8.0\n'
               'Using library: libvirt 12.8.0\n'
               'Using API: QEMU 12.8.0\n'
               'Running hypervisor: QEMU 11.1.3\n'
               'Running against daemon: 12.8.0\n')
        self.assertEqual(((12, 8, 0), (11, 1, 3)),
                         versions.parse_virsh_version(out))

    def test_bookworm_stack_warns_about_uefi(self):
        checks = versions.check_versions(
            versions.HostVersions((9, 0, 0), (7, 2, 0)), two_rc_host(), True)
        self.assertEqual([OK, WARN, OK], [c.code for c in checks])
        self.assertIn("loader attribute 'secure'", checks[1].message)
        self.assertEqual('install libvirt 11.3.0 or later (see '
                         'troubleshooting: UEFI guests refused by libvirt '
                         '9.0 (Nova 34))', checks[1].fix)

    def test_untested_release_between(self):
        checks = versions.check_versions(
            versions.HostVersions((10, 0, 0), (8, 2, 2)), two_rc_host(), True)
        self.assertEqual([OK, OK, OK], [c.code for c in checks])
        self.assertIn('not tested', checks[1].message)

    def test_too_old_for_override_with_cliques_fails(self):
        checks = versions.check_versions(
            versions.HostVersions((7, 0, 0), (6, 1, 0)), two_rc_host(), True)
        self.assertEqual([FAIL, WARN, WARN], [c.code for c in checks])
        self.assertIn('8.2.0', checks[0].message)
        self.assertIn('upgrade libvirt to 8.2.0', checks[0].fix)
        self.assertIn('does not report CUSTOM_GPU_NUMA_AFFINITY',
                      checks[2].message)
        self.assertEqual('upgrade libvirt and QEMU (see troubleshooting: '
                         'Old libvirt or QEMU)', checks[2].fix)

    def test_too_old_for_override_without_cliques_warns(self):
        checks = versions.check_versions(
            versions.HostVersions((8, 1, 0), (7, 2, 0)), two_rc_host(), False)
        self.assertEqual(WARN, checks[0].code)
        self.assertIn('nothing is lost now', checks[0].message)

    def test_old_qemu_only(self):
        checks = versions.check_versions(
            versions.HostVersions((9, 0, 0), (6, 1, 0)), two_rc_host(), True)
        self.assertEqual((WARN, 'QEMU: NUMA affinity'),
                         (checks[2].code, checks[2].subject))
        self.assertIn('QEMU 6.1.0 with libvirt 9.0.0: this host does not '
                      'report', checks[2].message)

    def test_no_gpu_numa_node(self):
        host = topo(fn('0000:01:00.0', numa=None, group=1))
        checks = versions.check_versions(
            versions.HostVersions((11, 3, 0), (10, 0, 2)), host, False)
        self.assertEqual(WARN, checks[2].code)
        self.assertIn('no NVIDIA GPU with a known NUMA node',
                      checks[2].message)
        checks = versions.check_versions(
            versions.HostVersions((11, 3, 0), (10, 0, 2)), topo(), False)
        self.assertEqual(OK, checks[2].code)
        # A sentence that ends, naming what is and is not there.
        self.assertEqual('QEMU 10.0.2 with libvirt 11.3.0 can bind PCIe '
                         'expander buses to NUMA nodes (needs libvirt 8.0.0 '
                         'and QEMU 6.2.0); this host has no NVIDIA GPU, so '
                         'it reports no CUSTOM_GPU_NUMA_AFFINITY',
                         checks[2].message)

    def test_unknown_versions(self):
        checks = versions.check_versions(
            versions.HostVersions(None, None, 'virsh: not found'),
            two_rc_host(), True)
        self.assertEqual([(WARN, 'libvirt'), (WARN, 'QEMU')],
                         self.statuses(checks))
        self.assertIn('virsh: not found', checks[0].message)
        self.assertIn('--libvirt-version', checks[0].fix)
        self.assertIn('virsh -c qemu:///system version', checks[1].fix)

    def test_unknown_qemu_only(self):
        checks = versions.check_versions(
            versions.HostVersions((11, 3, 0), None), two_rc_host(), True)
        self.assertEqual([OK, OK, WARN], [c.code for c in checks])
        self.assertIn('not found', checks[2].message)


class TestFirmware(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path

    def write(self, path, text=''):
        path = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    def test_descriptor_and_code(self):
        self.write('usr/share/OVMF/OVMF_CODE_4M.fd')
        self.write('usr/share/qemu/firmware/60-edk2-x86_64.json',
                   json.dumps(DESCRIPTOR))
        check = firmware.check_firmware(self.root)
        self.assertEqual(OK, check.code)
        self.assertIn('/usr/share/OVMF/OVMF_CODE_4M.fd', check.message)
        self.assertIn('60-edk2-x86_64.json', check.message)

    def test_plain_uefi_preferred_over_secure_boot(self):
        self.write('usr/share/OVMF/OVMF_CODE_4M.fd')
        self.write('usr/share/OVMF/OVMF_CODE_4M.secboot.fd')
        secure = dict(DESCRIPTOR, features=['secure-boot'], mapping={
            'executable': {
                'filename': '/usr/share/OVMF/OVMF_CODE_4M.secboot.fd'}})
        self.write('etc/qemu/firmware/10-secure.json', json.dumps(secure))
        self.write('usr/share/qemu/firmware/60-edk2-x86_64.json',
                   json.dumps(DESCRIPTOR))
        self.assertIn('OVMF_CODE_4M.fd (60-edk2',
                      firmware.check_firmware(self.root).message)

    def test_code_without_descriptor(self):
        self.write('usr/share/OVMF/OVMF_CODE.fd')
        check = firmware.check_firmware(self.root)
        self.assertEqual(WARN, check.code)
        self.assertIn('/usr/share/OVMF/OVMF_CODE.fd', check.message)
        self.assertIn('no QEMU firmware descriptor', check.message)
        self.assertIn('install OVMF with its QEMU firmware descriptors',
                      check.fix)
        self.assertIn('see troubleshooting: No UEFI firmware (OVMF)',
                      check.fix)

    def test_nothing(self):
        check = firmware.check_firmware(self.root)
        self.assertEqual(WARN, check.code)
        self.assertIn('no UEFI firmware', check.message)
        self.assertIn('install OVMF with its QEMU firmware descriptors',
                      check.fix)
        self.assertIn('see troubleshooting: No UEFI firmware (OVMF)',
                      check.fix)

    def test_descriptors_that_do_not_count(self):
        # Executable missing, BIOS only, another architecture, garbage.
        self.write('usr/share/qemu/firmware/1.json', json.dumps(DESCRIPTOR))
        self.write('usr/share/OVMF/OVMF_CODE_4M.fd')
        self.write('usr/share/qemu/firmware/2.json', json.dumps(
            dict(DESCRIPTOR, **{'interface-types': ['bios']})))
        self.write('usr/share/qemu/firmware/3.json', json.dumps(
            dict(DESCRIPTOR, targets=[{'architecture': 'aarch64'}])))
        self.write('usr/share/qemu/firmware/4.json', '{not json')
        os.remove(os.path.join(self.root, 'usr/share/OVMF/OVMF_CODE_4M.fd'))
        self.assertEqual(WARN, firmware.check_firmware(self.root).code)
        self.write('usr/share/OVMF/OVMF_CODE_4M.fd')
        self.assertIn('(1.json)', firmware.check_firmware(self.root).message)


class TestIommu(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.sys = os.path.join(self.root, 'sys')
        self.groups = os.path.join(self.sys, 'kernel', 'iommu_groups')
        os.makedirs(self.groups)

    def cmdline(self, text):
        os.makedirs(os.path.join(self.root, 'proc'), exist_ok=True)
        with open(os.path.join(self.root, 'proc', 'cmdline'), 'w') as f:
            f.write(text)

    def test_on(self):
        for group in ('1', '2'):
            os.mkdir(os.path.join(self.groups, group))
        check = vfio.check_iommu(two_rc_host(), self.sys, self.root)
        self.assertEqual((OK, 'on: 2 groups, every NVIDIA GPU in one'),
                         (check.code, check.message))

    def test_no_groups(self):
        self.cmdline('BOOT_IMAGE=/vmlinuz intel_iommu=off quiet\n')
        check = vfio.check_iommu(two_rc_host(), self.sys, self.root)
        self.assertEqual(FAIL, check.code)
        self.assertIn('iommu_groups is empty', check.message)
        self.assertIn('kernel command line: intel_iommu=off', check.message)
        self.assertIn('intel_iommu=on iommu=pt', check.fix)

    def test_no_groups_directory(self):
        os.rmdir(self.groups)
        self.cmdline('quiet\n')
        check = vfio.check_iommu(two_rc_host(), self.sys, self.root)
        self.assertEqual(FAIL, check.code)
        self.assertIn('no iommu option', check.message)

    def test_gpu_without_group(self):
        os.mkdir(os.path.join(self.groups, '1'))
        host = topo(fn('0000:01:00.0', group=1), fn('0000:02:00.0'))
        check = vfio.check_iommu(host, self.sys, self.root)
        self.assertEqual(FAIL, check.code)
        self.assertIn('no IOMMU group for 0000:02:00.0', check.message)

    def test_captured_topology(self):
        self.assertEqual(OK, vfio.check_iommu(two_rc_host(), None).code)
        self.assertEqual(FAIL, vfio.check_iommu(
            topo(fn('0000:01:00.0')), None, self.root).code)


class TestBindings(base.TestCase):

    def test_all_on_vfio(self):
        checks = vfio.check_bindings(two_rc_host())
        self.assertEqual([(OK, 'vfio-pci',
                           '2 of 2 NVIDIA GPUs bound to vfio-pci')],
                         [(c.code, c.subject, c.message) for c in checks])

    def test_host_driver_fails_unbound_warns(self):
        host = topo(fn('0000:01:00.0', group=1),
                    fn('0000:02:00.0', driver='nvidia', group=2,
                       device=0x26b9),
                    fn('0000:03:00.0', driver=None, group=3))
        ok, nvidia, unbound = vfio.check_bindings(host)
        self.assertEqual((OK, '1 of 3 NVIDIA GPUs bound to vfio-pci'),
                         (ok.code, ok.message))
        self.assertEqual((FAIL, '0000:02:00.0'),
                         (nvidia.code, nvidia.subject))
        self.assertIn('bound to nvidia, not vfio-pci', nvidia.message)
        self.assertIn('driverctl set-override 0000:02:00.0 vfio-pci',
                      nvidia.fix)
        self.assertIn('vfio-pci.ids=10de:26b9', nvidia.fix)
        self.assertEqual((WARN, '0000:03:00.0'),
                         (unbound.code, unbound.subject))
        self.assertIn('bound to no driver', unbound.message)

    def test_iommu_group_companions(self):
        host = topo(
            fn('0000:01:00.0', group=7),
            fn('0000:01:00.1', group=7, class_code=0x040300,
               driver='snd_hda_intel'),
            fn('0000:00:01.0', group=7, class_code=BRIDGE,
               driver='pcieport', port_type=model.PortType.ROOT_PORT),
            fn('0000:01:00.2', group=7, class_code=0x0c0330, driver=None),
            fn('0000:01:00.3', group=7, class_code=0x0c8000,
               driver='vfio-pci'))
        ok, group = vfio.check_bindings(host)
        self.assertEqual((FAIL, '0000:01:00.0'), (group.code,
                                                  group.subject))
        self.assertEqual('IOMMU group 7 also holds 0000:01:00.1 '
                         '(snd_hda_intel): VFIO refuses a group with a '
                         'device on a host driver', group.message)
        self.assertIn('driverctl', group.fix)

    def test_no_gpus(self):
        self.assertEqual([], vfio.check_bindings(topo()))


class TestAcs(base.TestCase):

    def port_warning(self, acs_a=REDIRECT):
        """The one line check_acs gives for port 02:00.0 of switch_host."""
        (check,) = acs.check_acs(switch_host(acs_a), lc.AcsPolicy.ROUTE,
                                 lc.LinkClass.PXB)
        self.assertEqual((WARN, '0000:02:00.0'), (check.code,
                                                  check.subject))
        return check

    def test_redirect_under_route(self):
        check = self.port_warning()
        self.assertIn('port 0000:02:00.0 has ACS P2P Request Redirect on: '
                      'P2P between 0000:03:00.0 and 0000:04:00.0',
                      check.message)
        self.assertIn('acs_policy=route counts those pairs as PHB, so at '
                      'p2p_level PXB these pairs share no clique: '
                      '0000:03:00.0-0000:04:00.0', check.message)
        self.assertIn('pci=disable_acs_redir=0000:02:00.0', check.fix)
        self.assertIn('set the ACS control register of 0000:02:00.0 to '
                      '0x0011 (see troubleshooting: ACS P2P Request '
                      'Redirect)', check.fix)
        self.assertIn('security model', check.fix)

    def test_redirect_harmless_at_phb(self):
        (check,) = acs.check_acs(switch_host(), lc.AcsPolicy.ROUTE,
                                 lc.LinkClass.PHB)
        self.assertNotIn('share no clique', check.message)

    def test_redirect_under_ignore(self):
        (check,) = acs.check_acs(switch_host(), lc.AcsPolicy.IGNORE,
                                 lc.LinkClass.PXB)
        self.assertIn('acs_policy=ignore still counts them', check.message)

    def test_both_ports(self):
        checks = acs.check_acs(switch_host(acs_b=REDIRECT),
                               lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)
        self.assertEqual(['0000:02:00.0', '0000:02:01.0'],
                         [c.subject for c in checks])

    def test_no_redirect(self):
        host = switch_host(acs_a=model.Acs(0x5f, 0x11))
        self.assertEqual([(OK, 'ACS')], [
            (c.code, c.subject) for c in acs.check_acs(
                host, lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)])

    def test_root_port_redirect_changes_nothing(self):
        host = topo(
            bridge('0000:00:01.0', model.PortType.ROOT_PORT, acs=REDIRECT),
            bridge('0000:00:02.0', model.PortType.ROOT_PORT, acs=REDIRECT),
            fn('0000:01:00.0', '0000:00:01.0', group=1),
            fn('0000:02:00.0', '0000:00:02.0', group=2))
        self.assertEqual(OK, acs.check_acs(host, lc.AcsPolicy.ROUTE,
                                           lc.LinkClass.SYS)[0].code)

    def test_unreadable_config(self):
        # One line for the host, however many ports are unknown.
        (check,) = acs.check_acs(switch_host(config_space_read=False),
                                 lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)
        self.assertEqual((WARN, 'ACS'), (check.code, check.subject))
        self.assertIn('ACS is unknown and counted as P2P Request Redirect '
                      'on (fail closed)', check.message)
        self.assertIn('share no clique: 0000:03:00.0-0000:04:00.0',
                      check.message)
        self.assertIn('CAP_SYS_ADMIN', check.fix)
        self.assertIn('run as root', check.fix)
        (check,) = acs.check_acs(switch_host(config_space_read=False),
                                 lc.AcsPolicy.IGNORE, lc.LinkClass.PXB)
        self.assertIn('acs_policy=ignore still counts them', check.message)

    def test_unreadable_config_without_switch(self):
        host = topo(
            bridge('0000:00:01.0', model.PortType.ROOT_PORT,
                   acs_known=False),
            bridge('0000:00:02.0', model.PortType.ROOT_PORT,
                   acs_known=False),
            fn('0000:01:00.0', '0000:00:01.0', group=1),
            fn('0000:02:00.0', '0000:00:02.0', group=2),
            config_space_read=False)
        (check,) = acs.check_acs(host, lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)
        self.assertEqual((OK, 'ACS'), (check.code, check.subject))
        self.assertIn('changes nothing here', check.message)

    def test_egress_control(self):
        check = self.port_warning(model.Acs(0x7f, 0x21))
        self.assertIn('has ACS P2P Egress Control on: P2P between '
                      '0000:03:00.0 and 0000:04:00.0 is blocked or goes up '
                      'through the root complex', check.message)
        self.assertIn('0000:02:00.0 to 0x0001', check.fix)

    def test_fewer_than_two_gpus(self):
        self.assertEqual([], acs.check_acs(topo(fn('0000:01:00.0')),
                                           lc.AcsPolicy.ROUTE,
                                           lc.LinkClass.PXB))


class TestNumaAndNVSwitch(base.TestCase):

    def test_unknown_and_cpuless_nodes(self):
        host = topo(fn('0000:01:00.0', numa=0), fn('0000:41:00.0', numa=1),
                    fn('0001:01:00.0', rc='pci0001:00', numa=None),
                    numa_nodes=(model.NumaNode(0, frozenset({0}), (10, 20)),
                                model.NumaNode(1, frozenset(), (20, 10))))
        unknown, cpuless = numa.check_numa(host)
        self.assertEqual((WARN, 'NUMA'), (unknown.code, unknown.subject))
        self.assertIn('no NUMA node (-1) for 0001:01:00.0', unknown.message)
        self.assertIn('SRAT', unknown.fix)
        self.assertEqual((WARN, '0000:41:00.0'),
                         (cpuless.code, cpuless.subject))
        self.assertIn('NUMA node 1, which has no CPUs', cpuless.message)

    def test_numa_fine(self):
        self.assertEqual([], numa.check_numa(switch_host()))

    def test_nvswitch_without_nvlink(self):
        switch = fn('0000:10:00.0', class_code=0x068000, driver='nvidia')
        host = topo(fn('0000:01:00.0'), switch)
        (check,) = nvswitch.check_nvswitch(host)
        self.assertEqual(WARN, check.code)
        self.assertIn('0000:10:00.0', check.message)
        self.assertIn('topology_backend = static', check.fix)
        self.assertEqual([], nvswitch.check_nvswitch(dataclasses.replace(
            host, nvlink_pairs=frozenset(
                [frozenset(('0000:01:00.0', '0000:02:00.0'))]))))
        self.assertEqual([], nvswitch.check_nvswitch(switch_host()))


class TestP2PLevel(base.TestCase):

    def test_clique_and_other_levels(self):
        (check,) = p2p_level.check_p2p_level(
            switch_host(acs_a=None), lc.LinkClass.PXB, lc.AcsPolicy.ROUTE,
            extra_traits={'CUSTOM_X'})
        self.assertEqual((OK, 'p2p_level PXB'), (check.code,
                                                 check.subject))
        self.assertEqual(
            '1 clique, largest 2 GPUs; 0 of 2 GPUs in no clique; traits: '
            'CUSTOM_GPU_P2P CUSTOM_GPU_P2P_CLIQUE_2 CUSTOM_X', check.message)

    def test_no_clique_names_the_level_that_gives_one(self):
        (check,) = p2p_level.check_p2p_level(two_rc_host(), lc.LinkClass.PXB,
                                             lc.AcsPolicy.ROUTE)
        self.assertEqual(WARN, check.code)
        self.assertIn('0 cliques, largest 0 GPUs; 2 of 2 GPUs in no clique; '
                      'traits: (none); largest clique at NODE: 2, at SYS: 2',
                      check.message)
        self.assertIn('P2P flavors do not land here', check.message)
        self.assertIn('raise [gpu_p2p] p2p_level to NODE', check.fix)

    def test_acs_keeps_every_level_from_a_clique(self):
        host = switch_host()
        host = dataclasses.replace(host, p2p_overrides={
            frozenset(('0000:03:00.0', '0000:04:00.0')): False})
        (check,) = p2p_level.check_p2p_level(host, lc.LinkClass.SYS,
                                             lc.AcsPolicy.ROUTE)
        self.assertEqual(WARN, check.code)
        self.assertIn('no level gives a clique', check.fix)

    def test_clique_map_and_nvlink_level(self):
        host = dataclasses.replace(two_rc_host(), nvlink_pairs=frozenset(
            [frozenset(('0000:01:00.0', '0000:41:00.0'))]))
        (check,) = p2p_level.check_p2p_level(host, lc.LinkClass.PIX,
                                             lc.AcsPolicy.ROUTE)
        self.assertEqual(OK, check.code)
        self.assertIn('CUSTOM_GPU_P2P_NVLINK', check.message)
        (check,) = p2p_level.check_p2p_level(
            two_rc_host(), lc.LinkClass.PIX, lc.AcsPolicy.ROUTE,
            {'0000:01:00.0': 5, '0000:41:00.0': 5})
        self.assertEqual(OK, check.code)
        self.assertIn('1 clique, largest 2 GPUs', check.message)

    def test_one_gpu(self):
        (check,) = p2p_level.check_p2p_level(
            topo(fn('0000:01:00.0')), lc.LinkClass.PXB, lc.AcsPolicy.ROUTE)
        self.assertEqual(OK, check.code)
        self.assertIn('no peer', check.message)

    def test_no_gpu_fails(self):
        (check,) = p2p_level.check_p2p_level(topo(), lc.LinkClass.PXB,
                                             lc.AcsPolicy.ROUTE)
        self.assertEqual((FAIL, 'GPUs'), (check.code, check.subject))
        self.assertIn('lspci -nn -d 10de:', check.fix)

    def test_no_gpu_says_where_and_why(self):
        switch = fn('0000:05:00.0', class_code=0x068000, driver=None)
        (check,) = p2p_level.check_p2p_level(
            topo(switch), lc.LinkClass.PXB, lc.AcsPolicy.ROUTE,
            sysfs_root='/srv')
        self.assertEqual(p2p_level.no_gpu(topo(switch), '/srv'), check)
        self.assertEqual(
            'no NVIDIA GPU found in /srv/bus/pci/devices (1 other NVIDIA PCI '
            'functions, such as NVSwitches or audio): nothing for P2P '
            'flavors to use', check.message)
        # Driver binding is not why: sysfs lists GPUs bound to any.
        for words in ('whatever driver they are bound to (nvidia, vfio-pci '
                      'or none)', '/srv is not this host\'s sysfs '
                      '(--sysfs-root, [gpu_p2p] sysfs_root)', 'firmware'):
            self.assertIn(words, check.fix)

    def test_no_gpu_in_a_capture(self):
        check = p2p_level.no_gpu(topo(), None)
        self.assertEqual('no NVIDIA GPU found in the capture: nothing for '
                         'P2P flavors to use', check.message)
        self.assertIn('nova-gpu-p2p capture', check.fix)


def spec(address, clique_id, rank=0):
    """A [pci] device_spec value as topology --device-spec prints it."""
    return device_spec_tags.entry(address, clique_id,
                                  rank=rank).split(' = ', 1)[1]


#: Offers every NVIDIA GPU, with no clique trait or tag.
BROAD = '{"vendor_id": "10de"}'
A, B = '0000:03:00.0', '0000:04:00.0'


class TestPlacement(base.TestCase):
    """switch_host(acs_a=None): A and B behind one switch, clique 0."""

    def setUp(self):
        super().setUp()
        # Nova asks sysfs whether an address-based entry names a PF.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    def check(self, specs, host=None, in_placement=True):
        host = host or switch_host(acs_a=None)
        cliques = cliques_mod.assign(host, lc.LinkClass.PXB,
                                     lc.AcsPolicy.ROUTE)
        return placement.check_placement(
            host, cliques, placement.PciSettings(in_placement, tuple(specs)))

    def test_not_in_placement(self):
        (check,) = self.check([spec(A, 0), spec(B, 0)], in_placement=False)
        self.assertEqual((WARN, 'placement'), (check.code, check.subject))
        self.assertIn('[pci] report_in_placement is off', check.message)
        self.assertIn('cannot give a hw:gpu_p2p_clique=required server GPUs '
                      'of one clique', check.message)
        self.assertIn('set [pci] report_in_placement = True and the [pci] '
                      'device_spec lines of "nova-gpu-p2p topology '
                      '--device-spec"', check.fix)
        self.assertIn('[filter_scheduler] pci_in_placement = True',
                      check.fix)

    def test_fabric_manager_partitions_tagged(self):
        # On an HGX host the entries carry partition traits and tags too;
        # the lines --device-spec prints raise no warning, lines without
        # the partitions do.
        board = dataclasses.replace(
            switch_host(acs_a=None), fabric_partitions=(
                partitions_mod.FabricPartition(0, (A, B)),
                partitions_mod.FabricPartition(7, (A,)),
                partitions_mod.FabricPartition(8, (B,))))
        lines = [line.partition(' = ')[2] for line in device_spec_tags.entries(
            {A: 0, B: 0}, {}, board.fabric_partitions)]
        (check,) = self.check(lines, board)
        self.assertEqual(OK, check.code)
        checks = self.check([spec(A, 0), spec(B, 0, 1)], board)
        self.assertEqual(2, len(checks))
        self.assertIn('partition', checks[0].message)

    def test_not_in_placement_without_a_clique(self):
        # Nothing here for a required flavor to land on.
        self.assertEqual([], self.check([], two_rc_host(), in_placement=False))

    def test_order_tags_missing_or_stale(self):
        """Warned apart: they cost moves on an unfixed Nova, not cliques."""
        for specs in ([spec(A, 0), spec(B, 0)], [spec(A, 0, 1), spec(B, 0)]):
            ok, order = self.check(specs)
            self.assertEqual(OK, ok.code)
            self.assertEqual((WARN, '[pci] device_spec order'),
                             (order.code, order.subject))
            self.assertIn('lack the order tags (gpu_p2p_order_1, ...) of the '
                          'claim order', order.message)
            self.assertIn('refused where they are not one clique',
                          order.message)
            self.assertIn('topology --device-spec', order.fix)

    def test_every_gpu_tagged(self):
        (check,) = self.check([spec(A, 0), spec(B, 0, 1), BROAD])
        self.assertEqual(
            (OK, 'placement', '[pci] report_in_placement on: 2 of 2 GPUs '
             'in cliques offered by [pci] device_spec, each with its clique '
             'trait and gpu_p2p_clique tag'),
            (check.code, check.subject, check.message))

    def test_gpu_no_entry_offers_is_counted(self):
        (check,) = self.check([spec(A, 0)])
        self.assertEqual(OK, check.code)
        self.assertIn('1 of 2 GPUs in cliques offered', check.message)

    def test_broad_entry_first_hides_the_tags(self):
        # Nova uses the first entry that matches a GPU.
        checks = self.check([BROAD, spec(A, 0), spec(B, 0)])
        self.assertEqual(
            [(WARN, '[pci] device_spec %s' % address,
              'GPU %s is in clique 0 but its placement provider has no '
              'clique trait and its [pci] device_spec entry has no '
              'gpu_p2p_clique tag' % address,
              'set device_spec = %s' % spec(address, 0, rank))
             for rank, address in enumerate((A, B))],
            [(c.code, c.subject, c.message, c.fix) for c in checks])

    def test_tag_without_trait(self):
        (check,) = self.check(
            [spec(A, 0), '{"address": "%s", "gpu_p2p_clique": "0"}' % B])
        self.assertEqual(
            'GPU %s is in clique 0 but its placement provider has no '
            'clique trait' % B, check.message)
        self.assertEqual(
            'set device_spec = {"address": "%s", "traits": '
            '"CUSTOM_GPU_P2P_CLIQUE_ID_0", "gpu_p2p_clique": "0", '
            '"gpu_p2p_order_1": "1"}' % B,
            check.fix)

    def test_trait_as_nova_normalizes_it(self):
        # Nova prefixes a name that is no standard trait with CUSTOM_.
        (check,) = self.check([spec(A, 0), json.dumps(
            {'address': B, 'traits': 'GPU_P2P_CLIQUE_ID_0',
             'gpu_p2p_clique': '0', 'gpu_p2p_order_1': '1'})])
        self.assertEqual(OK, check.code)

    def test_wrong_tag_and_trait(self):
        (check,) = self.check([spec(A, 0), spec(B, 1)])
        self.assertEqual(
            'GPU %s is in clique 0 but its placement provider has '
            'CUSTOM_GPU_P2P_CLIQUE_ID_1 and its [pci] device_spec entry has '
            'gpu_p2p_clique \'1\'' % B, check.message)
        self.assertEqual('set device_spec = %s' % spec(B, 0, 1), check.fix)

    def test_gpu_in_no_clique_with_a_tag(self):
        # Request Redirect above A: no clique at PXB.
        checks = self.check([spec(A, 0), spec(B, 0)], switch_host())
        self.assertEqual([WARN, WARN], [c.code for c in checks])
        self.assertIn('GPU %s is in no clique but' % A, checks[0].message)
        self.assertEqual('remove the clique trait and tag from its [pci] '
                         'device_spec entry', checks[0].fix)


class TestFindingsAndAll(base.TestCase):

    def test_findings_skip_unreadable_config(self):
        checks = host.check_findings(['0000:01:00.0 skipped: gone',
                                      sysfs.UNREADABLE_CONFIG])
        self.assertEqual([(WARN, 'discovery', '0000:01:00.0 skipped: gone')],
                         [(c.code, c.subject, c.message) for c in checks])
        self.assertEqual([], host.check_findings([sysfs.UNREADABLE_CONFIG]))

    def test_findings_in_one_row(self):
        checks = host.check_findings(['0000:01:00.0 skipped: gone',
                                      '0000:02:00.0 skipped: odd'])
        self.assertEqual([(WARN, 'discovery', '0000:01:00.0 skipped: gone; '
                           '0000:02:00.0 skipped: odd')],
                         [(c.code, c.subject, c.message) for c in checks])

    def test_host_checks_order(self):
        root = self.useFixture(fixtures.TempDir()).path
        gpus = dataclasses.replace(two_rc_host(), findings=('odd',))
        checks = host.host_checks(
            gpus, versions.HostVersions((11, 3, 0), (10, 0, 2)),
            lc.LinkClass.NODE, lc.AcsPolicy.ROUTE, sysfs_root=None, root=root)
        self.assertEqual(
            ['libvirt: clique IDs', 'libvirt: UEFI guest XML',
             'QEMU: NUMA affinity',
             'guest firmware', 'IOMMU', 'vfio-pci', 'ACS', 'p2p_level NODE',
             'discovery'], [c.subject for c in checks])
        self.assertIn('traits: CUSTOM_GPU_NUMA_AFFINITY CUSTOM_GPU_P2P ',
                      checks[7].message)

    def test_placement_last_and_only_with_nova_conf(self):
        root = self.useFixture(fixtures.TempDir()).path
        found = versions.HostVersions((11, 3, 0), (10, 0, 2))
        without = host.host_checks(two_rc_host(), found, lc.LinkClass.NODE,
                                   lc.AcsPolicy.ROUTE, sysfs_root=None,
                                   root=root)
        with_pci = host.host_checks(
            two_rc_host(), found, lc.LinkClass.NODE, lc.AcsPolicy.ROUTE,
            sysfs_root=None, root=root, pci=placement.PciSettings(False))
        self.assertEqual(without, with_pci[:-1])
        self.assertEqual((WARN, 'placement'),
                         (with_pci[-1].code, with_pci[-1].subject))

    def test_bindings_from_elsewhere(self):
        bound = two_rc_host()
        unbound = topo(*(dataclasses.replace(f, driver=None)
                         for f in bound.functions.values()))
        checks = host.host_checks(unbound, versions.HostVersions(None, None),
                                  lc.LinkClass.NODE, lc.AcsPolicy.ROUTE,
                                  sysfs_root=None, bindings=bound)
        self.assertIn('vfio-pci', [c.subject for c in checks])
        self.assertNotIn(WARN, [c.code for c in checks
                                if c.subject.startswith('0000')])


class TestGuestLinks(base.TestCase):
    """Which bandwidths guests see, with and without the agent."""

    def host(self, gpu_gen='32.0', port_gen='32.0'):
        port = dataclasses.replace(
            bridge('0000:00:01.0', model.PortType.ROOT_PORT),
            link_speed='%s GT/s PCIe' % port_gen, link_width=16)
        gpu = dataclasses.replace(fn('0000:01:00.0', '0000:00:01.0'),
                                  link_speed='%s GT/s PCIe' % gpu_gen,
                                  link_width=16)
        return topo(port, gpu)

    def check(self, topology, libvirt=(10, 0, 0), qemu=(9, 2, 0),
              cpu=None):
        return guest_links.check_guest_links(
            topology, versions.HostVersions(libvirt, qemu), cpu)

    def test_new_qemu_guests_read_the_hosts_links(self):
        [row] = self.check(self.host(), cpu={
            'vendor': 'GenuineIntel', 'familyid': 6, 'modelid': 143})
        self.assertEqual(upgradecheck.Code.SUCCESS, row.code)
        self.assertIn("root ports carry this host's links (1 GPUs",
                      row.message)
        self.assertIn('socket-to-socket rate: GenuineIntel family 6 model '
                      '143 (a guest with a named CPU model', row.message)

    def test_old_qemu_shows_gen5_as_gen4(self):
        [row] = self.check(self.host(), qemu=(7, 2, 0))
        self.assertEqual(upgradecheck.Code.WARNING, row.code)
        self.assertIn("read 1 devices' 32.0 GT/s PCIe links (0000:01:00.0) "
                      'as 16 GT/s', row.message)
        self.assertIn('with the guest agent', row.message)
        self.assertIn('upgrade QEMU to 9.2.0', row.fix)

    def test_old_qemu_fine_for_a_gen5_card_in_a_gen4_slot(self):
        [row] = self.check(self.host(port_gen='16.0'), qemu=(7, 2, 0))
        self.assertEqual(upgradecheck.Code.SUCCESS, row.code)

    def test_no_override_in_old_libvirt(self):
        [row] = self.check(self.host(), libvirt=(8, 1, 0))
        self.assertEqual(upgradecheck.Code.WARNING, row.code)
        self.assertIn('no <qemu:override>', row.message)

    def test_no_known_links_no_row(self):
        self.assertEqual([], self.check(topo(fn('0000:01:00.0'))))
