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

"""Partition lifecycle against the stand-in Fabric Manager library."""

import fixtures

from nova_gpu_p2p.fabric import lifecycle
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.fabric import partitions
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base

PARTITIONS, _ = partitions.to_addresses(fake_fm.H100_PARTITIONS.items(),
                                        hosts.HGX_MODULES)
NIC = '0000:85:00.0'


def gpus(*modules):
    return tuple(hosts.HGX_MODULES[m] for m in modules)


class TestLifecycle(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fm = fake_fm.FakeFM(self.useFixture(fixtures.TempDir()).path)
        self.running = {}
        self.partitions = PARTITIONS
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.fabric.lifecycle'))
        library = fake_fm.library()
        self.lifecycle = lifecycle.Lifecycle(
            lambda: nvfm.FabricManager(self.fm.address, library),
            lambda: self.partitions, lambda: self.running)

    def start(self, uuid, addresses, exact_only=False):
        """Start a domain the way the driver does; its activation."""
        with self.lifecycle.starting(uuid, addresses,
                                     exact_only) as activation:
            self.running[uuid] = addresses
        return activation

    def warnings(self, text):
        return [line for line in self.log.output.splitlines()
                if text in line]

    # Activation.

    def test_exact_partition_activated(self):
        activation = self.start('a', gpus(5, 6, 7, 8) + (NIC,))
        self.assertEqual(lifecycle.Activation(
            gpus=tuple(sorted(gpus(5, 6, 7, 8))), ids=(2,), nvlink=True),
            activation)
        self.assertEqual({2}, self.fm.active())

    def test_no_fabric_gpu_no_call(self):
        activation = self.start('a', (NIC,))
        self.assertEqual((), activation.ids)
        self.assertIsNone(activation.problem)
        self.assertEqual([], self.fm.calls())

    def test_non_partition_gets_one_gpu_partitions(self):
        activation = self.start('a', gpus(2, 3))
        self.assertFalse(activation.nvlink)
        self.assertIsNone(activation.problem)
        self.assertEqual({8, 9}, self.fm.active())

    def test_exact_only_refuses_non_partition(self):
        activation = self.start('a', gpus(2, 3), exact_only=True)
        self.assertEqual((), activation.ids)
        self.assertEqual('GPUs %s, %s are not one Fabric Manager partition, '
                         'so they cannot have NVLink'
                         % tuple(sorted(gpus(2, 3))), activation.problem)
        self.assertEqual([], self.fm.calls())

    def test_exact_only_accepts_partitions_and_single_gpus(self):
        self.assertIsNone(self.start('a', gpus(1, 3), True).problem)
        self.assertIsNone(self.start('b', gpus(2), True).problem)
        self.assertEqual({3, 8}, self.fm.active())

    def test_unexpected_failure_is_a_problem_not_a_crash(self):
        def running():
            raise RuntimeError('libvirt went away')

        self.lifecycle = lifecycle.Lifecycle(
            lambda: nvfm.FabricManager(self.fm.address, fake_fm.library()),
            lambda: self.partitions, running)
        activation = self.start('a', gpus(1, 3))
        self.assertIn("not activated: RuntimeError('libvirt went away')",
                      activation.problem)

    def test_gpu_in_no_partition(self):
        self.partitions = tuple(p for p in PARTITIONS if p.id != 14)
        activation = self.start('a', gpus(7, 8))
        self.assertEqual('GPU(s) %s are in no Fabric Manager partition'
                         % gpus(8), activation.problem)
        self.assertEqual(set(), self.fm.active())

    def test_stale_partition_in_use(self):
        self.fm.force_active(1)
        activation = self.start('a', gpus(1, 3))
        self.assertIn('Fabric Manager partition(s) 3 (GPUs %s, %s) not '
                      'activated: ' % tuple(sorted(gpus(1, 3))),
                      activation.problem)
        self.assertIn('FM_ST_IN_USE', activation.problem)

    def test_already_active_partition_accepted(self):
        self.fm.force_active(3)
        self.assertIsNone(self.start('a', gpus(1, 3)).problem)

    def test_fm_down(self):
        self.fm.down()
        activation = self.start('a', gpus(1, 3))
        self.assertIn('FM_ST_CONNECTION_NOT_VALID', activation.problem)

    def test_library_missing(self):
        self.lifecycle = lifecycle.Lifecycle(
            lambda: nvfm.FabricManager(self.fm.address, '/nonexistent.so'),
            lambda: self.partitions, lambda: self.running)
        activation = self.start('a', gpus(1, 3))
        self.assertIn('dlopen(/nonexistent.so)', activation.problem)

    def test_restarted_fm_told_what_runs_then_activates(self):
        self.start('a', gpus(5, 6, 7, 8))
        self.fm.restart()
        self.assertIsNone(self.start('b', gpus(1, 3)).problem)
        self.assertEqual({2, 3}, self.fm.active())
        self.assertIn('fmSetActivatedFabricPartitions 2 0', self.fm.calls())

    def test_starting_instance_survives_a_reconcile(self):
        with self.lifecycle.starting('a', gpus(1, 3)):
            self.lifecycle.reconcile()
            self.lifecycle.release()
            self.assertEqual({3}, self.fm.active())
        # Its domain did not start: the next release takes it back.
        self.lifecycle.release()
        self.assertEqual(set(), self.fm.active())

    # Release and reconcile.

    def test_release_deactivates_what_no_domain_holds(self):
        self.start('a', gpus(1, 3))
        self.start('b', gpus(2, 4))
        del self.running['a']
        self.lifecycle.release()
        self.assertEqual({4}, self.fm.active())

    def test_release_restores_nothing(self):
        self.running['a'] = gpus(1, 3)
        self.lifecycle.release()
        self.assertEqual(set(), self.fm.active())

    def test_reconcile_clears_stale_partition(self):
        self.start('a', gpus(1, 3))
        self.fm.force_active(6)
        self.lifecycle.reconcile()
        self.assertEqual({3}, self.fm.active())
        self.assertIn('Fabric Manager partition 6 deactivated: no running '
                      'server holds its GPUs', self.log.output)

    def test_reconcile_after_restart_sends_set_activated(self):
        self.start('a', gpus(1, 3))
        self.start('b', gpus(5))
        self.fm.restart()
        before = len(self.fm.calls())
        self.lifecycle.reconcile()
        self.assertEqual({3, 11}, self.fm.active())
        self.assertEqual('up', self.fm.mode())
        # Refused while it has no data, told, then asked again.
        self.assertEqual(
            ['fmGetSupportedFabricPartitions -8',
             'fmSetActivatedFabricPartitions 3,11 0',
             'fmGetSupportedFabricPartitions 0'],
            [c for c in self.fm.calls()[before:]
             if not c.startswith(('fmConnect', 'fmDisconnect'))])
        self.assertEqual(1, len(self.warnings(
            'Fabric Manager restarted: told it the partitions of running '
            'servers (3, 11)')))
        self.assertEqual([], self.warnings('runs without'))

    def test_restart_with_nothing_running_sends_an_empty_list(self):
        self.fm.restart()
        self.lifecycle.reconcile()
        self.assertEqual('up', self.fm.mode())
        self.assertIn('fmSetActivatedFabricPartitions - 0', self.fm.calls())

    def test_a_partition_never_activated_is_not_declared(self):
        # Known: nothing active. A server whose activation failed runs.
        self.lifecycle.reconcile()
        self.running['a'] = gpus(1, 3)
        self.fm.restart()
        self.lifecycle.reconcile()
        calls = self.fm.calls()
        self.assertIn('fmSetActivatedFabricPartitions - 0', calls)
        # Then activated, routed, as any missing partition.
        self.assertIn('fmActivateFabricPartition 3 0', calls)
        self.assertEqual({3}, self.fm.active())

    def test_running_fm_is_never_sent_set_activated(self):
        # NVIDIA documents no answer from a Fabric Manager that did not
        # restart; one might mark the partitions active, unrouted.
        self.running['a'] = gpus(1, 3)
        self.lifecycle.reconcile()
        self.start('b', gpus(5))
        self.assertEqual({3, 11}, self.fm.active())
        self.assertEqual([], [c for c in self.fm.calls()
                              if c.startswith('fmSetActivated')])

    def test_instance_without_partition_reported_once(self):
        self.fm.force_active(1)
        self.running['a'] = gpus(1, 3)
        for _ in range(3):
            self.lifecycle.reconcile()
        self.assertEqual(1, len(self.warnings(
            'Instance a runs without NVLink or CUDA through Fabric Manager: '
            'Fabric Manager partition(s) 3 not active')))
        # Gone (the stale partition goes too), then back: reported again.
        del self.running['a']
        self.lifecycle.reconcile()
        self.assertEqual(set(), self.fm.active())
        self.fm.force_active(1)
        self.running['a'] = gpus(1, 3)
        self.lifecycle.reconcile()
        self.assertEqual(2, len(self.warnings('Instance a runs without')))

    def test_fm_down_logged_once_never_raised(self):
        self.fm.down()
        for _ in range(3):
            self.lifecycle.reconcile()
            self.lifecycle.release()
        self.assertEqual(1, len(self.warnings('not reconciled')))
        self.fm.up()
        self.lifecycle.reconcile()
        self.assertIn('reachable again', self.log.output)

    def test_host_without_partitions_makes_no_call(self):
        self.partitions = ()
        self.running['a'] = gpus(1, 3)
        self.lifecycle.reconcile()
        self.assertEqual([], self.fm.calls())

    def test_offload_runs_each_session(self):
        offloaded = []

        def offload(func, *args):
            offloaded.append(func.__name__)
            return func(*args)

        self.lifecycle = lifecycle.Lifecycle(
            lambda: nvfm.FabricManager(self.fm.address, fake_fm.library()),
            lambda: self.partitions, lambda: self.running, offload)
        self.start('a', gpus(1, 3))
        self.lifecycle.reconcile()
        self.assertEqual(['_activate_all', '_sync'], offloaded)


class TestOutcome(base.TestCase):
    """Issue 9's rule: only a new build is refused."""

    PAIR = ('0000:04:00.0', '0000:08:00.0')

    def outcome(self, new_build, required, **activation):
        fields = dict(gpus=self.PAIR, ids=(3,), nvlink=True)
        fields.update(activation)
        return lifecycle.Activation(**fields).outcome(new_build, required)

    def test_all_well(self):
        for new_build in (True, False):
            for required in (True, False):
                self.assertEqual(lifecycle.Outcome(),
                                 self.outcome(new_build, required))
        self.assertEqual(lifecycle.Outcome(), self.outcome(
            True, True, gpus=self.PAIR[:1], ids=(9,), nvlink=False))

    def test_problem_refuses_a_new_build(self):
        self.assertEqual(lifecycle.Outcome(refusal='FM down'),
                         self.outcome(True, False, problem='FM down'))

    def test_problem_reported_for_an_existing_server(self):
        self.assertEqual(
            lifecycle.Outcome(lost='no NVLink, and maybe no CUDA: FM down'),
            self.outcome(False, False, problem='FM down'))

    def test_one_gpu_partitions(self):
        note = ('GPUs 0000:04:00.0, 0000:08:00.0 are not one Fabric Manager '
                'partition: each got its 1-GPU partition, so CUDA works '
                'without NVLink between them')
        self.assertEqual(lifecycle.Outcome(note=note), self.outcome(
            True, False, ids=(9, 7), nvlink=False))
        self.assertEqual(lifecycle.Outcome(lost=note), self.outcome(
            False, True, ids=(9, 7), nvlink=False))
