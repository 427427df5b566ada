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

"""GPUP2PCliqueFilter and GPUP2PCliqueFitWeigher on Nova's host states.

Nova's own HostState, PCI stats, weight handler and aggregate multiplier
lookup; the allocation candidates are shaped as placement returns them.
"""

import logging

import fixtures
from nova import conf as nova_conf
from nova import objects
from nova.pci import stats as pci_stats
from nova.scheduler import weights
from nova.tests.unit.scheduler import fakes
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids
import testtools

from nova_gpu_p2p import driver_stat
from nova_gpu_p2p import exception
from nova_gpu_p2p import scheduler
from nova_gpu_p2p.scheduler import host_view
from nova_gpu_p2p.scheduler import nova_support
from tests.unit import base

CONF = nova_conf.CONF
ROOT = 'root-rp'


def _spec(clique='required'):
    extra = {} if clique is None else {'hw:gpu_p2p_clique': clique}
    return objects.RequestSpec(
        flavor=objects.Flavor(extra_specs=extra), num_instances=1)


def _pools(*cliques, used=(), vendor='10de'):
    """One pool per GPU provider gN, as a compute in placement reports."""
    pools = []
    for i, clique in enumerate(cliques):
        pool = {'vendor_id': vendor, 'product_id': '2330', 'numa_node': 0,
                'count': 0 if i in used else 1,
                'address': '0000:%02x:00.0' % (i + 3), 'dev_type': 'type-PCI',
                'rp_uuid': 'g%d' % i}
        if clique is not None:
            pool['gpu_p2p_clique'] = str(clique)
        pools.append(objects.PciDevicePool.from_dict(pool))
    return objects.PciDevicePoolList(objects=pools)


#: An H100 board's partitions of two or more GPUs as providers g0..g7
#: (modules 1..8) carry them: g0 is in the board, the first half and the
#: pair {g0, g2}.
H100_TAGS = ('0:8,1:4,3:2', '0:8,1:4,4:2', '0:8,1:4,3:2', '0:8,1:4,4:2',
             '0:8,2:4,5:2', '0:8,2:4,6:2', '0:8,2:4,5:2', '0:8,2:4,6:2')


def _board_pools(used=()):
    """The board's free GPUs' pools: Nova drops a pool whose GPU is used."""
    pools = _pools(*[0] * 8)
    for pool, tag in zip(pools, H100_TAGS):
        pool.tags['gpu_p2p_partitions'] = tag
    pools.objects = [pool for i, pool in enumerate(pools) if i not in used]
    return pools


def _candidate(*gpus, nic=None):
    mappings = {'': [ROOT]}
    mappings.update(('req-%d' % i, ['g%d' % gpu])
                    for i, gpu in enumerate(gpus))
    if nic:
        mappings['nic-req-0'] = [nic]
    return {'mappings': mappings,
            'allocations': {rp: {} for rps in mappings.values()
                            for rp in rps}}


def _uuid_candidate(request, *gpus):
    """Groups named as Nova names them: ``<request_id>-<n>``."""
    mappings = {'': [ROOT]}
    mappings.update(('%s-%d' % (request, i), ['g%d' % gpu])
                    for i, gpu in enumerate(gpus))
    return {'mappings': mappings,
            'allocations': {rp: {'resources': {'R': 1}}
                            for rps in mappings.values() for rp in rps}}


def _spec_with_groups(request, gpus, clique='required'):
    """A request for ``gpus`` GPUs in Nova's groups, one device each."""
    spec = _spec(clique)
    spec.pci_requests = objects.InstancePCIRequests(requests=[
        objects.InstancePCIRequest(
            count=gpus, request_id=request, alias_name='gpu',
            spec=[{'vendor_id': '10de', 'product_id': '2330'}])])
    spec.requested_resources = [objects.RequestGroup(
        requester_id='%s-%d' % (request, i),
        resources={'CUSTOM_PCI_10DE_2330': 1}) for i in range(gpus)]
    return spec


def _pci_candidate(request, *gpus):
    """:func:`_uuid_candidate` with the GPUs' class, as placement has it."""
    candidate = _uuid_candidate(request, *gpus)
    candidate['allocations'] = {
        rp: {'resources': {'CUSTOM_PCI_10DE_2330': 1} if rp != ROOT
             else {}} for rp in candidate['allocations']}
    return candidate


def _host(name, pools, candidates, aggregates=(),
          stats=driver_stat.reported({'num_instances': '1'})):
    """A host whose compute runs our driver, unless ``stats`` say not."""
    return fakes.FakeHostState(name, name, {
        'pci_stats': pci_stats.PciDeviceStats(None, stats=pools),
        'allocation_candidates': list(candidates),
        'aggregates': list(aggregates), 'uuid': ROOT, 'stats': stats})


class _Base(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(CONF))
        self.conf.config(pci_in_placement=True, group='filter_scheduler')
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.scheduler', level=logging.DEBUG))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.scheduler.nova_support._legacy_warned', False))


class TestFilter(_Base):

    def setUp(self):
        super().setUp()
        self.filter = scheduler.GPUP2PCliqueFilter()
        # The whole order; test_at_most_k_spread_over_the_cliques cuts it.
        self.conf.config(candidates_per_host=0, group='gpu_p2p')

    def test_issue_example(self):
        # Clique 0 = g0..g3 with g3 free, clique 1 = g4, g5 free.
        candidates = [_candidate(3, 4), _candidate(3, 5), _candidate(4, 5),
                      _candidate(5, 4)]
        host = _host('h', _pools(0, 0, 0, 0, 1, 1, used=(0, 1, 2)),
                     candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidates[2], candidates[3]],
                         host.allocation_candidates)

    def test_best_fit_order(self):
        # Clique 0: a free 4-clique; clique 1: a free pair.
        candidates = [_candidate(0, 1), _candidate(0, 4), _candidate(4, 5),
                      _candidate(2, 3)]
        host = _host('h', _pools(0, 0, 0, 0, 1, 1), candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidates[2], candidates[0], candidates[3]],
                         host.allocation_candidates)

    def test_host_dropped_when_nothing_fits(self):
        host = _host('h', _pools(0, 1, None), [_candidate(0, 1),
                                               _candidate(1, 2)])
        self.assertFalse(self.filter.host_passes(host, _spec()))
        self.assertEqual([], host.allocation_candidates)
        self.assertIn('no allocation candidate of', self.log.output)

    def test_gpus_without_tag_are_in_no_clique(self):
        host = _host('h', _pools(None, None), [_candidate(0, 1)])
        self.assertFalse(self.filter.host_passes(host, _spec()))

    def test_partitions_exactly_and_best_fit_first(self):
        # The pair {g0, g2} is used: {g1, g3} keeps the other half whole.
        candidates = [_candidate(1, 4), _candidate(4, 6), _candidate(5, 7),
                      _candidate(3, 1), _candidate(1, 5)]
        host = _host('h', _board_pools(used=(0, 2)), candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidates[3], candidates[1], candidates[2]],
                         host.allocation_candidates)

    def test_free_part_of_a_partition_is_no_fit(self):
        # g1 and g2 are used: g0 and g3 are all that is free of the half.
        host = _host('h', _board_pools(used=(1, 2)), [_candidate(0, 3)])
        self.assertFalse(self.filter.host_passes(host, _spec()))

    def test_gpu_without_partition_tag_on_a_partition_host(self):
        pools = _board_pools()
        del pools[1].tags['gpu_p2p_partitions']
        candidates = [_candidate(1, 3), _candidate(1)]
        host = _host('h', pools, candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidates[1]], host.allocation_candidates)

    def test_other_devices_of_the_candidate_do_not_count(self):
        # A NIC from a second alias, and the compute node's own resources.
        pools = _pools(0, 0, vendor='10de')
        pools.objects.append(objects.PciDevicePool.from_dict(
            {'vendor_id': '15b3', 'product_id': '101e', 'numa_node': 0,
             'count': 4, 'rp_uuid': 'nic', 'address': '0000:81:00.0'}))
        candidate = _candidate(0, 1, nic='nic')
        host = _host('h', pools, [candidate])
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidate], host.allocation_candidates)

    def test_request_without_gpus_passes_untouched(self):
        candidates = [{'mappings': {'': [ROOT]}, 'allocations': {}}]
        host = _host('h', _pools(0, 0), candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual(candidates, host.allocation_candidates)

    def test_a_fitting_candidate_built_when_none_came_back(self):
        # Placement's cap left only candidates across the two cliques.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        candidates = [_pci_candidate(request, 0, 4),
                      _pci_candidate(request, 1, 5)]
        spec = _spec_with_groups(request, 2)
        host = _host('h', _pools(0, 0, 0, 0, 1, 1, 1, 1, used=(2, 3)),
                     candidates)
        self.assertTrue(self.filter.host_passes(host, spec))
        [built] = host.allocation_candidates
        # Clique 0 has two free: the tightest fit.
        self.assertEqual({'': [ROOT], '%s-0' % request: ['g0'],
                          '%s-1' % request: ['g1']}, built['mappings'])
        self.assertEqual({ROOT, 'g0', 'g1'}, set(built['allocations']))
        # Without the request's groups nothing is built: dropped.
        host = _host('h', _pools(0, 0, 0, 0, 1, 1, 1, 1, used=(2, 3)),
                     candidates)
        self.assertFalse(self.filter.host_passes(host, _spec()))

    def test_the_best_fit_built_when_only_a_worse_fit_came_back(self):
        # Placement returned one clique, but the roomier one: clique 1 is
        # free, clique 0 has its last two free.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        candidates = [_pci_candidate(request, 4, 5)]
        spec = _spec_with_groups(request, 2)
        host = _host('h', _pools(0, 0, 0, 0, 1, 1, 1, 1, used=(0, 1)),
                     candidates)
        self.assertTrue(self.filter.host_passes(host, spec))
        built, returned = host.allocation_candidates
        self.assertEqual(['g2', 'g3'], sorted(
            p for suffix, providers in built['mappings'].items() if suffix
            for p in providers))
        self.assertEqual(candidates[0], returned)
        # An equal fit keeps placement's.
        host = _host('h', _pools(0, 0, 0, 0, 1, 1, 1, 1), candidates)
        self.assertTrue(self.filter.host_passes(host, spec))
        self.assertEqual(candidates, host.allocation_candidates)

    def test_a_partition_built_when_none_came_back(self):
        # The pair {g0, g2} is used; placement returned only GPUs of two
        # pairs.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        candidate = _uuid_candidate(request, 1, 4)
        candidate['allocations'] = {
            rp: {'resources': {'CUSTOM_PCI_10DE_2330': 1} if rp != ROOT
                 else {}} for rp in candidate['allocations']}
        spec = _spec()
        spec.requested_resources = [objects.RequestGroup(
            requester_id='%s-%d' % (request, i),
            resources={'CUSTOM_PCI_10DE_2330': 1},
            required_traits={'OWNER_NOVA'}) for i in range(2)]
        host = _host('h', _board_pools(used=(0, 2)), [candidate])
        self.assertTrue(self.filter.host_passes(host, spec))
        [built] = host.allocation_candidates
        self.assertEqual(['g1', 'g3'], sorted(
            p for suffix, providers in built['mappings'].items() if suffix
            for p in providers))

    def test_a_one_node_candidate_built_before_those_across_nodes(self):
        # One clique of eight over two nodes, g0 in use; placement's
        # candidates all span both nodes, node 1 holds four free.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        pools = _pools(*[0] * 8, used=(0,))
        for pool in pools[4:]:
            pool.numa_node = 1
        candidates = [_uuid_candidate(request, 1, 2, 3, 4),
                      _uuid_candidate(request, 1, 2, 4, 5)]
        for candidate in candidates:
            for rp in candidate['allocations']:
                candidate['allocations'][rp] = {'resources': (
                    {'CUSTOM_PCI_10DE_2330': 1} if rp != ROOT else {})}
        for clique in ('required', None):
            spec = _spec(clique)
            spec.requested_resources = [objects.RequestGroup(
                requester_id='%s-%d' % (request, i),
                resources={'CUSTOM_PCI_10DE_2330': 1},
                required_traits={'OWNER_NOVA'}) for i in range(4)]
            host = _host('h', pools, candidates)
            self.assertTrue(self.filter.host_passes(host, spec))
            self.assertEqual(3, len(host.allocation_candidates), clique)
            self.assertEqual(
                ['g4', 'g5', 'g6', 'g7'],
                sorted(p for suffix, providers in
                       host.allocation_candidates[0]['mappings'].items()
                       if suffix for p in providers), clique)

    def test_numa_nodes_spread_within_a_clique(self):
        # One clique of four over two host nodes: a pair on each node
        # comes before the pairs across them.
        pools = _pools(0, 0, 0, 0)
        for pool in pools[2:]:
            pool.numa_node = 1
        candidates = [_candidate(0, 2), _candidate(0, 1), _candidate(1, 3),
                      _candidate(2, 3)]
        host = _host('h', pools, candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidates[1], candidates[3], candidates[0],
                          candidates[2]], host.allocation_candidates)

    def test_other_modes_fitting_first_never_dropped(self):
        candidates = [_candidate(0, 2), _candidate(0, 1), _candidate(2, 3)]
        for clique in (None, 'none', 'auto', '3', 'bogus'):
            host = _host('h', _pools(0, 0, 1, 1), candidates)
            self.assertTrue(self.filter.host_passes(host, _spec(clique)))
            self.assertEqual([candidates[1], candidates[2], candidates[0]],
                             host.allocation_candidates, clique)
        host = _host('h', _pools(0, 1), [_candidate(0, 1)])
        self.assertTrue(self.filter.host_passes(host, _spec('auto')))
        self.assertEqual([_candidate(0, 1)], host.allocation_candidates)

    def test_orders_of_one_claim_are_one_candidate(self):
        # Nova's groups for one InstancePCIRequest of two GPUs.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        candidates = [_uuid_candidate(request, 0, 1),
                      _uuid_candidate(request, 1, 0),
                      _uuid_candidate(request, 2, 3)]
        for clique in ('required', 'auto', None):
            host = _host('h', _pools(0, 0, 0, 0), candidates)
            self.assertTrue(self.filter.host_passes(host, _spec(clique)))
            self.assertEqual([candidates[0], candidates[2]],
                             host.allocation_candidates, clique)

    def test_at_most_k_spread_over_the_cliques(self):
        # Two free cliques of four, one a NUMA node: every pair, in
        # placement's order.
        pairs = [(a, b) for a in range(8) for b in range(a + 1, 8)]
        candidates = [_candidate(a, b) for a, b in pairs]

        def host():
            pools = _pools(*[0] * 4 + [1] * 4)
            for pool in pools[4:]:
                pool.numa_node = 1
            return _host('h', pools, candidates)

        self.conf.config(candidates_per_host=3, group='gpu_p2p')
        # A third pair of one node is judged as the first of that node;
        # a pair across the nodes is not.
        for clique, expected in (
                ('required', [_candidate(0, 1), _candidate(4, 5)]),
                ('auto', [_candidate(0, 1), _candidate(4, 5),
                          _candidate(0, 4)])):
            found = host()
            self.assertTrue(self.filter.host_passes(found, _spec(clique)))
            self.assertEqual(expected, found.allocation_candidates, clique)
        CONF.clear_override('candidates_per_host', group='gpu_p2p')
        found = host()
        self.assertTrue(self.filter.host_passes(found, _spec()))
        self.assertEqual([_candidate(0, 1), _candidate(4, 5)],
                         found.allocation_candidates, 'the default, 2')
        self.conf.config(candidates_per_host=0, group='gpu_p2p')
        found = host()
        self.assertTrue(self.filter.host_passes(found, _spec('auto')))
        self.assertEqual(len(candidates), len(found.allocation_candidates))
        found = host()
        self.assertTrue(self.filter.host_passes(found, _spec()))
        self.assertEqual(12, len(found.allocation_candidates))

    def test_candidates_judged_alike_are_one(self):
        # Two cliques on one NUMA node: Nova's filters judge a pair of
        # either alike, so only the best fit reaches them.
        candidates = [_candidate(0, 1), _candidate(2, 3)]
        self.conf.config(candidates_per_host=2, group='gpu_p2p')
        host = _host('h', _pools(0, 0, 1, 1), candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual([candidates[0]], host.allocation_candidates)
        # Another product is another judgement.
        pools = _pools(0, 0, 1, 1)
        for pool in pools[2:]:
            pool.product_id = '2335'
        host = _host('h', pools, candidates)
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertEqual(candidates, host.allocation_candidates)

    def test_one_candidate_where_nova_surely_passes_it(self):
        # Two cliques of four on two nodes: the second candidate is for a
        # host node Nova's NUMA check might refuse the first for.
        candidates = [_candidate(0, 1), _candidate(4, 5)]
        pools = _pools(*[0] * 4 + [1] * 4)
        for pool in pools[4:]:
            pool.numa_node = 1
        self.conf.config(candidates_per_host=2, group='gpu_p2p')

        def kept(numa_topology, free_cpus):
            host = _host('h', pools, candidates)
            host.numa_topology = objects.NUMATopology(cells=[
                objects.NUMACell(
                    id=node, cpuset=set(), pcpuset={0, 1, 2, 3},
                    pinned_cpus=set(range(4 - free_cpus)), memory=8192,
                    memory_usage=0, siblings=[], mempages=[])
                for node in (0, 1)])
            spec = _spec()
            spec.numa_topology = numa_topology
            self.assertTrue(self.filter.host_passes(host, spec))
            return host.allocation_candidates

        def one_cell(**fields):
            return objects.InstanceNUMATopology(cells=[
                objects.InstanceNUMACell(
                    id=0, cpuset=set(), pcpuset={0, 1}, memory=2048,
                    **fields)])

        self.assertEqual(candidates[:1], kept(None, 0))
        self.assertEqual(candidates[:1], kept(one_cell(), 2))
        for topology, free in ((one_cell(), 1),
                               (one_cell(pagesize=2048), 4),
                               (one_cell(cpu_thread_policy='isolate'), 4)):
            self.assertEqual(candidates, kept(topology, free))

    def test_later_instance_of_a_request_gets_a_fit_built(self):
        # Nova consumed g0 and g1 for the first instance of a --min 2
        # request, and dropped their pools: the candidates left overlap
        # them, so the free pair of the clique is built from one of them.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        pools = _pools(0, 0, 0, 0)
        pools.objects = pools.objects[2:]
        host = _host('h', pools, [_pci_candidate(request, 0, 1),
                                  _pci_candidate(request, 0, 2)])
        self.assertTrue(self.filter.host_passes(
            host, _spec_with_groups(request, 2)))
        self.assertEqual([_pci_candidate(request, 2, 3)],
                         host.allocation_candidates)

    def test_later_instance_dropped_when_nothing_is_left(self):
        # Of two pairs, one GPU is left.
        request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'
        pools = _pools(0, 0, 1, 1)
        pools.objects = pools.objects[3:]
        host = _host('h', pools, [_pci_candidate(request, 0, 1)])
        self.assertFalse(self.filter.host_passes(
            host, _spec_with_groups(request, 2)))
        self.assertEqual([], host.allocation_candidates)

    def test_required_only_where_our_driver_runs(self):
        # Another driver (a rollback to libvirt.LibvirtDriver): the
        # compute node's stats lack ours, whatever traits were left.
        candidates = [_candidate(0, 1)]
        for stats in ({'num_instances': '1'}, {}, None,
                      {driver_stat.KEY: 'other'}):
            host = _host('h', _pools(0, 0), candidates, stats=stats)
            self.assertFalse(self.filter.host_passes(host, _spec()), stats)
            self.assertIn('does not run the GPU P2P compute driver',
                          self.log.output)
            for clique in (None, 'auto'):
                self.assertTrue(self.filter.host_passes(
                    host, _spec(clique)), (stats, clique))
        self.conf.config(pci_in_placement=False, group='filter_scheduler')
        host = _host('h', _pools(0, 0), candidates, stats={})
        self.assertFalse(self.filter.host_passes(host, _spec()))

    def test_legacy_tracking_passes_and_warns_once(self):
        self.conf.config(pci_in_placement=False, group='filter_scheduler')
        candidates = [_candidate(0, 1)]
        for _ in range(3):
            host = _host('h', _pools(0, 1), candidates)
            self.assertTrue(self.filter.host_passes(host, _spec()))
            self.assertEqual(candidates, host.allocation_candidates)
        self.assertEqual(1, self.log.output.count(
            'GPUP2PCliqueFilter: [filter_scheduler] pci_in_placement is '
            'off'))

    def test_never_raises(self):
        host = _host('h', _pools(0, 0), [_candidate(0, 1)])
        self.useFixture(fixtures.MockPatchObject(
            host_view, 'gpus', side_effect=KeyError('boom')))
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.assertIn('could not judge the GPUs of host', self.log.output)

    def test_not_run_on_rebuild(self):
        self.assertFalse(self.filter.RUN_ON_REBUILD)

    def test_runs_in_nova_filter_handler(self):
        """Nova loads it by class path and runs it with its own handler."""
        from nova.scheduler import filters

        handler = filters.HostFilterHandler()
        [cls] = handler.get_matching_classes(
            ['nova_gpu_p2p.scheduler.GPUP2PCliqueFilter'])
        fits = _host('a', _pools(0, 0, 1, 1), [_candidate(0, 1)])
        apart = _host('b', _pools(0, 1, 2, 3), [_candidate(0, 1)])
        passed = handler.get_filtered_objects([cls()], [fits, apart],
                                              _spec())
        self.assertEqual([fits], list(passed))


class TestBoundedHosts(_Base):
    """Only the best few hosts reach Nova's filters after ours.

    Nova's own filter handler and a real Nova filter after ours
    (``DifferentHostFilter``, which refuses the hosts running the hinted
    instances) stand for Nova's PCI and NUMA filters.
    """

    def setUp(self):
        super().setUp()
        self.conf.config(
            enabled_filters=['GPUP2PCliqueFilter', 'DifferentHostFilter'],
            available_filters=['nova.scheduler.filters.all_filters',
                               'nova_gpu_p2p.scheduler.GPUP2PCliqueFilter'],
            group='filter_scheduler')
        self.conf.config(max_attempts=2, group='scheduler')
        self.conf.config(spare_hosts=1, group='gpu_p2p')
        from nova.scheduler import filters
        self.handler = filters.HostFilterHandler()
        self.filters = [cls() for cls in self.handler.get_matching_classes(
            CONF.filter_scheduler.available_filters)
            if cls.__name__ in CONF.filter_scheduler.enabled_filters]
        self.filters.sort(key=lambda one: type(one).__name__ != (
            'GPUP2PCliqueFilter'))
        # Hosts h0..h7; host n has n+2 free GPUs in its clique (leftover
        # n for a pair), listed worst first; h8 has no free pair.
        self.hosts = [
            _host('h%d' % n, _pools(*[0] * 10, used=range(n + 2, 10)),
                  [_candidate(0, 1)]) for n in reversed(range(8))]
        self.hosts.append(_host('h8', _pools(0, 1), [_candidate(0, 1)]))

    def passed(self, spec, refused=()):
        """Hosts Nova's handler passes; ``refused`` run the hinted server."""
        for host in self.hosts:
            host.instances = ({uuids.server: objects.Instance(
                uuid=uuids.server)} if host.host in refused else {})
        spec.scheduler_hints = {'different_host': [uuids.server]}
        return [host.host for host in self.handler.get_filtered_objects(
            self.filters, self.hosts, spec)]

    def test_best_fits_only(self):
        # One server, one alternate, one spare.
        self.assertEqual(['h0', 'h1', 'h2'], self.passed(_spec()))

    def test_refused_best_fits_replaced_in_the_same_request(self):
        self.assertEqual(['h2', 'h4', 'h5'], self.passed(
            _spec(), refused={'h0', 'h1', 'h3'}))

    def test_nova_refusing_all_but_the_worst_fit_still_places(self):
        self.assertEqual(['h7'], self.passed(
            _spec(), refused={'h%d' % n for n in range(7)}))

    def test_a_batch_of_servers_keeps_a_host_for_each(self):
        spec = _spec()
        spec.num_instances = 4
        self.assertEqual(['h%d' % n for n in range(6)], self.passed(spec))

    def test_unbounded_with_negative_spares(self):
        self.conf.config(spare_hosts=-1, group='gpu_p2p')
        self.assertEqual(['h%d' % n for n in reversed(range(8))],
                         self.passed(_spec(), refused={'h0'})[:7] + ['h0'])

    def test_other_modes_unbounded(self):
        self.assertEqual(['h%d' % n for n in reversed(range(8))] + ['h8'],
                         self.passed(_spec('auto')))

    def test_nova_filters_error_hands_on_every_fit(self):
        self.useFixture(fixtures.MockPatchObject(
            type(self.filters[1]), 'host_passes',
            side_effect=ValueError('boom')))
        with testtools.ExpectedException(ValueError):
            # Nova's own pass fails the same way: nothing of ours hides it.
            self.passed(_spec())
        self.assertIn('could not choose the best-fitting hosts',
                      self.log.output)


class TestMoveFilter(_Base):
    """Moves whose claim ignores placement (move_claims), Nova's PCI code."""

    request = '8d2b5a0e-6f1c-4a3e-9b7d-2c4e6f8a0b1c'

    def setUp(self):
        super().setUp()
        self.filter = scheduler.GPUP2PCliqueFilter()
        self.conf.config(candidates_per_host=0, group='gpu_p2p')
        self.instance = objects.Instance(
            task_state='resize_prep',
            pci_requests=objects.InstancePCIRequests(requests=[
                objects.InstancePCIRequest(request_id=self.request,
                                           alias_name='gpu')]))
        self.read = self.useFixture(fixtures.MockPatchObject(
            host_view, '_instance', return_value=self.instance)).mock

    def spec(self, clique='required'):
        return _spec_with_groups(self.request, 2, clique)

    def candidate(self, *gpus):
        return _pci_candidate(self.request, *gpus)

    def taken(self, host):
        return [sorted(p for suffix, providers in c['mappings'].items()
                       if suffix for p in providers)
                for c in host.allocation_candidates]

    def test_keeps_only_what_nova_claims(self):
        # Nova claims the first free pools in order: g1 and g2.
        candidates = [self.candidate(3, 4), self.candidate(2, 1)]
        host = _host('h', _pools(0, 0, 0, 0, 0, used=(0,)), candidates)
        self.assertTrue(self.filter.host_passes(host, self.spec()))
        self.assertEqual([candidates[1]], host.allocation_candidates)

    def test_builds_the_claim_where_placement_did_not_return_it(self):
        host = _host('h', _pools(0, 0, 0, 0),
                     [self.candidate(2, 3), self.candidate(1, 3)])
        self.assertTrue(self.filter.host_passes(host, self.spec()))
        self.assertEqual([['g0', 'g1']], self.taken(host))

    def test_required_refused_where_the_claim_is_two_cliques(self):
        # Clique 1 is free, but Nova claims g0 and g1.
        host = _host('h', _pools(0, 1, 1), [self.candidate(1, 2)])
        self.assertFalse(self.filter.host_passes(host, self.spec()))
        self.assertEqual([], host.allocation_candidates)
        self.assertIn('not one clique (partition): g0, g1', self.log.output)

    def test_other_modes_take_the_claim_of_two_cliques(self):
        host = _host('h', _pools(0, 1, 1), [self.candidate(1, 2)])
        self.assertTrue(self.filter.host_passes(host, self.spec('auto')))
        self.assertEqual([['g0', 'g1']], self.taken(host))

    def test_partition_host_refused_where_the_claim_is_no_partition(self):
        # g0 is used: Nova claims modules 2 and 3, in no pair.
        host = _host('h', _board_pools(used=(0,)), [self.candidate(5, 7)])
        self.assertFalse(self.filter.host_passes(host, self.spec()))
        # g1 is used: modules 1 and 3 are a pair.
        host = _host('h', _board_pools(used=(1,)), [self.candidate(5, 7)])
        self.assertTrue(self.filter.host_passes(host, self.spec()))
        self.assertEqual([['g0', 'g2']], self.taken(host))

    def test_builds_follow_placement(self):
        # Nova would claim g0 and g1, two cliques, on a move.
        self.read.return_value = None
        candidates = [self.candidate(2, 3), self.candidate(0, 1)]
        host = _host('h', _pools(0, 1, 1, 1), candidates)
        self.assertTrue(self.filter.host_passes(host, self.spec()))
        self.assertEqual([candidates[0]], host.allocation_candidates)

    def test_unshelve_follows_placement_unless_the_server_moved(self):
        self.instance.task_state = 'unshelving'
        candidates = [self.candidate(2, 3)]
        host = _host('h', _pools(0, 0, 1, 1), candidates)
        self.assertTrue(self.filter.host_passes(host, self.spec()))
        self.assertEqual([candidates[0]], host.allocation_candidates)
        self.instance.pci_requests.requests[0].request_id = (
            '5f0c1e2d-3b4a-4c5d-8e6f-7a8b9c0d1e2f')
        host = _host('h', _pools(0, 0, 1, 1), candidates)
        self.assertTrue(self.filter.host_passes(host, self.spec()))
        self.assertEqual([['g0', 'g1']], self.taken(host))

    def test_instance_read_once_per_request(self):
        hosts = [_host(name, _pools(0, 0, 1, 1), [self.candidate(2, 3)])
                 for name in 'abc']
        passed = list(self.filter.filter_all(hosts, self.spec()))
        self.assertEqual(hosts, passed)
        self.read.assert_called_once()
        self.assertEqual([['g0', 'g1']], self.taken(hosts[2]))

    def test_request_without_gpus_reads_nothing(self):
        host = _host('h', _pools(0, 0), [{'mappings': {'': [ROOT]},
                                          'allocations': {}}])
        self.assertTrue(self.filter.host_passes(host, _spec()))
        self.read.assert_not_called()

    def test_not_run_on_rebuild(self):
        spec = self.spec()
        spec.scheduler_hints = {'_nova_check_type': ['rebuild']}
        host = _host('h', _pools(0, 1), [self.candidate(0, 1)])
        self.assertEqual([host], list(self.filter.filter_all([host], spec)))
        self.read.assert_not_called()

    def test_a_claim_that_fails_refuses_required(self):
        # One GPU free for two.
        host = _host('h', _pools(0, 0, used=(0,)), [self.candidate(0, 1)])
        self.assertFalse(self.filter.host_passes(host, self.spec()))
        self.assertIn('fails there', self.log.output)


class TestInstanceRead(base.TestCase):
    """Where the request's instance cannot be read, it is a build's."""

    def test_no_context_or_instance(self):
        self.assertIsNone(host_view._instance(_spec()))

    def test_instance_not_in_a_cell(self):
        spec = _spec()
        spec.instance_uuid = '2e6b7d1e-5a3c-4f0e-9d8b-1c2a3b4c5d6e'
        spec._context = mock_context = object()
        mapping = objects.InstanceMapping(cell_mapping=None)
        get = self.useFixture(fixtures.MockPatchObject(
            objects.InstanceMapping, 'get_by_instance_uuid',
            return_value=mapping)).mock
        self.assertIsNone(host_view._instance(spec))
        get.assert_called_once_with(mock_context, spec.instance_uuid)

    def test_read_error_judged_as_a_build(self):
        spec = _spec()
        spec.instance_uuid = '2e6b7d1e-5a3c-4f0e-9d8b-1c2a3b4c5d6e'
        spec._context = object()
        self.useFixture(fixtures.MockPatchObject(
            objects.InstanceMapping, 'get_by_instance_uuid',
            side_effect=RuntimeError('database gone')))
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p.scheduler'))
        self.assertIsNone(host_view._instance(spec))
        self.assertIn('judging its request as a build', log.output)


class TestWeigher(_Base):

    def weigh(self, hosts, spec=None):
        handler = weights.HostWeightHandler()
        weighers = handler.get_matching_classes(
            ['nova.scheduler.weights.all_weighers',
             'nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher'])
        ours = [w() for w in weighers
                if w is scheduler.GPUP2PCliqueFitWeigher]
        self.assertEqual(1, len(ours))
        return handler.get_weighed_objects(ours, hosts, spec or _spec())

    def hosts(self):
        pair = _host('pair', _pools(0, 0, 1, 1, used=(0, 1)),
                     [_candidate(2, 3)])
        four = _host('four', _pools(0, 0, 0, 0), [_candidate(0, 1)])
        eight = _host('eight', _pools(*[0] * 8), [_candidate(0, 1)])
        broken = _host('broken', _pools(0, 1), [_candidate(0, 1)])
        return pair, four, eight, broken

    def test_tightest_fit_first(self):
        weighed = self.weigh(list(reversed(self.hosts())))
        self.assertEqual(['pair', 'four', 'eight', 'broken'],
                         [w.obj.host for w in weighed])
        # Leftovers 0, 2, 6 and no fit (one below the loosest: -7),
        # normalised to 0..1, times the default multiplier 10.
        self.assertEqual([10.0, 7.143, 1.429, 0.0],
                         [round(w.weight, 3) for w in weighed])

    def test_partition_hosts_pair_in_the_half_in_use_first(self):
        half_used = _host('half_used', _board_pools(used=(0, 2)),
                          [_candidate(1, 3)])
        free = _host('free', _board_pools(), [_candidate(0, 2)])
        pair = _host('pair', _pools(0, 0), [_candidate(0, 1)])
        four = _host('four', _pools(0, 0, 0, 0), [_candidate(0, 1)])
        weighed = self.weigh([four, free, pair, half_used])
        # Leftovers 0, 0, 2 (of the free half) and 2.
        self.assertEqual(
            {'pair': 10.0, 'half_used': 10.0, 'free': 0.0, 'four': 0.0},
            {w.obj.host: round(w.weight, 3) for w in weighed})

    def test_other_modes_weigh_the_same(self):
        for clique in (None, 'auto', 'none', '1'):
            weighed = self.weigh(list(self.hosts()), _spec(clique))
            self.assertEqual({0.0}, {w.weight for w in weighed}, clique)

    def test_legacy_tracking_weighs_the_same(self):
        self.conf.config(pci_in_placement=False, group='filter_scheduler')
        self.assertEqual({0.0}, {w.weight for w in
                                 self.weigh(list(self.hosts()))})

    def test_multiplier_from_config(self):
        self.conf.config(clique_fit_weight_multiplier=-1.0, group='gpu_p2p')
        weighed = self.weigh(list(self.hosts()))
        self.assertEqual('broken', weighed[0].obj.host)

    def test_multiplier_from_aggregate(self):
        pair, four, eight, broken = self.hosts()
        pair.aggregates = [objects.Aggregate(
            id=1, name='gpu', hosts=['pair'],
            metadata={'gpu_p2p_clique_fit_weight_multiplier': '0'})]
        weighed = self.weigh([pair, four, eight, broken])
        self.assertEqual(['four', 'eight', 'pair', 'broken'],
                         [w.obj.host for w in weighed])

    def test_weighs_what_the_filter_left(self):
        host = _host('h', _pools(0, 0, 0, 0, 1, 1),
                     [_candidate(0, 1), _candidate(4, 5)])
        self.assertTrue(scheduler.GPUP2PCliqueFilter().host_passes(
            host, _spec()))
        weigher = scheduler.GPUP2PCliqueFitWeigher()
        self.assertEqual(-0.0, weigher._weigh_object(host, _spec()))

    def test_error_weighs_as_no_fit(self):
        pair, four, _, _ = self.hosts()
        self.useFixture(fixtures.MockPatchObject(
            host_view, 'fits', side_effect=[ValueError('x'),
                                            ([], True)] * 3))
        weighed = self.weigh([pair, four])
        self.assertEqual({0.0}, {w.weight for w in weighed})
        self.assertIn('could not weigh the GPUs of host', self.log.output)


class TestCheckNova(base.TestCase):

    def test_this_nova_is_accepted(self):
        nova_support.check_nova()

    def test_missing_candidates_refused_at_start(self):
        from nova.scheduler import host_manager

        real_init = host_manager.HostState.__init__

        def init(state, *args, **kwargs):
            real_init(state, *args, **kwargs)
            del state.allocation_candidates

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.host_manager.HostState.__init__', init))
        for cls in (scheduler.GPUP2PCliqueFilter,
                    scheduler.GPUP2PCliqueFitWeigher):
            exc = self.assertRaises(exception.IncompatibleNova, cls)
            self.assertIn('HostState has no allocation_candidates',
                          str(exc))

    def test_changed_multiplier_lookup_refused(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.utils.get_weight_multiplier',
            lambda host_state, name: 1.0))
        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_support.check_nova)
        self.assertIn('get_weight_multiplier takes (host_state, name)',
                      str(exc))

    def test_changed_move_claim_code_refused(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.hardware.numa_fit_instance_to_host',
            lambda host_topology, instance_topology, limits=None: None))
        self.useFixture(fixtures.MockPatchObject(
            pci_stats.PciDeviceStats, 'apply_requests',
            lambda stats, requests, numa_cells=None: None))
        message = str(self.assertRaises(exception.IncompatibleNova,
                                        nova_support.check_nova))
        self.assertIn('numa_fit_instance_to_host takes no pci_requests, '
                      'pci_stats, provider_mapping', message)
        self.assertIn('PciDeviceStats.apply_requests takes no '
                      'provider_mapping', message)
