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

"""The Fabric Manager binding, loading the stand-in libnvfm.so.1 for real.

ctypes loads tests/fixtures/nvfm's library, built from C with the struct
layouts of NVIDIA's nv_fm_types.h, so the structs, version words and
argument types cross a real C boundary; the stand-in's state file plays
the Fabric Manager daemon.
"""

import ctypes
import os
from unittest import mock

import fixtures

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base


class FabricManagerTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.library = fake_fm.library()
        self.fm = fake_fm.FakeFM(self.useFixture(fixtures.TempDir()).path)

    def connect(self) -> nvfm.FabricManager:
        return nvfm.FabricManager(self.fm.address, self.library)

    def test_partitions_of_each_board(self):
        for board, expected in fake_fm.BOARDS.items():
            self.fm = fake_fm.FakeFM(
                self.useFixture(fixtures.TempDir()).path, board)
            with self.connect() as fm:
                partitions = fm.partitions()
            self.assertEqual(
                expected, {p.id: p.modules for p in partitions}, board)
            self.assertFalse(any(p.active for p in partitions))

    def test_b200_ids_one_to_fifteen(self):
        """NVIDIA's B200 numbering: board 1, halves 2-3, pairs 4-7."""
        self.fm = fake_fm.FakeFM(self.useFixture(fixtures.TempDir()).path,
                                 'b200')
        with self.connect() as fm:
            found = {p.id: p.modules for p in fm.partitions()}
            fm.activate(4)  # modules 1, 2
            for overlapping in (1, 2, 8, 9):
                self.assertRaises(exception.FmInUse, fm.activate, overlapping)
            fm.activate(5)  # modules 3, 4: free
            for unknown in (0, 16):
                e = self.assertRaises(exception.FmError, fm.activate, unknown)
                self.assertEqual(nvfm.FM_ST_BADPARAM, e.status)
        self.assertEqual({
            1: frozenset(range(1, 9)),
            2: frozenset({1, 2, 3, 4}), 3: frozenset({5, 6, 7, 8}),
            4: frozenset({1, 2}), 5: frozenset({3, 4}),
            6: frozenset({5, 6}), 7: frozenset({7, 8}),
            **{7 + m: frozenset({m}) for m in range(1, 9)}}, found)
        self.assertEqual({4, 5}, self.fm.active())

    def test_gpus_carry_module_uuid_and_bus_id(self):
        with self.connect() as fm:
            whole = fm.partitions()[0]
        self.assertEqual(tuple(range(1, 9)),
                         tuple(gpu.module_id for gpu in whole.gpus))
        self.assertEqual(nvfm.PartitionGpu(
            module_id=2, uuid='GPU-00000000-0000-0000-0000-000000000002',
            pci_bus_id='00000000:03:00.0'), whole.gpus[1])
        # The stand-in's board is the corpus' HGX host, modules not in PCI
        # order.
        self.assertEqual(
            hosts.EXPECTED['hgx-8gpu-nvswitch-2numa'].addresses,
            tuple(sorted(fake_fm.MODULE_ADDRESSES.values())))
        self.assertEqual(
            ['0000' + fake_fm.MODULE_ADDRESSES[gpu.module_id].upper()
             for gpu in whole.gpus],
            [gpu.pci_bus_id.upper() for gpu in whole.gpus])

    def test_activation_outlives_the_connection(self):
        with self.connect() as fm:
            fm.activate(3)
            fm.activate(6)
        self.assertEqual({3, 6}, self.fm.active())
        with self.connect() as fm:
            self.assertEqual(
                {3, 6}, {p.id for p in fm.partitions() if p.active})
            fm.deactivate(3)
        self.assertEqual({6}, self.fm.active())
        self.assertEqual(
            ['fmConnect v2 0', 'fmActivateFabricPartition 3 0',
             'fmActivateFabricPartition 6 0', 'fmDisconnect 0',
             'fmConnect v2 0', 'fmGetSupportedFabricPartitions 0',
             'fmDeactivateFabricPartition 3 0', 'fmDisconnect 0'],
            self.fm.calls())

    def test_overlap_is_in_use(self):
        with self.connect() as fm:
            fm.activate(1)  # modules 1-4
            for overlapping in (1, 0, 3, 7, 10):
                e = self.assertRaises(exception.FmInUse, fm.activate,
                                      overlapping)
                self.assertEqual(nvfm.FM_ST_IN_USE, e.status)
            fm.activate(2)  # modules 5-8: free
        self.assertEqual({1, 2}, self.fm.active())

    def test_deactivating_an_inactive_partition(self):
        # nv_fm_agent.h: FM_ST_UNINITIALIZED "specified partition is not
        # activated", for this call only.
        with self.connect() as fm:
            e = self.assertRaises(exception.FmError, fm.deactivate, 4)
            self.assertIs(exception.FmNotActive, type(e))
            self.assertEqual(nvfm.FM_ST_UNINITIALIZED, e.status)
            e = self.assertRaises(exception.FmError, fm.activate, 15)
            self.assertIs(exception.FmError, type(e))

    def test_unknown_partition(self):
        with self.connect() as fm:
            for call in (fm.activate, fm.deactivate):
                e = self.assertRaises(exception.FmError, call, 15)
                self.assertEqual(nvfm.FM_ST_BADPARAM, e.status)

    def test_fabric_manager_down(self):
        self.fm.down()
        e = self.assertRaises(exception.FmUnavailable,
                              self.connect().__enter__)
        self.assertEqual(
            'Fabric Manager fmConnect(%s) failed: '
            'FM_ST_CONNECTION_NOT_VALID (-9)' % self.fm.address, str(e))
        self.assertEqual(['fmConnect v2 -9'], self.fm.calls())

    def test_fabric_manager_goes_down_while_connected(self):
        with self.connect() as fm:
            self.fm.down()
            self.assertRaises(exception.FmUnavailable, fm.activate, 1)
            self.fm.up()
            fm.activate(1)
        self.assertEqual({1}, self.fm.active())

    def test_no_fabric_manager_at_the_address(self):
        os.remove(self.fm.address)
        self.assertRaises(exception.FmUnavailable, self.connect().__enter__)
        tcp = nvfm.FabricManager('127.0.0.1:6666', self.library)
        self.assertRaises(exception.FmUnavailable, tcp.__enter__)

    def test_restart_refuses_until_told_what_is_active(self):
        with self.connect() as fm:
            fm.activate(3)
        self.fm.restart()
        # Restart mode keeps the routes.
        self.assertEqual({3}, self.fm.active())
        with self.connect() as fm:
            e = self.assertRaises(exception.FmNotReady, fm.partitions)
            self.assertEqual(nvfm.FM_ST_NOT_CONFIGURED, e.status)
            for call in (fm.activate, fm.deactivate):
                e = self.assertRaises(exception.FmNotReady, call, 3)
                self.assertEqual(nvfm.FM_ST_NOT_CONFIGURED, e.status)
            fm.set_activated([3, 6])
            self.assertEqual('up', self.fm.mode())
            fm.deactivate(3)
            fm.activate(5)
        self.assertEqual({5, 6}, self.fm.active())
        self.assertIn('fmSetActivatedFabricPartitions 3,6 0',
                      self.fm.calls())

    def test_set_activated_empty_after_restart(self):
        self.fm.restart()
        with self.connect() as fm:
            fm.set_activated([])
            fm.activate(0)
        self.assertEqual({0}, self.fm.active())
        self.assertIn('fmSetActivatedFabricPartitions - 0', self.fm.calls())

    def test_set_activated_when_up_marks_unrouted_partitions(self):
        # NVIDIA documents no answer here; the stand-in plays the worst
        # case, so that the lifecycle's tests show it is never sent.
        with self.connect() as fm:
            fm.set_activated([1])
        self.assertEqual({1}, self.fm.active())

    def test_set_activated_overlapping(self):
        self.fm.restart()
        with self.connect() as fm:
            self.assertRaises(exception.FmInUse, fm.set_activated, [1, 3])
        self.assertEqual('restarted', self.fm.mode())

    def test_set_activated_too_many(self):
        with self.connect() as fm:
            e = self.assertRaises(ValueError, fm.set_activated, [1] * 65)
        self.assertIn('at most 64', str(e))

    def test_stale_partition_shows_active(self):
        self.fm.force_active(5)
        with self.connect() as fm:
            self.assertEqual([5], [p.id for p in fm.partitions() if p.active])
            self.assertRaises(exception.FmInUse, fm.activate, 2)

    def test_connections_share_one_initialised_library(self):
        # fmLibShutdown is process-wide: leaving the inner block must not
        # shut the library down under the outer one.
        with self.connect() as outer:
            with self.connect() as inner:
                inner.activate(1)
            outer.activate(2)
        self.assertEqual({1, 2}, self.fm.active())

    def test_used_outside_its_with_block(self):
        e = self.assertRaises(RuntimeError, self.connect().partitions)
        self.assertIn('outside its with block', str(e))

    def test_failed_connect_releases_the_library(self):
        self.fm.down()
        self.assertRaises(exception.FmUnavailable, self.connect().__enter__)
        self.fm.up()
        with self.connect() as fm:
            fm.activate(1)

    def test_address_too_long(self):
        e = self.assertRaises(
            ValueError, nvfm.FabricManager, '/' + 'x' * 255, self.library)
        self.assertIn('longer than the 255 bytes', str(e))

    def test_from_conf(self):
        conf = mock.Mock()
        conf.gpu_p2p.fabric_manager_address = self.fm.address
        conf.gpu_p2p.fabric_manager_library = self.library
        with nvfm.from_conf(conf) as fm:
            self.assertEqual(15, len(fm.partitions()))


class VersionTest(base.TestCase):
    """The version words: what nv_fm_types.h makes of its structs."""

    def setUp(self):
        super().setUp()
        self.library = fake_fm.library()
        self.fm = fake_fm.FakeFM(self.useFixture(fixtures.TempDir()).path)
        # Each test's libraries, with no fmConnect version remembered.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.fabric.nvfm._libraries', {}))

    def test_version_words(self):
        # Sizes worked out by hand from nv_fm_types.h: 4 + 256 + 3 * 4;
        # 3 * 4 + 64 * (3 * 4 + 16 * (4 + 80 + 32 + 3 * 4)); 2 * 4 + 64 * 4.
        self.assertEqual(272 | 2 << 24, nvfm.CONNECT_PARAMS_VERSION)
        self.assertEqual(131852 | 1 << 24, nvfm.PARTITION_LIST_VERSION)
        self.assertEqual(264 | 1 << 24, nvfm.ACTIVATED_LIST_VERSION)

    def test_connect_v1_version_word(self):
        # nv_fm_types.h's fmConnectV1Params_version1 and
        # fmConnectV2Params_version2: version 2 is version 1 and addressType.
        self.assertEqual(0x0100010C, nvfm.CONNECT_PARAMS_V1_VERSION)
        self.assertEqual(268, ctypes.sizeof(nvfm.ConnectParamsV1))
        self.assertEqual(0x02000110, nvfm.CONNECT_PARAMS_VERSION)
        self.assertEqual(272, ctypes.sizeof(nvfm.ConnectParams))
        self.assertEqual(nvfm.ConnectParamsV1.addressIsUnixSocket.offset,
                         nvfm.ConnectParams.addressIsUnixSocket.offset)
        self.assertEqual(268, nvfm.ConnectParams.addressType.offset)

    def test_connect_falls_back_to_version_1(self):
        library = fake_fm.library(connect_v1_only=True)
        log = self.useFixture(fixtures.FakeLogger(name=nvfm.__name__))
        with nvfm.FabricManager(self.fm.address, library) as fm:
            self.assertEqual(15, len(fm.partitions()))
        self.assertEqual(
            ['fmConnect v2 -6', 'fmConnect v1 0',
             'fmGetSupportedFabricPartitions 0', 'fmDisconnect 0'],
            self.fm.calls())
        self.assertEqual(
            '%s refuses fmConnect parameters version 2: connecting with '
            'version 1\n' % library, log.output)

    def test_connect_version_remembered(self):
        library = fake_fm.library(connect_v1_only=True)
        log = self.useFixture(fixtures.FakeLogger(name=nvfm.__name__))
        for _ in range(2):
            with nvfm.FabricManager(self.fm.address, library):
                pass
        self.assertEqual(1, len(log.output.splitlines()))
        self.assertEqual(
            ['fmConnect v2 -6', 'fmConnect v1 0', 'fmDisconnect 0',
             'fmConnect v1 0', 'fmDisconnect 0'], self.fm.calls())
        # Remembered per library: the default stand-in still gets version 2.
        self.use(lambda fm: None)
        self.assertEqual(['fmConnect v2 0', 'fmDisconnect 0'],
                         self.fm.calls()[5:])

    def test_connect_v1_to_a_down_fabric_manager(self):
        library = fake_fm.library(connect_v1_only=True)
        self.fm.down()
        e = self.assertRaises(
            exception.FmUnavailable,
            nvfm.FabricManager(self.fm.address, library).__enter__)
        self.assertEqual(nvfm.FM_ST_CONNECTION_NOT_VALID, e.status)
        # Version 1 was taken, if not connected: it comes first next time.
        self.fm.up()
        with nvfm.FabricManager(self.fm.address, library):
            pass
        self.assertEqual(
            ['fmConnect v2 -6', 'fmConnect v1 -9', 'fmConnect v1 0',
             'fmDisconnect 0'], self.fm.calls())

    def test_the_library_refuses_another_version(self):
        for names, call in (
                (('CONNECT_PARAMS_VERSION', 'CONNECT_PARAMS_V1_VERSION'),
                 lambda fm: None),
                (('PARTITION_LIST_VERSION',), lambda fm: fm.partitions()),
                (('ACTIVATED_LIST_VERSION',),
                 lambda fm: fm.set_activated([]))):
            self.fm.restart()
            # Neither version of fmConnect's parameters, for fmConnect.
            wrong = {name: getattr(nvfm, name) - (1 << 24) for name in names}
            with mock.patch.multiple(nvfm, **wrong):
                e = self.assertRaises(exception.FmError, self.use, call)
            # Not FmUnavailable, even from fmConnect: retrying won't help.
            self.assertIs(exception.FmError, type(e), names)
            self.assertEqual(nvfm.FM_ST_VERSION_MISMATCH, e.status)
            self.assertIn('failed: FM_ST_VERSION_MISMATCH (-6)', str(e))

    def use(self, call) -> None:
        with nvfm.FabricManager(self.fm.address, self.library) as fm:
            call(fm)

    def test_the_library_checks_the_struct_size(self):
        # A struct one field short, as a binding of an older header would
        # have it, even with the right version number.
        lib = ctypes.CDLL(self.library)
        lib.fmLibInit()
        self.addCleanup(lib.fmLibShutdown)
        params = nvfm.ConnectParams(
            version=(nvfm.CONNECT_PARAMS_VERSION - 4),
            addressInfo=self.fm.address.encode(),
            addressType=nvfm.NV_FM_API_ADDR_TYPE_UNIX)
        handle = ctypes.c_void_p()
        self.assertEqual(nvfm.FM_ST_VERSION_MISMATCH,
                         lib.fmConnect(ctypes.byref(params),
                                       ctypes.byref(handle)))


class LibraryTest(base.TestCase):

    def test_missing_library_names_the_path(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'libnvfm.so.1')
        e = self.assertRaises(exception.FmLibraryMissing,
                              nvfm.FabricManager('/run/fm.sock',
                                                 path).__enter__)
        self.assertIsNone(e.status)
        self.assertIn('Fabric Manager dlopen(%s) failed: ' % path, str(e))
        self.assertIn('nvidia-fabricmanager-dev', str(e))

    def test_library_without_a_call(self):
        # libc loads, but has none of Fabric Manager's calls.
        e = self.assertRaises(exception.FmLibraryMissing,
                              nvfm.FabricManager('/run/fm.sock',
                                                 'libc.so.6').__enter__)
        self.assertEqual('dlsym(fmLibInit)', e.call)
        self.assertIn('not in libc.so.6', str(e))


class ErrorTest(base.TestCase):

    def test_each_status_has_its_class_and_message(self):
        for status, cls in (
                (nvfm.FM_ST_CONNECTION_NOT_VALID, exception.FmUnavailable),
                (nvfm.FM_ST_TIMEOUT, exception.FmUnavailable),
                (nvfm.FM_ST_IN_USE, exception.FmInUse),
                (nvfm.FM_ST_RESOURCE_IN_USE, exception.FmInUse),
                (nvfm.FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION,
                 exception.FmInUse),
                (nvfm.FM_ST_NOT_CONFIGURED, exception.FmNotReady),
                (nvfm.FM_ST_NOT_READY, exception.FmNotReady),
                (nvfm.FM_ST_UNINITIALIZED, exception.FmError),
                (nvfm.FM_ST_NVLINK_ERROR, exception.FmError)):
            e = self.assertRaises(exception.FmError, nvfm._check,
                                  'fmActivateFabricPartition(3)', status)
            self.assertIs(cls, type(e))
            self.assertEqual('fmActivateFabricPartition(3)', e.call)
            self.assertEqual(status, e.status)
            self.assertEqual(
                'Fabric Manager fmActivateFabricPartition(3) failed: '
                '%s (%d)' % (nvfm.STATUS_NAMES[status], status), str(e))

    def test_connect_failures_are_unavailable(self):
        e = self.assertRaises(exception.FmUnavailable, nvfm._check,
                              'fmConnect(127.0.0.1:6666)',
                              nvfm.FM_ST_GENERIC_ERROR,
                              exception.FmUnavailable)
        self.assertEqual(
            'Fabric Manager fmConnect(127.0.0.1:6666) failed: '
            'FM_ST_GENERIC_ERROR (-2)', str(e))

    def test_unknown_status(self):
        e = self.assertRaises(exception.FmError, nvfm._check, 'fmLibInit()',
                              -99)
        self.assertEqual(
            'Fabric Manager fmLibInit() failed: unknown status (-99)',
            str(e))

    def test_status_names(self):
        self.assertEqual(30, len(nvfm.STATUS_NAMES))
        self.assertEqual('FM_ST_SUCCESS', nvfm.STATUS_NAMES[0])
        self.assertEqual('FM_ST_PARTITION_ROUTE_PROGRAMMING_ERROR',
                         nvfm.STATUS_NAMES[-29])


class AnswerBoundsTest(base.TestCase):
    """A broken or hostile answer is refused, never clamped."""

    def answer(self, count: int, gpus: int = 1,
               ids: list[int] | None = None) -> nvfm.PartitionList:
        found = nvfm.PartitionList(version=nvfm.PARTITION_LIST_VERSION)
        found.numPartitions = count
        for index in range(min(count, nvfm.FM_MAX_FABRIC_PARTITIONS)):
            info = found.partitionInfo[index]
            info.partitionId = ids[index] if ids else index
            info.numGpus = gpus
        return found

    def test_a_sound_answer(self):
        self.assertEqual([0, 1], [p.id for p in nvfm.read_partitions(
            self.answer(2, gpus=8))])

    def test_more_partitions_than_fit(self):
        e = self.assertRaises(exception.FmError, nvfm.read_partitions,
                              self.answer(65))
        self.assertIn('65 partitions answered; at most 64 fit', str(e))

    def test_more_gpus_than_fit(self):
        e = self.assertRaises(exception.FmError, nvfm.read_partitions,
                              self.answer(1, gpus=17))
        self.assertIn('partition 0 has 17 GPUs; at most 16 fit', str(e))

    def test_an_id_twice(self):
        e = self.assertRaises(exception.FmError, nvfm.read_partitions,
                              self.answer(3, ids=[4, 4, 5]))
        self.assertIn('partition ID(s) 4 answered twice', str(e))

    def test_an_id_beyond_32_bits_is_not_the_board(self):
        for value in (2 ** 32, -1):
            e = self.assertRaises(ValueError, nvfm._partition_id, value)
            self.assertIn('out of range', str(e))
