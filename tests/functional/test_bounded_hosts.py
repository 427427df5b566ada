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

"""Few hosts reach Nova's filters, and none Nova would take is lost.

Real scheduler, placement and computes (two cliques of four, a clique a
socket). ``[gpu_p2p] spare_hosts = 0`` and ``[scheduler] max_attempts =
1``: ``GPUP2PCliqueFilter`` hands Nova's filters one host per server.
The best fit of the cloud, ``tight``, is one Nova's ``NUMATopologyFilter``
refuses: its free GPUs' socket has no free CPU. Stock Nova places these
requests elsewhere; so must the bound, in the same request.
"""

import logging

import fixtures

from tests.cloud import scheduling
from tests.functional import test_guest_config as layout
from tests.functional import test_operations_matrix as matrix

NODE0, NODE1 = layout.NODE0_GPUS, layout.NODE1_GPUS
HANDED_ON = 'handing on the %d best-fitting of %d hosts'


class BoundedHostsTest(matrix.Moves, scheduling.CliqueSchedulingBase):
    """``tight`` fits best and is refused; ``loose1``, ``loose2`` idle."""

    OURS_FIRST = True
    #: The host name weigher's preference among the hosts handed on.
    WEIGHTS = {'tight': 100, 'loose1': 50, 'loose2': 10}

    def setUp(self):
        super().setUp()
        self.filter_log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.scheduler.clique_filter',
            level=logging.DEBUG))
        self.flags(spare_hosts=0, group='gpu_p2p')
        self.flags(max_attempts=1, group='scheduler')
        self.flags(cores=-1, group='quota')
        for hostname in ('tight', 'loose1', 'loose2'):
            self.start_host(hostname, 'PHB')
        # On 'tight', socket 1's clique keeps a free pair (the best fit of
        # the cloud for a pair) on no free CPU; socket 0 has free CPUs
        # (placement counts the host's, not a socket's) and no free GPU.
        cpus0 = self.boot_settled(
            self.gpu_flavor(0, vcpus=scheduling.SOCKET_CPUS), host='tight')
        self.assertEqual(NODE1[:2], self.gpus(self.boot_settled(
            self.flavor(2, None), host='tight')))
        self.boot_settled(
            self.gpu_flavor(0, vcpus=scheduling.SOCKET_CPUS - 1),
            host='tight')
        self.delete(cpus0)
        self.assertEqual(NODE0, self.gpus(self.boot_settled(
            self.flavor(4, None), host='tight')))

    def test_refused_best_fit_replaced_in_the_same_request(self):
        server = self.boot_settled(self.flavor(2))
        # The next in Nova's order of the equally good fits.
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], ('loose1', 'loose2'))
        self.assertIn(self.gpus(server), (NODE0[:2], NODE1[:2]))
        self.assertIn(HANDED_ON % (1, 3), self.filter_log.output)
        self.assert_not_rescheduled()

    def test_batch_keeps_a_host_for_each_server(self):
        servers = self.boot_together(self.flavor(2), 2)
        # The second pair takes the rest of the first one's clique.
        self.assertEqual(['loose1', 'loose1'], [
            server['OS-EXT-SRV-ATTR:host'] for server in servers])
        self.assertIn(tuple(sorted(self.gpus(servers[0])
                                   + self.gpus(servers[1]))),
                      (NODE0, NODE1))
        self.assertIn(HANDED_ON % (2, 3), self.filter_log.output)
        self.assert_not_rescheduled()

    def test_move_to_the_next_host_nova_takes(self):
        """A cold migration of a ``required`` pair still finds its host."""
        self.skip_disk_copy()
        server = self.boot_settled(self.flavor(2), host='loose2')
        server = self._migrate_server(server)
        self.assertEqual('loose1', self.host_of(server))
        self.assertEqual(self.gpus(server),
                         self.allocated_gpus(server, 'loose1'))
        self._confirm_resize(server)
