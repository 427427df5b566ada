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

"""``openstack server create --min N --max N`` of ``required`` flavors.

Nova asks placement once for the whole request and copies each host's
candidates once; for each instance it runs the filters again over what
the host still has and claims the first candidate left. The candidates
our filter kept for the first instance overlap its claim, so for the
later ones it builds each host's best fit again from the GPUs still free,
before Nova's PCI and NUMA filters look. Under the recommended settings:
placement's cap two candidates per host, our filter first.
"""

from lab import placement_cases
from tests.cloud import scheduling
from tests.functional import test_clique_scheduling as clique_scheduling
from tests.functional import test_fabric_partitions as fabric
from tests.functional import test_guest_config as layout

NODE0, NODE1 = layout.NODE0_GPUS, layout.NODE1_GPUS


class TwinSocketTest(clique_scheduling._SocketCliques,
                     scheduling.CliqueSchedulingBase):
    """Twin sockets at ``p2p_level = PHB``: free cliques of four and two.

    A pair of socket 1's clique is taken by a server of a flavor without
    the clique key: socket 0's four GPUs and socket 1's second pair are
    free.
    """

    OURS_FIRST = True

    def setUp(self):
        super().setUp()
        self.cap_placement(placement_cases.PER_HOST)

    def test_three_pairs_each_on_one_clique(self):
        servers = self.boot_together(self.flavor(2), 3)
        taken = [self.gpus(server) for server in servers]
        # Best fit: the free pair of socket 1 first, then socket 0's
        # clique twice.
        self.assertEqual(NODE1[2:], taken[0])
        self.assertEqual(NODE0, tuple(sorted(taken[1] + taken[2])))
        self.assert_not_rescheduled()

    def test_four_pairs_do_not_fit(self):
        servers = self.boot_together(self.flavor(2), 4, 'ERROR')
        self.assertIn('No valid host', servers[0]['fault']['message'])


class TwoHostsTest(scheduling.CliqueSchedulingBase):
    """Four ``required`` servers of four GPUs over two hosts of two cliques.

    Each host holds two of them, one a clique: a batch packs like single
    requests do.
    """

    OURS_FIRST = True

    def setUp(self):
        super().setUp()
        for hostname in ('host1', 'host2'):
            self.start_host(hostname, 'PHB')
        self.cap_placement(placement_cases.PER_HOST * 2)

    def test_two_per_host_each_a_clique(self):
        servers = self.boot_together(self.flavor(4), 4)
        placed = sorted((s['OS-EXT-SRV-ATTR:host'], self.gpus(s))
                        for s in servers)
        self.assertEqual([('host1', NODE0), ('host1', NODE1),
                          ('host2', NODE0), ('host2', NODE1)], placed)
        self.assert_not_rescheduled()


class B200BoardTest(fabric._FabricBase):
    """An HGX B200 board under Fabric Manager: four pairs in one request.

    Its 2-GPU partitions are modules {1,2} {3,4} {5,6} {7,8} (IDs 4 to 7),
    each joining GPUs behind two PCIe switches of one NUMA node.
    """

    BOARD = 'b200'

    def test_four_pairs_each_on_its_partition(self):
        servers = self.boot_together(self.flavor(2), 4)
        held = sorted(self.assert_started_on_its_partition(server)
                      for server in servers)
        self.assertEqual([4, 5, 6, 7], held)
        self.assertEqual(set(held), self.fm.active())
        self.assert_not_rescheduled()
