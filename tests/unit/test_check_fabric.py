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

"""``nova-gpu-p2p check`` on HGX hosts: Fabric Manager and NVSwitches.

Fabric Manager is the stand-in library over a state file
(:mod:`tests.fixtures.fake_fm`); the host is the corpus HGX host, whose
module IDs are :data:`tests.fixtures.hosts.HGX_MODULES`.
"""

import dataclasses
import json
import os

import fixtures

from nova_gpu_p2p.checks import fabric
from nova_gpu_p2p.checks import host
from nova_gpu_p2p.checks import nvswitch
from nova_gpu_p2p.checks import placement
from nova_gpu_p2p.checks import result
from nova_gpu_p2p.checks import vfio
from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.topology import backends
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_check_command
from tests.unit import test_checks
from tests.unit import test_corpus

OK, WARN, FAIL = (result.Code.SUCCESS, result.Code.WARNING,
                  result.Code.FAILURE)
HGX = 'hgx-8gpu-nvswitch-2numa'
SWITCHES = ('0000:0d:00.0', '0000:0e:00.0', '0000:0f:00.0', '0000:10:00.0')
#: Module ID -> GPU on the corpus HGX host.
MODULES = hosts.HGX_MODULES


def fm_partitions(active=()):
    """The stand-in's H100 partitions, as nvfm reads them."""
    return tuple(
        nvfm.Partition(id=pid, active=pid in active, gpus=tuple(
            nvfm.PartitionGpu(module_id=m, uuid='GPU-%d' % m, pci_bus_id='')
            for m in sorted(modules)))
        for pid, modules in sorted(fake_fm.H100_PARTITIONS.items()))


def hgx_topology(known=MODULES):
    """The corpus HGX host as the fabricmanager backend reads it."""
    found = test_corpus.discover(HGX)
    partitions = tuple(
        partitions_mod.FabricPartition(id=pid, gpus=tuple(sorted(
            known[m] for m in modules)))
        for pid, modules in sorted(fake_fm.H100_PARTITIONS.items())
        if modules <= known.keys())
    return dataclasses.replace(found, fabric_partitions=partitions)


def facts(mode=fabric.FabricMode.SHARED_NVSWITCH, backend='fabricmanager',
          state=None, problem=None):
    if state is None and (mode is fabric.FabricMode.SHARED_NVSWITCH
                          or mode is None and backend == 'fabricmanager'):
        state = fabric.FabricState(fm_partitions(active={3}))
    return fabric.FabricFacts(
        backend, backends.capabilities(backend), 'fabricmanager',
        '/run/fm.sock', fabric.FabricConfig('/fm.cfg', mode, problem), state)


def by_subject(checks):
    return {c.subject: c for c in checks}


class TestReadConfig(base.TestCase):

    def write(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'fabricmanager.cfg')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_mode(self):
        path = self.write('# FABRIC_MODE=0\nLOG_LEVEL=4\n'
                          'FABRIC_MODE=1  # shared\nFM_CMD_PORT_NUMBER=6666\n')
        self.assertEqual(fabric.FabricConfig(
            path, fabric.FabricMode.SHARED_NVSWITCH),
            fabric.read_config(path))

    def test_fabric_managers_default_is_zero(self):
        self.assertIs(fabric.FabricMode.FULL_PASSTHROUGH,
                      fabric.read_config(self.write('LOG_LEVEL=4\n')).mode)

    def test_bad_value(self):
        path = self.write('FABRIC_MODE=shared\n')
        self.assertEqual(fabric.FabricConfig(
            path, problem='%s: FABRIC_MODE=shared is not one of 0, 1, 2'
            % path), fabric.read_config(path))

    def test_missing(self):
        config = fabric.read_config('/nonexistent/fabricmanager.cfg')
        self.assertIsNone(config.mode)
        self.assertEqual('cannot read /nonexistent/fabricmanager.cfg: No '
                         'such file or directory', config.problem)


class TestMode(base.TestCase):

    def test_shared_with_the_backend(self):
        check = fabric.check_mode(facts())
        self.assertEqual(OK, check.code)
        self.assertIn('FABRIC_MODE=1 (shared NVSwitch) in /fm.cfg',
                      check.message)

    def test_shared_without_the_backend_fails(self):
        check = fabric.check_mode(facts(backend='sysfs'))
        self.assertEqual(FAIL, check.code)
        self.assertIn('topology_backend = sysfs: no partition is activated',
                      check.message)
        self.assertIn('CUDA error 802', check.message)
        self.assertEqual('set [gpu_p2p] topology_backend = fabricmanager '
                         'and restart nova-compute', check.fix)

    def test_full_passthrough(self):
        check = fabric.check_mode(facts(fabric.FabricMode.FULL_PASSTHROUGH,
                                        backend='sysfs'))
        self.assertEqual(OK, check.code)
        self.assertIn('only whole-board servers get NVLink', check.message)
        self.assertIn('flavor --whole-board', check.message)
        check = fabric.check_mode(facts(fabric.FabricMode.FULL_PASSTHROUGH))
        self.assertEqual(FAIL, check.code)
        self.assertIn('as topology_backend = fabricmanager needs',
                      check.message)
        self.assertIn('see troubleshooting: Fabric Manager mode', check.fix)

    def test_vgpu_fails(self):
        check = fabric.check_mode(facts(fabric.FabricMode.VGPU, 'sysfs'))
        self.assertEqual(FAIL, check.code)
        self.assertIn('FABRIC_MODE=2 (vGPU)', check.message)

    def test_unknown_is_a_warning(self):
        check = fabric.check_mode(facts(None, problem='cannot read /fm.cfg'))
        self.assertEqual(WARN, check.code)
        self.assertIn('--fabricmanager-config', check.fix)
        self.assertIn('see troubleshooting: Fabric Manager mode', check.fix)


class TestReachable(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fm = fake_fm.FakeFM(self.useFixture(fixtures.TempDir()).path)
        self.conf = test_corpus.make_conf(
            fabric_manager_address=self.fm.address,
            fabric_manager_library=fake_fm.library())

    def check(self):
        return fabric.check_reachable(fabric.FabricFacts(
            'fabricmanager', backends.capabilities('fabricmanager'),
            'fabricmanager', self.fm.address,
            fabric.FabricConfig('/fm.cfg', fabric.FabricMode(1)),
            fabric.ask(self.conf)))

    def test_up(self):
        self.fm.force_active(3)
        check = self.check()
        self.assertEqual(result.success(
            'Fabric Manager', 'reachable at %s: 15 partitions, 1 active'
            % self.fm.address), check)

    def test_up_with_a_library_older_than_connect_v2(self):
        # fmConnect falls back to fmConnectParams_v1 for such a library.
        self.conf.set_override('fabric_manager_library',
                               fake_fm.library(connect_v1_only=True),
                               'gpu_p2p')
        self.assertEqual(result.success(
            'Fabric Manager', 'reachable at %s: 15 partitions, 0 active'
            % self.fm.address), self.check())

    def test_down_names_the_address_and_the_service(self):
        self.fm.down()
        check = self.check()
        self.assertEqual(FAIL, check.code)
        self.assertIn('cannot reach it at %s (Fabric Manager fmConnect'
                      % self.fm.address, check.message)
        self.assertIn('systemctl enable --now nvidia-fabricmanager',
                      check.fix)
        self.assertIn('see troubleshooting: Fabric Manager unreachable',
                      check.fix)

    def test_restarted_and_waiting_for_the_list(self):
        self.fm.restart()
        check = self.check()
        self.assertEqual(result.Code.WARNING, check.code)
        self.assertIn('has no partition data yet (Fabric Manager '
                      'fmGetSupportedFabricPartitions() failed: '
                      'FM_ST_NOT_CONFIGURED (-8))', check.message)
        self.assertIn('next periodic update', check.fix)

    def test_library_missing(self):
        self.conf.set_override('fabric_manager_library',
                               '/nonexistent/libnvfm.so.1', 'gpu_p2p')
        check = self.check()
        self.assertEqual(FAIL, check.code)
        self.assertIn('fabric_manager_library', check.fix)


class TestPartitionsAndModules(base.TestCase):

    def test_partitions_listed(self):
        where = fabric.module_addresses(fm_partitions(), hgx_topology())
        self.assertEqual(MODULES, where)
        checks = fabric.check_partitions(fm_partitions(active={3}), where)
        self.assertEqual(15, len(checks))
        self.assertEqual(result.success(
            'FM partition 3', 'modules 1, 3 -> 0000:08:00.0, 0000:04:00.0; '
            'active'), checks[3])
        self.assertEqual('module 5 -> 0000:88:00.0; inactive',
                         checks[11].message)

    def test_every_module_known(self):
        check = fabric.check_module_ids(fm_partitions(), MODULES,
                                        hgx_topology())
        self.assertEqual(OK, check.code)
        self.assertIn('1 0000:08:00.0, 2 0000:03:00.0', check.message)

    def test_unknown_module(self):
        known = {m: a for m, a in MODULES.items() if m != 2}
        topology = hgx_topology(known)
        where = fabric.module_addresses(fm_partitions(), topology)
        self.assertEqual(known, where)
        check = fabric.check_module_ids(fm_partitions(), where, topology)
        self.assertEqual(FAIL, check.code)
        self.assertIn('no module ID for GPU 0000:03:00.0; no GPU for '
                      'module 2', check.message)
        self.assertIn('see troubleshooting: GPU module IDs unknown',
                      check.fix)
        self.assertIn('modules 2, 4 -> unknown, 0000:09:00.0',
                      fabric.check_partitions(fm_partitions(),
                                              where)[4].message)

    def test_single_gpu_advice(self):
        check = fabric.check_single_gpu(fm_partitions(), MODULES)
        self.assertEqual(OK, check.code)
        self.assertIn('a 1-GPU server has no NVLink peers, but nova-compute '
                      'activates that partition', check.message)
        without = tuple(p for p in fm_partitions() if p.id != 14)
        check = fabric.check_single_gpu(without, MODULES)
        self.assertEqual(WARN, check.code)
        self.assertIn('no 1-GPU partition for module 8 (GPU 0000:89:00.0)',
                      check.message)


class TestBindings(base.TestCase):

    def test_switches_on_nvidia_in_shared_mode(self):
        topology = test_corpus.discover(HGX)
        self.assertEqual(list(SWITCHES), [
            f.address for f in nvswitch.switches(topology)])
        self.assertEqual(
            [result.success('NVSwitch', '4 NVSwitch functions on nvidia: '
                            'Fabric Manager on this host drives them')],
            nvswitch.check_bindings(topology, 'nvidia'))
        checks = nvswitch.check_bindings(topology, 'vfio-pci')
        self.assertEqual([FAIL] * 4, [c.code for c in checks])
        self.assertEqual(result.failure(
            '0000:0d:00.0', 'NVSwitch bound to nvidia, not vfio-pci: a '
            'whole-board server takes them with its GPUs',
            'driverctl set-override 0000:0d:00.0 vfio-pci'), checks[0])
        self.assertEqual([], nvswitch.check_bindings(topology, None))

    def test_switch_driver(self):
        self.assertEqual('nvidia', fabric.switch_driver(facts()))
        self.assertEqual('nvidia', fabric.switch_driver(facts(None)))
        self.assertEqual('vfio-pci', fabric.switch_driver(
            facts(fabric.FabricMode.FULL_PASSTHROUGH, 'sysfs')))
        self.assertIsNone(fabric.switch_driver(facts(None, 'sysfs')))

    def test_gpus_idle_on_nvidia(self):
        gpu = test_checks.fn('0000:03:00.0', driver='nvidia', group=1)
        topology = test_checks.topo(gpu)
        self.assertEqual(FAIL, vfio.check_bindings(topology)[0].code)
        (check,) = vfio.check_bindings(topology, idle_on_nvidia=True)
        self.assertEqual(OK, check.code)
        self.assertIn('1 of 1 NVIDIA GPUs bound to nvidia (idle',
                      check.message)

    def test_managed_no_fails(self):
        topology = test_corpus.discover(HGX)
        pci = placement.PciSettings(True, (
            '{"address": "0000:03:00.0", "managed": "no"}',
            '{"vendor_id": "10de", "product_id": "2330"}'))
        (check,) = fabric.check_managed(topology, pci)
        self.assertEqual(FAIL, check.code)
        self.assertIn('managed=no for GPU 0000:03:00.0: ', check.message)
        self.assertEqual([], fabric.check_managed(
            topology, placement.PciSettings(True, (pci.device_specs[1],))))
        self.assertEqual([], fabric.check_managed(topology, None))


class TestHostChecks(base.TestCase):

    def run_checks(self, fabric_facts, topology=None):
        topology = topology or hgx_topology()
        return host.host_checks(
            topology, test_checks.versions.HostVersions(
                (11, 3, 0), (10, 0, 2)),
            test_checks.lc.LinkClass.PHB, test_checks.lc.AcsPolicy.ROUTE,
            sysfs_root=None, fabric=fabric_facts)

    def test_shared_mode_in_order(self):
        checks = by_subject(self.run_checks(facts()))
        for subject in ('Fabric Manager mode', 'Fabric Manager', 'NVSwitch',
                        'module IDs', '1-GPU servers', 'FM partition 0',
                        'FM partition 14'):
            self.assertEqual(OK, checks[subject].code, subject)
        # The corpus host's GPUs are on vfio-pci: in guests, or left there.
        self.assertIn('8 of 8 NVIDIA GPUs bound to nvidia (idle',
                      checks['vfio-pci'].message)
        subjects = [c.subject for c in self.run_checks(facts())]
        self.assertLess(subjects.index('Fabric Manager mode'),
                        subjects.index('module IDs'))

    def test_fabric_manager_down(self):
        down = fabric.FabricState(error=exception.FmUnavailable(
            'fmConnect(/run/fm.sock)', nvfm.FM_ST_CONNECTION_NOT_VALID,
            nvfm.status_text(nvfm.FM_ST_CONNECTION_NOT_VALID)))
        checks = self.run_checks(facts(state=down))
        self.assertEqual(FAIL, by_subject(checks)['Fabric Manager'].code)
        self.assertNotIn('module IDs', by_subject(checks))
        self.assertNotIn('FM partition 0', by_subject(checks))

    def test_without_facts_as_before(self):
        checks = by_subject(self.run_checks(None, test_corpus.discover(HGX)))
        self.assertEqual(WARN, checks['NVSwitch'].code)
        self.assertNotIn('Fabric Manager mode', checks)

    def test_unread_topology(self):
        checks = host.unread_host_checks(
            test_checks.versions.HostVersions((11, 3, 0), (10, 0, 2)),
            'Fabric Manager fmConnect failed', '/',
            fabric=facts(None, state=fabric.FabricState(
                error=exception.FmUnavailable('fmConnect(/run/fm.sock)', -9,
                                              nvfm.status_text(-9)))))
        self.assertEqual([('GPU topology', FAIL),
                          ('Fabric Manager mode', WARN),
                          ('Fabric Manager', FAIL)],
                         [(c.subject, c.code) for c in checks[-3:]])


class TestGather(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.fm = fake_fm.FakeFM(self.dir)
        self.config = os.path.join(self.dir, 'fabricmanager.cfg')

    def conf(self, backend='sysfs'):
        return test_corpus.make_conf(
            topology_backend=backend, fabric_manager_address=self.fm.address,
            fabric_manager_library=fake_fm.library())

    def test_not_an_hgx_host(self):
        self.assertIsNone(fabric.gather(
            self.conf(), self.config,
            test_corpus.discover('pcie-8gpu-4switch-2socket')))

    def test_switches_without_configuration(self):
        found = fabric.gather(self.conf(), self.config,
                              test_corpus.discover(HGX))
        self.assertIsNone(found.config.mode)
        self.assertIsNone(found.state)
        self.assertEqual([], self.fm.calls())

    def test_shared_mode_asks_fabric_manager(self):
        with open(self.config, 'w') as f:
            f.write('FABRIC_MODE=1\n')
        found = fabric.gather(self.conf(), self.config,
                              test_corpus.discover(HGX))
        self.assertEqual(15, len(found.state.partitions))
        self.assertIsNone(found.state.error)

    def test_backend_alone_makes_an_hgx_host(self):
        found = fabric.gather(self.conf('fabricmanager'), self.config, None)
        self.assertEqual('fabricmanager', found.backend)
        self.assertEqual(15, len(found.state.partitions))


class TestCheckCLI(test_check_command.CheckCLIBase):
    """The command on the corpus HGX host with a stand-in Fabric Manager."""

    def setUp(self):
        super().setUp()
        self.fm = fake_fm.FakeFM(self.root)
        os.makedirs(os.path.join(self.root, 'usr/share/nvidia/nvswitch'))
        self.config = os.path.join(
            self.root, fabric.CONFIG_FILE.lstrip('/'))

    def nova_conf(self, backend, modules=MODULES):
        """nova.conf for the corpus HGX host, and the kept module IDs.

        NVML sees no GPU (they are on vfio-pci): the fabricmanager backend
        reads the module IDs kept before.
        """
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.module_ids.read_nvml',
            return_value=({}, 'NVML is not available: no GPU on nvidia')))
        kept = os.path.join(self.root, 'module_ids.json')
        with open(kept, 'w') as f:
            json.dump({'module_ids': {a: m for m, a in modules.items()}}, f)
        path = os.path.join(self.root, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[gpu_p2p]\ntopology_backend = %s\nsysfs_root = %s\n'
                    'fabric_manager_address = %s\n'
                    'fabric_manager_library = %s\nmodule_id_file = %s\n'
                    % (backend, test_corpus.tree(HGX), self.fm.address,
                       fake_fm.library(), kept))
        return path

    def mode(self, value):
        with open(self.config, 'w') as f:
            f.write('FABRIC_MODE=%d\n' % value)

    def test_shared_mode_with_the_backend(self):
        self.mode(1)
        self.fm.force_active(3)
        rc, out = self.run_cli('--config-file',
                               self.nova_conf('fabricmanager'))
        text = test_check_command.lines(out)
        # The GPUs are not in placement: nova.conf's [pci] default.
        self.assertEqual([(WARN, 'placement')], self.not_ok(out), text)
        self.assertIn('Success Fabric Manager: reachable at %s: 15 '
                      'partitions, 1 active' % self.fm.address, text)
        self.assertIn('Success FM partition 3: modules 1, 3 -> '
                      '0000:08:00.0, 0000:04:00.0; active', text)
        self.assertIn('Success NVSwitch: 4 NVSwitch functions on nvidia',
                      text)
        self.assertIn('Success module IDs: every GPU\'s module ID known: '
                      '1 0000:08:00.0, 2 0000:03:00.0', text)
        self.assertIn('Success 1-GPU servers: each GPU has its 1-GPU '
                      'partition', text)

    def test_module_id_unknown(self):
        self.mode(1)
        known = {m: a for m, a in MODULES.items() if m != 2}
        rc, out = self.run_cli('--config-file',
                               self.nova_conf('fabricmanager', known))
        self.assertEqual(1, rc)
        self.assertIn((FAIL, 'module IDs'), self.not_ok(out))
        self.assertIn('Success FM partition 4: modules 2, 4 -> unknown, '
                      '0000:09:00.0; inactive',
                      test_check_command.lines(out))

    def test_fabric_manager_down(self):
        self.mode(1)
        self.fm.down()
        rc, out = self.run_cli('--config-file',
                               self.nova_conf('fabricmanager'))
        self.assertEqual(1, rc)
        self.assertEqual([(FAIL, 'GPU topology'), (FAIL, 'Fabric Manager')],
                         self.not_ok(out)[-2:])
        self.assertIn('systemctl enable --now nvidia-fabricmanager',
                      test_check_command.lines(out))

    def test_shared_mode_without_the_backend(self):
        self.mode(1)
        rc, out = self.run_cli('--config-file', self.nova_conf('sysfs'))
        self.assertEqual(1, rc)
        # (And the GPUs are not in placement: nova.conf's [pci] default.)
        self.assertEqual([(FAIL, 'Fabric Manager mode'), (WARN, 'placement')],
                         self.not_ok(out))

    def test_full_passthrough_from_another_path(self):
        path = os.path.join(self.root, 'fm.cfg')
        with open(path, 'w') as f:
            f.write('FABRIC_MODE=0\n')
        rc, out = self.run_cli('--sysfs-root', test_corpus.tree(HGX),
                               '--fabricmanager-config', path)
        self.assertEqual(1, rc)
        # The switches are on nvidia: a whole-board guest cannot take them.
        self.assertEqual([(FAIL, address) for address in SWITCHES],
                         self.not_ok(out))
        self.assertEqual([], self.fm.calls())
