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

"""The capacity math against a brute-force count, over random clouds."""

import random

from nova_gpu_p2p import capacity
from tests.fixtures import capacity_brute as brute
from tests.unit import base

MODELS = ('CUSTOM_PCI_10DE_2330', 'CUSTOM_PCI_10DE_20B5')
#: An H100 board's partitions of 2+ GPUs by GPU index: four pairs, two
#: halves, the board.
HGX = {1: (0, 1), 2: (2, 3), 3: (4, 5), 4: (6, 7), 5: (0, 1, 2, 3),
       6: (4, 5, 6, 7), 7: tuple(range(8))}


def random_host(rng: random.Random, index: int) -> brute.Host:
    """A host of 8 GPUs: cliques of any shape, or an HGX board."""
    fabric = rng.random() < 0.4
    table = dict(HGX)
    if fabric and rng.random() < 0.3:
        # Overlapping partitions of one size: the most at once counts.
        table[8] = (1, 2)
        table[9] = (3, 4, 5, 6)
    models = MODELS if rng.random() < 0.2 else MODELS[:1]
    gpus = []
    for i in range(8):
        if fabric:
            clique = 0
        else:
            clique = rng.choice((None, 0, 0, 1, 1, 2, 3))
        gpus.append(brute.Gpu(
            'h%d-g%d' % (index, i), rng.choice(models),
            rng.random() < 0.55, clique,
            frozenset(p for p, members in table.items() if i in members)
            if fabric else frozenset()))
    return brute.Host('host%d' % index, tuple(gpus), rng.random() < 0.1)


def as_placement_shows(host: brute.Host) -> capacity.Host:
    """What placement shows: no class for a GPU with no free unit."""
    return capacity.Host(host.name, tuple(
        capacity.Gpu(g.provider, int(g.free),
                     g.resource_class if g.free else None, g.clique,
                     g.partitions) for g in host.gpus), host.disabled)


class CloudTableTest(base.TestCase):

    def test_random_clouds_match_brute_force(self):
        rng = random.Random(44)
        for trial in range(150):
            hosts = [random_host(rng, i) for i in range(rng.randint(1, 5))]
            got = [dict(zip(capacity.SIZE_COLUMNS, row.row()))
                   for row in capacity.cloud_sizes(
                       as_placement_shows(h) for h in hosts)]
            self.assertEqual(brute.table(hosts, capacity.SIZES), got,
                             'trial %d' % trial)

    def test_a_fragmented_cloud(self):
        # Two hosts, cliques of four, one GPU used in each clique: six
        # free GPUs take three pairs, no four.
        hosts = [capacity.Host('h%d' % h, tuple(
            capacity.Gpu('h%d-%d' % (h, i), 0 if i in (0, 4) else 1,
                         None if i in (0, 4) else MODELS[0], i // 4)
            for i in range(8))) for h in range(2)]
        rows = {row.size: row for row in capacity.cloud_sizes(hosts)}
        self.assertEqual((2, 4, 12, 0, 0.3333), rows[2].row())
        self.assertEqual((4, 0, 12, 12, 1.0), rows[4].row())
        self.assertEqual((1, 12, 12, 0, 0.0), rows[1].row())

    def test_disabled_and_reserved_count_nothing(self):
        gpus = tuple(capacity.Gpu('g%d' % i, 1, MODELS[0], 0)
                     for i in range(4))
        disabled = capacity.Host('off', gpus, disabled=True)
        # Reserved units are no free units: placement shows none.
        reserved = capacity.Host('reserved', tuple(
            capacity.Gpu(g.provider + 'r', 0, None, 0) for g in gpus))
        for row in capacity.cloud_sizes([disabled, reserved]):
            self.assertEqual((0, 0, 0), (row.placeable, row.free,
                                         row.stranded))
        self.assertEqual(0, capacity.largest_fit(disabled))

    def test_fabric_manager_needs_a_whole_partition(self):
        # Three GPUs of a half free, the other half whole: one 4-GPU
        # server (the whole half), a pair, and three stranded for 4.
        free = {1, 2, 3, 4, 5, 6, 7}
        host = capacity.Host('hgx', tuple(
            capacity.Gpu('g%d' % i, int(i in free),
                         MODELS[0] if i in free else None, 0,
                         frozenset(p for p, m in HGX.items() if i in m))
            for i in range(8)))
        found = capacity.host_size(host, 4)
        self.assertEqual(({MODELS[0]: 1}, {MODELS[0]: 3}),
                         (dict(found.placeable), dict(found.stranded)))
        self.assertEqual(3, dict(capacity.host_size(host, 2).placeable)[
            MODELS[0]])
        self.assertEqual(4, capacity.largest_fit(host))
        self.assertIn('partition 5: 3/4', capacity.host_groups_text(host))


class HostsTest(base.TestCase):

    def test_largest_fit_and_groups(self):
        host = capacity.Host('h', (
            capacity.Gpu('a', 1, MODELS[0], 0),
            capacity.Gpu('b', 1, MODELS[0], 0),
            capacity.Gpu('c', 1, MODELS[0], 1),
            capacity.Gpu('d', 0, None, 1),
            capacity.Gpu('e', 1, MODELS[0], None)))
        self.assertEqual(2, capacity.largest_fit(host))
        self.assertEqual('clique 0: 2/2, clique 1: 1/2, no group: 1',
                         capacity.host_groups_text(host))
        self.assertEqual([('h', MODELS[0], 4,
                           'clique 0: 2/2, clique 1: 1/2, no group: 1', 2,
                           False)], capacity.host_rows([host]))

    def test_closest_hosts_fewest_missing_first(self):
        full = capacity.Host('full', tuple(
            capacity.Gpu('f%d' % i, 0, None, 0) for i in range(4)))
        half = capacity.Host('half', tuple(
            capacity.Gpu('h%d' % i, int(i < 2), MODELS[0] if i < 2 else None,
                         0) for i in range(4)))
        small = capacity.Host('small', tuple(
            capacity.Gpu('s%d' % i, 1, MODELS[0], 0) for i in range(2)))
        nears = capacity.closest([full, half, small], 4, limit=5)
        self.assertEqual([('half', 2), ('full', 4)],
                         [(n.host.name, n.missing) for n in nears])
        self.assertEqual(('h2', 'h3'),
                         tuple(g.provider for g in nears[0].held))
        self.assertEqual(1, len(capacity.closest([full, half], 4, 1)))
