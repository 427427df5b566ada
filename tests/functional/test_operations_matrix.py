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

"""Every operation a cloud runs on a P2P server, both modes, both backends.

Two identical GPU computes under the recommended scheduler settings
(placement's cap two candidates per host, breadth-first;
``GPUP2PCliqueFilter`` first, then Nova's NUMA and PCI filters, and our
weigher), GPUs in placement. Per class a ``hw:gpu_p2p_clique`` mode
(``required`` or ``auto``) and a topology backend: ``sysfs`` on the
corpus host of two PCIe cliques of four (``p2p_level = PHB``), or
``fabricmanager`` on the HGX board, each compute with a stand-in Fabric
Manager of its own. Each test walks a chain of operations on one server
(one cloud per test, not per operation); after every step the server is
ACTIVE, its GPUs are one clique (on Fabric Manager hosts: exactly one
partition, active on its host when its domain started), and no host ever
refused it (no reschedule).

Cold migration and resize power the source's domain off as Nova does
(the Fabric Manager partition is released then), without the disk copy
Nova's libvirt test double cannot do.

On a cold migration, a resize, an evacuation and an unshelve after one of
them, Nova claims the destination's first free GPUs whatever placement
allocated (test_nova_move_claims); our filter has placement allocate
exactly those, and refuses a host for ``required`` where they are not
one clique (partition) (:mod:`nova_gpu_p2p.scheduler.move_claims`). The
driver reports each node's GPUs grouped by partition
(:mod:`nova_gpu_p2p.claim_order`), so on an HGX board whose
nova-compute met its GPUs that way Nova's first free pair is a partition
(:class:`FabricManagerRequiredTest` moves there); once its nova-compute
restarted it reads them in PCI address order, where the first free pair
is modules 2 and 3, no partition (:class:`FabricManagerRequiredTest`
shows the refusal, :class:`FabricManagerAutoTest` the ``auto`` move
there). The chains on Fabric Manager hosts also move a pair to a
destination half busy (:attr:`_OperationsMatrix.BUSY_DESTINATION`).
"""

import contextlib
import json

import fixtures
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client

from lab import placement_cases
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p import nova_fix
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p import traits
from tests.cloud import fake_fabric
from tests.cloud import scheduling
from tests.fixtures import hosts
from tests.fixtures import waits
from tests.functional import test_guest_config as layout

CONF = nova_conf.CONF
HOSTS = ['host1', 'host2']
STOCK_DRIVER = 'libvirt.LibvirtDriver'
OUR_DRIVER = 'gpu_p2p.GPUP2PLibvirtDriver'
#: Nova 34 starts an evacuated server SHUTOFF from 2.95 on, and starting
#: it then fails with PCI in placement (SPEC): the last microversion that
#: keeps it running.
EVACUATE_MICROVERSION = '2.94'
#: What the ``--min N`` batch test waits for: an instance's last state.
SETTLED = ('ACTIVE', 'ERROR')


class Moves:
    """What tests of moves share; a mixin for Nova's functional tests."""

    def skip_disk_copy(self) -> None:
        """Cold migration and resize power the source off, copy nothing.

        Nova's libvirt test double cannot copy disks.
        """
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver'
            '.migrate_disk_and_power_off', self.power_off_only))

    @staticmethod
    def power_off_only(compute_driver, context, instance, dest, flavor,
                       network_info, block_device_info=None, timeout=0,
                       retry_interval=0) -> str:
        """Nova's migrate_disk_and_power_off, less the disk copy."""
        compute_driver.power_off(instance, timeout, retry_interval)
        return '{}'

    def host_of(self, server: dict) -> str:
        return self._show_server(server)['OS-EXT-SRV-ATTR:host']

    def allocated_gpus(self, server: dict, host: str) -> tuple[str, ...]:
        """The GPUs placement holds for the server on ``host``.

        Nova names a device's provider ``<host>_<PCI address>``.
        """
        allocations = self.placement.get(
            '/allocations/%s' % server['id'],
            version='1.28').body['allocations']
        names = {provider['uuid']: provider['name'] for provider in
                 self.placement.get('/resource_providers',
                                    version='1.14').body[
                     'resource_providers']}
        prefix = host + '_'
        return tuple(sorted(names[uuid][len(prefix):] for uuid in allocations
                            if names[uuid].startswith(prefix)))

    @contextlib.contextmanager
    def api_microversion(self, version: str):
        saved = self.api.microversion
        self.api.microversion = version
        try:
            yield
        finally:
            self.api.microversion = saved


class _OperationsMatrix(Moves):
    """Two computes of one shape; the test classes pick mode and backend.

    A mixin, so that only the test classes below it run its tests.
    """

    OURS_FIRST = True
    ADDRESS_ORDER = False
    #: ``hw:gpu_p2p_clique`` of every flavor here.
    MODE = 'required'
    #: Whether a move goes to a destination half busy
    #: (:meth:`prepare_destination`), where the first free pair, which
    #: Nova claims, is the partition beside another server's pair.
    BUSY_DESTINATION = False

    def setUp(self):
        super().setUp()
        self.cap_placement(placement_cases.PER_HOST * len(HOSTS))
        #: (server UUID, host) -> Fabric Manager partitions active as its
        #: domain started there (empty without Fabric Manager).
        self.at_start: dict[tuple[str, str], set[int]] = {}
        original = fakelibvirt.Domain.createWithFlags

        def create(domain, flags):
            host = domain._connection.hostname
            self.at_start[(domain.UUIDString(), host)] = self.active(host)
            return original(domain, flags)

        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'createWithFlags', create))
        self.skip_disk_copy()
        self.start_hosts()
        self.pair = self.flavor(2, self.MODE)
        self.four = self.flavor(4, self.MODE)

    def start_hosts(self) -> None:
        raise NotImplementedError

    def active(self, host: str) -> set[int]:
        """Partitions the host's Fabric Manager has active (none here)."""
        return set()

    def assert_one_group(self, server: dict, gpus: int) -> str:
        """The server's GPUs are one host clique, and one in the guest.

        They are the GPUs placement allocated to it, which the scheduler
        chose: on a move too, where Nova's claim ignores placement
        (test_nova_move_claims) and our filter has placement allocate
        what Nova claims.
        """
        host = self.host_of(server)
        claimed = self.gpus(server)
        self.assertEqual(gpus, len(claimed), claimed)
        self.assertEqual(self.allocated_gpus(server, host), claimed)
        ids = discovery.evaluate(self.topologies[host], CONF).cliques.ids
        self.assertEqual(1, len({ids[gpu] for gpu in claimed}), ids)
        self.assertIsNotNone(ids[claimed[0]])
        guest = layout.gpu_cliques(self.domain_xml(server))
        self.assertEqual(set(claimed), set(guest))
        self.assertEqual(1, len(set(guest.values())), guest)
        return host

    def assert_started(self, server: dict, gpus: int) -> str:
        """ACTIVE on one clique, its domain started since :meth:`step`."""
        server = self._show_server(server)
        self.assertEqual('ACTIVE', server['status'])
        host = self.assert_one_group(server, gpus)
        self.assertIn((server['id'], host), self.at_start)
        return host

    def step(self) -> None:
        """Forget earlier domain starts and definitions."""
        self.at_start.clear()

    def held(self, server: dict) -> int | None:
        """The server's Fabric Manager partition (none here)."""
        return None

    def assert_released(self, host: str, held: int | None) -> None:
        """``held`` (:meth:`held`) is no longer active on ``host``."""

    def assert_kept(self, host: str, server: dict) -> None:
        """The server's partition is active on ``host`` (Fabric Manager)."""

    def test_create_and_in_place_operations(self):
        """``--min 2``, hard reboot, compute restart, rebuild, unshelve.

        The batch's pairs land a host each if need be; the first then
        goes through the rest.
        """
        self.step()
        server = self.assert_batch(2)[0]
        host = self.assert_started(server, 2)
        self.step()
        server = self._reboot_server(server, hard=True)
        self.assertEqual(host, self.assert_started(server, 2))
        self.restart_compute_service(host)
        server = self._show_server(server)
        self.assertEqual('ACTIVE', server['status'])
        self.assert_one_group(server, 2)
        self.assert_kept(host, server)
        self.step()
        server = self._reboot_server(server, hard=True)
        self.assert_started(server, 2)
        self.step()
        server = self._rebuild_server(server, self.q35_image_with())
        self.assertEqual(host, self.assert_started(server, 2))
        held = self.held(server)
        self._shelve_server(server)
        self.assert_released(host, held)
        self.step()
        server = self._unshelve_server(server)
        self.settle(server)
        self.assert_started(server, 2)
        self.assert_not_rescheduled()

    def move(self, server: dict, flavor: str | None, gpus: int,
             finish: str) -> dict:
        """Resize to ``flavor`` (None: cold migrate), then ``finish`` it.

        The destination's domain starts with its own partition active;
        confirm releases the source's; revert starts the source's domain
        again with its partition active and releases the destination's.
        """
        source = self.host_of(server)
        before = len(self.gpus(server))
        held = self.held(server)
        self.step()
        if flavor is None:
            server = self._migrate_server(server)
        else:
            server = self._resize_server(server, flavor)
        dest = self.host_of(server)
        self.assertNotEqual(source, dest)
        self.assertEqual(dest, self.assert_one_group(server, gpus))
        self.assertIn((server['id'], dest), self.at_start)
        self.assert_kept(dest, server)
        dest_held = self.held(server)
        self.step()
        if finish == 'revert':
            server = self._revert_resize(server)
            self.settle(server)
            self.assertEqual(source, self.assert_started(server, before))
            self.assert_kept(source, server)
            self.assert_released(dest, dest_held)
        else:
            server = self._confirm_resize(server)
            self.settle(server)
            self.assertEqual(dest, self.assert_one_group(server, gpus))
            self.assert_released(source, held)
            self.assert_kept(dest, server)
        return server

    def test_resize_up(self):
        """2 to 4 GPUs, reverted, then confirmed."""
        server = self.boot_settled(self.pair)
        self.assert_one_group(server, 2)
        server = self.move(server, self.four, 4, 'revert')
        self.move(server, self.four, 4, 'confirm')
        self.assert_not_rescheduled()

    def other_host(self, server: dict) -> str:
        (other,) = set(HOSTS) - {self.host_of(server)}
        return other

    def prepare_destination(self, server: dict) -> None:
        """With :attr:`BUSY_DESTINATION`, the other host half busy.

        A server without GPUs on all CPUs of one socket, a ``required``
        pair on the other's GPUs: a guest fits only that socket, whose
        first free pair is the partition beside the pair.
        """
        if not self.BUSY_DESTINATION:
            return
        host = self.other_host(server)
        self.boot_settled(self.gpu_flavor(0, vcpus=scheduling.SOCKET_CPUS),
                          host=host)
        neighbour = self.boot_settled(self.pair, host=host)
        self.assert_one_group(neighbour, 2)

    def test_resize_down(self):
        """4 to 2 GPUs, reverted, then confirmed."""
        server = self.boot_settled(self.four)
        self.assert_one_group(server, 4)
        self.prepare_destination(server)
        server = self.move(server, self.pair, 2, 'revert')
        self.move(server, self.pair, 2, 'confirm')
        self.assert_not_rescheduled()

    def test_cold_migration(self):
        """Migrated and reverted, then migrated and confirmed."""
        server = self.boot_settled(self.pair)
        self.assert_one_group(server, 2)
        self.prepare_destination(server)
        server = self.move(server, None, 2, 'revert')
        self.move(server, None, 2, 'confirm')
        self.assert_not_rescheduled()

    def test_unshelve_after_cold_migration(self):
        """Nova's claim ignores placement on this unshelve too.

        The move gave the server PCI request IDs its request spec does not
        know (test_nova_move_claims).
        """
        server = self.boot_settled(self.pair)
        self.assert_one_group(server, 2)
        self.prepare_destination(server)
        server = self.move(server, None, 2, 'confirm')
        # Either host may take it back: the source half busy too.
        self.prepare_destination(server)
        self._shelve_server(server)
        # Nova frees the moved server's PCI devices on its host only in
        # the resource tracker's periodic update (until then the
        # unshelved domain gets them too): Nova's, not ours.
        self._run_periodics()
        self.step()
        server = self._unshelve_server(server)
        self.settle(server)
        host = self.assert_started(server, 2)
        self.assert_kept(host, server)
        self.assert_not_rescheduled()

    def test_evacuation(self):
        server = self.boot_settled(self.pair)
        source = self.assert_one_group(server, 2)
        self.prepare_destination(server)
        held = self.held(server)
        (dest,) = set(HOSTS) - {source}
        self.computes[source].stop()
        service = self.computes[source].service_ref.uuid
        self.api.put_service(service, {'forced_down': True})
        self.step()
        with self.api_microversion(EVACUATE_MICROVERSION):
            server = self._evacuate_server(server, expected_host=dest,
                                           expected_state='ACTIVE')
        self.settle(server)
        self.assertEqual(dest, self.assert_started(server, 2))
        self.assert_kept(dest, server)
        # The source comes back: it destroys the evacuated domain.
        self.restart_compute_service(source)
        self.api.put_service(service, {'forced_down': False})
        self.assert_released(source, held)
        self.assert_not_rescheduled()

    def boot_batch(self, count: int, flavor: str) -> list[dict]:
        """``openstack server create --min N --max N``: the servers."""
        reservation = self.api.post_server({'server': {
            'name': 'batch', 'imageRef': self.q35_image,
            'flavorRef': flavor, 'networks': 'none',
            'min_count': count, 'max_count': count,
            'return_reservation_id': True}})['reservation_id']
        servers = self.api.get_servers(
            search_opts={'reservation_id': reservation})
        self.assertEqual(count, len(servers))
        return [self.final_state(server) for server in servers]

    def final_state(self, server: dict) -> dict:
        """The server once ACTIVE or ERROR, and its compute done."""
        found = [server]

        def done() -> bool:
            found[0] = self._show_server(server)
            return found[0]['status'] in SETTLED

        waits.until(done, lambda: 'server %s to be ACTIVE or ERROR; it is '
                    '%s' % (server['id'], found[0]['status']))
        self.settle(server)
        return found[0]

    def assert_batch(self, count: int) -> list[dict]:
        """``count`` pairs in one request, each ACTIVE on one clique."""
        servers = self.boot_batch(count, self.pair)
        for server in servers:
            self.assertEqual('ACTIVE', server['status'], server.get('fault'))
            self.assertEqual(server['OS-EXT-SRV-ATTR:host'],
                             self.assert_started(server, 2))
        self.assert_not_rescheduled()
        return servers

    def test_multi_create_packs(self):
        """``--min 3`` pairs on two hosts: two of them share one."""
        self.assert_batch(3)

    def provider_traits(self, host: str) -> dict:
        return self.placement.get(
            '/resource_providers/%s/traits' % self.compute_rp_uuids[host],
            version='1.6').body

    def remove_our_traits(self, host: str) -> None:
        """What an operator's rollback does: our traits off the provider."""
        found = self.provider_traits(host)
        self.placement.put(
            '/resource_providers/%s/traits' % self.compute_rp_uuids[host],
            {'traits': sorted(set(found['traits']) - traits.OWNED),
             'resource_provider_generation':
                 found['resource_provider_generation']},
            version='1.6')

    def switch_driver(self, host: str, compute_driver: str) -> None:
        """nova.conf's compute_driver changed, nova-compute restarted."""
        self.flags(compute_driver=compute_driver)
        self.restart_compute_service(host)

    def test_driver_switch_both_ways(self):
        """Rolled back to Nova's driver and enabled again, server running."""
        server = self.boot_settled(self.pair)
        host = self.assert_one_group(server, 2)
        self.switch_driver(host, STOCK_DRIVER)
        self.assertEqual('ACTIVE', self._show_server(server)['status'])
        self.remove_our_traits(host)
        self.step()
        server = self._reboot_server(server, hard=True)
        # Nova's own driver: the GPUs, nothing of ours in the XML.
        self.assertEqual(2, len(self.gpus(server)))
        self.assert_no_additions(self.domain_xml(server))
        self.switch_driver(host, OUR_DRIVER)
        self.assertEqual('ACTIVE', self._show_server(server)['status'])
        self.assertIn(traits.GPU_P2P,
                      self.provider_traits(host)['traits'])
        self.step()
        server = self._reboot_server(server, hard=True)
        self.assertEqual(host, self.assert_started(server, 2))
        self.assert_kept(host, server)
        self.assert_not_rescheduled()


class _SysfsMatrix(_OperationsMatrix):
    """The corpus host at PHB: two cliques of four GPUs, one a socket."""

    LEVEL = 'PHB'

    def start_hosts(self) -> None:
        for host in HOSTS:
            self.start_host(host, self.LEVEL)


class _FabricManagerMatrix(_OperationsMatrix):
    """The HGX board: each compute with its own Fabric Manager."""

    PARTITIONED = True
    #: Moves to an empty board: the tests below.
    BUSY_DESTINATION = True

    def start_hosts(self) -> None:
        self.fms = fake_fabric.fabric_managers(self, HOSTS)
        with open(CONF.gpu_p2p.module_id_file, 'w') as f:
            # What NVML recorded while the GPUs were on nvidia.
            json.dump({'module_ids': fake_fabric.MODULE_IDS}, f)
        self.flags(p2p_level='SYS', group='gpu_p2p')
        for host in HOSTS:
            self.start_gpu_compute(
                host, scheduling.HGX_HOST, gpu_p2p_options=dict(
                    fake_fabric.compute_options(self.fms[host]),
                    p2p_level='SYS'))

    def active(self, host: str) -> set[int]:
        return self.fms[host].active()

    def restart_with_old_entries(self, host: str) -> None:
        """Its nova-compute restarted on entries without the order tags.

        As ``topology --device-spec`` printed them before the tags: the
        restarted tracker meets its free GPUs in PCI address order, as
        it reads them from its database.
        """
        self.ORDER_TAGS = False
        gpus = self.computes[host].manager.driver.host_gpus
        self.flags(device_spec=self.device_spec_values(
            gpus.topology, gpus.cliques.ids), group='pci')
        self.restart_compute_service(host)

    def partition(self, server: dict) -> int:
        found = partitions.exact(scheduling.PARTITIONS, self.gpus(server))
        self.assertIsNotNone(found, self.gpus(server))
        return found.id

    def assert_one_group(self, server: dict, gpus: int) -> str:
        """And exactly one partition, active when its domain started."""
        host = super().assert_one_group(server, gpus)
        started = self.at_start.get((server['id'], host))
        if started is not None:
            self.assertIn(self.partition(server), started)
        return host

    def assert_kept(self, host: str, server: dict) -> None:
        self.assertIn(self.partition(server), self.fms[host].active())

    def held(self, server: dict) -> int:
        return self.partition(server)

    def assert_released(self, host: str, held: int | None) -> None:
        self.assertNotIn(held, self.fms[host].active())


class _MatrixTestBase(layout.LayoutAssertions,
                      scheduling.CliqueSchedulingBase):
    """Nova's cloud under the matrix mixins (they come first)."""


class SysfsRequiredTest(_SysfsMatrix, _MatrixTestBase):
    MODE = 'required'


class SysfsAutoTest(_SysfsMatrix, _MatrixTestBase):
    MODE = 'auto'


class FabricManagerRequiredTest(_FabricManagerMatrix, _MatrixTestBase):
    MODE = 'required'

    def test_cold_migration_to_an_empty_board(self):
        """Nova's first free pair there is a partition: the driver's order.

        The destination's tracker met its GPUs in the order the driver
        reports them (:mod:`nova_gpu_p2p.claim_order`), each node's
        pair partitions adjacent; in PCI address order, Nova's own, the first
        free pair is modules 2 and 3, no partition, and the move is
        refused (:meth:`test_move_refused_where_nova_claims_no_partition`).
        """
        server = self.boot_settled(self.pair)
        self.assert_one_group(server, 2)
        server = self.move(server, None, 2, 'revert')
        self.move(server, None, 2, 'confirm')
        self.assert_not_rescheduled()

    def test_resize_down_to_an_empty_board(self):
        server = self.boot_settled(self.four)
        self.assert_one_group(server, 4)
        self.move(server, self.pair, 2, 'confirm')
        self.assert_not_rescheduled()

    def test_move_refused_where_nova_claims_no_partition(self):
        """A restarted empty board's first free pair is no partition.

        Without the order tags its nova-compute meets its free GPUs in PCI
        address order, whatever order the driver reports: Nova would
        claim modules 2 and 3 there whatever placement allocated, so the
        move is refused; the server stays running where it is, on its
        GPUs. With the tags (test_restart_matrix), or on a Nova with the
        fix, the move lands on a partition.
        """
        if nova_fix.carried():
            self.skipTest('Nova carries %s' % nova_fix.NAME)
        server = self.boot_settled(self.pair)
        source = self.assert_one_group(server, 2)
        self.restart_with_old_entries(self.other_host(server))
        before = (self.gpus(server), self.allocated_gpus(server, source))
        self.step()
        error = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'migrate': None})
        self.assertIn('NoValidHost', str(error))
        # One line, at WARNING, says why.
        self.assertIn('refused for the move of instance %s: the GPUs Nova '
                      'claims there' % server['id'],
                      self.stdlog.logger.output)
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(source, self.host_of(server))
        self.assertEqual(before, (self.gpus(server),
                                  self.allocated_gpus(server, source)))
        self.assertEqual({}, self.at_start)
        self.assert_kept(source, server)
        self.assertEqual(
            (), self.allocated_gpus(server, self.other_host(server)))


class FabricManagerAutoTest(_FabricManagerMatrix, _MatrixTestBase):
    MODE = 'auto'

    def test_move_where_nova_claims_no_partition(self):
        """Placement holds what Nova claims: a restarted board's first pair.

        Modules 2 and 3 (PCI address order, which a restarted nova-compute
        meets its free GPUs in without the order tags), no partition: each
        GPU gets a partition of its own, as ``auto`` allows, and no other
        GPU is held. Not with the tags, nor on a Nova with the fix
        (test_restart_matrix).
        """
        if nova_fix.carried():
            self.skipTest('Nova carries %s' % nova_fix.NAME)
        server = self.boot_settled(self.pair)
        source = self.assert_one_group(server, 2)
        self.restart_with_old_entries(self.other_host(server))
        server = self._migrate_server(server)
        dest = self.host_of(server)
        self.assertNotEqual(source, dest)
        first = (hosts.HGX_MODULES[2], hosts.HGX_MODULES[3])
        self.assertEqual(first, self.gpus(server))
        self.assertEqual(first, self.allocated_gpus(server, dest))
        self.assertIsNone(partitions.exact(scheduling.PARTITIONS, first))
        self.assertIn('are not one Fabric Manager partition',
                      self.stdlog.logger.output)
        server = self._confirm_resize(server)
        self.settle(server)
        self.assertEqual(first, self.gpus(server))
        self.assertEqual(first, self.allocated_gpus(server, dest))
