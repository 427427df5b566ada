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

from lxml import etree

from nova_gpu_p2p import driver
from nova_gpu_p2p.tests.functional import base


class DriverLoadTest(base.GPUP2PServersTestBase):

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
        # Nova's own pinning reached the domain unchanged.
        self.assertEqual(1, len(domain.findall('./cputune/vcpupin')) // 2)
        self.assertIsNotNone(domain.find('./numatune/memory'))
