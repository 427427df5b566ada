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
(:meth:`_CliqueSchedulingBase.in_address_order`), so the baseline fails
the same way every time and ours has to beat an order that leads Nova
astray.

The guests have one NUMA node and one dedicated CPU, so Nova gives them
GPUs of one socket. Servers without GPUs that take all CPUs of a socket
keep the others from using its GPUs; that keeps each scenario to a few
small requests (placement's candidate count grows with the permutations
of the free GPUs: 1680 for 4 of 8).
"""

import fixtures
from nova import conf as nova_conf
from nova.scheduler.client import report
from nova.tests import fixtures as nova_fixtures

from harness import nova_cloud as base
from harness import placement_scale
from harness import scheduling_sim
from nova_gpu_p2p import device_spec
from nova_gpu_p2p import driver
from nova_gpu_p2p.topology import discovery
from tests.fixtures import waits
from tests.functional import test_guest_config as layout

CONF = nova_conf.CONF

#: The corpus host of every compute here: four PCIe switches with two
#: A100s each, two switches per socket. Its cliques follow [gpu_p2p]
#: p2p_level: four pairs at PXB (a switch each), two cliques of four at
#: PHB (a socket each), one of eight at SYS.
CORPUS_HOST = layout.EIGHT_GPU_HOST
NODE0, NODE1 = layout.NODE0_GPUS, layout.NODE1_GPUS
PAIRS = layout.PAIRS
#: CPUs of each socket of a fake GPU host.
SOCKET_CPUS = base.FAKE_CPUS // 2
NOVA_FILTERS = ['NUMATopologyFilter', 'PciPassthroughFilter']
FILTER = 'GPUP2PCliqueFilter'
FILTER_CLASS = 'nova_gpu_p2p.scheduler.GPUP2PCliqueFilter'
WEIGHER_CLASS = 'nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher'
HOST_NAME_WEIGHER = (nova_fixtures.HostNameWeigher.__module__
                     + '.HostNameWeigher')
#: The compute's refusal and the conductor's reschedule, in the log.
REFUSAL = 'cannot form one P2P clique on this host'
RESCHEDULED = 'Error from last host'
LEGACY_WARNING = 'pci_in_placement is off'


def device_spec_values(clique_ids: dict[str, int]) -> list[str]:
    """``[pci] device_spec`` values, as ``topology --device-spec`` prints.

    Every GPU of :data:`CORPUS_HOST` is in a clique at the levels used
    here, so each gets its entry.
    """
    values = []
    for address, clique_id in sorted(clique_ids.items()):
        key, _, value = device_spec.entry(address, clique_id).partition(
            ' = ')
        assert key == 'device_spec', key
        values.append(value)
    return values


class _CliqueSchedulingBase(waits.PatientWaits, base.GPUHostsTestBase):
    """Computes on :data:`CORPUS_HOST`, GPUs tracked in placement.

    Hosts are weighed by Nova's host name weigher (:attr:`WEIGHTS`) and,
    with :attr:`STEERING`, ours: nothing else moves a server.
    """

    #: Whether the scheduler runs our filter and weigher.
    STEERING = True
    PCI_IN_PLACEMENT = True
    #: The host name weigher's preferences (Nova's defaults when empty).
    WEIGHTS: dict[str, int] = {}
    #: Ours before Nova's candidate filters, as scheduling-scale.rst
    #: recommends: needed where Nova's would refuse every candidate
    #: placement returned, before ours can build one.
    OURS_FIRST = False
    #: Placement's candidates sorted by GPU address
    #: (:meth:`in_address_order`), else in placement's own order.
    ADDRESS_ORDER = True

    @property
    def ADDITIONAL_FILTERS(self) -> list[str]:
        """Read by Nova's libvirt test base when the scheduler starts."""
        if not self.STEERING:
            return NOVA_FILTERS
        return ([FILTER] + NOVA_FILTERS if self.OURS_FIRST
                else NOVA_FILTERS + [FILTER])

    def setUp(self):
        super().setUp()
        self.flags(report_in_placement=True, group='pci')
        # As scheduling-scale.rst recommends: 4 of 8 free GPUs are 1680
        # candidates, and Nova's default cap of 1000 keeps whichever
        # placement generated first, which may hold no best fit.
        self.flags(max_placement_results=10000, group='scheduler')
        # Nova reads the host's sysfs for each device_spec address.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        # Said once per process: a warning from an earlier test in this
        # worker must not hide this test's.
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.scheduler.host_view._legacy_warned', False))
        if self.ADDRESS_ORDER:
            self.useFixture(fixtures.MockPatchObject(
                report.SchedulerReportClient, 'get_allocation_candidates',
                self.in_address_order(
                    report.SchedulerReportClient.get_allocation_candidates)))
        self.useFixture(fixtures.MockPatchObject(
            driver.GPUP2PLibvirtDriver, 'update_provider_tree',
            self.own_device_spec(
                driver.GPUP2PLibvirtDriver.update_provider_tree)))

    def _setup_scheduler_service(self):
        # The scheduler loads its filters and weighers when it starts.
        self.useFixture(nova_fixtures.HostNameWeigherFixture(
            weights=self.WEIGHTS or None))
        weighers = [HOST_NAME_WEIGHER]
        if self.STEERING:
            weighers.append(WEIGHER_CLASS)
            self.flags(available_filters=[
                'nova.scheduler.filters.all_filters', FILTER_CLASS],
                group='filter_scheduler')
        self.flags(weight_classes=weighers,
                   pci_in_placement=self.PCI_IN_PLACEMENT,
                   group='filter_scheduler')
        return super()._setup_scheduler_service()

    def in_address_order(self, original):
        """Placement's answer, each host's candidates by GPU address.

        Nova's device providers are named ``<host>_<ADDRESS>``.
        """

        def get_allocation_candidates(client, context, resources):
            found = original(client, context, resources)
            if found is None or found[0] is None:
                return found
            providers = self.placement.get(
                '/resource_providers',
                version='1.14').body['resource_providers']
            names = {rp['uuid']: rp['name'] for rp in providers}
            candidates = sorted(found[0], key=lambda candidate: sorted(
                names[uuid] for uuids in candidate['mappings'].values()
                for uuid in uuids))
            return (candidates,) + tuple(found[1:])

        return get_allocation_candidates

    def own_device_spec(self, original):
        """The driver's device_spec check reads its own host's entries.

        One process runs every compute and [pci] device_spec is one
        option: Nova's PCI tracker keeps what a compute started with, the
        driver reads it again on each update.
        """

        def update_provider_tree(compute_driver, *args, **kwargs):
            self.flags(device_spec=device_spec_values(
                compute_driver.host_gpus.cliques.ids), group='pci')
            return original(compute_driver, *args, **kwargs)

        return update_provider_tree

    def _add_pci_aliases(self, topology):
        """Aliases as usual; device_spec by address, with the cliques."""
        super()._add_pci_aliases(topology)
        ids = discovery.evaluate(topology, CONF).cliques.ids
        self.flags(device_spec=device_spec_values(ids), group='pci')

    def cap_placement(self, cap: int) -> None:
        """Placement's cap, shared breadth-first and optimized.

        As scheduling-scale.rst recommends placement's settings, the
        number aside; Nova's limit the same.
        """
        self.flags(max_placement_results=cap, group='scheduler')
        self.placement_fixture.conf_fixture.config(
            group='placement', max_allocation_candidates=cap,
            allocation_candidates_generation_strategy='breadth-first')
        self.placement_fixture.conf_fixture.config(
            group='workarounds', optimize_for_wide_provider_trees=True)

    def start_host(self, hostname: str, level: str) -> None:
        """A compute on :data:`CORPUS_HOST` at ``p2p_level = level``."""
        self.flags(p2p_level=level, group='gpu_p2p')
        self.start_gpu_compute(hostname, CORPUS_HOST,
                               gpu_p2p_options={'p2p_level': level})

    def flavor(self, gpus: int, mode: str | None = 'required') -> str:
        """``gpus`` GPUs on one guest NUMA node; one dedicated CPU."""
        specs = {layout.CLIQUE_KEY: mode} if mode else {}
        return self.gpu_flavor(gpus, vcpus=1, extra_specs=specs)

    def settle(self, server: dict) -> None:
        """Wait until the compute is done with the server's actions."""
        waits.finished_events(self.api, server)

    def boot_settled(self, flavor: str, expected_state: str = 'ACTIVE',
                     **kwargs) -> dict:
        server = self.boot(flavor, expected_state=expected_state, **kwargs)
        self.settle(server)
        return server

    def take_socket_cpus(self) -> dict:
        """A server without GPUs on all CPUs of the emptier socket."""
        return self.boot_settled(self.gpu_flavor(0, vcpus=SOCKET_CPUS))

    def delete(self, server: dict) -> None:
        self._delete_server(server)
        # Its GPUs are back in the pools and placement only then.
        self.settle(server)

    def gpus(self, server: dict) -> tuple[str, ...]:
        """The host GPUs the server got, in address order."""
        return tuple(sorted(layout.hostdevs(self.domain_xml(server))))

    def assert_not_rescheduled(self) -> None:
        log = self.stdlog.logger.output
        self.assertNotIn(RESCHEDULED, log)
        self.assertNotIn(REFUSAL, log)

    def assert_refused(self, server: dict, gpus: tuple[str, str]) -> None:
        """host1 refused these GPUs, and no other host was left."""
        self.assertEqual('ERROR', server['status'])
        self.assertIn('Exceeded maximum number of retries',
                      server['fault']['message'])
        self.assertRegex(
            self.stdlog.logger.output,
            r'%s: host1 \(node host1\): .*GPUs %s, %s %s' % (
                RESCHEDULED, gpus[0], gpus[1], REFUSAL))


class _PairsHost:
    """Four pairs; free for a guest: the second pair and one GPU more.

    Socket 1's CPUs are taken, so a guest can have only socket 0's GPUs:
    the second GPU of the first pair and both of the second pair. Mixed
    into :class:`_CliqueSchedulingBase`.
    """

    def setUp(self):
        super().setUp()
        self.start_host('host1', 'PXB')
        self.assertEqual(
            (NODE0[0],), self.gpus(self.boot_settled(self.flavor(1, None))))
        self.take_socket_cpus()
        self.pair = self.flavor(2)


class PairsBaselineTest(_PairsHost, _CliqueSchedulingBase):
    """Nova alone claims the first candidate: a GPU of each pair."""

    STEERING = False

    def test_required_pair_is_refused(self):
        server = self.boot_settled(self.pair, expected_state='ERROR')
        self.assert_refused(server, (NODE0[1], NODE0[2]))


class PairsTest(_PairsHost, _CliqueSchedulingBase):
    """The filter hands Nova the free pair first."""

    def test_required_pair_lands_on_the_free_pair(self):
        server = self.boot_settled(self.pair)
        self.assertEqual(PAIRS[1], self.gpus(server))
        self.assert_not_rescheduled()


class LegacyModeTest(_PairsHost, _CliqueSchedulingBase):
    """Without PCI in placement the compute claims; it still refuses."""

    PCI_IN_PLACEMENT = False

    def test_refused_on_the_compute_and_warned_once(self):
        for _ in range(2):
            server = self.boot_settled(self.pair, expected_state='ERROR')
            self.assert_refused(server, (NODE0[1], NODE0[2]))
        warnings = [line for line in self.stdlog.logger.output.splitlines()
                    if LEGACY_WARNING in line]
        self.assertEqual(1, len(warnings), '\n'.join(warnings))
        self.assertIn(' WARNING [nova_gpu_p2p.scheduler.host_view] ',
                      warnings[0])


class _SocketCliques:
    """Two cliques of four; free: one of them whole and a pair of the other.

    One clique a socket: free are all of socket 0's GPUs and socket 1's
    second pair. Mixed into :class:`_CliqueSchedulingBase`.
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


class SocketCliquesBaselineTest(_SocketCliques, _CliqueSchedulingBase):
    """Nova alone breaks into the clique of four."""

    STEERING = False

    def test_other_modes_break_the_clique_of_four_too(self):
        self.assert_other_modes_take(NODE0[:2])

    def test_pair_breaks_the_clique_of_four(self):
        self.assertEqual(NODE0[:2],
                         self.gpus(self.boot_settled(self.flavor(2))))
        server = self.boot_settled(self.flavor(4), expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])


class SocketCliquesTest(_SocketCliques, _CliqueSchedulingBase):
    """Best fit: a pair takes the free pair; four still fit after it."""

    def test_other_modes_take_the_best_fit_too(self):
        """A pair of any flavor takes the free pair: the four stay whole."""
        self.assert_other_modes_take(NODE1[2:])

    def test_pair_takes_the_pair_and_four_still_fit(self):
        self.assertEqual(NODE1[2:],
                         self.gpus(self.boot_settled(self.flavor(2))))
        self.assertEqual(NODE0, self.gpus(self.boot_settled(self.flavor(4))))
        self.assert_not_rescheduled()


class ThreeHostsTest(_CliqueSchedulingBase):
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


class SimulationAgreesTest(_CliqueSchedulingBase):
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
        host = scheduling_sim.corpus_host(CORPUS_HOST, 'PHB', 'host1')
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


class TenHostsTest(_CliqueSchedulingBase):
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
        self.cap_placement(placement_scale.PER_HOST * len(self.HOSTS))

    def test_four_take_a_whole_free_clique_first_try(self):
        for mode in ('required', None):
            server = self.boot_settled(self.flavor(4, mode))
            self.assertIn(self.gpus(server), (NODE0, NODE1), mode)
            self.assert_not_rescheduled()


class TenBusyHostsSmallCapTest(_CliqueSchedulingBase):
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


class EightOfEightTest(_CliqueSchedulingBase):
    """An 8-GPU server on a host whose eight GPUs are one clique.

    Every candidate is an order of the same eight GPUs (40320 of them),
    which placement compares with one another as it collects them: with
    the recommended cap it answers at once, and the filter keeps one.
    """

    def setUp(self):
        super().setUp()
        self.cap_placement(placement_scale.PER_HOST)
        self.start_host('host1', 'SYS')

    def test_whole_host_first_try(self):
        flavor = self.gpu_flavor(8, numa_nodes=2, vcpus=2, extra_specs={
            layout.CLIQUE_KEY: 'required'})
        self.assertEqual(tuple(sorted(NODE0 + NODE1)),
                         self.gpus(self.boot_settled(flavor)))
        self.assert_not_rescheduled()
