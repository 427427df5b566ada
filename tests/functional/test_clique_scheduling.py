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

"""Clique-aware scheduling, with Nova's scheduler, placement and computes.

GPUs are tracked in placement (``[pci] report_in_placement``,
``[filter_scheduler] pci_in_placement``): each GPU is a resource provider,
the scheduler claims a host's first allocation candidate and the compute's
PCI claim follows it. The single-host scenarios run once without
``GPUP2PCliqueFilter`` and ``GPUP2PCliqueFitWeigher`` (the baseline:
Nova as it is) and once with them, on the same cloud in the same state.

Placement returns a host's candidates in no useful order: it merges the
request groups' candidates in a set, so which free GPUs Nova takes
changes from run to run. Here the candidates come in PCI address order
(:meth:`tests.cloud.scheduling.CliqueSchedulingBase.in_address_order`),
so the baseline fails the same way every time and ours has to beat an
order that leads Nova astray.

The guests have one NUMA node and one dedicated CPU, so Nova gives them
GPUs of one socket. Servers without GPUs that take all CPUs of a socket
keep the others from using its GPUs; that keeps each scenario to a few
small requests (placement's candidate count grows with the permutations
of the free GPUs: 1680 for 4 of 8).
"""

from nova.tests.functional.api import client

from lab import placement_cases
from lab import scheduling_sim
from tests.cloud import scheduling
from tests.functional import test_guest_config as layout
from tests.functional import test_operations_matrix as matrix

NODE0, NODE1 = layout.NODE0_GPUS, layout.NODE1_GPUS
PAIRS = layout.PAIRS
LEGACY_WARNING = 'pci_in_placement is off'


class _PairsHost:
    """Four pairs; free for a guest: the second pair and one GPU more.

    Socket 1's CPUs are taken, so a guest can have only socket 0's GPUs:
    the second GPU of the first pair and both of the second pair. Mixed
    into :class:`~tests.cloud.scheduling.CliqueSchedulingBase`.
    """

    def setUp(self):
        super().setUp()
        self.start_host('host1', 'PXB')
        self.assertEqual(
            (NODE0[0],), self.gpus(self.boot_settled(self.flavor(1, None))))
        self.take_socket_cpus()
        self.pair = self.flavor(2)


class PairsBaselineTest(_PairsHost, scheduling.CliqueSchedulingBase):
    """Nova alone claims the first candidate: a GPU of each pair."""

    STEERING = False

    def test_required_pair_is_refused(self):
        server = self.boot_settled(self.pair, expected_state='ERROR')
        self.assert_refused(server, (NODE0[1], NODE0[2]))


class PairsTest(_PairsHost, scheduling.CliqueSchedulingBase):
    """The filter hands Nova the free pair first."""

    def test_required_pair_lands_on_the_free_pair(self):
        server = self.boot_settled(self.pair)
        self.assertEqual(PAIRS[1], self.gpus(server))
        self.assert_not_rescheduled()


class PairsMoveTest(matrix.Moves, _PairsHost,
                    scheduling.CliqueSchedulingBase):
    """A pair cold-migrated to the pairs host, from a second one.

    Nova's move claim ignores placement (test_nova_move_claims): there it
    takes the first free GPUs of socket 0, a GPU of each pair, whatever
    placement allocated; the filter allocates what Nova claims, and a
    ``required`` pair is refused there.
    """

    def setUp(self):
        super().setUp()
        self.skip_disk_copy()
        self.start_host('host2', 'PXB')

    def moved(self, mode: str) -> dict:
        server = self.boot_settled(self.flavor(2, mode), host='host2')
        self.before = self.gpus(server)
        self.assertEqual(self.allocated_gpus(server, 'host2'), self.before)
        return server

    def test_required_pair_not_moved_across_pairs(self):
        server = self.moved('required')
        error = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'migrate': None})
        self.assertIn('NoValidHost', str(error))
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('host2', self.host_of(server))
        self.assertEqual(self.before, self.gpus(server))
        self.assertEqual(self.before, self.allocated_gpus(server, 'host2'))
        self.assertEqual((), self.allocated_gpus(server, 'host1'))

    def test_auto_pair_allocated_what_nova_claims(self):
        server = self._migrate_server(self.moved('auto'))
        self.assertEqual('host1', self.host_of(server))
        self.assertEqual((NODE0[1], NODE0[2]), self.gpus(server))
        self.assertEqual(self.gpus(server),
                         self.allocated_gpus(server, 'host1'))
        server = self._confirm_resize(server)
        self.assertEqual(self.gpus(server),
                         self.allocated_gpus(server, 'host1'))


class LegacyModeTest(_PairsHost, scheduling.CliqueSchedulingBase):
    """Without PCI in placement the compute claims; it still refuses."""

    PCI_IN_PLACEMENT = False

    def test_refused_on_the_compute_and_warned_once(self):
        for _ in range(2):
            server = self.boot_settled(self.pair, expected_state='ERROR')
            self.assert_refused(server, (NODE0[1], NODE0[2]))
        warnings = [line for line in self.stdlog.logger.output.splitlines()
                    if LEGACY_WARNING in line]
        self.assertEqual(1, len(warnings), '\n'.join(warnings))
        self.assertIn(' WARNING [nova_gpu_p2p.scheduler.nova_support] ',
                      warnings[0])


class _SocketCliques:
    """Two cliques of four; free: one of them whole and a pair of the other.

    One clique a socket: free are all of socket 0's GPUs and socket 1's
    second pair. Mixed into
    :class:`~tests.cloud.scheduling.CliqueSchedulingBase`.
    """

    def setUp(self):
        super().setUp()
        self.start_host('host1', 'PHB')
        socket0 = self.take_socket_cpus()
        self.assertEqual(
            NODE1[:2], self.gpus(self.boot_settled(self.flavor(2, None))))
        self.delete(socket0)

    def assert_other_modes_take(self, gpus: tuple[str, ...]) -> None:
        for mode in ('auto', 'none', None):
            server = self.boot_settled(self.flavor(2, mode))
            self.assertEqual(gpus, self.gpus(server), mode)
            self.delete(server)


class SocketCliquesBaselineTest(_SocketCliques,
                                scheduling.CliqueSchedulingBase):
    """Nova alone breaks into the clique of four."""

    STEERING = False

    def test_other_modes_break_the_clique_of_four_too(self):
        self.assert_other_modes_take(NODE0[:2])

    def test_pair_breaks_the_clique_of_four(self):
        self.assertEqual(NODE0[:2],
                         self.gpus(self.boot_settled(self.flavor(2))))
        server = self.boot_settled(self.flavor(4), expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])


class SocketCliquesTest(_SocketCliques, scheduling.CliqueSchedulingBase):
    """Best fit: a pair takes the free pair; four still fit after it."""

    def test_other_modes_take_the_best_fit_too(self):
        """A pair of any flavor takes the free pair: the four stay whole."""
        self.assert_other_modes_take(NODE1[2:])

    def test_pair_takes_the_pair_and_four_still_fit(self):
        self.assertEqual(NODE1[2:],
                         self.gpus(self.boot_settled(self.flavor(2))))
        self.assertEqual(NODE0, self.gpus(self.boot_settled(self.flavor(4))))
        self.assert_not_rescheduled()


class ThreeHostsTest(scheduling.CliqueSchedulingBase):
    """Across hosts the tightest fit wins, against the host name weigher.

    'eight' (one clique of eight) has five GPUs free, 'four' (two cliques
    of four) its socket 1 clique, 'pairs' all four pairs. The host name
    weigher prefers them in that order, the loosest fit first.
    """

    WEIGHTS = {'eight': 100, 'four': 50, 'pairs': 10}

    def setUp(self):
        super().setUp()
        for hostname, level in (('eight', 'SYS'), ('four', 'PHB'),
                                ('pairs', 'PXB')):
            self.start_host(hostname, level)
        self.assertEqual(NODE0[:3], self.gpus(
            self.boot_settled(self.flavor(3, None), host='eight')))
        for pair in PAIRS[:2]:
            self.assertEqual(pair, self.gpus(
                self.boot_settled(self.flavor(2, None), host='four')))

    def test_tightest_fit_wins(self):
        server = self.boot_settled(self.flavor(2))
        self.assertEqual('pairs', server['OS-EXT-SRV-ATTR:host'])
        self.assertIn(self.gpus(server), PAIRS)
        # Four fit on 'eight' too, with one GPU of its clique left over.
        server = self.boot_settled(self.flavor(4))
        self.assertEqual('four', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(NODE1, self.gpus(server))
        self.assert_not_rescheduled()
        # Not steered: the host name weigher's choice.
        server = self.boot_settled(self.flavor(2, 'auto'))
        self.assertEqual('eight', server['OS-EXT-SRV-ATTR:host'])


class SimulationAgreesTest(scheduling.CliqueSchedulingBase):
    """The benchmark's simulation predicts what the real scheduler does.

    ``tox -e bench`` scores the policies on :mod:`scheduling_sim`; here a
    seeded sequence of ``required`` boots and deletes runs on one host of
    two cliques of four, and every boot lands where the simulation's
    best-fit policy says, on the same GPUs, or fails where it fails. The
    seed is one where best fit, the filter alone and Nova's order all
    differ, so agreeing with the wrong policy fails the test.
    """

    SEED = 97

    def test_replay_matches_best_fit(self):
        self.start_host('host1', 'PHB')
        ops = scheduling_sim.random_ops(12, self.SEED, 8, sizes=(1, 2, 4),
                                        weights=(4, 3, 2))
        host = scheduling_sim.corpus_host(scheduling.CORPUS_HOST, 'PHB',
                                          'host1')
        expected = {policy: scheduling_sim.replay([host], ops, policy)
                    for policy in scheduling_sim.Policy}
        predicted = [(o.host, o.addresses)
                     for o in expected[scheduling_sim.Policy.BEST_FIT]]
        for policy in (scheduling_sim.Policy.FILTER,
                       scheduling_sim.Policy.NOVA):
            self.assertNotEqual(
                predicted, [(o.host, o.addresses) for o in expected[policy]],
                policy)
        flavors = {size: self.flavor(size) for size in (1, 2, 4)}
        servers: dict[int, dict] = {}
        seen = []
        for op in ops:
            if isinstance(op, scheduling_sim.Delete):
                self.delete(servers.pop(op.id))
                continue
            fails = predicted[len(seen)][0] is None
            server = self.boot_settled(
                flavors[op.gpus], expected_state='ERROR' if fails else
                'ACTIVE')
            servers[op.id] = server
            seen.append((None, ()) if fails else (
                server['OS-EXT-SRV-ATTR:host'], self.gpus(server)))
        self.assertEqual(predicted, seen)
        self.assert_not_rescheduled()


class TenHostsTest(scheduling.CliqueSchedulingBase):
    """Ten computes of two cliques of four, half running a pair.

    Every request with GPUs reaches Nova's filters as at most
    ``[gpu_p2p] candidates_per_host`` candidates per host, best fit
    first: four GPUs land on a whole free clique, the first try, whether
    the flavor asks for ``required`` or not.
    """

    HOSTS = ['host%d' % n for n in range(10)]
    OURS_FIRST = True

    def setUp(self):
        super().setUp()
        for hostname in self.HOSTS:
            self.start_host(hostname, 'PHB')
        pair = self.flavor(2, None)
        for hostname in self.HOSTS[1::2]:
            # Forced, so Nova's own order: a pair of socket 0's clique.
            server = self.boot_settled(pair, az='nova:%s' % hostname)
            self.assertEqual(NODE0[:2], self.gpus(server))
        # Placement's cap as scheduling-scale.rst recommends it, two
        # candidates per host: it builds 1680 orders of four of eight GPUs
        # per host without one.
        self.cap_placement(placement_cases.PER_HOST * len(self.HOSTS))

    def test_four_take_a_whole_free_clique_first_try(self):
        for mode in ('required', None):
            server = self.boot_settled(self.flavor(4, mode))
            self.assertIn(self.gpus(server), (NODE0, NODE1), mode)
            self.assert_not_rescheduled()


class TenBusyHostsSmallCapTest(scheduling.CliqueSchedulingBase):
    """Ten busy hosts, one candidate each from placement, none fitting.

    Each host runs a pair on socket 0, and placement's cap leaves each
    one candidate: the first order of its free GPUs (here two of socket
    0's and two of socket 1's). A ``required`` server of four still lands
    on a whole free clique the first try: the filter builds the candidate
    from the one returned, and placement's claim accepts it.
    """

    HOSTS = ['host%d' % n for n in range(10)]
    OURS_FIRST = True

    def setUp(self):
        super().setUp()
        # A server on each of ten hosts, and one more.
        self.flags(instances=len(self.HOSTS) + 1, group='quota')
        pair = self.flavor(2, None)
        for hostname in self.HOSTS:
            self.start_host(hostname, 'PHB')
            server = self.boot_settled(pair, az='nova:%s' % hostname)
            self.assertEqual(NODE0[:2], self.gpus(server))
        # Placement meets a host's GPUs in the order Nova created their
        # providers, by address: its one candidate is socket 0's free
        # pair and socket 1's first two GPUs.
        self.cap_placement(len(self.HOSTS))

    def test_required_four_on_the_free_clique_first_try(self):
        server = self.boot_settled(self.flavor(4))
        self.assertEqual(NODE1, self.gpus(server))
        self.assert_not_rescheduled()


class EightOfEightTest(scheduling.CliqueSchedulingBase):
    """An 8-GPU server on a host whose eight GPUs are one clique.

    Every candidate is an order of the same eight GPUs (40320 of them),
    which placement compares with one another as it collects them: with
    the recommended cap it answers at once, and the filter keeps one.
    """

    def setUp(self):
        super().setUp()
        self.cap_placement(placement_cases.PER_HOST)
        self.start_host('host1', 'SYS')

    def test_whole_host_first_try(self):
        flavor = self.gpu_flavor(8, numa_nodes=2, vcpus=2, extra_specs={
            layout.CLIQUE_KEY: 'required'})
        self.assertEqual(tuple(sorted(NODE0 + NODE1)),
                         self.gpus(self.boot_settled(flavor)))
        self.assert_not_rescheduled()
