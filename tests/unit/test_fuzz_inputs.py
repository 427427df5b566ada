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
import dataclasses
import json
import math
import os
import random
import shutil
from unittest import mock

import fixtures
from oslo_config import cfg
import testtools

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import conf
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import exception
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
from tests.unit import base
from tests.unit import test_check_command
from tests.unit import test_cli
from tests.unit import test_corpus
from tests.unit import test_guest_agent
from tests.unit import test_guest_plan
from tests.unit import test_scheduler

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


class TestFuzzInputs(base.TestCase):

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


class TestCaptureRoundTrip(base.TestCase):
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


class TestNvlinkPairs(base.TestCase):
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


class TestNoUnexpectedError(base.TestCase):
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


class TestOptionsFuzz(base.TestCase):
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


#: Numbers as people and attackers type them: Unicode digits (which
#: str.isdigit() accepts and int() refuses or reads), signs, spaces,
#: separators, and more digits than int() converts.
NUMBER_INPUTS = ('\u00b2', '\u0663', '\uff11', '0\u00b2', '\U0001d7ce', '+1',
                 '-1', ' 1', '1 ', '1_0', '0x1', '1e1', '', '9' * 5000,
                 '\u0661\u0665')


class TestTagNumbers(base.TestCase):
    """Issue 35 item 5: numbers in tags are ASCII decimal, one rule."""

    def test_ascii_decimal(self):
        self.assertEqual(0, ascii_decimal.parse('0'))
        self.assertEqual(15, ascii_decimal.parse('15'))
        for text in NUMBER_INPUTS + (None, 7, b'7'):
            self.assertIsNone(ascii_decimal.parse(text), repr(text))

    def test_unicode_digit_in_clique_tag_is_no_clique(self):
        # '\u00b2'.isdigit() is true and int() refuses it: a ValueError
        # in nova-compute's periodic and the scheduler filter.
        for text in NUMBER_INPUTS:
            self.assertIsNone(device_spec_tags.tag_clique(
                {device_spec_tags.CLIQUE_TAG: text}), repr(text))

    def test_unicode_digit_in_partitions_tag_is_no_partition(self):
        for text in NUMBER_INPUTS:
            for value in ('%s:2' % text, '1:%s' % text, '1:2,%s:4' % text):
                self.assertEqual({}, device_spec_tags.tag_partitions(
                    {device_spec_tags.PARTITIONS_TAG: value}), repr(value))

    def test_random_tags_never_raise(self):
        rng = random.Random(35)
        alphabet = '0123456789:,' + ''.join(
            text[:1] for text in NUMBER_INPUTS if text)
        for _ in range(500):
            value = ''.join(rng.choice(alphabet)
                            for _ in range(rng.randrange(8)))
            tags = {device_spec_tags.CLIQUE_TAG: value,
                    device_spec_tags.PARTITIONS_TAG: value}
            clique = device_spec_tags.tag_clique(tags)
            self.assertTrue(clique is None or 0 <= clique <= 15, value)
            partitions = device_spec_tags.tag_partitions(tags)
            self.assertTrue(all(isinstance(k, int) and v >= 2
                                for k, v in partitions.items()), value)
            device_spec_tags.problems(
                {'0000:03:00.0': 0}, {'0000:03:00.0': set()},
                {'0000:03:00.0': tags}, {})


class TestSchedulerTagNumbers(test_scheduler._Base):
    """Issue 35 item 5: the filter steers past a host with such a tag."""

    def test_filter_on_unicode_digit_tags(self):
        flt = test_scheduler.scheduler.GPUP2PCliqueFilter()
        for text in NUMBER_INPUTS:
            candidates = [test_scheduler._candidate(0, 1)]
            host = test_scheduler._host(
                'h', test_scheduler._pools(text, text), candidates)
            # No clique read from the tags: no pair in one clique.
            self.assertFalse(flt.host_passes(host, test_scheduler._spec()),
                             repr(text))
            self.assertNotIn('Traceback', self.log.output)


class TestCheckTagNumbers(test_check_command.CheckCLIBase):
    """Issue 35 item 5: check reports such a tag, never "unexpected"."""

    def test_unicode_digit_tag(self):
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[pci]\nreport_in_placement = True\ndevice_spec = '
                    '{"address": "0000:04:00.0", "gpu_p2p_clique": '
                    '"\u00b2", "traits": "CUSTOM_GPU_P2P_CLIQUE_ID_0"}\n')
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file', path)
        self.assertIn((test_check_command.WARN,
                       '[pci] device_spec 0000:04:00.0'), self.not_ok(out))


#: Physical address bits a tenant's image (or an old flavor) can give:
#: Nova's API and ImagePropertiesFilter take any integer.
PHYS_BITS_INPUTS = (-1, 0, 1, 31, 53, 64, 1000, 10 ** 9, 10 ** 30, -10 ** 30)


class TestImageProperties(test_guest_plan.DecideBase):
    """Issue 35 item 1: image properties are tenant input."""

    GIB = test_guest_plan.GiB

    def large_bars(self):
        return test_guest_plan.host_gpus(bars=256 * self.GIB)

    def test_negative_phys_bits_refused_naming_the_property(self):
        # hw_maxphysaddr_mode=emulate, hw_maxphysaddr_bits=-1: a
        # ValueError (negative shift count) on every host tried.
        guest = test_guest_plan.facts(phys_bits=-1)
        result = self.decide(test_guest_plan.request(numa='required'),
                             host=self.large_bars(), guest=guest)
        self.assertFalse(result.refusal.reschedule)
        self.assertEqual(
            'hw_maxphysaddr_bits (image property) is -1; allowed: integers '
            'from 32 to 52 (QEMU\'s x86-64 phys-bits): change it and boot '
            'again', result.refusal.message)

    def test_flavor_bits_named_as_the_flavor_key(self):
        guest = test_guest_plan.facts(
            phys_bits=64,
            phys_bits_property='hw:maxphysaddr_bits (flavor extra spec)')
        result = self.decide(test_guest_plan.request(clique='auto'),
                             guest=guest)
        self.assertIn('hw:maxphysaddr_bits (flavor extra spec) is 64',
                      result.refusal.message)

    def test_existing_server_keeps_its_layout(self):
        good = self.decide(test_guest_plan.request(numa='preferred'),
                           host=self.large_bars(),
                           guest=test_guest_plan.facts(phys_bits=None,
                                                       new_build=False))
        kept = self.decide(test_guest_plan.request(numa='required'),
                           host=self.large_bars(),
                           guest=test_guest_plan.facts(phys_bits=-1,
                                                       new_build=False))
        self.assertIsNone(kept.refusal)
        self.assertEqual(good.buses, kept.buses)
        self.assertEqual(good.hole64, kept.hole64)
        self.assertNoteContains('hw_maxphysaddr_bits (image property) is -1',
                                kept)

    def test_random_image_properties(self):
        """No value of the properties Nova passes on makes decide raise."""
        rng = random.Random(351)
        requests = [test_guest_plan.request(clique, numa)
                    for clique in ('none', 'auto', 'required', '3')
                    for numa in ('none', 'preferred', 'required')]
        machine_types = (None, '', 'pc', 'q35', 'pc-q35-8.2', 'virt',
                         'q35\nq35', '\u00b2' * 300)
        for _ in range(300):
            guest = test_guest_plan.facts(
                phys_bits=rng.choice(PHYS_BITS_INPUTS + (None, 40, 46)),
                phys_bits_from_host=rng.random() < 0.2,
                machine_type=rng.choice(machine_types),
                hypervisor_hidden=rng.random() < 0.3,
                acpi=rng.random() < 0.8,
                memory=rng.choice((0, 1, 16 * self.GIB, 1 << 60)),
                new_build=rng.random() < 0.5)
            req = rng.choice(requests)
            result = deadline.run_briefly(
                self.decide, req, host=self.large_bars(), guest=guest)
            if not guest.new_build:
                self.assertIsNone(result.refusal, guest)
            elif (req.wanted and not guest.phys_bits_from_host
                  and guest.phys_bits in PHYS_BITS_INPUTS):
                self.assertIn('hw_maxphysaddr_bits', result.refusal.message)
            if result.hole64 is not None and result.hole64.size:
                self.assertLess(result.hole64.size, 1 << 52)
        # Replace, not build: the facts stay a frozen dataclass.
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          test_guest_plan.FACTS, 'phys_bits', 1)


def static_gpus(count: int) -> str:
    """A static file of ``count`` GPUs, all tagged clique 0."""
    return 'gpus:\n' + ''.join(
        '- address: "0000:%02x:%02x.%x"\n  clique: 0\n'
        % (i // 256 + 1, i // 8 % 32, i % 8) for i in range(count))


class TestGpuCounts(test_cli.CLITestCase):
    """Issue 35 item 3: GPUs per host are bounded, one clear error."""

    def test_static_file_of_too_many_gpus_refused(self):
        # 3000 GPUs tagged clique 0 took nova-compute 14 s and 1.2 GB on
        # every periodic: refused before the work over all pairs.
        for count in (model.MAX_GPUS + 1, 3000):
            path = self.write('static.yaml', static_gpus(count))
            exc = self.assertRaises(
                exception.TopologyError, deadline.run_briefly,
                static.parse, static.read(path), path)
            self.assertEqual(
                '%s line %d: %d NVIDIA GPUs, more than the 128 per host '
                'supported (real hosts have up to 16)'
                % (path, 2 * model.MAX_GPUS + 2, count), str(exc))

    def test_static_file_at_the_limit_read(self):
        path = self.write('static.yaml', static_gpus(model.MAX_GPUS))
        topology = deadline.run_briefly(static.parse, static.read(path),
                                        path)
        self.assertEqual(model.MAX_GPUS, len(topology.gpus()))

    def capture_of(self, count: int) -> str:
        path = self.write('static.yaml', static_gpus(min(count,
                                                         model.MAX_GPUS)))
        data = capture.to_dict(static.parse(static.read(path), path))
        gpu = data['functions'][0]
        data['functions'] = [
            dict(gpu, address='0000:%02x:%02x.%x' % (
                i // 256 + 1, i // 8 % 32, i % 8)) for i in range(count)]
        data['p2p_overrides'] = []
        return self.write('capture.json', json.dumps(data))

    def test_capture_of_too_many_gpus_refused(self):
        # topology --load of 1000 GPUs took 17 s (20 s here).
        path = self.capture_of(1000)
        exc = self.assertRaises(exception.TopologyError,
                                deadline.run_briefly, capture.load, path)
        self.assertIn('1000 NVIDIA GPUs, more than the 128 per host '
                      'supported', str(exc))
        self.assertEqual(model.MAX_GPUS, len(capture.load(
            self.capture_of(model.MAX_GPUS)).gpus()))

    def test_too_many_pairs_refused(self):
        path = self.capture_of(2)
        with open(path) as f:
            data = json.load(f)
        data['nvlink_pairs'] = [[data['functions'][0]['address']] * 2] * (
            model.MAX_PAIRS + 1)
        self.assertIn('GPU pairs, more than', str(self.assertRaises(
            exception.TopologyError, capture.load,
            self.write('pairs.json', json.dumps(data)))))

    def test_sysfs_tree_beyond_the_limits_refused(self):
        tree = test_corpus.tree(HOST)
        for name, value, what in (('MAX_FUNCTIONS', 3, 'PCI functions'),
                                  ('MAX_GPUS', 1, 'NVIDIA GPUs')):
            with fixtures.MonkeyPatch(
                    'nova_gpu_p2p.topology.model.%s' % name, value):
                exc = self.assertRaises(
                    exception.TopologyError, sysfs.SysfsBackend(
                        test_corpus.make_conf(sysfs_root=tree),
                        read_config=sysfs.read_config_direct).discover)
            self.assertIn('%s, more than the %d per host supported'
                          % (what, value), str(exc))
