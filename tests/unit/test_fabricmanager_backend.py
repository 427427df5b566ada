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

"""The fabricmanager backend on the HGX corpus host.

The PCI tree is the corpus host's sysfs tree; Fabric Manager is the
stand-in library over a state file (tests.fixtures.fake_fm), loaded
through the real ctypes binding; module IDs come from a kept module file,
a fake pynvml or a static file. The host's modules are not in PCI order.
"""

import itertools
import json
import logging
import os
import sys
from unittest import mock

import fixtures

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import fabricmanager
from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import module_ids
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p import traits
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_corpus
from tests.unit import test_module_ids

HGX = 'hgx-8gpu-nvswitch-2numa'
GPUS = hosts.EXPECTED[HGX].addresses
MODULES = hosts.HGX_MODULES
NUMA0, NUMA1 = GPUS[:4], GPUS[4:]


def gpus(*module_ids):
    return tuple(sorted(MODULES[m] for m in module_ids))


def all_pairs(addresses):
    return frozenset(frozenset(pair)
                     for pair in itertools.combinations(addresses, 2))


class BackendTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.module_file = os.path.join(self.tmp, 'module_ids.json')
        # NVML sees no GPU: they are all on vfio-pci, unless a test says.
        self.nvml(None)
        self.keep(MODULES)

    def nvml(self, fake):
        self.useFixture(fixtures.MockPatchObject(sys, 'modules', dict(
            sys.modules, pynvml=fake)))

    def keep(self, modules):
        """The module file, as NVML's answers left it."""
        with open(self.module_file, 'w') as f:
            json.dump({'module_ids': {address: module_id for
                                      module_id, address in modules.items()}},
                      f)

    def fm(self, board='h100'):
        return fake_fm.FakeFM(self.tmp, board)

    def conf(self, fm, **overrides):
        options = dict(sysfs_root=test_corpus.tree(HGX),
                       fabric_manager_address=fm.address,
                       fabric_manager_library=fake_fm.library(),
                       module_id_file=self.module_file)
        options.update(overrides)
        return test_corpus.make_conf(**options)

    def backend(self, fm, **overrides):
        return fabricmanager.FabricManagerBackend(
            self.conf(fm, **overrides), read_config=sysfs.read_config_direct)

    def discover(self, fm=None, **overrides):
        return self.backend(fm or self.fm(), **overrides).discover()


class TestPartitions(BackendTestCase):

    def test_h100_partitions_by_address(self):
        topology = self.discover()
        self.assertEqual(
            tuple(partitions.FabricPartition(id=i, gpus=gpus(*modules))
                  for i, modules in sorted(
                      fake_fm.H100_PARTITIONS.items())),
            topology.fabric_partitions)
        by_id = {p.id: p for p in topology.fabric_partitions}
        # Modules 1 and 3 sit behind two different PCIe switches.
        self.assertEqual(('0000:04:00.0', '0000:08:00.0'), by_id[3].gpus)
        self.assertEqual(('0000:03:00.0', '0000:09:00.0'), by_id[4].gpus)
        self.assertEqual(NUMA0, by_id[1].gpus)
        self.assertEqual(GPUS, by_id[0].gpus)
        self.assertEqual(('0000:08:00.0',), by_id[7].gpus)
        self.assertEqual((), topology.findings)

    def test_b200_partitions_by_address(self):
        by_id = {p.id: p for p in self.discover(
            self.fm('b200')).fabric_partitions}
        # NVIDIA numbers B200's partitions from 1: board 1, pairs 4-7,
        # module m alone 7+m.
        self.assertEqual(list(range(1, 16)), sorted(by_id))
        self.assertEqual(GPUS, by_id[1].gpus)
        self.assertEqual(('0000:03:00.0', '0000:08:00.0'), by_id[4].gpus)
        self.assertEqual(('0000:04:00.0', '0000:09:00.0'), by_id[5].gpus)
        self.assertEqual(('0000:83:00.0', '0000:88:00.0'), by_id[6].gpus)
        self.assertEqual(('0000:08:00.0',), by_id[8].gpus)

    def test_one_8_clique_with_nvlink(self):
        topology = self.discover()
        self.assertEqual(all_pairs(GPUS), topology.nvlink_pairs)
        for a, b in itertools.combinations(GPUS, 2):
            self.assertIs(lc.LinkClass.NV,
                          lc.effective_class(topology, a, b))
        for level in (lc.LinkClass.NV, lc.LinkClass.PXB):
            found = cliques.assign(topology, level)
            self.assertEqual((GPUS,), found.groups)
            self.assertEqual({traits.GPU_P2P, traits.GPU_P2P_NVLINK,
                              traits.GPU_P2P_CLIQUE[2],
                              traits.GPU_P2P_CLIQUE[4],
                              traits.GPU_P2P_CLIQUE[8]},
                             traits.p2p_traits(topology, found))

    def test_pci_tree_is_the_sysfs_one(self):
        topology = self.discover()
        self.assertEqual(test_corpus.discover(HGX).functions,
                         topology.functions)

    def test_only_reads_fabric_manager(self):
        fm = self.fm()
        self.discover(fm)
        self.assertEqual(
            ['fmConnect', 'fmGetSupportedFabricPartitions', 'fmDisconnect'],
            [call.split()[0] for call in fm.calls()])
        self.assertEqual(set(), fm.active())

    def test_after_a_fabric_manager_restart(self):
        # Restart mode: no partition data until it is told what runs,
        # which the driver's reconcile does before it discovers again.
        fm = self.fm()
        fm.restart()
        exc = self.assertRaises(exception.TopologyError, self.discover, fm)
        self.assertIn('FM_ST_NOT_CONFIGURED (-8)', str(exc))
        fm.up()
        self.assertEqual(15, len(self.discover(fm).fabric_partitions))


class TestModuleIds(BackendTestCase):

    def test_gpu_without_module_id_drops_exactly_its_partitions(self):
        self.keep({m: a for m, a in MODULES.items() if m != 3})
        topology = self.discover()
        self.assertEqual({2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14},
                         {p.id for p in topology.fabric_partitions})
        # Module 3's GPU keeps no NVLink; its NUMA node's others keep the
        # one pair still offered: modules 2 and 4.
        self.assertEqual(all_pairs(NUMA1) | {frozenset(gpus(2, 4))},
                         topology.nvlink_pairs)
        self.assertEqual([NUMA1, gpus(2, 4)], sorted(
            (g for g in cliques.assign(topology, lc.LinkClass.NV).groups
             if len(g) > 1), key=len, reverse=True))
        gpu_finding, module_finding = topology.findings
        self.assertIn('no Fabric Manager module ID is known for GPU '
                      '0000:04:00.0', gpu_finding)
        self.assertIn('module ID 3:', module_finding)
        self.assertIn('(0, 1, 3, 9)', module_finding)

    def test_module_ids_from_nvml_are_kept(self):
        os.remove(self.module_file)
        self.nvml(test_module_ids.FakeNvml(test_module_ids.ADDRESS_MODULES))
        topology = self.discover()
        self.assertEqual(15, len(topology.fabric_partitions))
        with open(self.module_file) as f:
            self.assertEqual(test_module_ids.ADDRESS_MODULES,
                             json.load(f)['module_ids'])

    def test_nothing_known(self):
        os.remove(self.module_file)
        topology = self.discover()
        self.assertEqual((), topology.fabric_partitions)
        self.assertEqual(frozenset(), topology.nvlink_pairs)
        self.assertEqual(1 + 8, len(topology.findings))
        self.assertIn('NVML is not available', topology.findings[0])

    def static_file(self, entries):
        path = os.path.join(self.tmp, 'gpus.yaml')
        with open(path, 'w') as f:
            f.write('gpus:\n' + ''.join(
                '  - {address: %s%s}\n' % (
                    address, ', module_id: %d' % module_id
                    if module_id else '')
                for address, module_id in entries))
        return path

    def test_static_module_ids_win(self):
        # The kept file says otherwise: the operator's file is believed.
        self.keep({m: a for m, a in zip(range(1, 9), GPUS)})
        path = self.static_file(
            (address, module_id) for module_id, address in MODULES.items())
        topology = self.discover(static_topology_file=path)
        self.assertEqual(gpus(1, 3), {
            p.id: p for p in topology.fabric_partitions}[3].gpus)
        self.assertEqual((), topology.findings)

    def test_static_file_without_a_module_id(self):
        path = self.static_file(
            (address, module_id if module_id != 5 else None)
            for module_id, address in MODULES.items())
        topology = self.discover(static_topology_file=path)
        self.assertEqual({1, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14},
                         {p.id for p in topology.fabric_partitions})
        self.assertEqual(
            'no module_id is given in %s for GPU 0000:88:00.0, so the '
            'Fabric Manager partitions holding it are left out' % path,
            topology.findings[0])
        self.assertIn('module ID 5:', topology.findings[1])

    def test_static_file_without_module_ids_leaves_them_to_nvml(self):
        path = self.static_file((address, None) for address in GPUS)
        topology = self.discover(static_topology_file=path)
        self.assertEqual(15, len(topology.fabric_partitions))

    def test_bad_static_file(self):
        path = self.static_file([(GPUS[0], 1), (GPUS[1], 1)])
        exc = self.assertRaises(exception.TopologyError, self.discover,
                                static_topology_file=path)
        self.assertIn('%s line 3: duplicate module_id 1' % path, str(exc))


class TestKeptPartitions(BackendTestCase):
    """The partition table kept for when Fabric Manager cannot be asked."""

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_gpu_p2p', level=logging.WARNING))

    def test_discovery_keeps_the_table(self):
        self.discover()
        self.assertEqual(fake_fm.H100_PARTITIONS,
                         module_ids.load_partitions(self.module_file))
        self.assertEqual(
            (test_module_ids.ADDRESS_MODULES, None),
            module_ids.load(self.module_file))

    def test_unchanged_table_is_not_written_again(self):
        self.discover()
        with mock.patch.object(module_ids, 'save_partitions') as save:
            self.discover()
        save.assert_not_called()

    def test_bad_kept_table_is_replaced(self):
        with open(self.module_file) as f:
            data = json.load(f)
        with open(self.module_file, 'w') as f:
            json.dump(dict(data, partitions={'3': [0]}), f)
        self.discover()
        self.assertEqual(fake_fm.H100_PARTITIONS,
                         module_ids.load_partitions(self.module_file))

    def test_empty_answer_keeps_the_table(self):
        self.discover()
        with mock.patch.object(fabricmanager, 'supported_partitions',
                               return_value=()):
            self.assertEqual((), self.discover().fabric_partitions)
        self.assertEqual(fake_fm.H100_PARTITIONS,
                         module_ids.load_partitions(self.module_file))

    def test_failed_write_is_one_warning(self):
        with mock.patch.object(module_ids, 'save_partitions',
                               return_value='cannot write x: denied'):
            topology = self.discover()
        self.assertEqual(15, len(topology.fabric_partitions))
        self.assertEqual((), topology.findings)
        self.assertEqual(
            ['GPU P2P: the Fabric Manager partition table is not kept in '
             '[gpu_p2p] module_id_file, so a restart of Fabric Manager '
             'cannot be told what runs unless nova-compute still knows: '
             'cannot write x: denied'], self.log.output.splitlines())

    def test_by_address_without_fabric_manager_or_nvml(self):
        fm = self.fm()
        found = self.discover(fm).fabric_partitions
        calls = fm.calls()
        fm.down()
        with mock.patch.object(module_ids, 'read_nvml') as nvml:
            self.assertEqual(found, fabricmanager.kept_partitions(
                self.conf(fm)))
        nvml.assert_not_called()
        self.assertEqual(calls, fm.calls())

    def test_gpu_without_module_id_drops_its_partitions(self):
        self.keep({m: a for m, a in MODULES.items() if m != 3})
        module_ids.save_partitions(self.module_file, fake_fm.H100_PARTITIONS)
        kept = fabricmanager.kept_partitions(self.conf(self.fm()))
        self.assertEqual({2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14},
                         {p.id for p in kept})

    def test_static_module_ids_win(self):
        self.keep({m: a for m, a in zip(range(1, 9), GPUS)})
        module_ids.save_partitions(self.module_file, fake_fm.H100_PARTITIONS)
        path = os.path.join(self.tmp, 'gpus.yaml')
        with open(path, 'w') as f:
            f.write('gpus:\n' + ''.join(
                '  - {address: %s, module_id: %d}\n' % (address, module_id)
                for module_id, address in MODULES.items()))
        kept = fabricmanager.kept_partitions(
            self.conf(self.fm(), static_topology_file=path))
        self.assertEqual(gpus(1, 3), {p.id: p for p in kept}[3].gpus)

    def test_nothing_kept(self):
        self.assertEqual((), fabricmanager.kept_partitions(
            self.conf(self.fm())))
        self.assertEqual('', self.log.output)

    def test_bad_file_gives_none(self):
        with open(self.module_file, 'w') as f:
            f.write('{"module_ids": {}, "partitions": {"3": [0]}}')
        self.assertEqual((), fabricmanager.kept_partitions(
            self.conf(self.fm())))
        self.assertIn('GPU P2P: no kept Fabric Manager partitions: %s: '
                      "partition entry '3'" % self.module_file,
                      self.log.output)


class TestFabricManagerUnavailable(BackendTestCase):

    def assertRefused(self, *fragments, fm=None, **overrides):
        exc = self.assertRaises(exception.TopologyError, self.discover, fm,
                                **overrides)
        for fragment in fragments:
            self.assertIn(fragment, str(exc))
        return str(exc)

    def test_fabric_manager_down(self):
        fm = self.fm()
        fm.down()
        message = self.assertRefused(
            'cannot read the partitions of NVIDIA Fabric Manager at %s '
            '([gpu_p2p] fabric_manager_address)' % fm.address,
            'FM_ST_CONNECTION_NOT_VALID',
            'check that nvidia-fabricmanager runs there',
            'FABRIC_MODE=1', fm=fm)
        self.assertNotIn('\n', message)

    def test_nothing_listening(self):
        self.assertRefused('Fabric Manager at 127.0.0.1:6666',
                           'nvidia-fabricmanager',
                           fabric_manager_address='127.0.0.1:6666')

    def test_library_missing(self):
        library = os.path.join(self.tmp, 'libnvfm.so.1')
        self.assertRefused(
            'dlopen(%s)' % library,
            '[gpu_p2p] fabric_manager_library = %s must name NVIDIA Fabric '
            'Manager\'s client library' % library,
            fabric_manager_library=library)

    def test_address_too_long(self):
        # Refused where nova.conf is read (sun_path), before the backend.
        address = '/' + 'x' * nvfm.FM_MAX_STR_LENGTH
        self.assertRaises(ValueError, test_corpus.make_conf,
                          fabric_manager_address=address)


class TestEntryPoint(base.TestCase):

    def test_loaded_by_name(self):
        self.assertIsInstance(
            backends.load('fabricmanager', test_corpus.make_conf()),
            fabricmanager.FabricManagerBackend)
        self.assertIn('fabricmanager', backends.names())


class TestHgxHost(base.TestCase):
    """The corpus host that the Fabric Manager tests build on."""

    def test_four_nvswitch_functions(self):
        topology = test_corpus.discover(HGX)
        switches = sorted(
            f.address for f in topology.functions.values()
            if (f.vendor, f.device, f.class_code >> 8)
            == (model.NVIDIA_VENDOR_ID, 0x22a3, 0x0680))
        self.assertEqual(['0000:0d:00.0', '0000:0e:00.0', '0000:0f:00.0',
                          '0000:10:00.0'], switches)
        self.assertFalse(any(topology.functions[s].is_gpu
                             for s in switches))

    def test_modules_are_the_gpus_not_in_pci_order(self):
        self.assertEqual(sorted(GPUS), sorted(MODULES.values()))
        in_module_order = [MODULES[m] for m in sorted(MODULES)]
        self.assertNotEqual(sorted(in_module_order), in_module_order)
        # Each 2-GPU partition crosses PCIe switches; each half is a node.
        links = hosts.EXPECTED[HGX].links
        for board in (fake_fm.H100_PARTITIONS, fake_fm.B200_PARTITIONS):
            for modules in board.values():
                addresses = gpus(*modules)
                if len(addresses) == 2:
                    self.assertEqual('PHB', links[frozenset(addresses)])
                if len(addresses) == 4:
                    self.assertIn(addresses, (NUMA0, NUMA1))
