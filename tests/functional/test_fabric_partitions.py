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

"""Fabric Manager partitions follow the servers on an HGX host, with Nova.

The HGX corpus host (module IDs not in PCI order,
:data:`tests.fixtures.hosts.HGX_MODULES`) runs the ``fabricmanager``
topology backend against the stand-in Fabric Manager library; the
scheduler gives each ``required`` flavor one partition (the device_spec
entries carry them, as ``topology --device-spec`` prints them). Each
domain start records what Fabric Manager had active at that moment.
"""

import json
import os

import fixtures
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt

from lab import placement_cases
from nova_gpu_p2p.compute import outage
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.topology import pci_ids
from tests.cloud import fake_fabric
from tests.cloud import nova_cloud as base
from tests.cloud import scheduling
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.functional import test_guest_config as layout

CONF = nova_conf.CONF
LOST = 'keeps running without what its flavor requires'


class _FabricBase(scheduling.CliqueSchedulingBase):
    """One HGX compute with its own stand-in Fabric Manager."""

    #: As doc/source/scheduling-scale.rst recommends, with its cap.
    OURS_FIRST = True
    PARTITIONED = True

    def setUp(self):
        super().setUp()
        if not self.PCI_IN_PLACEMENT:
            self.flags(report_in_placement=False, group='pci')
        # As doc/source/scheduling-scale.rst recommends, for one host.
        self.cap_placement(placement_cases.PER_HOST)
        self.fm = fake_fabric.fabric_manager(self, self.BOARD)
        with open(CONF.gpu_p2p.module_id_file, 'w') as f:
            # What NVML recorded while the GPUs were on nvidia.
            json.dump({'module_ids': fake_fabric.MODULE_IDS}, f)
        self.flags(p2p_level='SYS', group='gpu_p2p')
        #: Server UUID -> the partitions active as its domain started.
        self.at_start: dict[str, set[int]] = {}
        original = fakelibvirt.Domain.createWithFlags

        def create(domain, flags):
            self.at_start[domain.UUIDString()] = self.fm.active()
            return original(domain, flags)

        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'createWithFlags', create))
        self.topology = self.start_gpu_compute('host1',
                                               scheduling.HGX_HOST)

    def partition(self, server: dict) -> int:
        """The partition that is exactly the server's GPUs."""
        found = partitions.exact(scheduling.board_partitions(self.BOARD),
                                 self.gpus(server))
        self.assertIsNotNone(found, self.gpus(server))
        return found.id

    def assert_started_on_its_partition(self, server: dict) -> int:
        partition = self.partition(server)
        self.assertIn(partition, self.at_start[server['id']])
        return partition

    def log_lines(self, text: str) -> list[str]:
        return [line for line in self.stdlog.logger.output.splitlines()
                if text in line]

    def check_each_size_on_exactly_its_partition(self):
        servers = [self.boot_settled(self.flavor(gpus)) for gpus in (1, 2, 4)]
        held = [self.assert_started_on_its_partition(s) for s in servers]
        by_id = {p.id: p for p in scheduling.board_partitions(self.BOARD)}
        self.assertEqual([1, 2, 4], [len(by_id[p].gpus) for p in held])
        self.assertEqual(set(held), self.fm.active())
        for server in servers:
            # Nova's managed hostdevs: libvirt moves each GPU from nvidia
            # to vfio-pci as the domain starts, and back as it stops.
            hostdevs = self.domain_xml(server).findall(
                "./devices/hostdev[@type='pci']")
            self.assertEqual({'yes'}, {h.get('managed') for h in hostdevs})
        for server in servers:
            self.delete(server)
        self.assertEqual(set(), self.fm.active())
        self.assert_not_rescheduled()


class WholeBoardTest(_FabricBase):
    """Eight GPUs of eight: Nova's PCI tracker, not placement, picks.

    Placement would list every order of the eight GPU providers.
    """

    PCI_IN_PLACEMENT = False
    STEERING = False

    def test_whole_board_on_partition_0(self):
        flavor = self.gpu_flavor(8, numa_nodes=2, vcpus=2, extra_specs={
            layout.CLIQUE_KEY: 'required'})
        whole = self.boot_settled(flavor)
        self.assertEqual(0, self.assert_started_on_its_partition(whole))
        self.assertEqual({0}, self.fm.active())
        self.delete(whole)
        self.assertEqual(set(), self.fm.active())


class FabricPartitionsTest(_FabricBase):

    def test_each_size_on_exactly_its_partition(self):
        self.check_each_size_on_exactly_its_partition()

    def test_stale_partition_refuses_then_is_cleared(self):
        self.fm.force_active(0)  # the whole board, behind Nova's back
        server = self.boot_settled(self.flavor(2), expected_state='ERROR')
        self.assertIn('Exceeded maximum number of retries',
                      server['fault']['message'])
        refusal, = self.log_lines(
            'ERROR [nova_gpu_p2p.compute.driver] GPU P2P: '
            'Fabric Manager partition(s) ')
        self.assertIn('not activated: Fabric Manager '
                      'fmActivateFabricPartition', refusal)
        self.assertIn('FM_ST_IN_USE', refusal)
        self._run_periodics()
        self.assertEqual(set(), self.fm.active())
        self.assertTrue(self.log_lines('Fabric Manager partition 0 '
                                       'deactivated'))
        self.assert_started_on_its_partition(
            self.boot_settled(self.flavor(2)))

    def test_fm_down(self):
        server = self.boot_settled(self.flavor(2))
        partition = self.partition(server)
        self.fm.down()
        refused = self.boot_settled(self.flavor(2), expected_state='ERROR')
        self.assertIn('Exceeded maximum number of retries',
                      refused['fault']['message'])
        self.assertTrue(self.log_lines('FM_ST_CONNECTION_NOT_VALID'))
        self.assertEqual([], self.log_lines(LOST))
        # An existing server starts anyway, with one warning.
        server = self._reboot_server(server, hard=True)
        self.assertEqual('ACTIVE', server['status'])
        lost, = self.log_lines(LOST)
        self.assertIn('no NVLink, and maybe no CUDA', lost)
        # Fabric Manager kept the routes it had while unreachable.
        self.assertEqual({partition}, self.fm.active())

    def test_fm_outage_reported_once_and_left_promptly(self):
        server = self.boot_settled(self.flavor(2))
        self.fm.down()
        self._run_periodics()
        # The cached discovery error and the failed activation: one report.
        server = self._reboot_server(server, hard=True)
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(1, len(self.log_lines(LOST)))
        self._reboot_server(server, hard=True)
        self.assertEqual(1, len(self.log_lines(LOST)))
        # Fabric Manager answers: the next build gets in, before any
        # periodic update (the unit tests check the rate limit).
        self.computes['host1'].driver._rediscovery = outage.Retry(0)
        self.fm.up()
        self.assert_started_on_its_partition(
            self.boot_settled(self.flavor(2)))

    def test_fm_restart_told_the_running_servers_partitions(self):
        servers = [self.boot_settled(self.flavor(gpus)) for gpus in (2, 4)]
        held = {self.partition(server) for server in servers}
        # Restart mode: the routes stay; partition calls wait for the list.
        self.fm.restart()
        self.assertEqual(held, self.fm.active())
        before = len(self.fm.calls())
        self._run_periodics()
        self.assertEqual('up', self.fm.mode())
        self.assertEqual(held, self.fm.active())
        told = 'fmSetActivatedFabricPartitions %s 0' % ','.join(
            map(str, sorted(held)))
        calls = self.fm.calls()[before:]
        self.assertIn(told, calls)
        # Nothing but a refused query came before the list.
        self.assertEqual(
            ['fmGetSupportedFabricPartitions -8'],
            [c for c in calls[:calls.index(told)]
             if not c.startswith(('fmConnect', 'fmDisconnect'))])
        for server in servers:
            self.assertEqual('ACTIVE', self._show_server(server)['status'])
        # A new build then starts with its own partition active.
        pair = self.boot_settled(self.flavor(2))
        self.assertIn(self.assert_started_on_its_partition(pair),
                      self.fm.active())
        self.assertEqual([], self.log_lines(LOST))
        self.assert_not_rescheduled()

    def test_host_reboot_restores_the_partitions(self):
        servers = [self.boot_settled(self.flavor(gpus)) for gpus in (1, 2)]
        held = {self.partition(server) for server in servers}
        self.flags(resume_guests_state_on_host_boot=True)
        # The host rebooted: Fabric Manager starts afresh, libvirt has no
        # domain until Nova resumes them.
        self.fm = fake_fm.FakeFM(os.path.dirname(self.fm.address),
                                 fake_fabric.BOARD)
        self.at_start.clear()
        self.restart_compute_service(
            'host1', host_info=base.host_info(self.topology),
            pci_info=base.pci_info(self.topology),
            libvirt_version=base.LIBVIRT_VERSION,
            qemu_version=base.QEMU_VERSION, keep_hypervisor_state=False)
        for server in servers:
            self._wait_for_state_change(server, 'ACTIVE')
            self.assert_started_on_its_partition(server)
        self.assertEqual(held, self.fm.active())
        self.assertEqual([], self.log_lines(LOST))


#: The B200 board's partitions, numbered from 1 as NVIDIA numbers them.
class B200BoardTest(_FabricBase):
    """An HGX B200 board, named from Debian 12's PCI ID database.

    That database (the tests' lines of it) does not name 10de:2901; the
    GPUs are 3D controllers on NVIDIA's boards, so they keep their
    cliques and partition tags by default, and each size gets exactly its
    partition.
    """

    BOARD = 'b200'

    def setUp(self):
        self.useFixture(fixtures.MockPatchObject(hosts, 'HOSTS', dict(
            hosts.HOSTS, **{scheduling.HGX_HOST: hosts.HGX_B200})))
        super().setUp()

    def test_each_size_on_exactly_its_partition(self):
        self.assertNotIn(
            0x2901, pci_ids.read(CONF.gpu_p2p.pci_ids_file).names)
        self.check_each_size_on_exactly_its_partition()
