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

"""The benchmark's cloned hosts are hosts to placement and the scheduler.

``tox -e bench -- select_destinations_cloned`` times 1000-host clouds of
which all but a few hosts are clones of a real compute's records
(:mod:`lab.cloned_hosts`); its numbers hold only if Nova's scheduler and
placement treat a clone as the crowded host it stands for. One real
compute and two clones, each clone with one GPU of each clique held.
"""

import fixtures
from nova import context as nova_context
from nova import objects

from lab import select_bench_cloud
from nova_gpu_p2p import traits
from tests.fixtures import waits


class ClonedHostsTest(select_bench_cloud.SelectCloud):

    hosts = 3
    real_hosts = 1
    busy = False
    free_trait = True

    def _root(self, hostname: str) -> dict:
        return self.placement.get(
            '/resource_providers?name=%s' % hostname,
            version='1.14').body['resource_providers'][0]

    def test_a_clone_is_the_crowded_host_it_stands_for(self):
        context = nova_context.get_admin_context()
        clone = self.names[1]
        held = self.used[clone]
        self.assertEqual(len(self.groups), len(held))
        node = objects.ComputeNode.get_by_host_and_nodename(
            context, clone, clone)
        root = self._root(clone)
        self.assertEqual(root['uuid'], node.uuid)
        tree = {rp['uuid']: rp for rp in self.placement.get(
            '/resource_providers?in_tree=%s' % root['uuid'],
            version='1.14').body['resource_providers']}
        # Nova's PCI pools: the held GPUs' at 0, each on a GPU provider of
        # the clone's own tree.
        pools = {pool.tags['address']: pool for pool in node.pci_device_pools}
        self.assertEqual(held, {address for address, pool in pools.items()
                                if pool.count == 0})
        for address, pool in pools.items():
            self.assertEqual('%s_%s' % (clone, address),
                             tree[pool.tags['rp_uuid']]['name'])
        # Placement: the held GPUs used, the free sizes of three per
        # clique reported, not four.
        usages = self.placement.get(
            '/resource_providers/%s/usages' % root['uuid'], version='1.14')
        self.assertEqual(0, sum(usages.body['usages'].values()))
        used = [rp for rp in tree if sum(self.placement.get(
            '/resource_providers/%s/usages' % rp,
            version='1.14').body['usages'].values())]
        self.assertEqual(held, {tree[rp]['name'][len(clone) + 1:]
                                for rp in used})
        names = set(self.placement.get(
            '/resource_providers/%s/traits' % root['uuid'],
            version='1.6').body['traits'])
        self.assertIn(traits.GPU_P2P_FREE[3], names)
        self.assertNotIn(traits.GPU_P2P_FREE[4], names)

    def test_the_scheduler_takes_a_clone_where_it_fits_best(self):
        # A pair leaves one GPU free in a clone's clique of three free,
        # two in the real host's four: the best fit is a clone. No
        # nova-compute serves it: the build cast goes nowhere, as to a
        # host that is down, and the scheduler's claim in placement shows
        # where the server went.
        self.useFixture(fixtures.MockPatch(
            'nova.compute.rpcapi.ComputeAPI.build_and_run_instance'))
        server = self.api.post_server({'server': self._build_server(
            flavor_id=self.bench_flavor(2, required=True),
            image_uuid=self.q35_image, networks='none')})
        path = '/allocations/%s' % server['id']

        def allocations() -> dict:
            return self.placement.get(path, version='1.28').body[
                'allocations']

        waits.until(allocations, lambda: 'no allocation for %s' % path)
        roots = {self._root(name)['uuid']: name for name in self.names}
        providers = self.placement.get(
            '/resource_providers', version='1.14').body['resource_providers']
        by_uuid = {rp['uuid']: rp for rp in providers}
        claimed = [by_uuid[rp] for rp in allocations()
                   if by_uuid[rp]['parent_provider_uuid']]
        host = {roots[rp['root_provider_uuid']] for rp in claimed}
        self.assertEqual(1, len(host))
        host, = host
        self.assertIn(host, self.names[1:])
        gpus = {rp['name'][len(host) + 1:] for rp in claimed}
        group = self.one_group(gpus)
        self.assertIsNotNone(group)
        # One GPU of the clique left free: the tightest fit there is.
        self.assertEqual(1, len(self._free(host) & group) - len(gpus))
        self.api.delete_server(server['id'])
