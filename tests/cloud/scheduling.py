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

"""Nova's scheduler, placement and GPU computes, for clique scheduling.

:class:`CliqueSchedulingBase` runs computes on corpus hosts with their
GPUs in placement, Nova's host name weigher and, with ``STEERING``, our
filter and weigher; the functional scheduling tests and the benchmark's
clouds (``lab/``) build on it.
"""

from collections.abc import Sequence
import json

import fixtures
from nova import conf as nova_conf
from nova.scheduler.client import report
from nova.tests import fixtures as nova_fixtures

from nova_gpu_p2p.compute import driver
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import model
from tests.cloud import fake_fabric
from tests.cloud import nova_cloud as base
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.fixtures import waits

CONF = nova_conf.CONF
#: patches/placement's option: at most this many candidates per tree.
PER_ROOT = 'max_allocation_candidates_per_root'

#: The corpus host of every compute here: four PCIe switches with two
#: A100s each, two switches per socket. Its cliques follow [gpu_p2p]
#: p2p_level: four pairs at PXB (a switch each), two cliques of four at
#: PHB (a socket each), one of eight at SYS.
CORPUS_HOST = 'pcie-8gpu-4switch-2socket'
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

#: The Fabric Manager corpus host: eight H100s on NVSwitches.
HGX_HOST = 'hgx-8gpu-nvswitch-2numa'


def board_partitions(board: str) -> tuple[partitions.FabricPartition, ...]:
    """:data:`HGX_HOST`'s partitions on one of the stand-in's boards.

    By module ID, not PCI order (:data:`tests.fixtures.hosts.HGX_MODULES`).
    """
    return partitions.to_addresses(fake_fm.BOARDS[board].items(),
                                   hosts.HGX_MODULES)[0]


#: The partitions of the stand-in's H100 board.
PARTITIONS = board_partitions(fake_fabric.BOARD)


def device_spec_values(topology: model.HostTopology,
                       clique_ids: dict[str, int | None],
                       partitions: Sequence[partitions.FabricPartition] = (),
                       order_tags: bool = True) -> list[str]:
    """``[pci] device_spec`` values, as ``topology --device-spec`` prints.

    :param partitions: the board's, for a :attr:`PARTITIONED` host.
    :param order_tags: False: without the order tags, as releases before
        them printed the entries.
    """
    values = []
    for line in device_spec_tags.entries(
            clique_ids, {address: function.numa_node for address, function
                         in topology.functions.items()}, partitions):
        key, _, value = line.partition(' = ')
        assert key == 'device_spec', key
        if not order_tags:
            value = json.dumps({
                name: tag for name, tag in json.loads(value).items()
                if not device_spec_tags.is_order_tag(name)})
        values.append(value)
    return values


class CliqueSchedulingBase(waits.PatientWaits, base.GPUHostsTestBase):
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
    #: ``[pci] device_spec`` carries :attr:`BOARD`'s partitions (on
    #: :data:`HGX_HOST`), as ``topology --device-spec`` prints them there.
    PARTITIONED = False
    #: The stand-in Fabric Manager's board (:data:`fake_fm.BOARDS`).
    BOARD = fake_fabric.BOARD
    #: ``[pci] device_spec`` carries the order tags
    #: (:func:`device_spec_tags.order_tags`), as ``topology
    #: --device-spec`` prints them.
    ORDER_TAGS = True

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
            'nova_gpu_p2p.scheduler.nova_support._legacy_warned', False))
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

    def device_spec_values(self, topology: model.HostTopology,
                           clique_ids: dict[str, int | None]) -> list[str]:
        """Each GPU's ``[pci] device_spec`` value (see :attr:`PARTITIONED`)."""
        return device_spec_values(
            topology, clique_ids,
            board_partitions(self.BOARD) if self.PARTITIONED else (),
            self.ORDER_TAGS)

    def own_device_spec(self, original):
        """The driver's device_spec check reads its own host's entries.

        One process runs every compute and [pci] device_spec is one
        option: Nova's PCI tracker keeps what a compute started with, the
        driver reads it again on each update.
        """

        def update_provider_tree(compute_driver, *args, **kwargs):
            host = compute_driver.host_gpus
            self.flags(device_spec=self.device_spec_values(
                host.topology, host.cliques.ids), group='pci')
            return original(compute_driver, *args, **kwargs)

        return update_provider_tree

    def _add_pci_aliases(self, topology):
        """Aliases as usual; device_spec by address, with the cliques."""
        super()._add_pci_aliases(topology)
        ids = discovery.evaluate(topology, CONF).cliques.ids
        self.flags(device_spec=self.device_spec_values(topology, ids),
                   group='pci')

    def cap_placement(self, cap: int) -> None:
        """Placement's cap, shared breadth-first and optimized.

        As scheduling-scale.rst recommends placement's settings, the
        number aside; Nova's limit the same. With ``patches/placement``
        also its cap per tree, ``[gpu_p2p] candidates_per_host``.
        """
        self.flags(max_placement_results=cap, group='scheduler')
        conf = self.placement_fixture.conf_fixture
        conf.config(
            group='placement', max_allocation_candidates=cap,
            allocation_candidates_generation_strategy='breadth-first')
        if PER_ROOT in conf.conf.placement.keys():
            conf.config(group='placement', **{
                PER_ROOT: CONF.gpu_p2p.candidates_per_host})
        self.placement_fixture.conf_fixture.config(
            group='workarounds', optimize_for_wide_provider_trees=True)

    def start_host(self, hostname: str, level: str) -> None:
        """A compute on :data:`CORPUS_HOST` at ``p2p_level = level``."""
        self.flags(p2p_level=level, group='gpu_p2p')
        self.start_gpu_compute(hostname, CORPUS_HOST,
                               gpu_p2p_options={'p2p_level': level})

    def flavor(self, gpus: int, mode: str | None = 'required') -> str:
        """``gpus`` GPUs on one guest NUMA node; one dedicated CPU."""
        specs = {extra_specs.CLIQUE_KEY: mode} if mode else {}
        return self.gpu_flavor(gpus, vcpus=1, extra_specs=specs)

    def settle(self, server: dict) -> None:
        """Wait until the compute is done with the server's actions."""
        events = waits.finished_events(self.api, server)
        self.assertTrue(all(event['finish_time'] for event in events),
                        events)

    def boot_settled(self, flavor: str, expected_state: str = 'ACTIVE',
                     **kwargs) -> dict:
        server = self.boot(flavor, expected_state=expected_state, **kwargs)
        self.settle(server)
        return server

    def wait_for_status(self, server: dict,
                        expected: str | tuple[str, ...]) -> dict:
        """The server once its status is ``expected`` (or one of them)."""
        if isinstance(expected, str):
            return self._wait_for_state_change(server, expected)

        def reached() -> dict | None:
            found = self.api.get_server(server['id'])
            return found if found['status'] in expected else None

        return waits.until(reached, lambda: 'server %s not %s' % (
            server['id'], ' or '.join(expected)))

    def boot_together(self, flavor: str, count: int,
                      expected_state: str | tuple[str, ...] = 'ACTIVE'
                      ) -> list[dict]:
        """``openstack server create --min count --max count``, settled.

        One request: Nova asks placement once and schedules the
        instances one after another over the same hosts. The servers
        come back in the order they were scheduled (their launch index).
        """
        body = self._build_server(image_uuid=self.q35_image,
                                  flavor_id=flavor, networks='none')
        body.update(min_count=count, max_count=count,
                    return_reservation_id=True)
        reservation = self.api.post_server({'server': body})['reservation_id']
        found = self.api.get_servers(
            search_opts={'reservation_id': reservation})
        self.assertEqual(count, len(found), found)
        servers = sorted(
            (self.wait_for_status(server, expected_state)
             for server in found),
            key=lambda server: server['OS-EXT-SRV-ATTR:launch_index'])
        for server in servers:
            self.settle(server)
        return servers

    def take_socket_cpus(self) -> dict:
        """A server without GPUs on all CPUs of the emptier socket."""
        return self.boot_settled(self.gpu_flavor(0, vcpus=SOCKET_CPUS))

    def delete(self, server: dict) -> None:
        self._delete_server(server)
        # Its GPUs are back in the pools and placement only then.
        self.settle(server)

    def gpus(self, server: dict) -> tuple[str, ...]:
        """The host GPUs the server got, in address order."""
        return tuple(sorted(base.hostdevs(self.domain_xml(server))))

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
