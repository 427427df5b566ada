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

import contextlib
import dataclasses
import io
import json
import os
import subprocess

import fixtures
import testtools

from nova_gpu_p2p.cmd import cli
from nova_gpu_p2p import device_spec
from nova_gpu_p2p import readiness as r
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.unit import test_cli
from tests.unit import test_corpus

OK, WARN, FAIL = r.Status.OK, r.Status.WARN, r.Status.FAIL
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


class TestCheckLine(testtools.TestCase):

    def test_line_and_dict(self):
        check = r.Check(FAIL, 'IOMMU', 'off', 'turn it on')
        self.assertEqual('FAIL IOMMU: off; fix: turn it on', check.line())
        self.assertEqual('OK   vfio-pci: fine',
                         r.Check(OK, 'vfio-pci', 'fine').line())
        self.assertEqual({'status': 'FAIL', 'subject': 'IOMMU',
                          'message': 'off', 'fix': 'turn it on'},
                         check.to_dict())

    def test_exit_status(self):
        self.assertEqual(0, r.exit_status([]))
        self.assertEqual(0, r.exit_status([r.Check(OK, 'a', 'b'),
                                           r.Check(WARN, 'a', 'b')]))
        self.assertEqual(1, r.exit_status([r.Check(OK, 'a', 'b'),
                                           r.Check(FAIL, 'a', 'b')]))


class TestVersions(testtools.TestCase):

    def test_parse_version(self):
        self.assertEqual((11, 3, 0), r.parse_version('11.3.0'))
        self.assertEqual((9, 0, 0), r.parse_version('9.0'))
        self.assertEqual((10, 0, 2), r.parse_version('QEMU 10.0.2'))
        self.assertIsNone(r.parse_version('unknown'))
        self.assertIsNone(r.parse_version(None))

    def test_parse_virsh_version_prefers_the_daemon(self):
        out = ('Compiled against library: libvirt 11.3.0\n'
               'Using library: libvirt 11.3.0\n'
               'Using API: QEMU 11.3.0\n'
               'Running hypervisor: QEMU 10.0.2\n'
               'Running against daemon: 9.0.0\n')
        self.assertEqual(((9, 0, 0), (10, 0, 2)),
                         r.parse_virsh_version(out))

    def test_parse_virsh_version_without_daemon_line(self):
        out = ('Using library: libvirt 8.0.0\n'
               'Running hypervisor: QEMU 6.2.0\n')
        self.assertEqual(((8, 0, 0), (6, 2, 0)), r.parse_virsh_version(out))

    def test_parse_virsh_version_other_hypervisor(self):
        self.assertEqual(((9, 0, 0), None), r.parse_virsh_version(
            'Using library: libvirt 9.0.0\nRunning hypervisor: Xen 4.17\n'))
        self.assertEqual((None, None), r.parse_virsh_version('error\n'))


class FakeConn:
    closed = False

    def getLibVersion(self):
        return 11003000

    def getVersion(self):
        return 10000002

    def close(self):
        self.closed = True


class TestProbeVersions(testtools.TestCase):

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
        versions = r.probe_versions(lambda name: Module, run)
        self.assertEqual(r.HostVersions((11, 3, 0), (10, 0, 2)), versions)
        self.assertTrue(conn.closed)
        self.assertEqual([], calls)

    def test_libvirt_python_cannot_connect(self):
        class Module:
            @staticmethod
            def openReadOnly(uri):
                raise RuntimeError('Failed to connect socket')

        versions = r.probe_versions(lambda name: Module)
        self.assertIsNone(versions.libvirt)
        self.assertIn('Failed to connect socket', versions.error)

    def test_virsh_when_no_bindings(self):
        run, calls = self.virsh(stdout='Using library: libvirt 11.3.0\n'
                                       'Running hypervisor: QEMU 10.0.2\n'
                                       'Running against daemon: 11.3.0\n')
        versions = r.probe_versions(self.no_libvirt, run)
        self.assertEqual(r.HostVersions((11, 3, 0), (10, 0, 2)), versions)
        self.assertEqual([list(r.VIRSH_VERSION)], calls)

    def test_virsh_fails(self):
        run, _ = self.virsh(rc=1, stdout='Using library: libvirt 9.0.0\n',
                            stderr='error: failed to connect to the '
                                   'hypervisor\n')
        versions = r.probe_versions(self.no_libvirt, run)
        self.assertEqual((9, 0, 0), versions.libvirt)
        self.assertIsNone(versions.qemu)
        self.assertIn('exited 1: error: failed to connect', versions.error)

    def test_virsh_missing(self):
        run, _ = self.virsh(exc=FileNotFoundError(2, 'No such file'))
        versions = r.probe_versions(self.no_libvirt, run)
        self.assertEqual((None, None), (versions.libvirt, versions.qemu))
        self.assertIn('virsh: ', versions.error)

    def test_virsh_no_output(self):
        run, _ = self.virsh(rc=1)
        self.assertIn('no output',
                      r.probe_versions(self.no_libvirt, run).error)


class TestCheckVersions(testtools.TestCase):

    def statuses(self, checks):
        return [(c.status, c.subject) for c in checks]

    def test_current_stack(self):
        checks = r.check_versions(r.HostVersions((11, 3, 0), (10, 0, 2)),
                                  two_rc_host(), True)
        self.assertEqual([(OK, 'libvirt 11.3.0'), (OK, 'libvirt 11.3.0'),
                          (OK, 'QEMU 10.0.2')], self.statuses(checks))
        self.assertIn('needs 8.2.0', checks[0].message)
        self.assertIn('tested with 11.3.0', checks[1].message)
        self.assertIn('CUSTOM_GPU_NUMA_AFFINITY', checks[2].message)

    def test_bookworm_stack_warns_about_uefi(self):
        checks = r.check_versions(r.HostVersions((9, 0, 0), (7, 2, 0)),
                                  two_rc_host(), True)
        self.assertEqual([OK, WARN, OK], [c.status for c in checks])
        self.assertIn("loader attribute 'secure'", checks[1].message)
        self.assertIn('bookworm-backports', checks[1].fix)

    def test_untested_release_between(self):
        checks = r.check_versions(r.HostVersions((10, 0, 0), (8, 2, 2)),
                                  two_rc_host(), True)
        self.assertEqual([OK, OK, OK], [c.status for c in checks])
        self.assertIn('not tested', checks[1].message)

    def test_too_old_for_override_with_cliques_fails(self):
        checks = r.check_versions(r.HostVersions((8, 0, 0), (6, 2, 0)),
                                  two_rc_host(), True)
        self.assertEqual([FAIL, WARN, WARN], [c.status for c in checks])
        self.assertIn('8.2.0', checks[0].message)
        self.assertIn('upgrade libvirt to 8.2.0', checks[0].fix)
        self.assertIn('does not report CUSTOM_GPU_NUMA_AFFINITY',
                      checks[2].message)
        self.assertIn('bookworm-backports', checks[2].fix)

    def test_too_old_for_override_without_cliques_warns(self):
        checks = r.check_versions(r.HostVersions((8, 1, 0), (7, 2, 0)),
                                  two_rc_host(), False)
        self.assertEqual(WARN, checks[0].status)
        self.assertIn('nothing is lost now', checks[0].message)

    def test_old_qemu_only(self):
        checks = r.check_versions(r.HostVersions((9, 0, 0), (7, 1, 0)),
                                  two_rc_host(), True)
        self.assertEqual((WARN, 'QEMU 7.1.0'),
                         (checks[2].status, checks[2].subject))

    def test_no_gpu_numa_node(self):
        host = topo(fn('0000:01:00.0', numa=None, group=1))
        checks = r.check_versions(r.HostVersions((11, 3, 0), (10, 0, 2)),
                                  host, False)
        self.assertEqual(WARN, checks[2].status)
        self.assertIn('no NVIDIA GPU with a known NUMA node',
                      checks[2].message)
        checks = r.check_versions(r.HostVersions((11, 3, 0), (10, 0, 2)),
                                  topo(), False)
        self.assertEqual(OK, checks[2].status)
        self.assertIn('no NVIDIA GPU to report', checks[2].message)

    def test_unknown_versions(self):
        checks = r.check_versions(
            r.HostVersions(None, None, 'virsh: not found'), two_rc_host(),
            True)
        self.assertEqual([(WARN, 'libvirt'), (WARN, 'QEMU')],
                         self.statuses(checks))
        self.assertIn('virsh: not found', checks[0].message)
        self.assertIn('--libvirt-version', checks[0].fix)
        self.assertIn('virsh -c qemu:///system version', checks[1].fix)

    def test_unknown_qemu_only(self):
        checks = r.check_versions(r.HostVersions((11, 3, 0), None),
                                  two_rc_host(), True)
        self.assertEqual([OK, OK, WARN], [c.status for c in checks])
        self.assertIn('not found', checks[2].message)


class TestFirmware(testtools.TestCase):

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
        check = r.check_firmware(self.root)
        self.assertEqual(OK, check.status)
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
                      r.check_firmware(self.root).message)

    def test_code_without_descriptor(self):
        self.write('usr/share/OVMF/OVMF_CODE.fd')
        check = r.check_firmware(self.root)
        self.assertEqual(WARN, check.status)
        self.assertIn('/usr/share/OVMF/OVMF_CODE.fd', check.message)
        self.assertIn('no QEMU firmware descriptor', check.message)
        self.assertIn('apt-get install ovmf', check.fix)

    def test_nothing(self):
        check = r.check_firmware(self.root)
        self.assertEqual(WARN, check.status)
        self.assertIn('no UEFI firmware', check.message)
        self.assertIn('apt-get install ovmf', check.fix)

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
        self.assertEqual(WARN, r.check_firmware(self.root).status)
        self.write('usr/share/OVMF/OVMF_CODE_4M.fd')
        self.assertIn('(1.json)', r.check_firmware(self.root).message)


class TestIommu(testtools.TestCase):

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
        check = r.check_iommu(two_rc_host(), self.sys, self.root)
        self.assertEqual((OK, 'on: 2 groups, every NVIDIA GPU in one'),
                         (check.status, check.message))

    def test_no_groups(self):
        self.cmdline('BOOT_IMAGE=/vmlinuz intel_iommu=off quiet\n')
        check = r.check_iommu(two_rc_host(), self.sys, self.root)
        self.assertEqual(FAIL, check.status)
        self.assertIn('iommu_groups is empty', check.message)
        self.assertIn('kernel command line: intel_iommu=off', check.message)
        self.assertIn('intel_iommu=on iommu=pt', check.fix)

    def test_no_groups_directory(self):
        os.rmdir(self.groups)
        self.cmdline('quiet\n')
        check = r.check_iommu(two_rc_host(), self.sys, self.root)
        self.assertEqual(FAIL, check.status)
        self.assertIn('no iommu option', check.message)

    def test_gpu_without_group(self):
        os.mkdir(os.path.join(self.groups, '1'))
        host = topo(fn('0000:01:00.0', group=1), fn('0000:02:00.0'))
        check = r.check_iommu(host, self.sys, self.root)
        self.assertEqual(FAIL, check.status)
        self.assertIn('no IOMMU group for 0000:02:00.0', check.message)

    def test_captured_topology(self):
        self.assertEqual(OK, r.check_iommu(two_rc_host(), None).status)
        self.assertEqual(FAIL, r.check_iommu(
            topo(fn('0000:01:00.0')), None, self.root).status)


class TestBindings(testtools.TestCase):

    def test_all_on_vfio(self):
        checks = r.check_bindings(two_rc_host())
        self.assertEqual([(OK, 'vfio-pci',
                           '2 of 2 NVIDIA GPUs bound to vfio-pci')],
                         [(c.status, c.subject, c.message) for c in checks])

    def test_host_driver_fails_unbound_warns(self):
        host = topo(fn('0000:01:00.0', group=1),
                    fn('0000:02:00.0', driver='nvidia', group=2,
                       device=0x26b9),
                    fn('0000:03:00.0', driver=None, group=3))
        ok, nvidia, unbound = r.check_bindings(host)
        self.assertEqual((OK, '1 of 3 NVIDIA GPUs bound to vfio-pci'),
                         (ok.status, ok.message))
        self.assertEqual((FAIL, '0000:02:00.0'),
                         (nvidia.status, nvidia.subject))
        self.assertIn('bound to nvidia, not vfio-pci', nvidia.message)
        self.assertIn('driverctl set-override 0000:02:00.0 vfio-pci',
                      nvidia.fix)
        self.assertIn('vfio-pci.ids=10de:26b9', nvidia.fix)
        self.assertEqual((WARN, '0000:03:00.0'),
                         (unbound.status, unbound.subject))
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
        ok, group = r.check_bindings(host)
        self.assertEqual((FAIL, '0000:01:00.0'), (group.status,
                                                  group.subject))
        self.assertEqual('IOMMU group 7 also holds 0000:01:00.1 '
                         '(snd_hda_intel): VFIO refuses a group with a '
                         'device on a host driver', group.message)
        self.assertIn('driverctl', group.fix)

    def test_no_gpus(self):
        self.assertEqual([], r.check_bindings(topo()))


class TestAcs(testtools.TestCase):

    def port_warning(self, acs_a=REDIRECT):
        """The one line check_acs gives for port 02:00.0 of switch_host."""
        (check,) = r.check_acs(switch_host(acs_a), lc.AcsPolicy.ROUTE,
                               lc.LinkClass.PXB)
        self.assertEqual((WARN, '0000:02:00.0'), (check.status,
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
        self.assertIn('setpci -s 0000:02:00.0 ECAP_ACS+6.w=0011', check.fix)
        self.assertIn('security model', check.fix)

    def test_redirect_harmless_at_phb(self):
        (check,) = r.check_acs(switch_host(), lc.AcsPolicy.ROUTE,
                               lc.LinkClass.PHB)
        self.assertNotIn('share no clique', check.message)

    def test_redirect_under_ignore(self):
        (check,) = r.check_acs(switch_host(), lc.AcsPolicy.IGNORE,
                               lc.LinkClass.PXB)
        self.assertIn('acs_policy=ignore still counts them', check.message)

    def test_both_ports(self):
        checks = r.check_acs(switch_host(acs_b=REDIRECT),
                             lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)
        self.assertEqual(['0000:02:00.0', '0000:02:01.0'],
                         [c.subject for c in checks])

    def test_no_redirect(self):
        host = switch_host(acs_a=model.Acs(0x5f, 0x11))
        self.assertEqual([(OK, 'ACS')], [
            (c.status, c.subject) for c in r.check_acs(
                host, lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)])

    def test_root_port_redirect_changes_nothing(self):
        host = topo(
            bridge('0000:00:01.0', model.PortType.ROOT_PORT, acs=REDIRECT),
            bridge('0000:00:02.0', model.PortType.ROOT_PORT, acs=REDIRECT),
            fn('0000:01:00.0', '0000:00:01.0', group=1),
            fn('0000:02:00.0', '0000:00:02.0', group=2))
        self.assertEqual(OK, r.check_acs(host, lc.AcsPolicy.ROUTE,
                                         lc.LinkClass.SYS)[0].status)

    def test_unreadable_config(self):
        # One line for the host, however many ports are unknown.
        (check,) = r.check_acs(switch_host(config_space_read=False),
                               lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)
        self.assertEqual((WARN, 'ACS'), (check.status, check.subject))
        self.assertIn('ACS is unknown and counted as P2P Request Redirect '
                      'on (fail closed)', check.message)
        self.assertIn('share no clique: 0000:03:00.0-0000:04:00.0',
                      check.message)
        self.assertIn('CAP_SYS_ADMIN', check.fix)
        self.assertIn('run as root', check.fix)
        (check,) = r.check_acs(switch_host(config_space_read=False),
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
        (check,) = r.check_acs(host, lc.AcsPolicy.ROUTE, lc.LinkClass.PXB)
        self.assertEqual((OK, 'ACS'), (check.status, check.subject))
        self.assertIn('changes nothing here', check.message)

    def test_egress_control(self):
        check = self.port_warning(model.Acs(0x7f, 0x21))
        self.assertIn('has ACS P2P Egress Control on: P2P between '
                      '0000:03:00.0 and 0000:04:00.0 is blocked or goes up '
                      'through the root complex', check.message)
        self.assertIn('ECAP_ACS+6.w=0001', check.fix)

    def test_fewer_than_two_gpus(self):
        self.assertEqual([], r.check_acs(topo(fn('0000:01:00.0')),
                                         lc.AcsPolicy.ROUTE,
                                         lc.LinkClass.PXB))


class TestNumaAndNVSwitch(testtools.TestCase):

    def test_unknown_and_cpuless_nodes(self):
        host = topo(fn('0000:01:00.0', numa=0), fn('0000:41:00.0', numa=1),
                    fn('0001:01:00.0', rc='pci0001:00', numa=None),
                    numa_nodes=(model.NumaNode(0, frozenset({0}), (10, 20)),
                                model.NumaNode(1, frozenset(), (20, 10))))
        unknown, cpuless = r.check_numa(host)
        self.assertEqual((WARN, 'NUMA'), (unknown.status, unknown.subject))
        self.assertIn('no NUMA node (-1) for 0001:01:00.0', unknown.message)
        self.assertIn('SRAT', unknown.fix)
        self.assertEqual((WARN, '0000:41:00.0'),
                         (cpuless.status, cpuless.subject))
        self.assertIn('NUMA node 1, which has no CPUs', cpuless.message)

    def test_numa_fine(self):
        self.assertEqual([], r.check_numa(switch_host()))

    def test_nvswitch_without_nvlink(self):
        nvswitch = fn('0000:10:00.0', class_code=0x068000, driver='nvidia')
        host = topo(fn('0000:01:00.0'), nvswitch)
        (check,) = r.check_nvswitch(host)
        self.assertEqual(WARN, check.status)
        self.assertIn('0000:10:00.0', check.message)
        self.assertIn('topology_backend = static', check.fix)
        self.assertEqual([], r.check_nvswitch(dataclasses.replace(
            host, nvlink_pairs=frozenset(
                [frozenset(('0000:01:00.0', '0000:02:00.0'))]))))
        self.assertEqual([], r.check_nvswitch(switch_host()))


class TestP2PLevel(testtools.TestCase):

    def test_clique_and_other_levels(self):
        (check,) = r.check_p2p_level(switch_host(acs_a=None),
                                     lc.LinkClass.PXB, lc.AcsPolicy.ROUTE,
                                     extra_traits={'CUSTOM_X'})
        self.assertEqual((OK, 'p2p_level PXB'), (check.status,
                                                 check.subject))
        self.assertEqual(
            '1 clique, largest 2 GPUs; 0 of 2 GPUs in no clique; traits: '
            'CUSTOM_GPU_P2P CUSTOM_GPU_P2P_CLIQUE_2 CUSTOM_X', check.message)

    def test_no_clique_names_the_level_that_gives_one(self):
        (check,) = r.check_p2p_level(two_rc_host(), lc.LinkClass.PXB,
                                     lc.AcsPolicy.ROUTE)
        self.assertEqual(WARN, check.status)
        self.assertIn('0 cliques, largest 0 GPUs; 2 of 2 GPUs in no clique; '
                      'traits: (none); largest clique at NODE: 2, at SYS: 2',
                      check.message)
        self.assertIn('P2P flavors do not land here', check.message)
        self.assertIn('raise [gpu_p2p] p2p_level to NODE', check.fix)

    def test_acs_keeps_every_level_from_a_clique(self):
        host = switch_host()
        host = dataclasses.replace(host, p2p_overrides={
            frozenset(('0000:03:00.0', '0000:04:00.0')): False})
        (check,) = r.check_p2p_level(host, lc.LinkClass.SYS,
                                     lc.AcsPolicy.ROUTE)
        self.assertEqual(WARN, check.status)
        self.assertIn('no level gives a clique', check.fix)

    def test_clique_map_and_nvlink_level(self):
        host = dataclasses.replace(two_rc_host(), nvlink_pairs=frozenset(
            [frozenset(('0000:01:00.0', '0000:41:00.0'))]))
        (check,) = r.check_p2p_level(host, lc.LinkClass.PIX,
                                     lc.AcsPolicy.ROUTE)
        self.assertEqual(OK, check.status)
        self.assertIn('CUSTOM_GPU_P2P_NVLINK', check.message)
        (check,) = r.check_p2p_level(two_rc_host(), lc.LinkClass.PIX,
                                     lc.AcsPolicy.ROUTE,
                                     {'0000:01:00.0': 5, '0000:41:00.0': 5})
        self.assertEqual(OK, check.status)
        self.assertIn('1 clique, largest 2 GPUs', check.message)

    def test_one_gpu(self):
        (check,) = r.check_p2p_level(topo(fn('0000:01:00.0')),
                                     lc.LinkClass.PXB, lc.AcsPolicy.ROUTE)
        self.assertEqual(OK, check.status)
        self.assertIn('no peer', check.message)

    def test_no_gpu_fails(self):
        (check,) = r.check_p2p_level(topo(), lc.LinkClass.PXB,
                                     lc.AcsPolicy.ROUTE)
        self.assertEqual((FAIL, 'GPUs'), (check.status, check.subject))
        self.assertIn('lspci -nn -d 10de:', check.fix)

    def test_no_gpu_says_where_and_why(self):
        nvswitch = fn('0000:05:00.0', class_code=0x068000, driver=None)
        (check,) = r.check_p2p_level(topo(nvswitch), lc.LinkClass.PXB,
                                     lc.AcsPolicy.ROUTE, sysfs_root='/srv')
        self.assertEqual(r.no_gpu(topo(nvswitch), '/srv'), check)
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
        check = r.no_gpu(topo(), None)
        self.assertEqual('no NVIDIA GPU found in the capture: nothing for '
                         'P2P flavors to use', check.message)
        self.assertIn('nova-gpu-p2p capture', check.fix)


def spec(address, clique_id):
    """A [pci] device_spec value as topology --device-spec prints it."""
    return device_spec.entry(address, clique_id).split(' = ', 1)[1]


#: Offers every NVIDIA GPU, with no clique trait or tag.
BROAD = '{"vendor_id": "10de"}'
A, B = '0000:03:00.0', '0000:04:00.0'


class TestPlacement(testtools.TestCase):
    """switch_host(acs_a=None): A and B behind one switch, clique 0."""

    def setUp(self):
        super().setUp()
        # Nova asks sysfs whether an address-based entry names a PF.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    def check(self, specs, host=None, report=True):
        host = host or switch_host(acs_a=None)
        result = cliques_mod.assign(host, lc.LinkClass.PXB,
                                    lc.AcsPolicy.ROUTE)
        return r.check_placement(host, result,
                                 r.PciSettings(report, tuple(specs)))

    def test_not_in_placement(self):
        (check,) = self.check([spec(A, 0), spec(B, 0)], report=False)
        self.assertEqual((WARN, 'placement'), (check.status, check.subject))
        self.assertIn('[pci] report_in_placement is off', check.message)
        self.assertIn('cannot give a hw:gpu_p2p_clique=required server GPUs '
                      'of one clique', check.message)
        self.assertIn('set [pci] report_in_placement = True and the [pci] '
                      'device_spec lines of "nova-gpu-p2p topology '
                      '--device-spec"', check.fix)
        self.assertIn('[filter_scheduler] pci_in_placement = True',
                      check.fix)

    def test_not_in_placement_without_a_clique(self):
        # Nothing here for a required flavor to land on.
        self.assertEqual([], self.check([], two_rc_host(), report=False))

    def test_every_gpu_tagged(self):
        (check,) = self.check([spec(A, 0), spec(B, 0), BROAD])
        self.assertEqual(
            (OK, 'placement', '[pci] report_in_placement on: 2 of 2 GPUs '
             'in cliques offered by [pci] device_spec, each with its clique '
             'trait and gpu_p2p_clique tag'),
            (check.status, check.subject, check.message))

    def test_gpu_no_entry_offers_is_counted(self):
        (check,) = self.check([spec(A, 0)])
        self.assertEqual(OK, check.status)
        self.assertIn('1 of 2 GPUs in cliques offered', check.message)

    def test_broad_entry_first_hides_the_tags(self):
        # Nova uses the first entry that matches a GPU.
        checks = self.check([BROAD, spec(A, 0), spec(B, 0)])
        self.assertEqual(
            [(WARN, '[pci] device_spec',
              'GPU %s is in clique 0 but its placement provider has no '
              'clique trait and its [pci] device_spec entry has no '
              'gpu_p2p_clique tag' % address,
              'set device_spec = %s' % spec(address, 0))
             for address in (A, B)],
            [(c.status, c.subject, c.message, c.fix) for c in checks])

    def test_tag_without_trait(self):
        (check,) = self.check(
            [spec(A, 0), '{"address": "%s", "gpu_p2p_clique": "0"}' % B])
        self.assertEqual(
            'GPU %s is in clique 0 but its placement provider has no '
            'clique trait' % B, check.message)
        self.assertEqual(
            'set device_spec = {"address": "%s", "traits": '
            '"CUSTOM_GPU_P2P_CLIQUE_ID_0", "gpu_p2p_clique": "0"}' % B,
            check.fix)

    def test_trait_as_nova_normalizes_it(self):
        # Nova prefixes a name that is no standard trait with CUSTOM_.
        (check,) = self.check([spec(A, 0), json.dumps(
            {'address': B, 'traits': 'GPU_P2P_CLIQUE_ID_0',
             'gpu_p2p_clique': '0'})])
        self.assertEqual(OK, check.status)

    def test_wrong_tag_and_trait(self):
        (check,) = self.check([spec(A, 0), spec(B, 1)])
        self.assertEqual(
            'GPU %s is in clique 0 but its placement provider has '
            'CUSTOM_GPU_P2P_CLIQUE_ID_1 and its [pci] device_spec entry has '
            'gpu_p2p_clique "1"' % B, check.message)
        self.assertEqual('set device_spec = %s' % spec(B, 0), check.fix)

    def test_gpu_in_no_clique_with_a_tag(self):
        # Request Redirect above A: no clique at PXB.
        checks = self.check([spec(A, 0), spec(B, 0)], switch_host())
        self.assertEqual([WARN, WARN], [c.status for c in checks])
        self.assertIn('GPU %s is in no clique but' % A, checks[0].message)
        self.assertEqual('remove the clique trait and tag from its [pci] '
                         'device_spec entry', checks[0].fix)


class TestFindingsAndAll(testtools.TestCase):

    def test_findings_skip_unreadable_config(self):
        checks = r.check_findings(['0000:01:00.0 skipped: gone',
                                   sysfs.UNREADABLE_CONFIG])
        self.assertEqual([(WARN, 'discovery', '0000:01:00.0 skipped: gone')],
                         [(c.status, c.subject, c.message) for c in checks])

    def test_host_checks_order(self):
        root = self.useFixture(fixtures.TempDir()).path
        host = dataclasses.replace(two_rc_host(), findings=('odd',))
        checks = r.host_checks(host, r.HostVersions((11, 3, 0), (10, 0, 2)),
                               lc.LinkClass.NODE, lc.AcsPolicy.ROUTE,
                               sysfs_root=None, root=root)
        self.assertEqual(
            ['libvirt 11.3.0', 'libvirt 11.3.0', 'QEMU 10.0.2',
             'guest firmware', 'IOMMU', 'vfio-pci', 'ACS', 'p2p_level NODE',
             'discovery'], [c.subject for c in checks])
        self.assertIn('traits: CUSTOM_GPU_NUMA_AFFINITY CUSTOM_GPU_P2P ',
                      checks[7].message)

    def test_placement_last_and_only_with_nova_conf(self):
        root = self.useFixture(fixtures.TempDir()).path
        versions = r.HostVersions((11, 3, 0), (10, 0, 2))
        without = r.host_checks(two_rc_host(), versions, lc.LinkClass.NODE,
                                lc.AcsPolicy.ROUTE, sysfs_root=None,
                                root=root)
        with_pci = r.host_checks(two_rc_host(), versions, lc.LinkClass.NODE,
                                 lc.AcsPolicy.ROUTE, sysfs_root=None,
                                 root=root, pci=r.PciSettings(False))
        self.assertEqual(without, with_pci[:-1])
        self.assertEqual((WARN, 'placement'),
                         (with_pci[-1].status, with_pci[-1].subject))

    def test_bindings_from_elsewhere(self):
        host = dataclasses.replace(two_rc_host())
        unbound = topo(*(dataclasses.replace(f, driver=None)
                         for f in host.functions.values()))
        checks = r.host_checks(unbound, r.HostVersions(None, None),
                               lc.LinkClass.NODE, lc.AcsPolicy.ROUTE,
                               sysfs_root=None, bindings=host)
        self.assertIn('vfio-pci', [c.subject for c in checks])
        self.assertNotIn(WARN, [c.status for c in checks
                                if c.subject.startswith('0000')])


# The command over the corpus.

#: (status, subject) of every line that is not OK, per host, with libvirt
#: 11.3.0 / QEMU 10.0.2, OVMF present and the tree's IOMMU groups.
EXPECTED = {
    'pcie-8gpu-4switch-2socket': [],
    # Four NVSwitches beside the GPUs; sysfs sees PCIe only.
    'hgx-8gpu-nvswitch-2numa': [(WARN, 'NVSwitch')],
    # The last L40S is on the nvidia driver; every GPU is alone at PXB.
    'four-numa-7gpu': [(FAIL, '0000:c1:00.0'), (WARN, 'p2p_level PXB')],
    # One GPU per root complex: NODE at best.
    'epyc-4gpu-per-root-complex': [(WARN, 'p2p_level PXB')],
    # Redirect on the downstream ports above A (03) and B (04).
    'acs-redirect-switch': [(WARN, '0000:02:00.0'), (WARN, '0000:02:01.0')],
    'mixed-vendors-nic': [],
    # Node unknown for the domain 1 GPU, node 1 has no CPUs, all SYS.
    'gpu-on-cpuless-node': [(WARN, 'NUMA'), (WARN, '0000:41:00.0'),
                            (WARN, 'p2p_level PXB')],
    'large-16gpu-8numa': [],
    'pcie-2level-switch-pxb': [],
}


class TestCheckCLI(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.NoHostConfig())
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            sysfs.read_config_direct))
        self.probe = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.readiness.probe_versions',
            return_value=r.HostVersions(None, None, 'no libvirtd'))).mock
        self.root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.root, 'usr/share/OVMF'))
        os.makedirs(os.path.join(self.root, 'usr/share/qemu/firmware'))
        open(os.path.join(self.root, 'usr/share/OVMF/OVMF_CODE_4M.fd'),
             'w').close()
        with open(os.path.join(self.root, 'usr/share/qemu/firmware/'
                               '60-edk2-x86_64.json'), 'w') as f:
            json.dump(DESCRIPTOR, f)

    def run_cli(self, *argv, versions=('11.3.0', '10.0.2')):
        if versions:
            argv += ('--libvirt-version', versions[0],
                     '--qemu-version', versions[1])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(['check', '--root', self.root] + list(argv))
        self.assertEqual('', err.getvalue())
        return rc, out.getvalue()

    def not_ok(self, text):
        result = []
        for line in text.splitlines()[:-1]:
            status, _, rest = line.partition(' ')
            if status != 'OK':
                result.append((r.Status(status),
                               rest.strip().split(': ', 1)[0]))
        return result

    def test_every_corpus_host(self):
        self.assertEqual(set(hosts.HOSTS), set(EXPECTED))
        for name, expected in EXPECTED.items():
            rc, out = self.run_cli('--sysfs-root', test_corpus.tree(name))
            self.assertEqual(expected, self.not_ok(out), name)
            self.assertEqual(1 if (FAIL, '0000:c1:00.0') in expected else 0,
                             rc, name)
            self.assertIn('OK   IOMMU: on', out, name)
            self.assertIn('OK   guest firmware', out, name)
            self.assertRegex(out.splitlines()[-1],
                             r'^\d+ FAIL, \d+ WARN, \d+ OK$')
        self.probe.assert_not_called()

    def test_nvidia_bound_gpu_line(self):
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('four-numa-7gpu'))
        self.assertEqual(1, rc)
        self.assertIn('FAIL 0000:c1:00.0: bound to nvidia, not vfio-pci',
                      out)
        self.assertIn('fix: bind it to vfio-pci: driverctl set-override '
                      '0000:c1:00.0 vfio-pci', out)
        self.assertIn('OK   vfio-pci: 6 of 7 NVIDIA GPUs', out)

    def test_acs_line_names_ports_and_pairs(self):
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('acs-redirect-switch'))
        self.assertEqual(0, rc)
        self.assertIn('WARN 0000:02:00.0: switch downstream port '
                      '0000:02:00.0 has ACS P2P Request Redirect on', out)
        self.assertIn('p2p_level PXB these pairs share no clique: '
                      '0000:03:00.0-0000:04:00.0', out)
        self.assertIn('OK   p2p_level PXB: 1 clique, largest 2 GPUs; 2 of 4 '
                      'GPUs in no clique', out)
        self.assertIn('at PHB: 4', out)

    def test_level_option(self):
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('epyc-4gpu-per-root-complex'),
                               '--level', 'NODE')
        self.assertEqual(0, rc)
        self.assertIn('OK   p2p_level NODE: 1 clique, largest 4 GPUs', out)

    def test_old_libvirt_fails_where_cliques_exist(self):
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('pcie-8gpu-4switch-2socket'),
            versions=('8.0.0', '6.2.0'))
        self.assertEqual(1, rc)
        self.assertEqual([(FAIL, 'libvirt 8.0.0'), (WARN, 'libvirt 8.0.0'),
                          (WARN, 'QEMU 6.2.0')], self.not_ok(out))
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('epyc-4gpu-per-root-complex'),
            versions=('8.0.0', '6.2.0'))
        self.assertEqual(0, rc)
        self.assertIn('WARN libvirt 8.0.0: too old for <qemu:override>', out)

    def test_bookworm_versions(self):
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            versions=('9.0.0', '7.2.0'))
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'libvirt 9.0.0')], self.not_ok(out))
        self.assertIn('apt-get install -t bookworm-backports', out)

    def test_versions_probed_when_not_given(self):
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            versions=None)
        self.probe.assert_called_once_with()
        self.assertEqual(0, rc)
        self.assertIn('WARN libvirt: version unknown (no libvirtd)', out)
        self.probe.return_value = r.HostVersions((11, 3, 0), None, 'x')
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            '--qemu-version', '10.0.2', versions=None)
        self.assertIn('OK   QEMU 10.0.2: NUMA-bound', out)

    def test_bad_version_is_a_usage_error(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(SystemExit, cli.main, [
                'check', '--libvirt-version', 'new'])
        self.assertEqual(2, exc.code)
        self.assertIn("'new' is not a version", err.getvalue())

    def test_no_firmware(self):
        empty = self.useFixture(fixtures.TempDir()).path
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            '--root', empty)
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'guest firmware')], self.not_ok(out))

    def test_iommu_off(self):
        host = dataclasses.replace(hosts.HOSTS['mixed-vendors-nic'],
                                   iommu=False)
        tree = self.useFixture(sysfs_builder.SysfsTree(host)).root
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertEqual(1, rc)
        self.assertEqual([(FAIL, 'IOMMU')], self.not_ok(out))
        self.assertIn('iommu_groups is empty', out)

    def test_unprivileged_acs_unknown(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            lambda path, size: b''))
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('acs-redirect-switch'))
        self.assertEqual(0, rc)
        # Unknown is redirect on: no two GPUs behind the switch share a
        # clique at PXB.
        self.assertEqual([(WARN, 'ACS'), (WARN, 'p2p_level PXB')],
                         self.not_ok(out))
        self.assertIn('run as root', out)

    def test_json_and_load(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'host.json')
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(0, cli.main([
                'capture', '--output', path, '--sysfs-root',
                test_corpus.tree('four-numa-7gpu')]))
        rc, out = self.run_cli('--load', path, '--json')
        self.assertEqual(1, rc)
        report = json.loads(out)
        self.assertEqual(1, report['exit_status'])
        by_subject = {c['subject']: c for c in report['checks']}
        self.assertEqual('FAIL', by_subject['0000:c1:00.0']['status'])
        self.assertIn('driverctl', by_subject['0000:c1:00.0']['fix'])
        self.assertEqual('on: every NVIDIA GPU is in an IOMMU group',
                         by_subject['IOMMU']['message'])

    def test_topology_error(self):
        path = self.nova_conf('[gpu_p2p]\ntopology_backend = nosuch\n')
        rc, out = self.run_cli('--config-file', path)
        self.assertEqual(1, rc)
        self.assertIn('FAIL GPU topology: [gpu_p2p] topology_backend = '
                      'nosuch: no such backend', out)
        self.assertIn('OK   guest firmware', out)

    def test_unreadable_capture_is_a_usage_error(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(['check', '--load', '/nonexistent.json'])
        self.assertEqual(2, rc)
        self.assertEqual(['nova-gpu-p2p: /nonexistent.json is not a readable '
                          'nova-gpu-p2p capture: [Errno 2] No such file or '
                          "directory: '/nonexistent.json'"],
                         err.getvalue().splitlines())

    def test_nova_conf_found_as_nova_manage_finds_it(self):
        # Without --config-file, the host's nova.conf is read and [pci]
        # judged; --no-config reads none.
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        self.useFixture(test_cli.NoHostConfig([self.nova_conf('')]))
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertIn('WARN placement: [pci] report_in_placement is off',
                      out)
        rc, out = self.run_cli('--sysfs-root', tree, '--no-config')
        self.assertNotIn('placement', out)

    def nova_conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_placement_needs_nova_conf(self):
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertNotIn('placement', out)
        self.assertNotIn('device_spec', out)
        rc, out = self.run_cli('--sysfs-root', tree,
                               '--config-file', self.nova_conf(''))
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'placement')], self.not_ok(out))
        self.assertIn('WARN placement: [pci] report_in_placement is off',
                      out)

    def test_device_spec_lines_from_topology(self):
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), \
                contextlib.redirect_stderr(io.StringIO()):
            cli.main(['topology', '--device-spec', '--sysfs-root', tree])
        lines = printed.getvalue().splitlines()
        # What topology --device-spec prints is what check wants.
        path = self.nova_conf('[pci]\nreport_in_placement = True\n%s\n'
                              % '\n'.join(lines))
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file', path)
        self.assertEqual([], self.not_ok(out))
        self.assertIn('OK   placement: [pci] report_in_placement on: 8 of 8 '
                      'GPUs in cliques', out)
        # One GPU's tag wrong.
        lines[1] = lines[1].replace('"0"', '"3"')
        path = self.nova_conf('[pci]\nreport_in_placement = True\n%s\n'
                              % '\n'.join(lines))
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file', path)
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, '[pci] device_spec')], self.not_ok(out))
        self.assertIn(
            'WARN [pci] device_spec: GPU 0000:04:00.0 is in clique 0 but its '
            '[pci] device_spec entry has gpu_p2p_clique "3"; fix: set '
            'device_spec '
            '= {"address": "0000:04:00.0", "traits": '
            '"CUSTOM_GPU_P2P_CLIQUE_ID_0", "gpu_p2p_clique": "0"}', out)

    def test_static_backend_reads_bindings_from_sysfs(self):
        tree = test_corpus.tree('four-numa-7gpu')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[gpu_p2p]\ntopology_backend = nvml\nsysfs_root = %s\n'
                    % tree)
        topology = test_corpus.discover('four-numa-7gpu')
        backend = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.backends.load')).mock
        backend.return_value.discover.return_value = topology
        reads = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            lambda *a: reads.append(a)))
        rc, out = self.run_cli('--config-file', path)
        self.assertEqual(1, rc)
        self.assertIn('FAIL 0000:c1:00.0: bound to nvidia', out)
        self.assertEqual([], reads)
