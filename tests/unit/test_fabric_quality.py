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

"""The benchmark's judge of NVLink on an HGX board (lab.fabric_quality).

On the corpus' HGX host with the H100 board's partitions: module 1 is
``08:00.0``, 2 ``03:00.0``, 3 ``04:00.0``, 4 ``09:00.0`` (hosts.HGX_MODULES),
so the pair partition {1,3} is ``04:00.0`` + ``08:00.0`` and the first two
GPUs in PCI order (modules 2 and 3) are no partition.
"""

from lab import fabric_quality
from nova_gpu_p2p.fabric import partitions
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base

BOARD, _ = partitions.to_addresses(fake_fm.H100_PARTITIONS.items(),
                                   hosts.HGX_MODULES)
PAIR_13 = ('0000:04:00.0', '0000:08:00.0')      # partition 3
PAIR_24 = ('0000:03:00.0', '0000:09:00.0')      # partition 4
PCI_ORDER = ('0000:03:00.0', '0000:04:00.0')    # modules 2, 3
HALF_2 = ('0000:83:00.0', '0000:84:00.0', '0000:88:00.0', '0000:89:00.0')
WHOLE_BOARD = 0


def _values(found):
    return {name: (share.hits, share.total) for name, share in found.items()}


class TestScore(base.TestCase):

    def test_each_server_its_partition(self):
        found = fabric_quality.score([PAIR_13, PAIR_24, HALF_2], BOARD,
                                     active=[3, 4, 2])
        self.assertEqual({'nvlink_pairs': (1 + 1 + 6, 8),
                          'one_partition': (3, 3),
                          'cross_tenant': (0, 4 + 8 + 8),
                          'cuda_ready': (8, 8)}, _values(found))

    def test_nothing_active(self):
        # What a stack that never calls Fabric Manager leaves.
        found = fabric_quality.score([PCI_ORDER, HALF_2], BOARD, active=[])
        self.assertEqual({'nvlink_pairs': (0, 7), 'one_partition': (1, 2),
                          'cross_tenant': (0, 8), 'cuda_ready': (0, 6)},
                         _values(found))

    def test_whole_board_active_links_tenants(self):
        found = fabric_quality.score([PCI_ORDER, HALF_2], BOARD,
                                     active=[WHOLE_BOARD])
        self.assertEqual({'nvlink_pairs': (7, 7), 'one_partition': (1, 2),
                          'cross_tenant': (8, 8), 'cuda_ready': (6, 6)},
                         _values(found))

    def test_single_gpu_partitions_give_cuda_not_nvlink(self):
        # GPUs that are no partition get their 1-GPU partitions.
        singles = [p.id for p in BOARD
                   if len(p.gpus) == 1 and p.gpus[0] in PCI_ORDER]
        found = fabric_quality.score([PCI_ORDER], BOARD, active=singles)
        self.assertEqual((0, 1), _values(found)['nvlink_pairs'])
        self.assertEqual((2, 2), _values(found)['cuda_ready'])

    def test_one_gpu_servers_are_not_counted_as_one_partition(self):
        # Any one GPU is a partition: only sets of 2+ say something.
        found = fabric_quality.score([PCI_ORDER[:1], PAIR_13], BOARD,
                                     active=[3])
        self.assertEqual((1, 1), _values(found)['one_partition'])
        self.assertEqual((2, 3), _values(found)['cuda_ready'])

    def test_metric_names(self):
        found = fabric_quality.score([PAIR_13], BOARD, active=[3])
        self.assertEqual(set(fabric_quality.METRICS), set(found))
        self.assertLessEqual(fabric_quality.GOAL_NONE,
                             set(fabric_quality.METRICS))


class TestStrategies(base.TestCase):
    """Nova's GPUs (PCI order) against ours, pooled over two sequences."""

    RECORDS = [
        {'ours': False, 'servers': [PCI_ORDER, HALF_2], 'active': []},
        {'ours': True, 'servers': [PAIR_13, HALF_2], 'active': [3, 2]},
        {'ours': False, 'servers': [PAIR_13], 'active': []},
        {'ours': True, 'servers': [PAIR_24], 'active': [4]},
    ]

    def test_whole_board_is_the_largest_partition(self):
        self.assertEqual({WHOLE_BOARD}, fabric_quality.whole_board(
            BOARD, [PCI_ORDER], []))

    def test_hook_activates_each_servers_partition_or_its_singles(self):
        singles = {p.id for p in BOARD if p.gpus[0] in PCI_ORDER
                   and len(p.gpus) == 1}
        self.assertEqual({3, 2} | singles, fabric_quality.per_server_hook(
            BOARD, [PCI_ORDER, PAIR_13, HALF_2], [9]))

    def test_pooled(self):
        found = {name: {metric: (share.hits, share.total)
                        for metric, share in metrics.items()}
                 for name, metrics in fabric_quality.pooled(
                     self.RECORDS, BOARD).items()}
        self.assertEqual(set(fabric_quality.STRATEGIES), set(found))
        for name in ('stock', 'wrapper', 'sidecar'):
            self.assertEqual({'nvlink_pairs': (0, 8),
                              'one_partition': (2, 3),
                              'cross_tenant': (0, 8),
                              'cuda_ready': (0, 8)}, found[name])
        self.assertEqual({'nvlink_pairs': (8, 8), 'one_partition': (2, 3),
                          'cross_tenant': (8, 8), 'cuda_ready': (8, 8)},
                         found['stock + whole board by hand'])
        self.assertEqual({'nvlink_pairs': (7, 8), 'one_partition': (2, 3),
                          'cross_tenant': (0, 8), 'cuda_ready': (8, 8)},
                         found['stock + per-server hook'])
        self.assertEqual({'nvlink_pairs': (8, 8), 'one_partition': (3, 3),
                          'cross_tenant': (0, 8), 'cuda_ready': (8, 8)},
                         found['ours'])
