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

import dataclasses
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


class TestGpuCounts(testtools.TestCase):
    """Issue 35 item 3: GPUs per host are bounded, one clear error."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

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
