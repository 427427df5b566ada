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


"""Guest NUMA distances copied from the host SLIT."""

from nova_gpu_p2p.guest import numa_distances
from nova_gpu_p2p.topology import model
from tests.unit import base


def node(node_id, *distances):
    return model.NumaNode(id=node_id, cpus=frozenset(), distances=distances)


# A four-socket host with an asymmetric-looking SLIT.
FOUR = (
    node(0, 10, 12, 20, 22),
    node(1, 12, 10, 22, 20),
    node(2, 20, 22, 10, 12),
    node(3, 22, 20, 12, 10),
)


class TestGuestDistances(base.TestCase):

    def test_two_cells_identity_mapping(self):
        host = (node(0, 10, 21), node(1, 21, 10))
        self.assertEqual(((10, 21), (21, 10)),
                         numa_distances.guest_distances([0, 1], host))

    def test_cells_on_far_nodes(self):
        self.assertEqual(((10, 22), (22, 10)),
                         numa_distances.guest_distances([0, 3], FOUR))

    def test_cells_in_reverse_order(self):
        # Guest cell 0 on host node 2, cell 1 on host node 0.
        self.assertEqual(((10, 20), (20, 10)),
                         numa_distances.guest_distances([2, 0], FOUR))

    def test_three_cells(self):
        self.assertEqual(((10, 22, 12), (22, 10, 20), (12, 20, 10)),
                         numa_distances.guest_distances([1, 2, 0], FOUR))

    def test_asymmetric_host_copied_as_is(self):
        host = (node(0, 10, 16), node(1, 32, 10))
        self.assertEqual(((10, 32), (16, 10)),
                         numa_distances.guest_distances([1, 0], host))

    def test_non_contiguous_node_ids_indexed_by_position(self):
        host = (node(0, 10, 20), node(2, 20, 10))
        self.assertEqual(((10, 20), (20, 10)),
                         numa_distances.guest_distances([2, 0], host))
        self.assertEqual(((10, 20), (20, 10)),
                         numa_distances.guest_distances([0, 2], host))

    def test_single_cell(self):
        self.assertEqual(((10,),),
                         numa_distances.guest_distances([3], FOUR))

    def test_no_cells(self):
        self.assertEqual((), numa_distances.guest_distances([], FOUR))

    def test_unknown_node(self):
        self.assertIsNone(numa_distances.guest_distances([0, 4], FOUR))

    def test_unknown_first_node(self):
        self.assertIsNone(numa_distances.guest_distances([7, 0], FOUR))

    def test_no_host_nodes(self):
        self.assertIsNone(numa_distances.guest_distances([0, 1], ()))

    def test_host_without_distances(self):
        host = (node(0), node(1))
        self.assertIsNone(numa_distances.guest_distances([0, 1], host))

    def test_host_with_short_distances(self):
        host = (node(0, 10), node(1, 21, 10))
        self.assertIsNone(numa_distances.guest_distances([0, 1], host))

    def test_short_row_of_unused_node_ignored(self):
        host = (node(0, 10, 21), node(1, 21, 10), node(2))
        self.assertEqual(((10, 21), (21, 10)),
                         numa_distances.guest_distances([0, 1], host))

    def test_returns_tuples(self):
        result = numa_distances.guest_distances([0, 1], FOUR)
        self.assertIsInstance(result, tuple)
        self.assertIsInstance(result[0], tuple)
