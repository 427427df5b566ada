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

"""Consumer GPUs get no clique: the PCI ID database, the rule, and what
follows from it for cliques, traits, guests and the CLI.
"""

import json
import os

import fixtures

from lab import decision_quality
from nova_gpu_p2p.checks import consumer_gpus as check
from nova_gpu_p2p.checks import result
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import instance_cliques
from nova_gpu_p2p.topology import consumer_gpus as cg
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_ids
from nova_gpu_p2p import traits
import tests
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_cli
from tests.unit import test_corpus

#: Device IDs of the fixture's lines (tests/fixtures/pci.ids).
RTX4090, RTX3090, RTX3050, TITAN_RTX, TITAN_V, GTX_TITAN_LE = (
    0x2684, 0x2204, 0x2507, 0x1e02, 0x1d81, 0x1003)
QUADRO_GEFORCE = 0x00fc
RTX6000_ADA, L40S, H100, A6000, TESLA_P40 = (
    0x26b1, 0x26b9, 0x2330, 0x2230, 0x1b38)
#: Not in the fixture (nor in Debian 12's file): B200.
B200 = 0x2901
A, B, C = '0000:03:00.0', '0000:04:00.0', '0000:05:00.0'
REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
SYSTEM_FILE = '/usr/share/misc/pci.ids'


def fixture_db() -> pci_ids.Database:
    return pci_ids.read(tests.PCI_IDS)


def _host(*devices: int, nvlink: bool = False) -> model.HostTopology:
    """GPUs of these device IDs under one switch (PIX), in order A, B, C."""
    functions = {'0000:02:00.0': model.PCIFunction(
        '0000:02:00.0', 0x10b5, 0x8747, 0x060400, None, 'pci0000:00',
        port_type=model.PortType.UPSTREAM)}
    addresses = (A, B, C)[:len(devices)]
    for address, device in zip(addresses, devices):
        port = '0000:01:%02x.0' % int(address[5:7], 16)
        functions[port] = model.PCIFunction(
            port, 0x10b5, 0x8747, 0x060400, '0000:02:00.0', 'pci0000:00',
            port_type=model.PortType.DOWNSTREAM, acs=model.Acs(0, 0))
        functions[address] = model.PCIFunction(
            address, model.NVIDIA_VENDOR_ID, device, 0x030000, port,
            'pci0000:00', numa_node=0)
    pairs = frozenset()
    if nvlink:
        pairs = frozenset({frozenset(addresses[:2])})
    return model.HostTopology(functions=functions, nvlink_pairs=pairs)


class TestDatabase(base.TestCase):
    """pci.ids as pciutils writes it: only NVIDIA's device lines kept."""

    def test_names_from_the_nvidia_section(self):
        names = fixture_db().names
        self.assertEqual('AD102 [GeForce RTX 4090]', names[RTX4090])
        self.assertEqual('AD102GL [L6000 / RTX 6000 Ada Generation]',
                         names[RTX6000_ADA])
        self.assertEqual('GH100[H100 SXM5 80GB]', names[H100])
        self.assertEqual('AD102GL [L40S]', names[L40S])

    def test_subsystems_other_vendors_and_classes_are_not_devices(self):
        names = fixture_db().names
        # A subsystem line under the RTX 3090 (subvendor 147d).
        self.assertNotIn(0x147d, names)
        # AMD before NVIDIA, Intel's "Titan Ridge" after it.
        self.assertNotIn(0x744c, names)
        self.assertNotIn(0x15e7, names)
        self.assertFalse(any('Titan Ridge' in n for n in names.values()))
        self.assertNotIn(0x0000, names)

    def test_search_paths_in_order_and_none_found(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.pci_ids.SEARCH_PATHS',
            ('/nonexistent/pci.ids', tests.PCI_IDS)))
        self.assertEqual(tests.PCI_IDS, pci_ids.read().path)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.pci_ids.SEARCH_PATHS',
            ('/nonexistent/a', '/nonexistent/b')))
        found = pci_ids.read()
        self.assertEqual(({}, None), (found.names, found.path))
        self.assertEqual('no PCI ID database found (looked for '
                         '/nonexistent/a, /nonexistent/b)', found.error)

    def test_unreadable_files_are_errors_not_exceptions(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        fifo = os.path.join(tmp, 'fifo')
        os.mkfifo(fifo)
        for path, error in (
                (tmp, 'not a regular file'),
                # A FIFO nobody writes to: refused, not waited on.
                (fifo, 'not a regular file'),
                (os.path.join(tmp, 'missing'), 'No such file or directory')):
            found = pci_ids.read(path)
            self.assertEqual({}, found.names)
            self.assertEqual('cannot read the PCI ID database %s: %s'
                             % (path, error), found.error)

    def test_size_bound(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.pci_ids.MAX_SIZE', 1024))
        found = pci_ids.read(tests.PCI_IDS)
        self.assertEqual({}, found.names)
        self.assertEqual('cannot read the PCI ID database %s: more than '
                         '1024 bytes' % tests.PCI_IDS, found.error)

    def test_bytes_that_are_not_utf8(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'ids')
        with open(path, 'wb') as f:
            f.write(b'10de  NVIDIA Corporation\n\t2684  AD102 [GeForce '
                    b'RTX 4090 \xff]\n')
        self.assertEqual('AD102 [GeForce RTX 4090 \ufffd]',
                         pci_ids.read(path).names[RTX4090])

    def test_the_fixture_lines_are_the_system_file_lines(self):
        """The fixture is cut from Debian 12's file, less one later line."""
        if not os.path.isfile(SYSTEM_FILE):
            if os.environ.get(REQUIRE_TOOLS) == '1':
                self.fail('%s missing (package pci.ids; %s=1)'
                          % (SYSTEM_FILE, REQUIRE_TOOLS))
            self.skipTest('%s missing (package pci.ids)' % SYSTEM_FILE)
        system = pci_ids.read(SYSTEM_FILE)
        later = {L40S}
        for device, name in fixture_db().names.items():
            if device not in later or device in system.names:
                self.assertEqual(name, system.names.get(device), hex(device))
        for key, name in fixture_db().subsystems.items():
            self.assertEqual(name, system.subsystems.get(key), key)


class TestRule(base.TestCase):
    """GeForce and TITAN are consumer GPUs, by their names in the file."""

    def test_kinds_of_real_names(self):
        names = fixture_db().names
        for device in (RTX4090, RTX3090, RTX3050, TITAN_RTX, TITAN_V,
                       GTX_TITAN_LE, QUADRO_GEFORCE):
            self.assertTrue(cg.consumer_name(names[device]), names[device])
        for device in (RTX6000_ADA, L40S, H100, A6000, TESLA_P40):
            self.assertFalse(cg.consumer_name(names[device]), names[device])
        self.assertFalse(cg.consumer_name(None))

    def test_judge_bars_consumer_and_unknown(self):
        """Display controllers, no subsystem known: the names decide."""
        kinds = cg.judge(_host(RTX4090, RTX6000_ADA, B200), fixture_db(),
                         allow=False)
        self.assertEqual(
            {A: (RTX4090, 'AD102 [GeForce RTX 4090]', cg.Kind.CONSUMER,
                 "the PCI ID database names the device 'AD102 [GeForce RTX "
                 "4090]'"),
             B: (RTX6000_ADA, 'AD102GL [L6000 / RTX 6000 Ada Generation]',
                 cg.Kind.PROFESSIONAL,
                 "the PCI ID database names the device 'AD102GL [L6000 / "
                 "RTX 6000 Ada Generation]'"),
             C: (B200, None, cg.Kind.UNKNOWN,
                 'a display controller (class 0x0300) whose board maker '
                 '(subsystem) is unknown, that neither NVML nor the PCI ID '
                 'database names (not listed in %s)' % tests.PCI_IDS)},
            {a: (m.device, m.name, m.kind, m.rule)
             for a, m in kinds.models.items()})
        self.assertEqual([A, C], sorted(kinds.barred))
        self.assertEqual(
            "AD102 [GeForce RTX 4090] (10de:2684) is a consumer GPU "
            "(GeForce or TITAN): the PCI ID database names the device "
            "'AD102 [GeForce RTX 4090]'; GPUDirect P2P between such GPUs "
            "in a VM can hang NCCL or return wrong data; set [gpu_p2p] "
            "allow_consumer_gpu_cliques = true, only after verifying P2P "
            "bandwidth and data inside a guest on these cards and driver",
            kinds.barred[A])
        self.assertEqual(
            '10de:2901 may be a consumer GPU: a display controller (class '
            '0x0300) whose board maker (subsystem) is unknown, that '
            'neither NVML nor the PCI ID database names (not listed in '
            '%s); install a PCI ID database that names it (see '
            'troubleshooting: Consumer GPUs), or, once you know it is no '
            'GeForce or TITAN, add 10de:2901 to [gpu_p2p] '
            'trusted_gpu_models' % tests.PCI_IDS, kinds.barred[C])
        self.assertEqual((tests.PCI_IDS, None, False, '2023.04.10'),
                         (kinds.database, kinds.database_error,
                          kinds.allowed, kinds.database_version))

    def test_no_database_every_gpu_unknown(self):
        missing = pci_ids.read('/nonexistent/pci.ids')
        kinds = cg.judge(_host(H100, H100), missing, allow=False)
        self.assertEqual([A, B], kinds.of_kind(cg.Kind.UNKNOWN))
        self.assertIn('(cannot read the PCI ID database /nonexistent/'
                      'pci.ids: No such file or directory)', kinds.barred[A])

    def test_allow_bars_none_and_keeps_the_kinds(self):
        kinds = cg.judge(_host(RTX4090, B200), fixture_db(), allow=True)
        self.assertEqual({}, kinds.barred)
        self.assertEqual([A], kinds.of_kind(cg.Kind.CONSUMER))
        self.assertEqual([B], kinds.of_kind(cg.Kind.UNKNOWN))


def _assign(topology, allow=False, clique_map=None):
    kinds = cg.judge(topology, fixture_db(), allow)
    return host_cliques.assign(topology, lc.LinkClass.PXB,
                               clique_map=clique_map, barred=kinds.barred)


class TestCliques(base.TestCase):

    def test_consumer_pair_behind_one_switch_has_no_clique(self):
        found = _assign(_host(RTX4090, RTX4090))
        self.assertEqual({A: None, B: None}, found.ids)
        self.assertEqual(((A,), (B,)), found.groups)
        self.assertEqual(0, found.largest())
        self.assertEqual([A, B], found.without_id())
        self.assertEqual(('%s, %s get no clique: %s'
                          % (A, B, found.barred[A]),), found.findings)

    def test_allowed_they_share_clique_0(self):
        found = _assign(_host(RTX4090, RTX4090), allow=True)
        self.assertEqual({A: 0, B: 0}, found.ids)
        self.assertEqual((), found.findings)

    def test_professional_pair_keeps_its_clique(self):
        self.assertEqual({A: 0, B: 0},
                         _assign(_host(RTX6000_ADA, RTX6000_ADA)).ids)

    def test_mixed_switch_the_others_keep_theirs(self):
        found = _assign(_host(RTX6000_ADA, RTX4090, L40S))
        self.assertEqual({A: 0, B: None, C: 0}, found.ids)
        self.assertEqual(((A, C), (B,)), found.groups)
        self.assertEqual(['%s gets no clique: %s' % (B, found.barred[B])],
                         list(found.findings))

    def test_clique_map_does_not_lift_the_bar(self):
        found = _assign(_host(RTX4090, RTX4090), clique_map={A: 3, B: 3})
        self.assertEqual({A: None, B: None}, found.ids)
        self.assertEqual({A: 3, B: 3}, _assign(
            _host(RTX4090, RTX4090), allow=True,
            clique_map={A: 3, B: 3}).ids)

    def test_traits_none_from_consumer_gpus_nvlink_included(self):
        topology = _host(RTX3090, RTX3090, nvlink=True)
        self.assertEqual(set(), traits.p2p_traits(topology,
                                                  _assign(topology)))
        self.assertEqual(
            {'CUSTOM_GPU_P2P', 'CUSTOM_GPU_P2P_CLIQUE_2',
             'CUSTOM_GPU_P2P_NVLINK'},
            traits.p2p_traits(topology, _assign(topology, allow=True)))


def _instance(mode: str, topology: model.HostTopology, gpus):
    request = extra_specs.parse({extra_specs.CLIQUE_KEY: mode}).clique
    return instance_cliques.plan(request, gpus, _assign(topology),
                                 lambda a, b: 'PIX', 'PXB')


class TestInstanceCliques(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = _host(RTX4090, RTX4090, RTX6000_ADA)
        self.why = _assign(self.host).barred[A]

    def test_auto_no_clique_and_says_why(self):
        found = _instance('auto', self.host, [A, B])
        self.assertEqual({}, found.ids)
        self.assertIsNone(found.refusal)
        self.assertEqual((), found.warnings)
        self.assertEqual(('%s, %s get no clique: %s' % (A, B, self.why),),
                         found.info)

    def test_required_refused_naming_the_reason(self):
        found = _instance('required', self.host, [A, B])
        self.assertEqual({}, found.ids)
        self.assertEqual('GPUs %s, %s cannot form one P2P clique on this '
                         'host: %s, %s get no clique: %s'
                         % (A, B, A, B, self.why), found.refusal)

    def test_fixed_id_withheld_with_a_warning(self):
        found = _instance('5', self.host, [A, C])
        self.assertEqual({C: 5}, found.ids)
        self.assertEqual(('%s gets no clique: %s' % (A, self.why),),
                         found.warnings)

    def test_one_gpu_nothing_to_withhold(self):
        for mode in ('auto', 'required'):
            self.assertEqual(instance_cliques.CliquePlan(),
                             _instance(mode, self.host, [A]), mode)


class TestCLI(base.TestCase):
    """The issue's own acceptance: two GeForce cards behind one switch."""

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.NoHostConfig())
        self.geforce = test_corpus.tree('geforce-switch-pair')

    def json(self, *argv):
        rc, out, err = test_cli.run('topology', '--json', *argv)
        self.assertEqual((0, ''), (rc, err))
        return json.loads(out)

    def test_no_nova_conf_no_clique_no_trait_no_tag(self):
        report = self.json('--sysfs-root', self.geforce)
        self.assertEqual([None, None], [g['clique'] for g in report['gpus']])
        self.assertEqual([True, True],
                         [g['consumer'] for g in report['gpus']])
        self.assertEqual(['AD102 [GeForce RTX 4090]'] * 2,
                         [g['name'] for g in report['gpus']])
        for gpu in report['gpus']:
            self.assertIn('is a consumer GPU (GeForce or TITAN)',
                          gpu['no_clique'])
        self.assertEqual([], report['cliques'])
        self.assertEqual([], [t for t in report['traits']
                              if t.startswith('CUSTOM_GPU_P2P')])
        rc, out, err = test_cli.run('topology', '--device-spec',
                                    '--sysfs-root', self.geforce)
        self.assertEqual((0, ''), (rc, out))
        self.assertIn('No GPU is in a clique', err)

    def test_matrix_marks_them(self):
        rc, out, _ = test_cli.run('topology', '--sysfs-root', self.geforce)
        rows = out.splitlines()
        self.assertTrue(rows[1].endswith('- (consumer GPU)'), rows[1])
        self.assertIn('traits: (none)', rows)
        self.assertIn('is a consumer GPU (GeForce or TITAN)', out)

    def test_allowed_in_a_config_file_they_share_clique_0(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[gpu_p2p]\nallow_consumer_gpu_cliques = true\n')
        report = self.json('--config-file', path, '--sysfs-root',
                           self.geforce)
        self.assertEqual([0, 0], [g['clique'] for g in report['gpus']])
        self.assertEqual([True, True],
                         [g['consumer'] for g in report['gpus']])
        self.assertEqual([None, None],
                         [g['no_clique'] for g in report['gpus']])
        self.assertIn('CUSTOM_GPU_P2P_CLIQUE_2', report['traits'])
        rc, out, _ = test_cli.run('topology', '--config-file', path,
                                  '--sysfs-root', self.geforce)
        self.assertTrue(out.splitlines()[1].endswith('0 (consumer GPU)'))

    def test_rtx_6000_ada_pair_keeps_its_clique(self):
        report = self.json('--sysfs-root',
                           test_corpus.tree('ada-switch-pair'))
        self.assertEqual([(0, False, None)] * 2,
                         [(g['clique'], g['consumer'], g['no_clique'])
                          for g in report['gpus']])
        self.assertIn('CUSTOM_GPU_P2P_CLIQUE_2', report['traits'])


class TestDiscovery(base.TestCase):

    def test_the_database_is_read_once_per_discovery(self):
        opts = test_corpus.make_conf(
            sysfs_root=test_corpus.tree('geforce-switch-pair'))
        reads = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.pci_ids.read',
            side_effect=pci_ids.read)).mock
        found = discovery.discover(opts)
        self.assertEqual(1, reads.call_count)
        self.assertEqual([A, B], found.kinds.of_kind(cg.Kind.CONSUMER))
        self.assertEqual({A: None, B: None}, found.cliques.ids)
        discovery.discover(opts, found)
        self.assertEqual(2, reads.call_count)

    def test_a_new_bar_is_logged_once_across_updates(self):
        log = self.useFixture(fixtures.FakeLogger())
        opts = test_corpus.make_conf(
            sysfs_root=test_corpus.tree('geforce-switch-pair'))
        found = discovery.discover(opts)
        discovery.discover(opts, found)
        self.assertEqual(1, log.output.count('get no clique'))
        # And which rule decided each GPU, once.
        for address in (A, B):
            self.assertEqual(1, log.output.count(
                "GPU %s (AD102 [GeForce RTX 4090] (10de:2684)) is a "
                "consumer GPU: the PCI ID database names the device 'AD102 "
                "[GeForce RTX 4090]'; to let it have a clique: set "
                "[gpu_p2p] allow_consumer_gpu_cliques = true" % address))


class TestCheckRow(base.TestCase):
    """check's consumer GPUs line: what it found, and the fix."""

    def kinds(self, *devices, database=None, allow=False):
        return cg.judge(_host(*devices), database or fixture_db(), allow)

    def test_professional_only(self):
        self.assertEqual([result.success(
            check.SUBJECT, 'none: every GPU is a professional or '
            "data-center GPU (names from %s, version 2023.04.10): %s "
            "(GH100[H100 SXM5 80GB] (10de:2330)): the PCI ID database "
            "names the device 'GH100[H100 SXM5 80GB]'; %s (AD102GL [L40S] "
            "(10de:26b9)): the PCI ID database names the device 'AD102GL "
            "[L40S]'" % (tests.PCI_IDS, A, B))],
            check.check_consumer_gpus(self.kinds(H100, L40S)))

    def test_consumer_gpus_need_no_fix_but_say_why(self):
        [row] = check.check_consumer_gpus(self.kinds(RTX4090, RTX4090))
        self.assertEqual(result.Code.WARNING, row.code)
        self.assertEqual(
            "consumer GPUs %s, %s (AD102 [GeForce RTX 4090] (10de:2684)): "
            "the PCI ID database names the device 'AD102 [GeForce RTX "
            "4090]' (to lift: set [gpu_p2p] allow_consumer_gpu_cliques = "
            "true, only after verifying P2P bandwidth and data inside a "
            "guest on these cards and driver) get no clique and no P2P "
            "trait, so P2P flavors do not get them" % (A, B), row.message)
        self.assertIn('see troubleshooting: Consumer GPUs', row.fix)

    def test_unknown_gpus_name_the_package(self):
        missing = pci_ids.read('/nonexistent/pci.ids')
        [row] = check.check_consumer_gpus(
            self.kinds(H100, database=missing))
        self.assertIn('GPUs that may be consumer GPUs %s (10de:2330): a '
                      'display controller (class 0x0300) whose board maker '
                      '(subsystem) is unknown, that neither NVML nor the '
                      'PCI ID database names (cannot read the PCI ID '
                      'database /nonexistent/pci.ids' % A, row.message)
        self.assertIn('add 10de:2330 to [gpu_p2p] trusted_gpu_models',
                      row.message)
        self.assertEqual('install or update the PCI ID database (see '
                         'troubleshooting: Consumer GPUs), or name it with '
                         '[gpu_p2p] pci_ids_file; or vouch for the model in '
                         '[gpu_p2p] trusted_gpu_models', row.fix)

    def test_allowed_stays_a_warning(self):
        [row] = check.check_consumer_gpus(
            self.kinds(RTX4090, B200, allow=True))
        self.assertEqual(result.Code.WARNING, row.code)
        self.assertIn('may share cliques: [gpu_p2p] '
                      'allow_consumer_gpu_cliques = true', row.message)
        self.assertIn('10de:2901', row.message)

    def test_no_gpu_no_row(self):
        self.assertEqual([], check.check_consumer_gpus(self.kinds()))


class TestBenchTruth(base.TestCase):

    def test_no_pair_of_consumer_gpus_is_p2p_capable(self):
        """So the wrapper's clique on them counts as a false one."""
        self.assertEqual(frozenset(), decision_quality.host_truth(
            hosts.EXPECTED['geforce-switch-pair'], {}).p2p_pairs)
        self.assertEqual(frozenset({frozenset((A, B))}),
                         decision_quality.host_truth(
                             hosts.EXPECTED['ada-switch-pair'],
                             {}).p2p_pairs)
