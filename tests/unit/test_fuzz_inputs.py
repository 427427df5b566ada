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

"""Damaged captures, static files and sysfs trees, made at random.

Each case is a good input with random deletions and corruptions (fixed
seeds, so a failure can be replayed): discovery must answer or raise its
documented TopologyError, quickly, and never anything else.
"""

import base64
import json
import math
import os
import random
import shutil
from unittest import mock

import fixtures
from oslo_config import cfg
import testtools

from nova_gpu_p2p import conf
from nova_gpu_p2p import exception
from nova_gpu_p2p import flavor_commands
from nova_gpu_p2p import pci_address
from nova_gpu_p2p.scheduler import clique_fit_weigher
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import static
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import guest_sysfs as agent_sysfs
from tests.fixtures import deadline
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.unit import test_cli
from tests.unit import test_corpus
from tests.unit import test_guest_agent

CASES = 40
HOST = 'mixed-vendors-nic'
#: What a corruption writes: other types, loops, syntax, huge numbers.
JUNK = (None, '', 'x', -1, 2 ** 70, '9' * 5000, [], {}, [[[]]], True,
        '0000:02:00.0', '0x060400')
#: What goes into a static file: YAML syntax, digits, a huge number.
YAML_INSERTS = tuple(':-[]{}&*!|>"\'#\n 09aZ,\t') + ('9' * 5000,)
#: The sysfs files discovery reads.
SYSFS_READ = frozenset(['class', 'vendor', 'device', 'numa_node',
                        'resource', 'config', 'cpulist', 'distance',
                        'max_link_speed', 'max_link_width'])


class TestFuzzInputs(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # The defaults, not a nova.conf this machine may have.
        self.useFixture(test_cli.NoHostConfig())

    def assertDiscovers(self, discover, seed: int) -> None:
        """It answers or raises TopologyError, within the time bound.

        An answer is a tree: every function's bridges lead to a root
        complex.
        """
        def walk() -> None:
            topology = discover()
            self.assertIsInstance(topology, model.HostTopology, seed)
            for address in topology.functions:
                topology.ancestors(address)

        try:
            deadline.run_briefly(walk)
        except exception.TopologyError:
            pass

    def test_captures(self):
        good = capture.to_dict(test_corpus.discover(HOST))
        path = os.path.join(self.dir, 'capture.json')
        for seed in range(CASES):
            rng = random.Random(seed)
            data = json.loads(json.dumps(good))
            for _ in range(rng.randint(1, 3)):
                record = rng.choice(data['functions'])
                key = rng.choice(sorted(record))
                if rng.random() < 0.3:
                    del record[key]
                else:
                    record[key] = rng.choice(JUNK)
            text = json.dumps(data)
            if rng.random() < 0.2:
                text = text[:rng.randrange(len(text))]
            with open(path, 'w') as f:
                f.write(text)
            self.assertDiscovers(lambda: capture.load(path), seed)
            # What loaded must also get through every rule the CLI runs.
            rc, _out, err = deadline.run_briefly(
                test_cli.run, 'topology', '--load', path)
            self.assertIn(rc, (0, 2), (seed, err))
            self.assertNotIn('unexpected error', err, seed)

    def test_static_files(self):
        for seed in range(CASES):
            rng = random.Random(seed)
            text = list(test_cli.STATIC)
            for _ in range(rng.randint(1, 5)):
                where = rng.randrange(len(text))
                if rng.random() < 0.5:
                    del text[where]
                else:
                    text.insert(where, rng.choice(YAML_INSERTS))
            self.assertDiscovers(
                lambda: static.parse(''.join(text), 'static.yaml'), seed)

    def test_sysfs_trees(self):
        host = hosts.HOSTS[HOST]
        for seed in range(CASES // 4):
            rng = random.Random(seed)
            root = os.path.join(self.dir, str(seed))
            sysfs_builder.build(host, root)
            files = sorted(
                os.path.join(directory, name)
                for directory, _dirs, names in os.walk(root)
                for name in names if name in SYSFS_READ)
            for victim in rng.sample(files, 5):
                corruption = rng.randrange(3)
                os.unlink(victim)
                if corruption == 1:
                    os.mkfifo(victim)
                elif corruption == 2:
                    with open(victim, 'w') as f:
                        f.write(str(rng.choice(JUNK)))
            backend = sysfs.SysfsBackend(
                test_corpus.make_conf(sysfs_root=root),
                read_config=sysfs.read_config_direct)
            self.assertDiscovers(backend.discover, seed)
            shutil.rmtree(root)


def _one_line_escaped(test: testtools.TestCase, text: str) -> None:
    """One line, and no control character of the input left in it."""
    test.assertEqual(1, len(text.strip('\n').splitlines()), text)
    test.assertNotIn('\x1b', text)
    test.assertNotIn('\r', text)


class TestCaptureRoundTrip(testtools.TestCase):
    """Issue 35, item 7: what ``capture`` writes, ``--load`` reads.

    Over every corpus host and damaged copies of one: whatever discovery
    answers, its capture loads back to the same data.
    """

    DAMAGED_HOST = 'hgx-8gpu-nvswitch-2numa'
    #: What a damaged sysfs attribute holds: a device that does not
    #: answer (all ones), huge, negative and foreign numbers, junk.
    DAMAGE = ('63', '255', '0xffff', '0xffffffff', '-1', '4096',
              '99999999999', '9' * 5000, '\u0663', '0-99999999999', '31-0',
              'x', '', '10 20 30', '2147483648', 'Unknown')

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def assertRoundTrips(self, topology: model.HostTopology,
                         what: object) -> None:
        path = os.path.join(self.dir, 'capture.json')
        capture.save(topology, path)
        try:
            loaded = capture.load(path)
        except exception.TopologyError as exc:
            self.fail('%s: capture wrote what --load refuses: %s'
                      % (what, exc))
        self.assertEqual(capture.to_dict(topology), capture.to_dict(loaded),
                         what)

    def discover(self, root: str) -> model.HostTopology:
        return sysfs.SysfsBackend(
            test_corpus.make_conf(sysfs_root=root),
            read_config=sysfs.read_config_direct).discover()

    def overwrite(self, path: str, text: str) -> None:
        """Damage the corpus tree (built once a process) until cleanUp."""
        with open(path) as f:
            self.addCleanup(self.restore, path, f.read())
        with open(path, 'w') as f:
            f.write(text)

    @staticmethod
    def restore(path: str, text: str) -> None:
        with open(path, 'w') as f:
            f.write(text)

    def test_corpus_round_trips(self):
        for name in sorted(hosts.HOSTS):
            self.assertRoundTrips(test_corpus.discover(name), name)

    def test_device_that_does_not_answer(self):
        """max_link_width 63 is no width: the link is unknown."""
        root = test_corpus.tree(self.DAMAGED_HOST)
        gpu = self.discover(root).gpus()[0]
        self.overwrite(os.path.join(root, 'bus', 'pci', 'devices',
                                    gpu.address, 'max_link_width'), '63\n')
        topology = self.discover(root)
        self.assertIsNone(topology.functions[gpu.address].link_width)
        self.assertRoundTrips(topology, 'width 63')

    def test_numa_node_skipped_for_a_bad_cpulist(self):
        """The kept nodes' distances lose the skipped node's column."""
        root = test_corpus.tree(self.DAMAGED_HOST)
        self.overwrite(os.path.join(root, 'devices', 'system', 'node',
                                    'node1', 'cpulist'), '0-99999999999\n')
        topology = self.discover(root)
        self.assertEqual([(0, (10,))], [(n.id, n.distances)
                                        for n in topology.numa_nodes])
        self.assertIn('NUMA node1 skipped', ' '.join(topology.findings))
        self.assertRoundTrips(topology, 'bad cpulist')

    def test_damaged_trees_round_trip(self):
        root = test_corpus.tree(self.DAMAGED_HOST)
        files = sorted(
            os.path.join(directory, name)
            for directory, _dirs, names in os.walk(root)
            for name in names if name in SYSFS_READ and name != 'config')
        for seed in range(CASES):
            rng = random.Random(seed)
            damage = [(victim, rng.choice(self.DAMAGE) + '\n')
                      for victim in rng.sample(files, 8)]
            originals = []
            for victim, text in damage:
                with open(victim) as f:
                    originals.append((victim, f.read()))
                self.restore(victim, text)
            try:
                topology = deadline.run_briefly(self.discover, root)
            except exception.TopologyError:
                continue
            finally:
                for victim, text in originals:
                    self.restore(victim, text)
            self.assertRoundTrips(topology, seed)


class TestNvlinkPairs(testtools.TestCase):
    """Issue 35, item 8: NVLink joins two GPUs, nothing else."""

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.NoHostConfig())
        self.dir = self.useFixture(fixtures.TempDir()).path

    def test_capture_refuses_pairs_of_bridges_or_one_gpu(self):
        data = capture.to_dict(test_corpus.discover(
            'hgx-8gpu-nvswitch-2numa'))
        records = {r['address']: r for r in data['functions']}
        gpu = next(a for a, r in sorted(records.items())
                   if r['class_code'] >> 16 == 0x03)
        bridges = sorted(a for a, r in records.items()
                         if r['class_code'] >> 8 == 0x0604)
        path = os.path.join(self.dir, 'capture.json')
        for pair, reason in (([gpu, gpu], 'with itself'),
                             (bridges[:2], 'not an NVIDIA GPU'),
                             ([gpu, bridges[0]], 'not an NVIDIA GPU')):
            data['nvlink_pairs'] = [pair]
            with open(path, 'w') as f:
                json.dump(data, f)
            rc, out, err = test_cli.run('topology', '--load', path, '--json')
            self.assertEqual((2, ''), (rc, out), err)
            self.assertIn(reason, err)
            _one_line_escaped(self, err)


class TestNoUnexpectedError(testtools.TestCase):
    """Issue 35, item 9: a message naming the file or option.

    Never "unexpected error" or a traceback.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.NoHostConfig())
        self.dir = self.useFixture(fixtures.TempDir()).path

    def test_static_file_nested_5000_deep(self):
        for text in ('gpus:\n  - ' + '[' * 5000 + ']' * 5000 + '\n',
                     'gpus:\n  - ' + '{a: ' * 5000 + '1' + '}' * 5000):
            error = self.assertRaises(exception.TopologyError, static.parse,
                                      text, 'static.yaml')
            self.assertIn('static.yaml line 2: lists and mappings nested',
                          str(error))

    def test_static_file_with_a_5000_digit_gpu_label(self):
        text = test_cli.STATIC.replace('GPU0 X', 'GPU%s X' % ('9' * 5000))
        error = str(self.assertRaises(exception.TopologyError, static.parse,
                                      text, 'static.yaml'))
        self.assertIn('unknown GPU label', error)
        self.assertLess(len(error), 300)

    def test_cli_with_dollar_references(self):
        for body, fragment in (
                ('sysfs_root = $nowhere', 'nowhere'),
                ('static_topology_file = $module_id_file\n'
                 'module_id_file = $static_topology_file', 'lead back'),
                ('pcihole64 = $sysfs_root', "'/sys' is not auto")):
            path = os.path.join(self.dir, 'nova.conf')
            with open(path, 'w') as f:
                f.write('[gpu_p2p]\n%s\n' % body)
            rc, out, err = test_cli.run('topology', '--config-file', path)
            self.assertEqual(2, rc, err)
            self.assertNotIn('unexpected error', err)
            self.assertIn(fragment, err)
            _one_line_escaped(self, err)


class AgentInput(test_guest_agent.HandMadeBase):
    """The agent on hand-made hostile input."""

    def entry(self, document: object) -> None:
        text = document if isinstance(document, str) else json.dumps(
            document)
        self.build_entry(base64.b64encode(text.encode()).decode())


class TestAgentNoUnexpectedError(AgentInput):
    """Issue 35, item 9, in the guest agent."""

    def test_deeply_nested_json(self):
        # Within the 32 KiB the agent reads of the entry.
        self.entry('[' * 10000 + ']' * 10000)
        err = self.assertFailsWith('bad topology description: JSON nested')
        self.assertNotIn('unexpected', err)

    def test_huge_or_foreign_cpu_family(self):
        for family in ('9' * 4299, '\u0666', '9' * 20):
            with open(os.path.join(self.proc, 'cpuinfo'), 'w') as f:
                f.write('processor\t: 0\nvendor_id\t: GenuineIntel\n'
                        'cpu family\t: %s\nmodel\t\t: 143\n' % family)
            self.assertEqual([('arch', 'x86_64')],
                             agent_sysfs.cpu_type(self.proc))
        self.build(self.description)
        status, _out, err = self.run_agent()
        self.assertEqual(0, status, err)


class TestOneLineMessages(AgentInput):
    """Issue 35, item 10: input quoted on one line, escaped."""

    HOSTILE = 'sw\nnova-gpu-p2p-guest: wrote \x1b[2K\x1b[31mOK\r'

    def test_agent_switch_id(self):
        description = json.loads(json.dumps(self.description))
        description['switches'][self.HOSTILE] = {
            'link_speed': '<', 'link_width': 8}
        self.entry(description)
        err = self.assertFailsWith('bad topology description: switch ')
        _one_line_escaped(self, err)
        self.assertIn(repr(self.HOSTILE), err)

    def test_static_file_key(self):
        text = test_cli.STATIC.replace(
            'numa_node: 0, root', '"%s": 0, root'
            % self.HOSTILE.replace('\n', '\\n').replace('\x1b', '\\e')
            .replace('\r', '\\r'), 1)
        error = str(self.assertRaises(exception.TopologyError, static.parse,
                                      text, 'static.yaml'))
        _one_line_escaped(self, error)
        self.assertIn('unknown key %r' % self.HOSTILE, error)

    def test_nova_conf_path_continued(self):
        path = os.path.join(self.root, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[gpu_p2p]\nstatic_topology_file = /etc/a\n'
                    '  nova-gpu-p2p: ok\n')
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        opts(['--config-file', path], default_config_files=[])
        error = str(self.assertRaises(exception.InvalidConfig,
                                      conf.validate, opts))
        _one_line_escaped(self, error)
        self.assertIn("'/etc/a\\nnova-gpu-p2p: ok'", error)
        with test_cli.NoHostConfig():
            rc, _out, err = test_cli.run('topology', '--config-file', path)
        self.assertEqual(2, rc)
        _one_line_escaped(self, err)

    def test_other_sites_that_quote_input(self):
        hostile = self.HOSTILE
        messages = [
            str(self.assertRaises(ValueError, pci_address.normalize,
                                  hostile)),
            str(exception.InvalidExtraSpec('hw:gpu_p2p_clique', hostile,
                                           'auto')),
            str(self.assertRaises(ValueError, sysfs.parse_cpulist, hostile)),
            str(self.assertRaises(
                exception.InvalidFlavorRequest, flavor_commands.validate,
                flavor_commands.FlavorRequest(gpus=2, alias=hostile))),
            str(self.assertRaises(
                exception.InvalidFlavorRequest, flavor_commands.validate,
                flavor_commands.FlavorRequest(gpus=2, alias='a',
                                              name=hostile))),
        ]
        for message in messages:
            _one_line_escaped(self, message)
            self.assertIn(repr(hostile)[:20], message)

    def test_the_helper(self):
        self.assertEqual("'a\\nb\\x1b[31m'", errors.quoted('a\nb\x1b[31m'))
        self.assertEqual('<an integer of 16610 bits>',
                         errors.quoted(10 ** 5000))
        nested: list = []
        for _ in range(100000):
            nested = [nested]
        self.assertEqual('<a list nested too deep to show>',
                         errors.quoted(nested))
        self.assertEqual(80, len(errors.quoted('x' * 1000)))
        self.assertEqual('a\\nb\\x1b', errors.one_line('a\nb\x1b'))


class TestOptionsFuzz(testtools.TestCase):
    """Issue 35, item 6: every ``[gpu_p2p]`` option, given junk.

    Refused at start in one line naming it (nova-compute's validate, the
    CLI), or accepted and then used without an error; the scheduler's
    weigher never raises.
    """

    #: What an operator or a template engine may put in nova.conf.
    VALUES = ('', ' ', '0', '-1', '1', '99999999999999999999', '9' * 5000,
              '\u0666', '\u00b2', 'nan', 'inf', '1e400', 'x', '$nowhere',
              '$$', '/', '/' + 's' * 300, '127.0.0.1:\u0666\u0666',
              'a\n  b', '\x1b[31m', 'auto', 'off', 'PXB', 'gpu,nic',
              '0000:81:00.0:1', 'true', '1.5')

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.useFixture(test_cli.NoHostConfig())
        self.dir = self.useFixture(fixtures.TempDir()).path

    def test_options(self):
        rng = random.Random(35)
        path = os.path.join(self.dir, 'nova.conf')
        weigher = clique_fit_weigher.GPUP2PCliqueFitWeigher()
        for opt in conf.OPTS:
            for value in rng.sample(self.VALUES, 8) + ['$' + opt.dest]:
                with open(path, 'w') as f:
                    f.write('[gpu_p2p]\n%s = %s\n' % (opt.dest, value))
                opts = cfg.ConfigOpts()
                conf.register_opts(opts)
                opts(['--config-file', path], default_config_files=[])
                case = (opt.dest, value)
                try:
                    conf.validate(opts)
                except exception.InvalidConfig as exc:
                    self.assertIn('[gpu_p2p] %s' % opt.dest, str(exc), case)
                    _one_line_escaped(self, str(exc))
                rc, _out, err = test_cli.run(
                    'topology', '--config-file', path, '--sysfs-root',
                    test_corpus.tree(HOST), '--json')
                self.assertIn(rc, (0, 2), (case, err))
                self.assertNotIn('unexpected error', err, case)
                if rc == 2:
                    _one_line_escaped(self, err)
                with fixtures.MonkeyPatch(
                        'nova_gpu_p2p.scheduler.clique_fit_weigher.CONF',
                        opts):
                    multiplier = weigher.weight_multiplier(
                        mock.Mock(aggregates=[]))
                self.assertTrue(math.isfinite(multiplier), case)
