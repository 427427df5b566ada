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

"""``required`` flavors onto Fabric Manager partitions, with Nova.

The HGX corpus host's GPU entries in ``[pci] device_spec`` carry the
partitions of the stand-in's H100 board, by module ID
(:data:`tests.fixtures.hosts.HGX_MODULES`, not PCI order), as
``topology --device-spec`` prints them. The compute finds the GPUs in
sysfs at ``p2p_level = SYS``, one clique of eight, so it takes any GPUs it
is given: only the scheduler's partition rule keeps a server on one
partition. Candidates come in PCI address order
(:mod:`tests.cloud.scheduling`), where Nova's first pair,
``0000:03:00.0`` and ``0000:04:00.0`` (modules 2 and 3), is no partition.
"""

from lab import placement_cases
from nova_gpu_p2p import extra_specs
from tests.cloud import scheduling
from tests.fixtures import hosts


def gpus_of(*modules: int) -> tuple[str, ...]:
    """The PCI addresses of these modules, in address order."""
    return tuple(sorted(hosts.HGX_MODULES[m] for m in modules))


class _PartitionSchedulingBase(scheduling.CliqueSchedulingBase):
    """One HGX compute, GPUs in placement, our filter and weigher."""

    PARTITIONED = True

    def setUp(self):
        super().setUp()
        self.flags(p2p_level='SYS', group='gpu_p2p')
        self.start_gpu_compute('host1', scheduling.HGX_HOST,
                               gpu_p2p_options={'p2p_level': 'SYS'})

    def boot_pairs_then_four(self) -> None:
        pair = self.flavor(2)
        self.assertEqual(gpus_of(1, 3), self.gpus(self.boot_settled(pair)))
        # Best fit: the half already in use, not the free one.
        self.assertEqual(gpus_of(2, 4), self.gpus(self.boot_settled(pair)))
        self.assertEqual(gpus_of(5, 6, 7, 8),
                         self.gpus(self.boot_settled(self.flavor(4))))
        self.assert_not_rescheduled()


class PartitionsTest(_PartitionSchedulingBase):

    def test_pairs_fill_a_half_then_four_take_the_other(self):
        self.boot_pairs_then_four()

    def test_free_part_of_a_half_is_no_pair(self):
        # Servers of one GPU pack best fit first, whatever their flavor:
        # module 2, the other GPU of its pair (4), then a GPU of the
        # half's other pair (3, first in address order).
        one = self.flavor(1, None)
        for module in (2, 4, 3):
            self.assertEqual(gpus_of(module),
                             self.gpus(self.boot_settled(one)))
        # Module 1 is free but no partition of its own.
        self.assertEqual(gpus_of(5, 7),
                         self.gpus(self.boot_settled(self.flavor(2))))
        self.assert_not_rescheduled()

    def test_whole_board(self):
        # Every candidate for all eight GPUs is the board: under the
        # recommended cap placement stops at two of its 8! orderings,
        # which it would otherwise build from 8^8 combinations and Nova
        # judge one by one.
        self.cap_placement(placement_cases.PER_HOST)
        board = self.gpu_flavor(8, numa_nodes=2, vcpus=2, extra_specs={
            extra_specs.CLIQUE_KEY: 'required'})
        self.assertEqual(gpus_of(*range(1, 9)),
                         self.gpus(self.boot_settled(board)))
        self.assert_not_rescheduled()


class OneCandidatePartitionsTest(_PartitionSchedulingBase):
    """Placement returns one candidate: the partitions are built from it."""

    OURS_FIRST = True

    def test_pairs_fill_a_half_then_four_take_the_other(self):
        self.cap_placement(1)
        self.boot_pairs_then_four()
