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

"""The reported PCI device order, and Nova's first-free claim over it."""

import json

import fixtures
from nova import objects
from nova.pci import stats as pci_stats
from nova.pci import whitelist
from oslo_utils.fixture import uuidsentinel as uuids

from nova_gpu_p2p import claim_order
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.fabric import partitions
from tests.fixtures import expected_cliques
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base

HGX = 'hgx-8gpu-nvswitch-2numa'
CORPUS = 'pcie-8gpu-4switch-2socket'
NIC = {'address': '0000:05:00.0', 'vendor_id': '15b3', 'numa_node': 0}
#: Nova's device spec for the GPUs of these tests.
SPEC = json.dumps({'vendor_id': '10de'})


def board_partitions(name: str) -> tuple[partitions.FabricPartition, ...]:
    """The HGX host's partitions on the stand-in's ``name`` board."""
    return partitions.to_addresses(fake_fm.BOARDS[name].items(),
                                   hosts.HGX_MODULES)[0]


def board(name: str) -> tuple[tuple[str, ...], ...]:
    """The GPUs of each of :func:`board_partitions`."""
    return tuple(p.gpus for p in board_partitions(name))


def devices(addresses) -> list[dict]:
    """Nova's device dicts in address order, as libvirt lists them."""
    return [{'address': a, 'vendor_id': '10de', 'product_id': '2330',
             'dev_type': 'type-PCI', 'numa_node': 0 if a < '0000:80' else 1}
            for a in sorted(addresses)]


def pools(reported: list[dict], specs: list[str]
          ) -> tuple[pci_stats.PciDeviceStats, dict]:
    """Nova's pools of a new compute's devices, met in the reported order.

    One per device (``PciDevTracker._set_hvdevs``); ``specs``: ``[pci]
    device_spec``. With each device object by address.
    """
    objects.register_all()
    stats = pci_stats.PciDeviceStats(
        objects.NUMATopology(cells=[]),
        dev_filter=whitelist.Whitelist(specs))
    found = {}
    for device in reported:
        found[device['address']] = objects.PciDevice(
            compute_node_id=1, status='available', parent_addr=None,
            extra_info={}, label='label_10de_2330', dev_id=device['address'],
            **device)
        stats.add_device(found[device['address']])
    return stats, found


def first_free(reported: list[dict], count: int, cells: list[int],
               specs: list[str] = (SPEC,)) -> tuple[str, ...]:
    """What Nova's first-free claim takes, by Nova's own pool code.

    The pools are :func:`pools`'; the claim is in the NUMA cells Nova
    fitted (``PciDeviceStats.apply_requests``, as the move claim).
    """
    stats, _ = pools(reported, list(specs))
    before = [d.address for d in stats.get_free_devs()]
    stats.apply_requests([objects.InstancePCIRequest(
        count=count, request_id=uuids.request,
        spec=[{'vendor_id': '10de'}])], None,
        [objects.InstanceNUMACell(id=cell) for cell in cells])
    after = {d.address for d in stats.get_free_devs()}
    return tuple(sorted(a for a in before if a not in after))


class TestGroupKeys(base.TestCase):

    def test_nested_partitions_largest_first(self):
        keys = claim_order.group_keys(board('h100'))
        self.assertEqual(('0000:03:00.0', '0000:03:00.0', '0000:03:00.0',
                          '0000:09:00.0'), keys['0000:09:00.0'])
        self.assertEqual(8, len(keys))

    def test_a_gpu_in_no_group_of_a_size_sorts_last(self):
        keys = claim_order.group_keys([('0000:02:00.0', '0000:01:00.0'),
                                       ('0000:03:00.0',)])
        self.assertEqual(('0000:01:00.0', claim_order.UNGROUPED),
                         keys['0000:02:00.0'])
        self.assertEqual((claim_order.UNGROUPED, '0000:03:00.0'),
                         keys['0000:03:00.0'])

    def test_no_groups(self):
        self.assertEqual({}, claim_order.group_keys([(), ()]))


class TestOrdered(base.TestCase):

    def test_h100_pairs_adjacent_other_devices_in_place(self):
        found = devices(hosts.HGX_MODULES.values())
        found.insert(2, NIC)
        result = claim_order.ordered(
            found, claim_order.group_keys(board('h100')))
        self.assertEqual(
            [hosts.HGX_MODULES[2], hosts.HGX_MODULES[4], NIC['address'],
             hosts.HGX_MODULES[3], hosts.HGX_MODULES[1],
             hosts.HGX_MODULES[6], hosts.HGX_MODULES[8],
             hosts.HGX_MODULES[7], hosts.HGX_MODULES[5]],
            [d['address'] for d in result])
        self.assertIs(NIC, result[2])

    def test_unknown_gpus_and_other_vendors_keep_their_place(self):
        other = [{'address': '0000:01:00.0', 'vendor_id': '10de',
                  'numa_node': None}, NIC]
        found = other + devices(['0000:04:00.0', '0000:03:00.0'])
        keys = claim_order.group_keys([('0000:03:00.0',), ('0000:04:00.0',),
                                       ('0000:05:00.0',)])
        self.assertEqual(found, claim_order.ordered(found, keys))

    def test_numa_node_first_devices_without_one_last(self):
        found = [{'address': '0000:01:00.0', 'vendor_id': '10de',
                  'numa_node': None}] + devices(['0000:83:00.0',
                                                 '0000:03:00.0'])
        keys = claim_order.group_keys([(d['address'],) for d in found])
        self.assertEqual(['0000:03:00.0', '0000:83:00.0', '0000:01:00.0'],
                         [d['address'] for d in
                          claim_order.ordered(found, keys)])


class TestFirstFreeOnAnEmptyHost(base.TestCase):
    """Nova's claim on an empty host reported in this order: one group."""

    def assert_one_group(self, groups, gpus, sizes) -> None:
        reported = claim_order.ordered(devices(gpus),
                                       claim_order.group_keys(groups))
        wanted = {tuple(sorted(group)) for group in groups}
        for count in sizes:
            for cells in ([0], [1]) if count < 8 else ([0, 1],):
                claim = first_free(reported, count, cells)
                self.assertIn(claim, wanted, (count, cells))

    def test_partitions_of_each_hgx_board(self):
        for name in fake_fm.BOARDS:
            self.assert_one_group(board(name), hosts.HGX_MODULES.values(),
                                  (1, 2, 4, 8))

    def test_address_order_is_no_partition_there(self):
        # Nova's order, which is the PCI address order: modules 2 and 3.
        self.assertNotIn(first_free(devices(hosts.HGX_MODULES.values()), 2,
                                    [0]), board('h100'))

    def test_cliques_of_the_corpus_host(self):
        for level, size in (('PXB', 2), ('PHB', 4)):
            groups = expected_cliques.groups(CORPUS, level)
            gpus = [gpu for group in groups for gpu in group]
            self.assert_one_group(groups, gpus, (size,))


class TestOrderTags(base.TestCase):
    """The device_spec order tags: Nova's pools in claim order anyway.

    Devices met in PCI address order, as a restarted nova-compute reads
    them from its database, and freed ones added back.
    """

    def setUp(self):
        super().setUp()
        # Nova asks sysfs about each address-based device_spec entry.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    @staticmethod
    def specs(gpus, clique_ids=None, found=()) -> list[str]:
        numa = {d['address']: d['numa_node'] for d in devices(gpus)}
        return [line.split(' = ', 1)[1] for line in device_spec_tags.entries(
            clique_ids or dict.fromkeys(gpus, 0), numa, found)]

    def assert_one_group(self, groups, specs, gpus, sizes) -> None:
        wanted = {tuple(sorted(group)) for group in groups}
        for count in sizes:
            for cells in ([0], [1]) if count < 8 else ([0, 1],):
                claim = first_free(devices(gpus), count, cells, specs)
                self.assertIn(claim, wanted, (count, cells))

    def test_partitions_of_each_hgx_board_in_address_order(self):
        gpus = hosts.HGX_MODULES.values()
        for name in fake_fm.BOARDS:
            found = board_partitions(name)
            self.assert_one_group(board(name), self.specs(gpus, found=found),
                                  gpus, (1, 2, 4, 8))

    def test_cliques_of_the_corpus_host_in_address_order(self):
        for level, size in (('PXB', 2), ('PHB', 4)):
            groups = expected_cliques.groups(CORPUS, level)
            ids = {gpu: n for n, group in enumerate(groups) for gpu in group}
            self.assert_one_group(groups, self.specs(list(ids), ids),
                                  list(ids), (size,))

    def test_a_freed_gpu_goes_back_to_its_place(self):
        gpus = list(hosts.HGX_MODULES.values())
        stats, found = pools(devices(gpus), self.specs(
            gpus, found=board_partitions('h100')))
        order = [d.address for d in stats.get_free_devs()]
        first = found[order[0]]
        stats.remove_device(first)
        self.assertEqual(order[1:], [d.address for d in stats.get_free_devs()])
        stats.add_device(first)
        self.assertEqual(order, [d.address for d in stats.get_free_devs()])
        self.assertEqual(
            [hosts.HGX_MODULES[m] for m in (2, 4, 3, 1, 6, 8, 7, 5)], order)


class TestRanks(base.TestCase):

    def test_the_order_of_ordered(self):
        gpus = devices(hosts.HGX_MODULES.values())
        groups = board('h100')
        reported = claim_order.ordered(gpus, claim_order.group_keys(groups))
        self.assertEqual(
            {d['address']: n for n, d in enumerate(reported)},
            claim_order.ranks({d['address']: d['numa_node'] for d in gpus},
                              groups))

    def test_gpus_in_no_group_after_their_nodes_grouped_ones(self):
        self.assertEqual(
            {'0000:02:00.0': 0, '0000:01:00.0': 1, '0000:81:00.0': 2},
            claim_order.ranks({'0000:01:00.0': 0, '0000:02:00.0': 0,
                               '0000:81:00.0': 1},
                              [('0000:02:00.0',)]))
