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

"""Fabric Manager partitions by GPU address (fabric.partitions)."""

import itertools

from nova_gpu_p2p.fabric import partitions
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base

MODULES = hosts.HGX_MODULES
H100 = fake_fm.H100_PARTITIONS


def gpus(*module_ids):
    return tuple(sorted(MODULES[m] for m in module_ids))


def h100(modules=MODULES):
    return partitions.to_addresses(H100.items(), modules)


class TestToAddresses(base.TestCase):

    def test_every_partition_by_address(self):
        found, findings = h100()
        self.assertEqual((), findings)
        self.assertEqual(list(range(15)), [p.id for p in found])
        by_id = {p.id: p for p in found}
        self.assertEqual(gpus(*range(1, 9)), by_id[0].gpus)
        self.assertEqual(gpus(1, 3), by_id[3].gpus)
        self.assertEqual(('0000:04:00.0', '0000:08:00.0'), by_id[3].gpus)
        self.assertEqual((MODULES[8],), by_id[14].gpus)

    def test_addresses_are_sorted(self):
        for partition in h100()[0]:
            self.assertEqual(tuple(sorted(partition.gpus)), partition.gpus)

    def test_sorted_by_id_whatever_the_input_order(self):
        found, _ = partitions.to_addresses(
            reversed(list(H100.items())), MODULES)
        self.assertEqual(list(range(15)), [p.id for p in found])

    def test_unknown_module_drops_exactly_its_partitions(self):
        modules = {m: a for m, a in MODULES.items() if m != 3}
        found, findings = h100(modules)
        self.assertEqual({2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14},
                         {p.id for p in found})
        self.assertEqual(
            ('Fabric Manager module ID 3: no GPU of this host is known to '
             'have it, so the partitions holding it (0, 1, 3, 9) are left '
             'out',), findings)

    def test_one_finding_per_unknown_module(self):
        modules = {m: a for m, a in MODULES.items() if m not in (2, 7)}
        found, findings = h100(modules)
        self.assertEqual({3, 6, 7, 9, 10, 11, 12, 14},
                         {p.id for p in found})
        self.assertEqual(2, len(findings))
        self.assertIn('module ID 2:', findings[0])
        self.assertIn('(0, 1, 4, 8)', findings[0])
        self.assertIn('module ID 7:', findings[1])
        self.assertIn('(0, 2, 5, 13)', findings[1])

    def test_no_modules_known(self):
        found, findings = h100({})
        self.assertEqual((), found)
        self.assertEqual(8, len(findings))

    def test_no_partitions(self):
        self.assertEqual(((), ()), partitions.to_addresses([], MODULES))

    def test_modules_without_partition_are_ignored(self):
        found, findings = partitions.to_addresses(
            [(3, frozenset({1, 3}))], MODULES)
        self.assertEqual((partitions.FabricPartition(3, gpus(1, 3)),), found)
        self.assertEqual((), findings)


class TestExact(base.TestCase):

    def setUp(self):
        super().setUp()
        self.found = h100()[0]

    def test_each_partition_is_found_by_its_gpus(self):
        for partition in self.found:
            self.assertEqual(
                partition,
                partitions.exact(self.found, reversed(partition.gpus)))

    def test_not_a_partition(self):
        for modules in ((1, 2), (1, 2, 3), (1, 5), (1, 2, 3, 4, 5)):
            self.assertIsNone(partitions.exact(self.found, gpus(*modules)))

    def test_nothing(self):
        self.assertIsNone(partitions.exact(self.found, ()))
        self.assertIsNone(partitions.exact((), gpus(1)))

    def test_duplicates_count_once(self):
        self.assertEqual(3, partitions.exact(
            self.found, gpus(1, 3) + gpus(3)).id)


class TestForInstance(base.TestCase):

    def setUp(self):
        super().setUp()
        self.found = h100()[0]

    def check(self, addresses, ids, nvlink, missing=()):
        self.assertEqual(
            partitions.InstancePartitions(ids=ids, nvlink=nvlink,
                                          missing=missing),
            partitions.for_instance(self.found, addresses))

    def test_exact_partitions(self):
        self.check(gpus(*range(1, 9)), (0,), True)
        self.check(gpus(5, 6, 7, 8), (2,), True)
        self.check(gpus(2, 4), (4,), True)

    def test_one_gpu_gets_its_single_partition(self):
        self.check(gpus(1), (7,), False)
        self.check(gpus(8), (14,), False)

    def test_not_a_partition_gets_single_partitions_without_nvlink(self):
        # In address order: module 2 (03:00.0) before module 1 (08:00.0).
        self.check(gpus(1, 2), (8, 7), False)
        self.check(gpus(1, 3, 5), (9, 7, 11), False)

    def test_gpus_without_single_partition_are_missing(self):
        found = tuple(p for p in self.found if p.id not in (7, 11))
        self.assertEqual(
            partitions.InstancePartitions(
                ids=(8,), nvlink=False,
                missing=(MODULES[1], MODULES[5])),
            partitions.for_instance(found, gpus(1, 2, 5)))

    def test_unknown_gpu_is_missing(self):
        self.check(gpus(1, 3) + ('0000:c1:00.0',), (9, 7), False,
                   ('0000:c1:00.0',))

    def test_no_gpus(self):
        self.check((), (), False)

    def test_b200_numbered_from_one(self):
        """Found by their GPUs, whatever the numbering: B200's from 1."""
        self.found = partitions.to_addresses(
            fake_fm.B200_PARTITIONS.items(), MODULES)[0]
        self.check(gpus(*range(1, 9)), (1,), True)
        self.check(gpus(5, 6, 7, 8), (3,), True)
        self.check(gpus(1, 2), (4,), True)
        self.check(gpus(1), (8,), False)
        # Not a B200 pair: module 3 (04:00.0), then module 1 (08:00.0).
        self.check(gpus(1, 3), (10, 8), False)

    def test_accepts_any_iterable(self):
        self.assertEqual(
            (3,), partitions.for_instance(iter(self.found),
                                          iter(gpus(3, 1))).ids)


class TestNvlinkPairs(base.TestCase):

    def test_h100_board_is_all_pairs(self):
        self.assertEqual(
            frozenset(frozenset(pair) for pair in
                      itertools.combinations(MODULES.values(), 2)),
            partitions.nvlink_pairs(h100()[0]))

    def test_without_the_whole_board_halves_and_pairs_remain(self):
        found = tuple(p for p in h100()[0] if p.id not in (0, 1, 2))
        self.assertEqual(
            {frozenset(gpus(1, 3)), frozenset(gpus(2, 4)),
             frozenset(gpus(5, 7)), frozenset(gpus(6, 8))},
            partitions.nvlink_pairs(found))

    def test_single_gpu_partitions_give_no_pairs(self):
        found = tuple(p for p in h100()[0] if len(p.gpus) == 1)
        self.assertEqual(frozenset(), partitions.nvlink_pairs(found))

    def test_nothing(self):
        self.assertEqual(frozenset(), partitions.nvlink_pairs(()))
