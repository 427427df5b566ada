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

"""Every move after every nova-compute restarted, on Nova fixed or not.

The operations matrix (:mod:`test_operations_matrix`) with each compute
restarted before each move: a restarted nova-compute reads its free GPUs
from its database in PCI address order, where an unfixed Nova's move
claim would take modules 2 and 3 of an HGX board (no partition). Every
cold migration (revert, confirm), resize (up, down), evacuation (at 2.94,
and at the latest microversion followed by a start) and unshelve after a
move lands on one clique (exactly one partition, active before its
domain started), placement holds exactly the guest's GPUs, and nothing
is rescheduled: the assertions of the operations matrix after each step.

* On a Nova carrying the series in ``patches/nova``
  (:mod:`nova_gpu_p2p.nova_fix`; ``tox -e functional-nova-fixed``) the
  destination claims what placement allocated.
* On an unfixed Nova (``tox -e functional``) the device_spec entries'
  order tags keep the pools in the claim order after every restart, so
  the first free GPUs Nova claims are a partition (clique), and the
  scheduler allocates exactly those
  (:mod:`nova_gpu_p2p.scheduler.move_claims`); the driver gives a domain
  only the devices on its node (:func:`nova_fix.on_its_node`), so the
  server evacuated at the latest microversion starts. Without the tags
  such moves are refused (``test_operations_matrix``'s
  ``test_move_refused_where_nova_claims_no_partition``).
"""

from tests.functional import test_operations_matrix as matrix


class _RestartMatrix:
    """The moves of the operations matrix, computes restarted before each.

    A mixin in front of a matrix class; its in-place tests are left to
    the operations matrix.
    """

    test_create_and_in_place_operations = None
    test_multi_create_packs = None
    test_driver_switch_both_ways = None
    test_move_refused_where_nova_claims_no_partition = None
    test_move_where_nova_claims_no_partition = None

    def restart_all(self) -> None:
        for host in matrix.HOSTS:
            self.restart_compute_service(host)

    def move(self, server, flavor, gpus, finish):
        self.restart_all()
        return super().move(server, flavor, gpus, finish)

    def prepare_destination(self, server):
        super().prepare_destination(server)
        self.restart_all()

    def evacuated(self, server: dict, microversion: str) -> tuple[dict, str]:
        """The server evacuated from its host at ``microversion``."""
        source = self.assert_one_group(server, 2)
        self.prepare_destination(server)
        dest = self.other_host(server)
        self.computes[source].stop()
        self.api.put_service(self.computes[source].service_ref.uuid,
                             {'forced_down': True})
        self.step()
        with self.api_microversion(microversion):
            server = self._evacuate_server(
                server, expected_host=dest,
                expected_state=('ACTIVE' if microversion ==
                                matrix.EVACUATE_MICROVERSION else 'SHUTOFF'))
        self.settle(server)
        return server, dest

    def test_evacuation(self):
        server = self.boot_settled(self.pair)
        server, dest = self.evacuated(server, matrix.EVACUATE_MICROVERSION)
        self.assertEqual(dest, self.assert_started(server, 2))
        self.assert_kept(dest, server)
        self.assert_not_rescheduled()

    def test_evacuation_at_latest_then_start(self):
        """2.95 and later: the server arrives stopped; it then starts."""
        server = self.boot_settled(self.pair)
        server, dest = self.evacuated(server, 'latest')
        self.assertEqual(dest, self.assert_one_group(server, 2))
        self.step()
        server = self._start_server(server)
        self.settle(server)
        self.assertEqual(dest, self.assert_started(server, 2))
        self.assert_kept(dest, server)
        self.assert_not_rescheduled()


class FabricManagerRequiredEmptyTest(_RestartMatrix,
                                     matrix.FabricManagerRequiredTest):
    BUSY_DESTINATION = False


class FabricManagerRequiredBusyTest(_RestartMatrix,
                                    matrix.FabricManagerRequiredTest):
    BUSY_DESTINATION = True
    test_cold_migration_to_an_empty_board = None
    test_resize_down_to_an_empty_board = None


class FabricManagerAutoEmptyTest(_RestartMatrix,
                                 matrix.FabricManagerAutoTest):
    BUSY_DESTINATION = False


class SysfsRequiredBusyTest(_RestartMatrix, matrix.SysfsRequiredTest):
    BUSY_DESTINATION = True


class SysfsAutoEmptyTest(_RestartMatrix, matrix.SysfsAutoTest):
    BUSY_DESTINATION = False
