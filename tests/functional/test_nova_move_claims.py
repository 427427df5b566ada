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

"""Nova's own move claims with GPUs in placement, nothing of ours deciding.

Nova's ``ResourceTracker._move_claim`` (resize, cold migration,
evacuation) builds the destination's PCI requests again from the flavor
(``nova.pci.request.get_pci_requests_from_flavor``: new request IDs, no
``rp_uuids``), so ``PciDeviceStats.consume_requests`` takes the first
free devices that match, whatever placement allocated; the next periodic
update then adds the claimed devices to the server's allocation, which
keeps the scheduler's too. A boot, and an unshelve of a server never
moved, claim through ``instance.pci_requests``, which carry placement's
providers, and follow it (:meth:`NovaMoveClaimTest.test_unshelve`).

Here our filter and weigher are off, the flavor has no
``hw:gpu_p2p_clique``, and placement's candidates come highest address
first, so that what the scheduler allocates is never the lowest-address
pair the move claim takes. Each other test is an expected failure: it turns
into an unexpected success the day Nova claims what placement allocated.
The same move also leaves the server a PCI request ID its request spec
does not know, so that even an unshelve of it claims the first free GPUs
afterwards, where an unshelve of a server never moved follows placement.

Our filter works around it (:mod:`nova_gpu_p2p.scheduler.move_claims`):
on those requests it has placement allocate exactly what Nova will claim,
and refuses a host for ``hw:gpu_p2p_clique=required`` where that is not
one clique; :mod:`test_operations_matrix` shows the moves with it. The
day these tests succeed unexpectedly, that workaround can go.
"""

from tests.cloud import scheduling
from tests.functional import test_operations_matrix as matrix

NOVA_BUG = ('Nova (ResourceTracker._move_claim) claims the first free '
            'GPUs on a move\'s destination, not those placement allocated')


class NovaMoveClaimTest(matrix.Moves, scheduling.CliqueSchedulingBase):
    """Two corpus hosts, Nova's filters and a plain two-GPU flavor."""

    STEERING = False

    def setUp(self):
        super().setUp()
        self.skip_disk_copy()
        for host in matrix.HOSTS:
            self.start_host(host, 'PHB')

    def in_address_order(self, original):
        """Each host's candidates highest address first."""
        ordered = super().in_address_order(original)

        def get_allocation_candidates(client, context, resources):
            found = ordered(client, context, resources)
            if found is None or found[0] is None:
                return found
            return (found[0][::-1],) + tuple(found[1:])

        return get_allocation_candidates

    def booted(self, gpus: int) -> dict:
        """A server that took the GPUs placement allocated, as boots do."""
        server = self.boot_settled(self.flavor(gpus, None))
        claimed = self.gpus(server)
        self.assertEqual(gpus, len(claimed))
        self.assertEqual(self.allocated_gpus(server, self.host_of(server)),
                         claimed)
        # Not the lowest-address GPUs: a claim that ignores placement
        # takes other ones.
        self.assertNotEqual('0000:03:00.0', claimed[0])
        return server

    def assert_claim_follows_placement(self, server: dict) -> None:
        server = self._show_server(server)
        self.expectFailure(
            NOVA_BUG, self.assertEqual,
            self.allocated_gpus(server, self.host_of(server)),
            self.gpus(server))

    def test_cold_migration(self):
        server = self.booted(2)
        source = self.host_of(server)
        server = self._migrate_server(server)
        self.assertNotEqual(source, self.host_of(server))
        self.assert_claim_follows_placement(server)

    def test_resize_down(self):
        server = self.booted(4)
        source = self.host_of(server)
        server = self._resize_server(server, self.flavor(2, None))
        self.assertNotEqual(source, self.host_of(server))
        self.assert_claim_follows_placement(server)

    def test_evacuation(self):
        server = self.booted(2)
        source = self.host_of(server)
        (dest,) = set(matrix.HOSTS) - {source}
        self.computes[source].stop()
        self.api.put_service(self.computes[source].service_ref.uuid,
                             {'forced_down': True})
        with self.api_microversion(matrix.EVACUATE_MICROVERSION):
            server = self._evacuate_server(server, expected_host=dest,
                                           expected_state='ACTIVE')
        self.settle(server)
        self.assert_claim_follows_placement(server)

    def test_unshelve(self):
        """Unshelve claims what placement allocated, as a boot does."""
        server = self.booted(2)
        self._shelve_server(server)
        server = self._unshelve_server(server)
        self.settle(server)
        self.assertEqual(self.allocated_gpus(server, self.host_of(server)),
                         self.gpus(server))

    def test_unshelve_after_a_move(self):
        """Not after a move: the server's PCI request is another one.

        ``_move_claim`` gave the server a new PCI request ID, its request
        spec keeps the old one, and
        ``update_pci_request_with_placement_allocations`` finds no
        provider for the new ID: every later claim of the server ignores
        placement, whatever the operation.
        """
        server = self.booted(2)
        server = self._migrate_server(server)
        server = self._confirm_resize(server)
        self.settle(server)
        self._shelve_server(server)
        server = self._unshelve_server(server)
        self.settle(server)
        self.assert_claim_follows_placement(server)
