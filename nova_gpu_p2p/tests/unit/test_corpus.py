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
``nvidia-smi topo -m`` tables, never against this package's own code.
"""

import atexit
import contextlib
import io
import json
import os
import shutil
import tempfile

import fixtures
from oslo_config import cfg
import testtools

from nova_gpu_p2p.cmd import cli
from nova_gpu_p2p import conf
from nova_gpu_p2p.tests.fixtures import hosts
from nova_gpu_p2p.tests.fixtures import sysfs_builder
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import cliques
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import sysfs

_TREES: dict[tuple[str, bool], str] = {}
_SCRATCH: list[str] = []


def tree(name: str, unprivileged: bool = False) -> str:
    """The host's sysfs tree, built once per test process."""
    key = (name, unprivileged)
    if key not in _TREES:
        if not _SCRATCH:
            _SCRATCH.append(tempfile.mkdtemp(
                dir=sysfs_builder.scratch_dir()))
            atexit.register(shutil.rmtree, _SCRATCH[0], True)
        root = os.path.join(_SCRATCH[0], '%s-%d' % key)
        sysfs_builder.build(hosts.HOSTS[name], root, unprivileged)
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


def oracle_groups(expected: hosts.Expected, level: lc.LinkClass,
                  acs_policy: str) -> list[list[str]]:
    """The clique rule applied to the corpus' own link tables."""
    def capable(a, b):
        return lc.LinkClass[expected.link(a, b, acs_policy)] <= level
    return cliques.group_gpus(expected.addresses, capable)


LEVELS = [lc.LinkClass[name] for name in hosts.CLASSES]


class TestCorpus(testtools.TestCase):

    def test_corpus_has_the_required_hosts(self):
        self.assertGreaterEqual(len(hosts.HOSTS), 8)
        functions = len(discover('large-16gpu-8numa').functions)
        self.assertTrue(450 <= functions <= 550, functions)

    def test_gpus_numa_nodes_and_root_complexes(self):
        for name, expected in hosts.EXPECTED.items():
            topology = discover(name)
            self.assertEqual(
                [(g.address, g.numa_node, g.root_complex)
                 for g in expected.gpus],
                [(g.address, g.numa_node, g.root_complex)
                 for g in topology.gpus()], name)
            self.assertTrue(topology.config_space_read, name)
            self.assertEqual(
                list(expected.nics),
                sorted(f.address for f in topology.functions.values()
                       if f.is_nic), name)

    def test_link_classes(self):
        for name, expected in hosts.EXPECTED.items():
            topology = discover(name)
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
        for name, expected in hosts.EXPECTED.items():
            topology = discover(name)
            for level in LEVELS:
                for policy in lc.AcsPolicy:
                    result = cliques.assign(topology, level, policy)
                    self.assertEqual(
                        [tuple(g) for g in oracle_groups(expected, level,
                                                         policy.value)],
                        list(result.groups),
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

    def test_unprivileged_reads_at_reduced_accuracy(self):
        for name, expected in hosts.EXPECTED.items():
            topology = discover(name, unprivileged=True)
            self.assertFalse(topology.config_space_read)
            self.assertIn(sysfs.UNREADABLE_CONFIG, topology.findings)
            self.assertEqual(list(expected.addresses),
                             [g.address for g in topology.gpus()])
            # Port types are inferred from the tree, so the PCIe classes
            # hold; ACS is unknown, so redirect is not applied.
            for a, b in expected.links:
                self.assertEqual(
                    expected.link(a, b, 'ignore'),
                    lc.effective_class(topology, a, b).name,
                    '%s %s-%s' % (name, a, b))

    def test_capture_round_trip(self):
        for name in hosts.HOSTS:
            topology = discover(name)
            self.assertEqual(
                topology,
                capture.from_dict(json.loads(json.dumps(
                    capture.to_dict(topology)))), name)


class TestCLI(testtools.TestCase):

    def run_cli(self, *argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(0, cli.main(list(argv)))
        return out.getvalue()

    def test_topology_json_cliques_for_every_host(self):
        for name, expected in hosts.EXPECTED.items():
            report = json.loads(self.run_cli(
                'topology', '--sysfs-root', tree(name), '--json'))
            groups = [g for g in oracle_groups(expected, lc.LinkClass.PXB,
                                               'route') if len(g) > 1]
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

    def test_errors_are_one_line(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(2, cli.main(['topology', '--load',
                                          '/nonexistent.json']))
        self.assertIn('/nonexistent.json is not a readable', err.getvalue())
