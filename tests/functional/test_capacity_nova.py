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

"""``openstack gpu p2p capacity`` over a cloud that Nova filled.

Real Nova services and placement, GPUs in placement with their clique
and partition traits as the driver's device_spec entries put them there,
real servers created, deleted and cold-migrated; the command run as
``openstack`` against that placement (``auth_type: none``), its numbers
checked against a brute-force count of the same placement data, and
``--plan``'s commands carried out through Nova's API.
"""

import json

import fixtures

from lab import capacity_cloud as cloud
from lab import placement_cases
from nova_gpu_p2p import capacity
from nova_gpu_p2p import extra_specs
from tests.cloud import scheduling
from tests.fixtures import capacity_brute as brute
from tests.functional import test_operations_matrix as matrix


class _CapacityBase(matrix.Moves, scheduling.CliqueSchedulingBase):

    #: The recommended scheduler settings (scheduling-scale.rst): our
    #: filter first, placement capped per host. Uncapped, four of eight
    #: free GPUs are 1680 candidates, which took Nova 33's scheduler past
    #: its RPC timeout on a busy machine.
    OURS_FIRST = True

    def setUp(self):
        super().setUp()
        self.cap_placement(placement_cases.PER_HOST)
        self.skip_disk_copy()
        cloud.allow_reads()
        directory = self.useFixture(fixtures.TempDir()).path
        self.clouds = cloud.clouds_yaml(directory,
                                        self.placement_fixture.endpoint)

    def capacity(self, *argv: str):
        code, out, err = cloud.run_openstack(
            ['gpu', 'p2p', 'capacity', '-f', 'json', *argv], self.clouds)
        self.assertEqual(0, code, err[-2000:])
        return json.loads(out)

    def assert_counts(self) -> list[dict]:
        """The command's per-size table is the brute-force one."""
        truth = brute.read_placement(lambda path: self.placement.get(
            path, version='1.14').body)
        expected = brute.table(truth, capacity.SIZES)
        self.assertEqual(expected, self.capacity())
        return expected

    def required(self, gpus: int) -> str:
        if gpus < 8:
            return self.flavor(gpus)
        # Eight GPUs of two sockets: two guest NUMA nodes.
        return self.gpu_flavor(gpus, numa_nodes=2, vcpus=2, extra_specs={
            extra_specs.CLIQUE_KEY: 'required'})


class SysfsHostsTest(_CapacityBase):
    """Pairs (PXB), quads (PHB) and an eight (SYS) of the PCIe corpus."""

    def setUp(self):
        super().setUp()
        for host, level in (('host1', 'PXB'), ('host2', 'PHB'),
                            ('host3', 'SYS')):
            self.start_host(host, level)

    def test_counts_why_and_a_plan_carried_out(self):
        rows = {r['Size']: r for r in self.assert_counts()}
        self.assertEqual((24, 12, 4, 1), (
            rows[1]['Free GPUs'], rows[2]['Placeable'], rows[4]['Placeable'],
            rows[8]['Placeable']))
        self.boot_settled(self.required(2), host='host1')
        quad = self.boot_settled(self.required(4), host='host2')
        ones = [self.boot_settled(self.required(1), host='host3')
                for _ in range(2)]
        rows = {r['Size']: r for r in self.assert_counts()}
        self.assertEqual(0, rows[8]['Placeable'])
        self._delete_server(quad)
        self.settle(quad)
        self.assert_counts()
        # A move: a one-GPU server from the eight to the pairs host.
        moved = self._migrate_server(ones[1], host='host1')
        moved = self._confirm_resize(moved)
        self.settle(moved)
        self.assertEqual('host1', self.host_of(moved))
        rows = {r['Size']: r for r in self.assert_counts()}
        self.assertGreater(rows[2]['Stranded GPUs'], 0)
        # Eight GPUs: only host3 has a clique of eight; ones[0] blocks it.
        why = self.capacity('--why', '8')
        self.assertEqual([('host3', 1, '%s (1 GPUs)' % ones[0]['id'])],
                         [(r['Host'], r['Missing GPUs'], r['Blocked By'])
                          for r in why])
        plan = self.capacity('--plan', '8')
        self.assertEqual([(ones[0]['id'], 'host3')],
                         [(r['Server'], r['From']) for r in plan])
        for move in plan:
            server = self._migrate_server({'id': move['Server']},
                                          host=move['To'])
            self.settle(self._confirm_resize(server))
        self.assertEqual([1], [r['Placeable'] for r in self.capacity()
                               if r['Size'] == 8])
        eight = self.boot_settled(self.required(8))
        self.assertEqual('host3', self.host_of(eight))
        self.assertEqual(8, len(self.gpus(eight)))
        self.assert_counts()


class FabricManagerHostsTest(_CapacityBase):
    """Two HGX boards: servers take whole partitions."""

    PARTITIONED = True

    def setUp(self):
        super().setUp()
        self.flags(p2p_level='SYS', group='gpu_p2p')
        for host in ('host1', 'host2'):
            self.start_gpu_compute(host, scheduling.HGX_HOST,
                                   gpu_p2p_options={'p2p_level': 'SYS'})

    def test_partitions_counted_and_blockers_named(self):
        rows = {r['Size']: r for r in self.assert_counts()}
        self.assertEqual((8, 4, 2), (rows[2]['Placeable'],
                                     rows[4]['Placeable'],
                                     rows[8]['Placeable']))
        pair = self.boot_settled(self.required(2), host='host1')
        one = self.boot_settled(self.required(1), host='host1')
        rows = {r['Size']: r for r in self.assert_counts()}
        self.assertEqual(1, rows[8]['Placeable'])
        why = {r['Host']: r for r in self.capacity('--why', '8')}
        self.assertEqual(0, why['host2']['Missing GPUs'])
        self.assertEqual(3, why['host1']['Missing GPUs'])
        self.assertEqual(sorted(['%s (2 GPUs)' % pair['id'],
                                 '%s (1 GPUs)' % one['id']]),
                         sorted(why['host1']['Blocked By'].split(', ')))
        self._delete_server(pair)
        self.settle(pair)
        self.assert_counts()
