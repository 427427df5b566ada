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

"""Placement traits, checked against the names written in SPEC.md."""

import random

import os_traits

from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits
from tests.unit import base

P2P = 'CUSTOM_GPU_P2P'
C2 = 'CUSTOM_GPU_P2P_CLIQUE_2'
C4 = 'CUSTOM_GPU_P2P_CLIQUE_4'
C8 = 'CUSTOM_GPU_P2P_CLIQUE_8'
C16 = 'CUSTOM_GPU_P2P_CLIQUE_16'
NVLINK = 'CUSTOM_GPU_P2P_NVLINK'
NUMA = 'CUSTOM_GPU_NUMA_AFFINITY'
ALL_OURS = {P2P, C2, C4, C8, C16, NVLINK, NUMA}

A = '0000:03:00.0'
B = '0000:04:00.0'
C = '0000:81:00.0'
D = '0000:8a:00.0'


def _address(i):
    return '0000:%02x:00.0' % (0x10 + i)


def _function(address, numa=0, vendor=0x10de, class_code=0x030200):
    return model.PCIFunction(address=address, vendor=vendor, device=0x2330,
                             class_code=class_code, parent=None,
                             root_complex='pci0000:00', numa_node=numa)


def _topology(*functions, nvlink_pairs=frozenset()):
    return model.HostTopology(functions={f.address: f for f in functions},
                              nvlink_pairs=nvlink_pairs)


def _cliques(*sizes, with_ids=True):
    """One group per size, consecutive addresses, IDs 0, 1, ..."""
    groups, ids, n = [], {}, 0
    for clique_id, size in enumerate(sizes):
        group = tuple(_address(n + i) for i in range(size))
        n += size
        groups.append(group)
        for address in group:
            ids[address] = clique_id if with_ids and size > 1 else None
    return cliques.Cliques(groups=tuple(groups), ids=ids)


class TestNames(base.TestCase):

    def test_owned_is_exactly_the_spec_list(self):
        # The spec's list, and issue 47's trait for the sizes that fit now.
        self.assertEqual(
            frozenset(['CUSTOM_GPU_P2P', 'CUSTOM_GPU_P2P_CLIQUE_2',
                       'CUSTOM_GPU_P2P_CLIQUE_4', 'CUSTOM_GPU_P2P_CLIQUE_8',
                       'CUSTOM_GPU_P2P_CLIQUE_16', 'CUSTOM_GPU_P2P_NVLINK',
                       'CUSTOM_GPU_NUMA_AFFINITY']
                      + ['CUSTOM_GPU_P2P_FREE_%d' % n for n in range(2, 17)]),
            traits.OWNED)

    def test_names_are_legal_custom_traits(self):
        # What placement accepts: os-traits' custom namespace, A-Z 0-9 _,
        # at most 255 characters; and none is a standard trait.
        names = traits.OWNED | {traits.clique_id_trait(i) for i in range(16)}
        for name in names:
            self.assertTrue(os_traits.is_custom(name), name)
            self.assertEqual(name, os_traits.normalize_name(
                name[len(os_traits.CUSTOM_NAMESPACE):]))
            self.assertLessEqual(len(name), 255)
        self.assertEqual(set(), names & set(os_traits.get_traits()))

    def test_per_gpu_clique_trait_is_not_owned(self):
        self.assertNotIn('CUSTOM_GPU_P2P_CLIQUE_ID_0', traits.OWNED)

    def test_clique_id_trait(self):
        self.assertEqual('CUSTOM_GPU_P2P_CLIQUE_ID_0',
                         traits.clique_id_trait(0))
        self.assertEqual('CUSTOM_GPU_P2P_CLIQUE_ID_7',
                         traits.clique_id_trait(7))
        self.assertEqual('CUSTOM_GPU_P2P_CLIQUE_ID_15',
                         traits.clique_id_trait(15))


class TestP2PTraits(base.TestCase):

    def traits_for(self, *sizes, nvlink_pairs=frozenset()):
        # The GPUs the pairs name are on the host: NVLink counts only
        # between GPUs.
        gpus = [_function(address) for address in sorted(
            frozenset().union(*nvlink_pairs))]
        return traits.p2p_traits(
            _topology(*gpus, nvlink_pairs=nvlink_pairs), _cliques(*sizes))

    def test_no_gpus(self):
        self.assertEqual(set(), traits.p2p_traits(
            _topology(), cliques.Cliques(groups=(), ids={})))

    def test_largest_0(self):
        self.assertEqual(set(), self.traits_for())

    def test_largest_1(self):
        # Three lone GPUs: no clique of two or more.
        self.assertEqual(set(), self.traits_for(1, 1, 1))

    def test_largest_2(self):
        self.assertEqual({P2P, C2}, self.traits_for(2))

    def test_largest_3(self):
        self.assertEqual({P2P, C2}, self.traits_for(3, 1))

    def test_largest_4(self):
        self.assertEqual({P2P, C2, C4}, self.traits_for(2, 4))

    def test_largest_7(self):
        self.assertEqual({P2P, C2, C4}, self.traits_for(7))

    def test_largest_8(self):
        self.assertEqual({P2P, C2, C4, C8}, self.traits_for(8))

    def test_two_cliques_of_8(self):
        self.assertEqual({P2P, C2, C4, C8}, self.traits_for(8, 8))

    def test_largest_15(self):
        self.assertEqual({P2P, C2, C4, C8}, self.traits_for(15))

    def test_largest_16(self):
        self.assertEqual({P2P, C2, C4, C8, C16}, self.traits_for(16))

    def test_group_without_id_is_no_clique(self):
        # A group left without a host clique ID (more than 16 cliques)
        # cannot be used as one, so it does not count.
        without = _cliques(8, with_ids=False)
        self.assertEqual(set(), traits.p2p_traits(_topology(), without))
        mixed = cliques.Cliques(
            groups=(('0000:10:00.0', '0000:11:00.0', '0000:12:00.0',
                     '0000:13:00.0'), ('0000:20:00.0', '0000:21:00.0')),
            ids={'0000:10:00.0': None, '0000:11:00.0': None,
                 '0000:12:00.0': None, '0000:13:00.0': None,
                 '0000:20:00.0': 0, '0000:21:00.0': 0})
        self.assertEqual({P2P, C2}, traits.p2p_traits(_topology(), mixed))

    def test_nvlink(self):
        pairs = frozenset([frozenset([A, B])])
        self.assertEqual({P2P, C2, NVLINK},
                         self.traits_for(2, nvlink_pairs=pairs))

    def test_nvlink_without_clique(self):
        pairs = frozenset([frozenset([A, B])])
        self.assertEqual({NVLINK}, self.traits_for(nvlink_pairs=pairs))

    def test_nvlink_only_between_two_gpus(self):
        """Issue 35, item 8: bridges, or a GPU with itself, are no NVLink."""
        bridge = _function(C, class_code=0x060400)
        nvswitch = _function(D, class_code=0x068000)
        for pair in ((C, D), (A,), (A, C), (A, D)):
            topology = _topology(_function(A), bridge, nvswitch,
                                 nvlink_pairs=frozenset([frozenset(pair)]))
            self.assertNotIn(NVLINK, traits.p2p_traits(topology, _cliques()),
                             pair)

    def test_no_nvlink_without_pairs(self):
        self.assertNotIn(NVLINK, self.traits_for(16))

    def test_only_owned_names(self):
        pairs = frozenset([frozenset([A, B])])
        self.assertTrue(self.traits_for(16, nvlink_pairs=pairs)
                        <= traits.OWNED)


class TestNumaAffinity(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = _topology(_function(A, 0), _function(C, 1))

    def test_debian_12_pair(self):
        self.assertEqual({NUMA}, traits.numa_affinity(self.host, (9, 0, 0),
                                                      (7, 2, 0)))

    def test_backports_pair(self):
        self.assertEqual({NUMA}, traits.numa_affinity(self.host, (11, 3, 0),
                                                      (10, 0, 0)))

    def test_novas_minimum_pair(self):
        """Nova 33/34 start from libvirt 8.0.0 and QEMU 6.2.0: enough."""
        self.assertEqual({NUMA}, traits.numa_affinity(self.host, (8, 0, 0),
                                                      (6, 2, 0)))

    def test_libvirt_below_novas_minimum(self):
        for version in ((7, 10, 0), (7, 9, 99), (1, 3, 4)):
            self.assertEqual(set(), traits.numa_affinity(
                self.host, version, (7, 2, 0)), version)

    def test_libvirt_patch_release(self):
        self.assertEqual({NUMA}, traits.numa_affinity(self.host, (8, 0, 1),
                                                      (6, 2, 0)))

    def test_qemu_below_novas_minimum(self):
        for version in ((6, 1, 0), (6, 1, 99), (2, 6, 0)):
            self.assertEqual(set(), traits.numa_affinity(
                self.host, (9, 0, 0), version), version)

    def test_qemu_newer_minor(self):
        self.assertEqual({NUMA}, traits.numa_affinity(self.host, (8, 0, 0),
                                                      (6, 3, 0)))

    def test_both_too_old(self):
        self.assertEqual(set(), traits.numa_affinity(self.host, (7, 0, 0),
                                                     (6, 1, 0)))

    def test_gpus_without_numa_node(self):
        host = _topology(_function(A, None), _function(C, None))
        self.assertEqual(set(), traits.numa_affinity(host, (11, 3, 0),
                                                     (10, 0, 0)))

    def test_one_gpu_with_numa_node_is_enough(self):
        host = _topology(_function(A, None), _function(C, 1))
        self.assertEqual({NUMA}, traits.numa_affinity(host, (9, 0, 0),
                                                      (7, 2, 0)))

    def test_numa_node_zero_counts(self):
        host = _topology(_function(A, 0))
        self.assertEqual({NUMA}, traits.numa_affinity(host, (9, 0, 0),
                                                      (7, 2, 0)))

    def test_no_gpus(self):
        self.assertEqual(set(), traits.numa_affinity(_topology(), (11, 3, 0),
                                                     (10, 0, 0)))

    def test_only_non_gpu_functions_have_numa_nodes(self):
        host = _topology(
            _function(A, None),
            # A NIC and a non-NVIDIA display device, both on node 0.
            _function(B, 0, vendor=0x15b3, class_code=0x020000),
            _function(C, 0, vendor=0x1a03, class_code=0x030000))
        self.assertEqual(set(), traits.numa_affinity(host, (11, 3, 0),
                                                     (10, 0, 0)))


class TestFreeTraits(base.TestCase):
    """CUSTOM_GPU_P2P_FREE_<n> against a count by hand, random hosts."""

    @staticmethod
    def _host(sizes, barred=()):
        found = _cliques(*sizes)
        topology = _topology(*(_function(a) for a in found.ids))
        return host_gpus.HostGPUs(
            topology=topology, cliques=cliques.Cliques(
                groups=found.groups, ids=found.ids,
                barred={a: 'consumer' for a in barred}))

    def test_random_cliques_and_partitions(self):
        rng = random.Random(47)
        for _ in range(300):
            sizes = [rng.randint(1, 8) for _ in range(rng.randint(1, 4))]
            host = self._host(sizes)
            addresses = sorted(host.cliques.ids)
            held = {a for a in addresses if rng.random() < 0.4}
            # By hand: the most free GPUs of any clique of two or more.
            most = max([sum(1 for a in group if a not in held)
                        for group in host.cliques.groups if len(group) > 1]
                       + [0])
            expected = {traits.GPU_P2P_FREE[n] for n in traits.FREE_SIZES
                        if n <= most}
            self.assertEqual(expected, traits.free_traits(host, (), held),
                             (sizes, sorted(held)))
            # A Fabric Manager host: whole partitions, all GPUs free.
            # (One partition of two or more makes it one, as for the
            # scheduler: only those mark GPUs with a partition trait.)
            parts = []
            for pid in range(rng.randint(1, 4)):
                size = min(len(addresses), rng.choice(
                    [2, 4, 8] if pid == 0 else [1, 2, 4, 8]))
                start = rng.randrange(len(addresses) - size + 1)
                parts.append(partitions.FabricPartition(
                    pid, tuple(addresses[start:start + size])))
            if len(parts[0].gpus) < 2:
                continue
            expected = {traits.GPU_P2P_FREE[len(p.gpus)] for p in parts
                        if len(p.gpus) > 1 and not held & set(p.gpus)}
            self.assertEqual(expected, traits.free_traits(host, parts, held),
                             (sizes, parts, sorted(held)))

    def test_barred_gpus_never_count(self):
        host = self._host([4], barred=[_address(0)])
        self.assertEqual({traits.GPU_P2P_FREE[2], traits.GPU_P2P_FREE[3]},
                         traits.free_traits(host, (), set()))
