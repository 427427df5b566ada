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

import json
import os
import random
import shutil

import fixtures
import testtools

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import static
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import deadline
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.unit import test_check_command
from tests.unit import test_cli
from tests.unit import test_corpus
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


#: Numbers as people and attackers type them: Unicode digits (which
#: str.isdigit() accepts and int() refuses or reads), signs, spaces,
#: separators, and more digits than int() converts.
NUMBER_INPUTS = ('\u00b2', '\u0663', '\uff11', '0\u00b2', '\U0001d7ce', '+1',
                 '-1', ' 1', '1 ', '1_0', '0x1', '1e1', '', '9' * 5000,
                 '\u0661\u0665')


class TestTagNumbers(testtools.TestCase):
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
