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

"""Discovery, link classes and cliques over the whole fixture corpus.

Each corpus host is built as a real sysfs tree by the generator and read by
the sysfs backend; the answers are checked against the corpus' hand-written
``nvidia-smi topo -m`` tables and clique tables
(:mod:`tests.fixtures.expected_cliques`), never against this package's own
code.
"""

import atexit
import contextlib
import dataclasses
import io
import json
import os
import shutil
import tempfile

import fixtures
from oslo_config import cfg

from nova_gpu_p2p.cmd import cli
from nova_gpu_p2p import conf
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import deadline
from tests.fixtures import expected_cliques
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.unit import base
from tests.unit import test_cli

_TREES: dict[tuple[str, bool], str] = {}
#: How version 1 captures recorded an unreadable config space.
V1_UNREADABLE_CONFIG = (
    'PCI config space beyond 64 bytes could not be read (nova-compute\'s '
    'privsep daemon is not available, or not root): ACS settings are '
    'unknown and treated as off, switch port types are inferred from the '
    'tree')
_SCRATCH: list[str] = []
#: In mixed-vendors-nic: two switch downstream ports, a GPU below the first.
SWITCH_PORTS = ('0000:02:00.0', '0000:02:01.0')
SWITCH_GPU = '0000:03:00.0'


def tree(name: str, unprivileged: bool = False) -> str:
    """The host's sysfs tree, built once per test process."""
    key = (name, unprivileged)
    if key not in _TREES:
        if not _SCRATCH:
            _SCRATCH.append(tempfile.mkdtemp(
                dir=sysfs_builder.scratch_dir()))
            atexit.register(shutil.rmtree, _SCRATCH[0], True)
        root = os.path.join(_SCRATCH[0], '%s-%d' % key)
        sysfs_builder.build(hosts.host(name), root, unprivileged)
        _TREES[key] = root
    return _TREES[key]


def make_conf(**overrides) -> cfg.ConfigOpts:
    opts = cfg.ConfigOpts()
    conf.register_opts(opts)
    opts([], default_config_files=[])
    for key, value in overrides.items():
        opts.set_override(key, value, group='gpu_p2p')
    return opts


def discover(name: str, unprivileged: bool = False):
    backend = sysfs.SysfsBackend(
        make_conf(sysfs_root=tree(name, unprivileged)),
        read_config=sysfs.read_config_direct)
    return backend.discover()


LEVELS = [lc.LinkClass[name] for name in hosts.CLASSES]


def cases():
    """(name, unprivileged, expected): every corpus host and ACS case."""
    for name, expected in hosts.EXPECTED.items():
        yield name, False, expected
    for name, case in hosts.ACS_CASES.items():
        yield name, case.unprivileged, case.expected


class TestCorpus(base.TestCase):

    def test_corpus_has_the_required_hosts(self):
        self.assertGreaterEqual(len(hosts.HOSTS), 8)
        functions = len(discover('large-16gpu-8numa').functions)
        self.assertTrue(450 <= functions <= 550, functions)

    def test_gpus_numa_nodes_and_root_complexes(self):
        for name, unprivileged, expected in cases():
            topology = discover(name, unprivileged)
            self.assertEqual(
                [(g.address, g.numa_node, g.root_complex)
                 for g in expected.gpus],
                [(g.address, g.numa_node, g.root_complex)
                 for g in topology.gpus()], name)
            self.assertEqual(not unprivileged, topology.config_space_read,
                             name)
            self.assertEqual(
                list(expected.nics),
                sorted(f.address for f in topology.functions.values()
                       if f.is_nic), name)

    def test_link_classes(self):
        for name, unprivileged, expected in cases():
            topology = discover(name, unprivileged)
            for a, b in expected.links:
                self.assertEqual(
                    expected.link(a, b, 'ignore'),
                    lc.effective_class(topology, a, b,
                                       lc.AcsPolicy.IGNORE).name,
                    '%s %s-%s' % (name, a, b))
                self.assertEqual(
                    expected.link(a, b, 'route'),
                    lc.effective_class(topology, a, b,
                                       lc.AcsPolicy.ROUTE).name,
                    '%s %s-%s routed' % (name, a, b))

    def test_cliques_at_every_level_and_policy(self):
        for name, unprivileged, _expected in cases():
            topology = discover(name, unprivileged)
            for level in LEVELS:
                for policy in lc.AcsPolicy:
                    result = cliques.assign(topology, level, policy)
                    self.assertEqual(
                        expected_cliques.groups(name, level.name,
                                                policy.value),
                        result.groups,
                        '%s at %s/%s' % (name, level.name, policy.value))

    def test_acs_excludes_redirected_gpus(self):
        expected = hosts.EXPECTED['acs-redirect-switch']
        a, b, c, d = expected.addresses
        result = cliques.assign(discover('acs-redirect-switch'),
                                lc.LinkClass.PXB)
        # A and B sit behind redirecting ports: each is alone.
        self.assertEqual({a: None, b: None, c: 0, d: 0}, result.ids)
        self.assertEqual({a: 0, b: 0, c: 0, d: 0}, cliques.assign(
            discover('acs-redirect-switch'), lc.LinkClass.PXB,
            lc.AcsPolicy.IGNORE).ids)

    def test_all_pairs_p2p_at_sys(self):
        topology = discover('pcie-8gpu-4switch-2socket')
        result = cliques.assign(topology, lc.LinkClass.SYS)
        self.assertEqual(1, len(result.groups))
        self.assertEqual(8, result.largest())

    def test_unprivileged_reads_fail_closed(self):
        for name, expected in hosts.EXPECTED.items():
            topology = discover(name, unprivileged=True)
            self.assertFalse(topology.config_space_read)
            self.assertEqual(1, topology.findings.count(
                sysfs.UNREADABLE_CONFIG), name)
            self.assertEqual(list(expected.addresses),
                             [g.address for g in topology.gpus()])
            for a, b in expected.links:
                tree_class = expected.link(a, b, 'ignore')
                # Port types are inferred from the tree, so the PCIe
                # classes hold under ignore. Every PIX or PXB pair of the
                # corpus crosses a switch downstream port, whose ACS is
                # unknown: Request Redirect on, so PHB under route.
                self.assertEqual(
                    tree_class,
                    lc.effective_class(topology, a, b,
                                       lc.AcsPolicy.IGNORE).name,
                    '%s %s-%s' % (name, a, b))
                self.assertEqual(
                    'PHB' if tree_class in ('PIX', 'PXB') else tree_class,
                    lc.effective_class(topology, a, b).name,
                    '%s %s-%s routed' % (name, a, b))

    def assertCliquesAtPXB(self, name, route, ignore):
        """Clique IDs of an ACS case's GPUs (in order) under each policy."""
        topology = discover(name, hosts.ACS_CASES[name].unprivileged)
        for policy, ids in ((lc.AcsPolicy.ROUTE, route),
                            (lc.AcsPolicy.IGNORE, ignore)):
            self.assertEqual(
                dict(zip(hosts.ACS_CASES[name].expected.addresses, ids)),
                cliques.assign(topology, lc.LinkClass.PXB, policy).ids,
                '%s %s' % (name, policy.value))
        return topology

    def test_unreadable_switch_gives_no_clique_under_route(self):
        topology = self.assertCliquesAtPXB(
            'acs-config-unreadable', route=[None] * 5, ignore=[0, 0, 0, 1, 1])
        # One finding for the host, not one per port.
        self.assertEqual((sysfs.UNREADABLE_CONFIG,), topology.findings)
        self.assertEqual(
            ['0000:02:00.0', '0000:02:01.0', '0000:02:02.0', '0000:07:00.0',
             '0000:07:01.0'],
            sorted(f.address for f in topology.functions.values()
                   if f.port_type is model.PortType.DOWNSTREAM
                   and not f.acs_known))

    def test_egress_control_and_ports_without_acs(self):
        # A's port has egress control on: A is alone. D and E's ports have
        # no ACS, read as such: they stay a switch-local clique.
        topology = self.assertCliquesAtPXB(
            'acs-egress-control', route=[None, 0, 0, 1, 1],
            ignore=[0, 0, 0, 1, 1])
        a, b, _c, d, e = hosts.ACS_CASES['acs-egress-control'] \
            .expected.addresses
        self.assertEqual({'0000:02:00.0': (lc.AcsRoute.EGRESS_CONTROL,)},
                         lc.routing_ports(topology, a, b))
        self.assertEqual({}, lc.routing_ports(topology, d, e))
        self.assertEqual((), topology.findings)

    def test_capture_round_trip(self):
        for name, unprivileged, _expected in cases():
            topology = discover(name, unprivileged)
            self.assertEqual(
                topology,
                capture.from_dict(json.loads(json.dumps(
                    capture.to_dict(topology)))), name)

    def test_version_1_capture_loads_as_unknown_acs(self):
        # Version 1 had no acs_known, and worded the finding "treated as
        # off": loading one gives what discovery gives now.
        for unprivileged in (False, True):
            topology = discover('acs-config-unreadable', unprivileged)
            data = capture.to_dict(topology)
            data['format_version'] = 1
            for record in data['functions']:
                del record['acs_known']
            data['findings'] = [
                f.replace(sysfs.UNREADABLE_CONFIG, V1_UNREADABLE_CONFIG)
                for f in data['findings']]
            self.assertEqual(topology, capture.from_dict(data))

    def damaged_capture(self, **parents: str) -> str:
        """A corpus host's capture, bridges given new parents, in a file."""
        data = capture.to_dict(discover('mixed-vendors-nic'))
        for record in data['functions']:
            record['parent'] = parents.get(record['address'],
                                           record['parent'])
        path = self.useFixture(fixtures.TempDir()).join('capture.json')
        with open(path, 'w') as f:
            json.dump(data, f)
        return path

    def test_capture_whose_bridges_are_each_others_parent(self):
        a, b = SWITCH_PORTS
        path = self.damaged_capture(**{a: b, b: a})
        error = self.assertRaises(exception.TopologyError,
                                  deadline.run_briefly, capture.load, path)
        self.assertIn(path, str(error))
        self.assertIn("bridges %s and %s are each other's parent" % (a, b),
                      str(error))

    def test_capture_naming_a_parent_it_lacks(self):
        path = self.damaged_capture(**{SWITCH_GPU: '0000:7f:00.0'})
        error = self.assertRaises(exception.TopologyError, capture.load, path)
        self.assertIn(path, str(error))
        self.assertIn('%s names parent 0000:7f:00.0' % SWITCH_GPU, str(error))

    def test_ancestors_in_a_loop_raise(self):
        a, b = SWITCH_PORTS
        topology = discover('mixed-vendors-nic')
        functions = dict(topology.functions)
        for child, parent in ((a, b), (b, a)):
            functions[child] = dataclasses.replace(functions[child],
                                                   parent=parent)
        looped = dataclasses.replace(topology, functions=functions)
        error = self.assertRaises(ValueError, deadline.run_briefly,
                                  looped.ancestors, SWITCH_GPU)
        self.assertIn("each other's parent", str(error))


class TestCLI(base.TestCase):

    def setUp(self):
        super().setUp()
        # The defaults, not a nova.conf this machine may have.
        self.useFixture(test_cli.NoHostConfig())

    def run_cli(self, *argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(0, cli.main(list(argv)))
        return out.getvalue()

    def test_topology_json_cliques_for_every_host(self):
        for name, expected in hosts.EXPECTED.items():
            report = json.loads(self.run_cli(
                'topology', '--sysfs-root', tree(name), '--json'))
            groups = [g for g in expected_cliques.groups(name)
                      if len(g) > 1 and not expected.consumer]
            ids = {a: i for i, g in enumerate(groups) for a in g}
            self.assertEqual(
                [{'address': g.address, 'numa_node': g.numa_node,
                  'root_complex': g.root_complex,
                  'clique': ids.get(g.address)} for g in expected.gpus],
                [{k: g[k] for k in ('address', 'numa_node',
                                    'root_complex', 'clique')}
                 for g in report['gpus']], name)
            largest = max((len(g) for g in groups), default=0)
            self.assertEqual(largest >= 2, 'CUSTOM_GPU_P2P' in
                             report['traits'], name)

    def test_level_option_and_matrix(self):
        root = tree('pcie-8gpu-4switch-2socket')
        report = json.loads(self.run_cli(
            'topology', '--sysfs-root', root, '--json', '--level', 'SYS'))
        self.assertEqual({0}, {g['clique'] for g in report['gpus']})
        self.assertIn('CUSTOM_GPU_P2P_CLIQUE_8', report['traits'])
        text = self.run_cli('topology', '--sysfs-root', root)
        self.assertIn('GPU0', text.splitlines()[0])
        self.assertIn('SYS', text)
        self.assertIn('traits: CUSTOM_GPU_P2P CUSTOM_GPU_P2P_CLIQUE_2',
                      text)

    def test_capture_then_load_gives_the_same_answer(self):
        for name in ('acs-redirect-switch', 'large-16gpu-8numa'):
            path = os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'host.json')
            self.run_cli('capture', '--output', path, '--sysfs-root',
                         tree(name))
            live = self.run_cli('topology', '--sysfs-root', tree(name),
                                '--json')
            loaded = self.run_cli('topology', '--load', path, '--json')
            self.assertEqual(live, loaded, name)

    def test_matrix_marks_read_and_unknown_acs(self):
        pair = '0000:03:00.0 0000:04:00.0'
        for name, mark, key in (
                ('acs-egress-control', '*', 'acs_egress_control'),
                ('acs-config-unreadable', '?', 'acs_unknown')):
            case = hosts.ACS_CASES[name]
            path = os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'host.json')
            capture.save(discover(name, case.unprivileged), path)
            lines = self.run_cli('topology', '--load', path).splitlines()
            self.assertEqual(['X', 'PHB' + mark, 'PHB' + mark, 'PHB', 'PHB'],
                             lines[1].split()[1:6], name)
            self.assertEqual(mark == '?', 'ACS that could not be read' in
                             lines[7], name)
            link = json.loads(self.run_cli('topology', '--load', path,
                                           '--json'))['links'][pair]
            ports = ['0000:02:00.0'] + (['0000:02:01.0'] if mark == '?'
                                        else [])
            self.assertEqual(ports, link[key], name)
            self.assertEqual([], link['acs_redirect'], name)

    def test_errors_are_one_line(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(2, cli.main(['topology', '--load',
                                          '/nonexistent.json']))
        self.assertIn('/nonexistent.json is not a readable', err.getvalue())
