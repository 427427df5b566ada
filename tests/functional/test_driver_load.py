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

"""nova-compute loads our driver by name and boots servers through it."""

import fixtures
from lxml import etree

from nova_gpu_p2p.compute import driver
from nova_gpu_p2p.topology import sysfs
from tests.cloud import nova_cloud as base
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.fixtures import waits


class DriverLoadTest(waits.PatientWaits, base.GPUP2PServersTestBase):

    def test_compute_service_runs_our_driver(self):
        self.start_compute('compute1')
        loaded = self.computes['compute1'].manager.driver
        self.assertIs(driver.GPUP2PLibvirtDriver, type(loaded))

    def test_server_boots_through_nova_libvirt_path(self):
        self.start_compute('compute1')
        flavor_id = self._create_flavor(extra_spec={
            'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'})
        server = self._create_server(flavor_id=flavor_id, networks='none')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])

        conn = self.computes['compute1'].driver._host.get_connection()
        domain = etree.fromstring(
            conn.lookupByUUIDString(server['id']).XMLDesc(0))
        # Nova's own pinning reached the domain: one vcpupin per vCPU of
        # the two-vCPU flavor, and a NUMA memory policy.
        self.assertEqual(2, len(domain.findall('./cputune/vcpupin')))
        self.assertIsNotNone(domain.find('./numatune/memory'))


class TopologyRefreshTest(waits.PatientWaits, base.GPUP2PServersTestBase):
    """Discovery is cached and re-read on Nova's periodic update."""

    def use_host(self, name):
        tree = self.useFixture(sysfs_builder.SysfsTree(hosts.HOSTS[name]))
        self.flags(sysfs_root=tree.root, group='gpu_p2p')
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            sysfs.read_config_direct))

    def test_periodic_update_refreshes_the_cache(self):
        self.use_host('pcie-8gpu-4switch-2socket')
        self.start_compute('compute1')
        compute_driver = self.computes['compute1'].driver
        first = compute_driver.host_gpus
        self.assertEqual(4, len(first.cliques.groups))
        self.assertIs(first, compute_driver.host_gpus)

        self.use_host('acs-redirect-switch')
        self.assertIs(first, compute_driver.host_gpus)
        self._run_periodics()
        second = compute_driver.host_gpus
        self.assertIsNot(first, second)
        self.assertEqual(
            sorted(hosts.EXPECTED['acs-redirect-switch'].addresses),
            sorted(second.cliques.ids))

    def test_failed_discovery_keeps_nova_working(self):
        self.flags(sysfs_root='/nonexistent', group='gpu_p2p')
        self.start_compute('compute1')
        compute_driver = self.computes['compute1'].driver
        self.assertIn('/nonexistent', compute_driver.host_gpus.error)
        self._create_server(networks='none')
        self.assertEqual(
            1, self.stdlog.logger.output.count(
                'GPU topology discovery with'))
