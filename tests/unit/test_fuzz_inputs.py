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

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import static
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import deadline
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.unit import test_cli
from tests.unit import test_corpus

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
