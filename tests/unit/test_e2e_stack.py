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

"""The e2e tests' view of a stack: the host's, or a chroot's."""

import os

import fixtures

from tests.e2e import guest_image
from tests.e2e import test_grace_boot
from tests.fixtures import stack
from tests.unit import base


class TestStack(base.TestCase):

    def test_host_stack_runs_tools_as_they_are(self):
        host = stack.Stack('/')
        self.assertFalse(host.chrooted)
        self.assertEqual(['virsh', '-c', stack.URI, 'version'],
                         host.virsh('version'))
        self.assertEqual('/tmp/x.xml', host.inside('/tmp/x.xml'))
        self.assertIsNone(host.scratch_dir())

    def test_chroot_paths_both_ways(self):
        root = self.useFixture(fixtures.TempDir()).path
        chroot = stack.Stack(root)
        self.assertTrue(chroot.chrooted)
        self.assertEqual(os.path.join(root, 'usr/share/OVMF'),
                         chroot.path('/usr/share/OVMF'))
        self.assertEqual('/tmp/w/a.xml',
                         chroot.inside(os.path.join(root, 'tmp/w/a.xml')))
        self.assertEqual(os.path.join(root, 'tmp'), chroot.scratch_dir())
        # A file the stack cannot see is an error, not a wrong path.
        self.assertRaises(ValueError, chroot.inside, '/etc/hostname')

    def test_chroot_tools_looked_up_inside(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(root, 'usr/bin'))
        virsh = os.path.join(root, 'usr/bin/virsh')
        with open(virsh, 'w') as f:
            f.write('#!/bin/sh\n')
        os.chmod(virsh, 0o755)
        chroot = stack.Stack(root)
        self.assertEqual('/usr/bin/virsh', chroot.which('virsh'))
        self.assertIsNone(chroot.which('virt-xml-validate'))

    def test_chroot_without_its_libvirtd(self):
        chroot = stack.Stack(self.useFixture(fixtures.TempDir()).path)
        self.assertIsNone(chroot.daemon_pid())
        self.assertRaises(RuntimeError, chroot.virsh, 'version')

    def test_chroot_tools_enter_the_daemons_namespace(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(root, 'run'))
        with open(os.path.join(root, 'run/libvirtd.pid'), 'w') as f:
            f.write('%d\n' % os.getpid())
        chroot = stack.Stack(root)
        # This process is no libvirtd of that root: not entered.
        self.assertIsNone(chroot.daemon_pid())
        self.useFixture(fixtures.MockPatch(
            'os.readlink', return_value=root))
        self.assertEqual(
            ['nsenter', '--target', str(os.getpid()), '--mount', '--root',
             '--wd', 'virsh', '-c', stack.URI, 'version'],
            chroot.virsh('version'))


class TestSeabiosVersion(base.TestCase):

    def version(self, data: bytes):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'bios')
        with open(path, 'wb') as f:
            f.write(data)
        return guest_image.seabios_version(path)

    def test_debian_and_upstream_builds(self):
        self.assertEqual((1, 17, 0), self.version(
            b'\0\x55SeaBIOS (version %s)\0junk 1.2\0'
            b'1.17.0-debian-1.17.0-1\0more'))
        self.assertEqual((1, 16, 3), self.version(
            b'\0rel-1.16.3-0-ga6ed6b70\0'))

    def test_no_version(self):
        self.assertRaises(guest_image.MissingTool, self.version, b'\0' * 64)

    def test_acpi_rule(self):
        self.assertLess((1, 16, 3), guest_image.SEABIOS_OWN_ACPI_BELOW)
        self.assertGreaterEqual((1, 17, 0),
                                guest_image.SEABIOS_OWN_ACPI_BELOW)


class TestGraceRunnable(base.TestCase):
    """libvirt's Grace command line, turned into one QEMU runs by hand."""

    ARGV = (
        "LC_ALL=C HOME=/var/lib/libvirt/qemu/d /usr/bin/qemu-system-aarch64 "
        "-name guest=g -S -object '{\"qom-type\":\"secret\",\"id\":\"k\"}' "
        "-blockdev '{\"driver\":\"file\",\"filename\":\"/nvram/g_VARS.fd\","
        "\"node-name\":\"libvirt-pflash1-storage\",\"read-only\":false}' "
        "-nodefaults -chardev socket,id=charmonitor,path=/m.sock "
        "-object '{\"qom-type\":\"monitor-qmp\",\"id\":\"monitor\"}' "
        "-no-shutdown -device '{\"driver\":\"vfio-pci\",\"host\":"
        "\"0009:01:00.0\",\"id\":\"hostdev0\",\"bus\":\"pci.4\",\"addr\":"
        "\"0x0\"}' -object '{\"qom-type\":\"acpi-generic-initiator\","
        "\"id\":\"gi1\",\"pci-dev\":\"hostdev0\",\"node\":1}' "
        "-object '{\"qom-type\":\"acpi-generic-initiator\",\"id\":\"gi2\","
        "\"pci-dev\":\"hostdev0\",\"node\":2}'")
    FILES = {'kernel': '/k', 'initrd': '/i', 'console': '/c', 'vars': '/v'}

    def runnable(self, leave_out=None) -> list[str]:
        return test_grace_boot.runnable(
            self.ARGV, {'hostdev0': 'virtio-rng-pci'}, self.FILES, leave_out)

    def test_stand_in_and_files(self):
        argv = self.runnable()
        self.assertEqual('/usr/bin/qemu-system-aarch64', argv[0])
        for gone in ('-S', '-no-shutdown', '-chardev', 'secret',
                     'monitor-qmp', 'vfio-pci', '/nvram/'):
            self.assertNotIn(gone, ' '.join(argv))
        self.assertIn('-nodefaults', argv)
        self.assertIn('{"driver": "virtio-rng-pci", "id": "hostdev0", '
                      '"bus": "pci.4", "addr": "0x0"}', argv)
        self.assertIn('"filename": "/v"', ' '.join(argv))
        self.assertEqual(['-kernel', '/k', '-initrd', '/i'], argv[-8:-4])
        self.assertEqual(['-serial', 'file:/c'], argv[-2:])
        self.assertEqual(2, ' '.join(argv).count('acpi-generic-initiator'))

    def test_leave_out_one_initiator(self):
        argv = ' '.join(self.runnable(('hostdev0', 2)))
        self.assertEqual(1, argv.count('acpi-generic-initiator'))
        self.assertIn('"node":1', argv)
        self.assertNotIn('"node":2', argv)
