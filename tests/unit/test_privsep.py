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

"""The privileged read: PCI config space by address, at most 4096 bytes.

:func:`privsep.read_config` runs on real files: a small tree shaped like
sysfs (device links in ``bus/pci/devices`` into ``devices/pci*``), then
broken the ways a confused caller, an attacker or a racing hot-plug would
break it. Then the sysfs backend's use of it: one privileged call for all
bridges of the host's own /sys, never one for any other tree.
"""

import errno
import os
import shutil
import subprocess
import sys
from unittest import mock

import fixtures
from nova import privsep as nova_privsep
from oslo_utils import importutils

from nova_gpu_p2p import privsep
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.unit import base
from tests.unit import test_cli
from tests.unit import test_corpus

#: A root port, a function below it, a third elsewhere.
A, B, C = '0000:00:01.0', '0000:01:00.0', '0000:00:02.0'
CONFIG = {A: bytes(range(256)) * 16, B: b'B' * 4096, C: b'C' * 256}
EVIL = b'not config space' * 256


class Tree(fixtures.Fixture):
    """``bus/pci/devices`` links to directories under ``devices/pci*``."""

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.links = os.path.join(self.root, 'bus', 'pci', 'devices')
        os.makedirs(self.links)
        self.device(A, 'devices/pci0000:00/' + A)
        self.device(B, 'devices/pci0000:00/%s/%s' % (A, B))
        self.device(C, 'devices/pci0000:00/' + C)

    def path(self, relative: str) -> str:
        return os.path.join(self.root, relative)

    def directory(self, relative: str, config: bytes = EVIL) -> str:
        path = self.path(relative)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, 'config'), 'wb') as f:
            f.write(config)
        return path

    def link(self, address: str, target: str) -> None:
        """Point ``address``'s device link at ``target``, atomically."""
        link = os.path.join(self.links, address)
        temporary = link + '.new'
        os.symlink(os.path.relpath(target, self.links), temporary)
        os.replace(temporary, link)

    def device(self, address: str, relative: str) -> str:
        path = self.directory(relative, CONFIG[address])
        self.link(address, path)
        return path


class OnATree(base.TestCase):
    """``read`` is ``reader`` of a fresh :class:`Tree`."""

    reader = staticmethod(privsep.read_config)

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(Tree())

    def read(self, what, size=privsep.MAX_CONFIG_SIZE):
        return self.reader(self.tree.root, what, size)


class TestReadConfig(OnATree):

    def test_reads_the_config_of_the_address(self):
        self.assertEqual(CONFIG[A], self.read(A))
        self.assertEqual(CONFIG[B], self.read(B))
        self.assertEqual(CONFIG[A][:1], self.read(A, 1))
        self.assertEqual(CONFIG[A][:100], self.read(A, 100))
        # A conventional PCI function has 256 bytes: that is all there is.
        self.assertEqual(CONFIG[C], self.read(C))

    def test_size_from_1_to_4096(self):
        for size in (0, -1, 4097, 1 << 20, True, 64.0, '64', None):
            self.assertRaises(ValueError, self.read, A, size)

    def test_only_an_address(self):
        # What a path would reach if the address were not checked.
        self.tree.directory('bus/pci')
        for address in ('..', '../..', '/etc', '/', '', '.', A + '/..',
                        '../' + A, A + '/config', A + '/', A + '\n',
                        ' ' + A, os.path.join(self.tree.root, 'devices',
                                              'pci0000:00', A),
                        '0000:00:01.8', '0000:00:1F.0', '0000:0A:00.0',
                        '0000:00:01', '0000:0:01.0', '00000:00:01.0',
                        '0000:00:001.0', '0000-00-01.0', 'garbage',
                        A.encode(), None, 1, [A]):
            error = self.assertRaises(ValueError, self.read, address)
            self.assertIn('not a PCI address', str(error))

    def test_device_link_must_lead_into_devices_pci(self):
        outside = self.useFixture(fixtures.TempDir()).path
        for target in (
                self.tree.directory('elsewhere/' + A),
                self.tree.directory('devices/platform/' + A),
                self.tree.directory('devices/' + A),
                self.tree.directory('bus/pci/' + A),
                self.tree.directory('devices/pcixyz/' + A),
                os.path.join(outside, 'devices/pci0000:00', A),
                # Another function's directory, or none's.
                self.tree.path('devices/pci0000:00/' + C),
                self.tree.path('devices/pci0000:00')):
            os.makedirs(target, exist_ok=True)
            with open(os.path.join(target, 'config'), 'wb') as f:
                f.write(EVIL)
            self.tree.link(A, target)
            error = self.assertRaises(ValueError, self.read, A)
            self.assertIn('does not lead to', str(error))

    def test_a_directory_instead_of_a_link(self):
        link = os.path.join(self.tree.links, A)
        os.unlink(link)
        self.tree.directory(os.path.relpath(link, self.tree.root))
        self.assertRaises(ValueError, self.read, A)

    def test_config_must_not_be_a_symlink(self):
        config = self.tree.path('devices/pci0000:00/%s/config' % A)
        secret = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'secret')
        with open(secret, 'wb') as f:
            f.write(EVIL)
        for target in (secret, self.tree.path(
                'devices/pci0000:00/%s/config' % C)):
            os.unlink(config)
            os.symlink(target, config)
            error = self.assertRaises(OSError, self.read, A)
            self.assertEqual(errno.ELOOP, error.errno)

    def test_config_must_be_a_regular_file(self):
        config = self.tree.path('devices/pci0000:00/%s/config' % A)
        os.unlink(config)
        os.mkdir(config)
        self.assertRaises(ValueError, self.read, A)
        os.rmdir(config)
        os.mkfifo(config)  # would block a reader without O_NONBLOCK
        error = self.assertRaises(ValueError, self.read, A)
        self.assertIn('not a regular file', str(error))

    def test_no_such_device(self):
        self.assertRaises(FileNotFoundError, self.read, '0000:00:03.0')
        shutil.rmtree(self.tree.path('devices/pci0000:00/' + C))
        self.assertRaises(FileNotFoundError, self.read, C)
        os.unlink(self.tree.path('devices/pci0000:00/%s/config' % A))
        self.assertRaises(FileNotFoundError, self.read, A)

    def swapped_after_directory_open(self, swap):
        """Read A, running ``swap`` right after its directory is opened."""
        real_open = os.open

        def open_then_swap(path, flags, *args, **kwargs):
            fd = real_open(path, flags, *args, **kwargs)
            if flags & os.O_DIRECTORY:
                swap()
            return fd

        with mock.patch('os.open', side_effect=open_then_swap) as opened:
            found = self.read(A)
        self.assertEqual(2, opened.call_count)
        return found

    def test_link_swapped_after_the_check_reads_the_original(self):
        for target in (self.tree.path('devices/pci0000:00/' + C),
                       self.tree.directory('elsewhere/' + A)):
            self.tree.link(A, self.tree.path('devices/pci0000:00/' + A))
            self.assertEqual(CONFIG[A], self.swapped_after_directory_open(
                lambda: self.tree.link(A, target)))
            # The link did change: a new read is refused or reads C.
            self.assertNotEqual(CONFIG[A], privsep.read_configs(
                self.tree.root, [A], 4096)[A])

    def test_directory_moved_after_the_open_is_refused(self):
        directory = self.tree.path('devices/pci0000:00/' + A)

        def replace():
            os.rename(directory, directory + '.old')
            self.tree.directory(os.path.relpath(directory, self.tree.root))

        # The check asks the kernel where the opened directory is now.
        error = self.assertRaises(ValueError,
                                  self.swapped_after_directory_open, replace)
        self.assertIn('does not lead to', str(error))
        self.assertEqual(EVIL, self.read(A))


class TestReadConfigs(OnATree):

    reader = staticmethod(privsep.read_configs)

    def test_each_address_its_bytes_none_or_why(self):
        config = self.tree.path('devices/pci0000:00/%s/config' % C)
        os.unlink(config)
        os.symlink(self.tree.path('devices/pci0000:00/%s/config' % A),
                   config)
        self.tree.link(B, self.tree.directory('elsewhere/' + B))
        found = self.read([A, B, C, '0000:00:03.0', '../' + A, A])
        self.assertEqual(CONFIG[A], found[A])
        self.assertIsNone(found['0000:00:03.0'])
        self.assertIn('does not lead to', found[B])
        self.assertIn('Too many levels of symbolic links', found[C])
        self.assertIn('not a PCI address', found['../' + A])
        self.assertEqual(5, len(found))
        self.assertEqual({}, self.read([]))

    def test_whole_batch_refused(self):
        for addresses in (A, {A: 1}, None, (a for a in [A]), [A, None],
                          [A, A.encode()], [A, [A]]):
            error = self.assertRaises(ValueError, self.read, addresses)
            self.assertIn('list of strings', str(error))
        for size in (0, 4097, '4096'):
            self.assertRaises(ValueError, self.read, [A], size)
            self.assertRaises(ValueError, self.read, [], size)

    def test_at_most_max_batch_addresses(self):
        addresses = ['0000:%02x:%02x.%d' % (bus, device, function)
                     for bus in range(256) for device in range(32)
                     for function in range(8)][:privsep.MAX_BATCH + 1]
        error = self.assertRaises(ValueError, self.read, addresses)
        self.assertIn('at most %d' % privsep.MAX_BATCH, str(error))
        found = self.read(addresses[1:])
        self.assertEqual(privsep.MAX_BATCH, len(found))
        self.assertEqual(CONFIG[A], found[A])

    def test_the_entrypoint_reads_the_hosts_sys_only(self):
        self.assertTrue(nova_privsep.sys_admin_pctxt.is_entrypoint(
            privsep.read_pci_configs))
        # In the daemon the context is no client: the call runs there.
        nova_privsep.sys_admin_pctxt.set_client_mode(False)
        self.addCleanup(nova_privsep.sys_admin_pctxt.set_client_mode, True)
        with mock.patch.object(privsep, 'read_configs',
                               return_value={A: None}) as read:
            self.assertEqual({A: None},
                             privsep.read_pci_configs([A], 4096))
        read.assert_called_once_with('/sys', [A], 4096)

    def test_the_daemon_finds_the_entrypoint_by_name(self):
        # As oslo.privsep's daemon resolves the name a client sends.
        self.assertIs(privsep.read_pci_configs, importutils.import_class(
            'nova_gpu_p2p.privsep.read_pci_configs'))
        self.assertRaises(AttributeError, getattr, privsep, 'read_pci')

    def test_importing_it_brings_no_oslo_privsep(self):
        # Nor eventlet and its deprecation warning: only a call through
        # the daemon needs them, not the read as root.
        loaded = subprocess.run(
            [sys.executable, '-c',
             'import sys; from nova_gpu_p2p import privsep; '
             'from nova_gpu_p2p.topology import sysfs; '
             'privsep.read_configs("/nonexistent", [], 64); '
             'print(sorted(m for m in ("oslo_privsep", "eventlet") '
             'if m in sys.modules)); privsep.read_pci_configs; '
             'print("oslo_privsep" in sys.modules)'],
            cwd=test_cli.REPO, capture_output=True, text=True, timeout=120,
            check=True).stdout
        self.assertEqual('[]\nTrue\n', loaded)


class TestSysfsBackend(base.TestCase):
    """Which reader the sysfs backend uses, and what it makes of it."""

    HOST = 'acs-redirect-switch'

    def setUp(self):
        super().setUp()
        self.tree = test_corpus.tree(self.HOST)
        self.expected = test_corpus.discover(self.HOST)
        self.bridges = sorted(a for a, f in self.expected.functions.items()
                              if f.is_bridge)
        self.euid = self.useFixture(fixtures.MockPatch(
            'os.geteuid', return_value=1000)).mock
        self.calls = []

    def discover(self, root=None) -> model.HostTopology:
        return sysfs.SysfsBackend(test_corpus.make_conf(
            sysfs_root=root or self.tree)).discover()

    def daemon(self, answer=None):
        """The privsep entrypoint, answering for the tree as /sys."""
        def read_pci_configs(addresses, size):
            self.calls.append((list(addresses), size))
            found = privsep.read_configs(self.tree, addresses, size)
            return answer(found) if answer else found
        self.useFixture(fixtures.MockPatchObject(
            privsep, 'read_pci_configs', side_effect=read_pci_configs))
        self.useFixture(fixtures.MockPatchObject(
            privsep, 'SYS', os.path.realpath(self.tree)))

    def test_host_sys_in_one_privileged_call(self):
        self.daemon()
        self.assertEqual(self.expected, self.discover())
        self.assertEqual([(self.bridges, 4096)], self.calls)

    def test_batches_of_at_most_max_batch(self):
        self.daemon()
        self.useFixture(fixtures.MockPatchObject(privsep, 'MAX_BATCH', 3))
        self.assertEqual(self.expected, self.discover())
        self.assertEqual(self.bridges, sum((c[0] for c in self.calls), []))
        self.assertEqual(-(-len(self.bridges) // 3), len(self.calls))

    def test_as_root_the_same_read_in_process(self):
        self.daemon()
        self.euid.return_value = 0
        self.assertEqual(self.expected, self.discover())
        self.assertEqual([], self.calls)

    def test_other_trees_never_privileged(self):
        self.useFixture(fixtures.MockPatchObject(
            privsep, 'read_pci_configs', side_effect=AssertionError))
        self.useFixture(fixtures.MockPatchObject(
            privsep, 'read_configs', side_effect=AssertionError))
        for euid in (1000, 0):
            self.euid.return_value = euid
            self.assertEqual(self.expected, self.discover())

    def test_privsep_failure_leaves_config_unread(self):
        self.daemon()
        privsep.read_pci_configs.side_effect = RuntimeError('no daemon')
        topology = self.discover()
        self.assertFalse(topology.config_space_read)
        self.assertEqual((sysfs.UNREADABLE_CONFIG,), topology.findings)
        self.assertEqual(1, privsep.read_pci_configs.call_count)

    def test_refused_address_leaves_config_unread(self):
        refused = self.bridges[0]
        self.daemon(lambda found: dict(found, **{refused: 'refused'}))
        topology = self.discover()
        self.assertFalse(topology.config_space_read)
        self.assertIn(sysfs.UNREADABLE_CONFIG, topology.findings)
        self.assertIsNone(topology.functions[refused].acs)
        for address in self.bridges[1:]:
            self.assertEqual(self.expected.functions[address].acs,
                             topology.functions[address].acs)

    def test_vanished_bridge_skipped_with_all_below(self):
        gone = self.bridges[-1]
        self.daemon(lambda found: dict(found, **{gone: None}))
        topology = self.discover()
        self.assertTrue(topology.config_space_read)
        self.assertNotIn(gone, topology.functions)
        self.assertIn('%s skipped: ' % gone, topology.findings[0])
        self.assertEqual(
            {a for a in self.expected.functions
             if not self.below(a, gone)} - {gone},
            set(topology.functions))

    def below(self, address: str, bridge: str) -> bool:
        parent = self.expected.functions[address].parent
        while parent is not None and parent != bridge:
            parent = self.expected.functions[parent].parent
        return parent == bridge
