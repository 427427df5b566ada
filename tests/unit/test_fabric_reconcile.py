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

"""Which partitions a host's running domains hold, and which are stale."""

from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.fabric import reconcile
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base

PARTITIONS, _ = partitions.to_addresses(fake_fm.H100_PARTITIONS.items(),
                                        hosts.HGX_MODULES)
NIC = '0000:85:00.0'


def gpus(*modules):
    return tuple(hosts.HGX_MODULES[m] for m in modules)


def single(module):
    """The 1-GPU partition of a module on the stand-in's H100 board."""
    return 6 + module


class TestDecide(base.TestCase):

    def decide(self, active=(), **running):
        return reconcile.decide(PARTITIONS, active, running)

    def test_nothing_running_everything_active_is_stale(self):
        decision = self.decide(active=(0, 3, 14))
        self.assertEqual((0, 3, 14), decision.deactivate)
        self.assertEqual((), decision.needed)
        self.assertEqual((), decision.restore)

    def test_exact_partition_held_and_kept(self):
        decision = self.decide(active=(3,), a=gpus(1, 3))
        self.assertEqual((), decision.deactivate)
        self.assertEqual((3,), decision.needed)
        self.assertEqual((), decision.restore)

    def test_each_size_holds_its_partition(self):
        for modules, partition in (((5,), single(5)), ((6, 8), 6),
                                   ((5, 6, 7, 8), 2), (range(1, 9), 0)):
            decision = self.decide(a=gpus(*modules))
            self.assertEqual((partition,), decision.needed)
            self.assertEqual((partition,), decision.restore)

    def test_non_partition_set_holds_its_one_gpu_partitions(self):
        decision = self.decide(active=(single(2), single(3)),
                               a=gpus(2, 3))
        self.assertEqual((single(2), single(3)), decision.needed)
        self.assertEqual((), decision.deactivate)

    def test_stale_partition_of_free_gpus_deactivated(self):
        decision = self.decide(active=(3, 6), a=gpus(1, 3))
        self.assertEqual((6,), decision.deactivate)

    def test_partition_over_running_gpus_never_deactivated(self):
        # Half 1 active over a running pair's GPUs: not what it should
        # hold, but tearing it down would take CUDA from the guest.
        decision = self.decide(active=(1,), a=gpus(1, 3))
        self.assertEqual((), decision.deactivate)
        self.assertEqual((3,), decision.restore)

    def test_restore_after_restart_names_every_needed(self):
        decision = self.decide(active=(), a=gpus(1, 3), b=gpus(5, 6, 7, 8),
                               c=gpus(2))
        self.assertEqual((2, 3, single(2)), decision.needed)
        self.assertEqual((2, 3, single(2)), decision.restore)
        self.assertEqual((), decision.deactivate)

    def test_other_devices_ignored(self):
        decision = self.decide(active=(3,), a=gpus(1, 3) + (NIC,),
                               b=(NIC,))
        self.assertEqual((3,), decision.needed)
        self.assertEqual((), decision.deactivate)

    def test_domain_without_gpus_holds_nothing(self):
        decision = self.decide(active=(3,), a=())
        self.assertEqual((3,), decision.deactivate)

    def test_b200_numbered_from_one(self):
        b200, _ = partitions.to_addresses(fake_fm.B200_PARTITIONS.items(),
                                          hosts.HGX_MODULES)
        # Pair {1,2} is 4, module 5 alone 12; pair {7,8} (7) is stale.
        self.assertEqual(
            reconcile.Decision(deactivate=(7,), needed=(4, 12),
                               restore=(12,)),
            reconcile.decide(b200, (4, 7), {'a': gpus(1, 2), 'b': gpus(5)}))

    def test_host_without_partitions(self):
        decision = reconcile.decide((), (), {'a': gpus(1, 3)})
        self.assertEqual(reconcile.Decision((), (), ()), decision)


class TestLacking(base.TestCase):

    def test_all_active_nothing_lacking(self):
        self.assertEqual({}, reconcile.lacking(
            PARTITIONS, (3, single(2)), {'a': gpus(1, 3), 'b': gpus(2)}))

    def test_inactive_partition_named(self):
        self.assertEqual(
            {'b': 'Fabric Manager partition(s) 2 not active'},
            reconcile.lacking(PARTITIONS, (3,),
                              {'a': gpus(1, 3), 'b': gpus(5, 6, 7, 8)}))

    def test_one_gpu_partitions_named(self):
        self.assertEqual(
            {'a': 'Fabric Manager partition(s) %d not active' % single(3)},
            reconcile.lacking(PARTITIONS, (single(2),), {'a': gpus(2, 3)}))

    def test_gpu_in_no_one_gpu_partition(self):
        # Partition 14 (module 8) dropped: its module had no address.
        some = tuple(p for p in PARTITIONS if p.id != single(8))
        self.assertEqual(
            {'a': 'GPU(s) %s in no 1-GPU Fabric Manager partition'
                  % gpus(8)},
            reconcile.lacking(some, (single(7),), {'a': gpus(7, 8)}))

    def test_both_reasons(self):
        some = tuple(p for p in PARTITIONS if p.id != single(8))
        self.assertEqual(
            {'a': 'Fabric Manager partition(s) 13 not active; GPU(s) %s '
                  'in no 1-GPU Fabric Manager partition' % gpus(8)},
            reconcile.lacking(some, (), {'a': gpus(7, 8)}))
