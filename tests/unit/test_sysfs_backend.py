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

"""The sysfs backend on damaged trees and failing reads.

Real sysfs changes under the scan (hot unplug, a driver resetting a
device), firmware leaves files out, and privsep may be missing. Each test
builds a corpus host's tree, breaks one thing, and checks that discovery
skips only what it must and says what it skipped.
"""

import os
import shutil
from unittest import mock

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import deadline
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder as b
from tests.unit import base
from tests.unit import test_corpus

MIXED = 'mixed-vendors-nic'
#: In MIXED: a switch downstream port, the A6000 and its audio below it.
PORT_A, GPU_A, AUDIO_A = '0000:02:00.0', '0000:03:00.0', '0000:03:00.1'
#: In MIXED: the second downstream port, and the other A6000 with audio.
PORT_B, GPU_B, AUDIO_B = '0000:02:01.0', '0000:04:00.0', '0000:04:00.1'
ACS_HOST = 'acs-redirect-switch'


class TestDamagedTree(base.TestCase):

    def build(self, name: str = MIXED) -> None:
        """A private copy of the host's tree, free to break."""
        host = hosts.HOSTS[name]
        self.root = self.useFixture(b.SysfsTree(host)).root
        self.paths = b.addresses(host)

    def path(self, address: str, *names: str) -> str:
        return os.path.join(self.root, self.paths[address], *names)

    def discover(self, read_config: sysfs.ConfigReader =
                 sysfs.read_config_direct) -> model.HostTopology:
        return sysfs.SysfsBackend(
            test_corpus.make_conf(sysfs_root=self.root),
            read_config=read_config).discover()

    def assertSkipped(self, topology, addresses):
        """Exactly ``addresses`` are gone, each named in a finding."""
        self.assertEqual(set(self.paths) - set(addresses),
                         set(topology.functions))
        self.assertEqual(list(addresses),
                         [f.split(' skipped: ')[0] for f in topology.findings])

    def test_missing_file_skips_that_function(self):
        for name in ('numa_node', 'class'):
            self.build()
            os.remove(self.path(GPU_B, name))
            topology = self.discover()
            self.assertSkipped(topology, [GPU_B])
            self.assertIn(os.path.join(GPU_B, name), topology.findings[0])
            self.assertEqual([GPU_A], [g.address for g in topology.gpus()])
            self.assertTrue(topology.config_space_read)

    def test_fifo_or_endless_device_skips_that_function(self):
        for hostile in ('fifo', '/dev/zero'):
            self.build()
            numa_node = self.path(GPU_B, 'numa_node')
            os.remove(numa_node)
            if hostile == 'fifo':
                os.mkfifo(numa_node)
            else:
                os.symlink(hostile, numa_node)
            topology = deadline.run_briefly(self.discover)
            self.assertSkipped(topology, [GPU_B])
            self.assertIn('not a regular file', topology.findings[0])

    def test_unreadable_bridge_takes_what_is_below_it(self):
        self.build()
        os.remove(self.path(PORT_B, 'numa_node'))
        topology = self.discover()
        self.assertSkipped(topology, [PORT_B, GPU_B, AUDIO_B])
        self.assertIn('a bridge above it vanished', topology.findings[1])
        self.assertEqual([GPU_A], [g.address for g in topology.gpus()])

    def test_port_reading_all_ones_counts_as_redirect(self):
        # Issue 35 item 4: a switch port that does not answer reads as all
        # 0xff; its ACS is unknown (fail closed), not "none", and said so.
        self.build()
        route = lc.AcsPolicy.ROUTE
        self.assertEqual(lc.LinkClass.PIX, lc.effective_class(
            self.discover(), GPU_A, GPU_B, route))
        with open(self.path(PORT_A, 'config'), 'wb') as f:
            f.write(b'\xff' * 4096)
        topology = self.discover()
        port = topology.functions[PORT_A]
        self.assertFalse(port.acs_known)
        self.assertIs(model.PortType.DOWNSTREAM, port.port_type)
        self.assertEqual(lc.LinkClass.PHB, lc.effective_class(
            topology, GPU_A, GPU_B, route))
        self.assertEqual([sysfs.NO_ANSWER % PORT_A], list(topology.findings))
        self.assertTrue(topology.config_space_read)

    def test_no_numa_node(self):
        self.build()
        with open(self.path(GPU_A, 'numa_node'), 'w') as f:
            f.write('-1\n')
        topology = self.discover()
        self.assertIsNone(topology.functions[GPU_A].numa_node)
        self.assertEqual(0, topology.functions[GPU_B].numa_node)
        self.assertEqual((), topology.findings)

    def vanishing(self, bridge: str,
                  when: str | None) -> sysfs.ConfigReader:
        """A config reader that unplugs ``bridge`` with all below it.

        It does so at the first config read, or when ``when``'s config is
        read: the directory listing is taken by then, so what was below
        the bridge is still scanned.
        """
        def read_config(path: str, size: int) -> bytes:
            if when is None or (os.path.dirname(path)
                                == os.path.realpath(self.path(when))):
                shutil.rmtree(self.path(bridge), ignore_errors=True)
            return sysfs.read_config_direct(path, size)
        return read_config

    def test_bridge_vanishing_during_the_scan(self):
        for when in (None, PORT_A):
            self.build()
            topology = self.discover(self.vanishing(PORT_A, when))
            self.assertSkipped(topology, [PORT_A, GPU_A, AUDIO_A])
            # One unplugged device says nothing of the others' config.
            self.assertTrue(topology.config_space_read, when)
            self.assertIsNotNone(topology.functions[PORT_B].acs, when)
            self.assertEqual([GPU_B], [g.address for g in topology.gpus()])

    def test_no_pci_devices(self):
        self.build()
        devices = os.path.join(self.root, 'bus', 'pci', 'devices')
        shutil.rmtree(devices)
        error = self.assertRaises(exception.TopologyError, self.discover)
        self.assertIn(devices, str(error))

    def test_bridges_that_are_each_others_parent(self):
        self.build()
        devices = os.path.join(self.root, 'bus', 'pci', 'devices')
        loop = os.path.join(self.root, 'devices', 'pci0000:00', 'loop')
        for child, parent in ((PORT_A, PORT_B), (PORT_B, PORT_A)):
            target = os.path.join(loop, parent, child)
            shutil.copytree(os.path.realpath(self.path(child)), target,
                            symlinks=True)
            os.unlink(os.path.join(devices, child))
            os.symlink(target, os.path.join(devices, child))
        error = self.assertRaises(exception.TopologyError,
                                  deadline.run_briefly, self.discover)
        self.assertIn(devices, str(error))
        self.assertIn("bridges %s and %s are each other's parent"
                      % (PORT_A, PORT_B), str(error))

    def test_no_numa_nodes(self):
        self.build()
        nodes = os.path.join(self.root, 'devices', 'system', 'node')
        shutil.rmtree(nodes)
        topology = self.discover()
        self.assertEqual((), topology.numa_nodes)
        [finding] = topology.findings
        self.assertIn(nodes, finding)
        self.assertEqual(set(self.paths), set(topology.functions))

    def test_numa_node_without_cpulist(self):
        self.build()
        node0 = os.path.join(self.root, 'devices', 'system', 'node',
                             'node0')
        os.unlink(os.path.join(node0, 'cpulist'))
        topology = self.discover()
        self.assertEqual((), topology.numa_nodes)
        [finding] = topology.findings
        self.assertIn('NUMA node0 skipped', finding)
        self.assertIn('cpulist', finding)


class TestCorpusTree(base.TestCase):
    """Reads that need no damage: the shared corpus trees will do."""

    def test_unreadable_config(self):
        expected = hosts.EXPECTED[ACS_HOST]
        read_config = mock.Mock(side_effect=PermissionError(13, 'denied'))
        topology = sysfs.SysfsBackend(
            test_corpus.make_conf(sysfs_root=test_corpus.tree(ACS_HOST)),
            read_config=read_config).discover()
        # Tried once, not once per function.
        read_config.assert_called_once()
        self.assertFalse(topology.config_space_read)
        self.assertEqual((sysfs.UNREADABLE_CONFIG,), topology.findings)
        privileged = test_corpus.discover(ACS_HOST)
        self.assertEqual(
            {a: f.port_type for a, f in privileged.functions.items()},
            {a: f.port_type for a, f in topology.functions.items()})
        self.assertEqual(set(), {f.address for f in
                                 topology.functions.values() if f.acs})
        # Every bridge's ACS is unknown, the endpoints' was never asked.
        self.assertEqual(
            {a for a, f in topology.functions.items() if f.is_bridge},
            {a for a, f in topology.functions.items() if not f.acs_known})
        # Unknown counts as redirect on: every pair is PHB under route,
        # C-D too, whose ports have ACS off; ignore keeps the tree's PIX.
        for a, c in expected.links:
            self.assertEqual(
                ('PHB', expected.link(a, c, 'ignore')),
                (lc.effective_class(topology, a, c).name,
                 lc.effective_class(topology, a, c,
                                    lc.AcsPolicy.IGNORE).name))

    def test_standard_config_space_only_fails_closed(self):
        # No extended config space (no ECAM access): every read stops at
        # 256 bytes, where ACS is not. Its switch's GPUs are PHB under
        # route, as with the full read, not PIX as "no ACS" would make
        # them.
        expected = hosts.EXPECTED[ACS_HOST]
        topology = sysfs.SysfsBackend(
            test_corpus.make_conf(sysfs_root=test_corpus.tree(ACS_HOST)),
            read_config=lambda path, size: sysfs.read_config_direct(
                path, min(size, 256))).discover()
        full = test_corpus.discover(ACS_HOST)
        for a, c in expected.links:
            self.assertEqual('PHB', lc.effective_class(topology, a, c).name)
            self.assertLessEqual(
                lc.effective_class(full, a, c),
                lc.effective_class(topology, a, c))

    def test_64_bit_bars(self):
        topology = test_corpus.discover(ACS_HOST)
        # nvidia_gpu('H100-PCIE'): BAR1 128 GiB and BAR3 32 MiB are 64-bit,
        # BAR0 is not; bridges' windows are no BARs.
        self.assertEqual(
            {g: (128 * b.GiB, 32 * b.MiB)
             for g in hosts.EXPECTED[ACS_HOST].addresses},
            {f.address: f.bars64 for f in topology.functions.values()
             if f.bars64})
