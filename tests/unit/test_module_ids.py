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

"""GPU module IDs from NVML and the kept file (topology.module_ids)."""

import json
import os
import stat
import sys
from unittest import mock

import fixtures

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import module_ids
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_nvml_backend

#: GPU address -> module ID on the HGX corpus host.
ADDRESS_MODULES = {address: module_id
                   for module_id, address in hosts.HGX_MODULES.items()}
GPUS = sorted(ADDRESS_MODULES)


class FakeNvml(test_nvml_backend.FakeNvml):
    """The NVML backend's fake, answering module IDs from a table.

    ``modules`` maps the GPUs NVML sees (those on the nvidia driver) to
    their module ID, or to FAILS for a query that fails.
    """

    def __init__(self, modules, module_calls=True, **kwargs):
        super().__init__(gpus=sorted(modules), **kwargs)
        self.modules = modules
        if module_calls:
            # Absent from pynvml releases older than 12.535.
            self.nvmlDeviceGetModuleId = self._module_id

    def _module_id(self, handle):
        if self.modules[handle] == test_nvml_backend.FAILS:
            raise self.NVMLError('Not Supported')
        return self.modules[handle]


def on_nvidia(*addresses):
    """What NVML sees when only these GPUs are on the nvidia driver."""
    return {address: ADDRESS_MODULES[address] for address in addresses}


class NvmlTestCase(base.TestCase):

    def nvml(self, fake):
        self.useFixture(fixtures.MockPatchObject(sys, 'modules', dict(
            sys.modules, pynvml=fake)))
        return fake


class TestReadNvml(NvmlTestCase):

    def test_every_gpu_on_nvidia(self):
        fake = self.nvml(FakeNvml(ADDRESS_MODULES))
        self.assertEqual((ADDRESS_MODULES, None), module_ids.read_nvml())
        self.assertEqual(1, fake.shutdowns)

    def test_failing_or_out_of_range_answers_are_left_out(self):
        self.nvml(FakeNvml({GPUS[0]: test_nvml_backend.FAILS, GPUS[1]: 0,
                            GPUS[2]: 17, GPUS[3]: 16}))
        self.assertEqual(({GPUS[3]: 16}, None), module_ids.read_nvml())

    def test_bus_id_that_is_no_address(self):
        fake = self.nvml(FakeNvml(on_nvidia(GPUS[0])))
        fake.nvmlDeviceGetPciInfo = mock.Mock(
            return_value=mock.Mock(busId='GPU-1234'))
        self.assertEqual(({}, None), module_ids.read_nvml())

    def test_init_fails(self):
        fake = self.nvml(FakeNvml(ADDRESS_MODULES,
                                  init_error='Driver Not Loaded'))
        found, problem = module_ids.read_nvml()
        self.assertEqual({}, found)
        self.assertEqual('NVML is not available: Driver Not Loaded', problem)
        self.assertEqual(0, fake.shutdowns)

    def test_no_pynvml(self):
        self.nvml(None)
        found, problem = module_ids.read_nvml()
        self.assertEqual({}, found)
        self.assertIn('NVML is not available', problem)
        self.assertIn('pynvml', problem)

    def test_pynvml_without_module_ids(self):
        self.nvml(FakeNvml(ADDRESS_MODULES, module_calls=False))
        found, problem = module_ids.read_nvml()
        self.assertEqual({}, found)
        self.assertIn('nvmlDeviceGetModuleId', problem)
        self.assertIn('nvidia-ml-py 12.535', problem)

    def test_count_fails(self):
        fake = self.nvml(FakeNvml(ADDRESS_MODULES))
        fake.nvmlDeviceGetCount = mock.Mock(
            side_effect=fake.NVMLError('Unknown Error'))
        self.assertEqual(({}, 'NVML cannot count GPUs: Unknown Error'),
                         module_ids.read_nvml())
        self.assertEqual(1, fake.shutdowns)


class FileTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.directory, 'module_ids.json')

    def write(self, text):
        with open(self.path, 'w') as f:
            f.write(text)

    def kept(self):
        with open(self.path) as f:
            return json.load(f)['module_ids']


class TestLoadAndSave(FileTestCase):

    def test_round_trip(self):
        self.assertIsNone(module_ids.save(self.path, ADDRESS_MODULES))
        self.assertEqual((ADDRESS_MODULES, None), module_ids.load(self.path))
        with open(self.path) as f:
            text = f.read()
        self.assertTrue(text.startswith('{\n  "module_ids": {\n'
                                        '    "0000:03:00.0": 2,\n'), text)
        self.assertEqual(['module_ids.json'], os.listdir(self.directory))
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))

    def test_save_replaces_the_file(self):
        module_ids.save(self.path, ADDRESS_MODULES)
        module_ids.save(self.path, {GPUS[0]: 2})
        self.assertEqual({GPUS[0]: 2}, self.kept())

    def test_missing_file_is_nothing_kept(self):
        self.assertEqual(({}, None), module_ids.load(self.path))

    def test_unreadable_file(self):
        self.write('{"module_ids": {')
        kept, problem = module_ids.load(self.path)
        self.assertEqual({}, kept)
        self.assertIn('cannot read %s' % self.path, problem)
        self.assertIn('remove it to have it written anew', problem)

    def test_malformed_file(self):
        for text in ('[]', '{}', '{"module_ids": []}',
                     '{"module_ids": {"0000:03:00.0": 0}}',
                     '{"module_ids": {"0000:03:00.0": 17}}',
                     '{"module_ids": {"0000:03:00.0": "2"}}',
                     '{"module_ids": {"0000:03:00.0": true}}'):
            self.write(text)
            kept, problem = module_ids.load(self.path)
            self.assertEqual({}, kept, text)
            self.assertEqual(
                '%s is not {"module_ids": {"<PCI address>": <1 to 16>, '
                '...}}; it is left as it is: remove it to have it written '
                'anew' % self.path, problem, text)

    def test_save_to_a_missing_directory(self):
        path = os.path.join(self.directory, 'absent', 'module_ids.json')
        problem = module_ids.save(path, ADDRESS_MODULES)
        self.assertIn('cannot write %s' % path, problem)

    def test_failed_write_leaves_nothing_behind(self):
        with mock.patch.object(os, 'replace',
                               side_effect=OSError(28, 'No space left')):
            problem = module_ids.save(self.path, ADDRESS_MODULES)
        self.assertIn('cannot write %s' % self.path, problem)
        self.assertIn('No space left', problem)
        self.assertEqual([], os.listdir(self.directory))


class TestPartitionTable(FileTestCase):
    """The board's partition table, kept beside the module IDs."""

    def test_round_trip(self):
        self.assertIsNone(module_ids.save(self.path, ADDRESS_MODULES,
                                          fake_fm.H100_PARTITIONS))
        self.assertEqual((ADDRESS_MODULES, None), module_ids.load(self.path))
        self.assertEqual(fake_fm.H100_PARTITIONS,
                         module_ids.load_partitions(self.path))
        with open(self.path) as f:
            partitions = json.load(f)['partitions']
        self.assertEqual([str(i) for i in range(15)], list(partitions))
        self.assertEqual([1, 3], partitions['3'])

    def test_each_save_keeps_the_other_key(self):
        module_ids.save(self.path, ADDRESS_MODULES)
        self.assertIsNone(module_ids.save_partitions(
            self.path, fake_fm.H100_PARTITIONS))
        self.assertEqual(ADDRESS_MODULES, self.kept())
        module_ids.save(self.path, {GPUS[0]: 2})
        self.assertEqual({GPUS[0]: 2}, self.kept())
        self.assertEqual(fake_fm.H100_PARTITIONS,
                         module_ids.load_partitions(self.path))

    def test_table_alone_leaves_a_file_module_ids_can_read(self):
        module_ids.save_partitions(self.path, {3: frozenset({1, 3})})
        self.assertEqual(({}, None), module_ids.load(self.path))
        self.assertEqual({3: frozenset({1, 3})},
                         module_ids.load_partitions(self.path))

    def test_nothing_kept(self):
        self.assertEqual({}, module_ids.load_partitions(self.path))
        # A file from before the table was kept.
        self.write('{"module_ids": {"0000:03:00.0": 2}}')
        self.assertEqual(({'0000:03:00.0': 2}, None),
                         module_ids.load(self.path))
        self.assertEqual({}, module_ids.load_partitions(self.path))

    def test_bad_entry_is_refused_by_name(self):
        for entry in ('"64": [1]', '"-1": [1]', '"07": [1]', '"x": [1]',
                      '"3": []', '"3": [0]', '"3": [17]', '"3": [1, 1]',
                      '"3": "1"', '"3": [true]'):
            self.write('{"module_ids": {}, "partitions": {"0": [1], %s}}'
                       % entry)
            exc = self.assertRaises(exception.BadModuleIdFile,
                                    module_ids.load_partitions, self.path)
            key = json.loads(entry.split(':')[0])
            self.assertIn('%s: partition entry %r: ' % (self.path, key),
                          str(exc))
            self.assertIn('is not "<0 to 63>": [<distinct module IDs 1 to '
                          '16>, ...]; the kept partition table is not used '
                          'until Fabric Manager\'s next answer replaces it',
                          str(exc))

    def test_bad_file_is_refused(self):
        self.write('{"module_ids": {}, "partitions": [[1]]}')
        exc = self.assertRaises(exception.BadModuleIdFile,
                                module_ids.load_partitions, self.path)
        self.assertEqual('%s: "partitions" is not {"<partition ID>": '
                         '[<module ID>, ...], ...}' % self.path, str(exc))
        self.write('{"module_ids": {')
        exc = self.assertRaises(exception.BadModuleIdFile,
                                module_ids.load_partitions, self.path)
        self.assertIn('cannot read %s' % self.path, str(exc))

    def test_unreadable_file_is_left_as_it_is(self):
        self.write('{"module_ids": {')
        for problem in (
                module_ids.save_partitions(self.path, {3: {1, 3}}),
                module_ids.save(self.path, ADDRESS_MODULES)):
            self.assertIn('cannot read %s' % self.path, problem)
        with open(self.path) as f:
            self.assertEqual('{"module_ids": {', f.read())


class TestMerge(base.TestCase):

    def test_nvml_and_kept_agree(self):
        self.assertEqual((ADDRESS_MODULES, ()), module_ids.merge(
            on_nvidia(*GPUS[:3]), ADDRESS_MODULES))

    def test_kept_answers_for_gpus_nvml_does_not_see(self):
        # The GPUs on vfio-pci for a guest.
        self.assertEqual((ADDRESS_MODULES, ()), module_ids.merge(
            on_nvidia(*GPUS[:5]), on_nvidia(*GPUS[3:])))

    def test_nvml_alone(self):
        self.assertEqual((on_nvidia(*GPUS[:2]), ()),
                         module_ids.merge(on_nvidia(*GPUS[:2]), {}))

    def test_nvml_wins_for_a_gpu_it_sees(self):
        merged, findings = module_ids.merge({GPUS[0]: 7}, {GPUS[0]: 2})
        self.assertEqual({GPUS[0]: 7}, merged)
        self.assertEqual(('NVML says GPU 0000:03:00.0 is module 7, not '
                          'module 2 as kept before; module 7 is kept now',),
                         findings)

    def test_kept_module_that_nvml_gives_another_gpu_is_dropped(self):
        merged, findings = module_ids.merge({GPUS[0]: 2}, {GPUS[1]: 2})
        self.assertEqual({GPUS[0]: 2}, merged)
        self.assertEqual(('module 2 was kept for GPU 0000:04:00.0, but NVML '
                          'now says it is GPU 0000:03:00.0; GPU 0000:04:00.0 '
                          'has no module ID until NVML sees it',), findings)

    def test_one_module_for_two_gpus_answers_neither(self):
        for seen, kept in (({GPUS[0]: 2, GPUS[1]: 2}, {}),
                           ({}, {GPUS[0]: 2, GPUS[1]: 2}),
                           ({GPUS[0]: 2, GPUS[1]: 2}, {GPUS[2]: 5})):
            merged, findings = module_ids.merge(seen, kept)
            self.assertEqual({a: m for a, m in kept.items() if m != 2},
                             merged)
            self.assertEqual(('GPUs 0000:03:00.0, 0000:04:00.0 are all '
                              'given module 2; none of them has a module ID '
                              'until NVML sees them',), findings)


class TestDiscover(NvmlTestCase, FileTestCase):

    def discover(self, seen, gpus=GPUS):
        self.nvml(FakeNvml(seen))
        return module_ids.discover(self.path, gpus)

    def test_nvml_answers_are_kept_for_later(self):
        self.assertEqual((hosts.HGX_MODULES, ()),
                         self.discover(ADDRESS_MODULES))
        self.assertEqual(ADDRESS_MODULES, self.kept())
        # Later, every GPU is on vfio-pci: NVML sees none.
        self.assertEqual((hosts.HGX_MODULES, ()), self.discover({}))

    def test_new_answers_keep_the_partition_table(self):
        module_ids.save_partitions(self.path, fake_fm.H100_PARTITIONS)
        self.discover(ADDRESS_MODULES)
        self.assertEqual(ADDRESS_MODULES, self.kept())
        self.assertEqual(fake_fm.H100_PARTITIONS,
                         module_ids.load_partitions(self.path))

    def test_unchanged_answers_are_not_written_again(self):
        self.discover(ADDRESS_MODULES)
        with mock.patch.object(module_ids, 'save') as save:
            self.discover(on_nvidia(*GPUS[:4]))
        save.assert_not_called()

    def test_gpus_not_on_the_host_stay_in_the_file(self):
        modules, findings = self.discover(ADDRESS_MODULES, gpus=GPUS[:4])
        self.assertEqual({m: a for m, a in hosts.HGX_MODULES.items()
                          if a in GPUS[:4]}, modules)
        self.assertEqual((), findings)
        self.assertEqual(ADDRESS_MODULES, self.kept())

    def test_gpu_never_seen_is_a_finding(self):
        modules, findings = self.discover(on_nvidia(*GPUS[1:]))
        self.assertNotIn(GPUS[0], modules.values())
        self.assertEqual(7, len(modules))
        [finding] = findings
        self.assertIn('no Fabric Manager module ID is known for GPU '
                      '0000:03:00.0, so the partitions holding it are left '
                      'out', finding)
        self.assertIn('(%s)' % self.path, finding)
        self.assertIn('module_id per GPU in the static topology file', finding)

    def test_nvml_unavailable_is_said_only_when_it_matters(self):
        self.discover(ADDRESS_MODULES)
        self.nvml(FakeNvml({}, init_error='Driver Not Loaded'))
        self.assertEqual((hosts.HGX_MODULES, ()),
                         module_ids.discover(self.path, GPUS))
        _, findings = module_ids.discover(self.path,
                                          GPUS + ['0000:c1:00.0'])
        [finding] = findings
        self.assertIn('GPU 0000:c1:00.0', finding)
        self.assertIn('nvidia driver (NVML is not available: Driver Not '
                      'Loaded)', finding)

    def test_unreadable_file_is_not_overwritten(self):
        self.write('garbage')
        modules, findings = self.discover(ADDRESS_MODULES)
        self.assertEqual(hosts.HGX_MODULES, modules)
        [finding] = findings
        self.assertTrue(finding.startswith(
            '[gpu_p2p] module_id_file: cannot read %s' % self.path), finding)
        with open(self.path) as f:
            self.assertEqual('garbage', f.read())

    def test_unwritable_file_is_a_finding(self):
        with mock.patch.object(module_ids, 'save',
                               return_value='cannot write x: denied'):
            modules, findings = self.discover(ADDRESS_MODULES)
        self.assertEqual(hosts.HGX_MODULES, modules)
        self.assertEqual(
            ('[gpu_p2p] module_id_file: cannot write x: denied',), findings)

    def test_conflicts_are_findings_and_the_file_is_corrected(self):
        self.discover(ADDRESS_MODULES)
        swapped = dict(ADDRESS_MODULES, **{GPUS[0]: ADDRESS_MODULES[GPUS[1]],
                                           GPUS[1]: ADDRESS_MODULES[GPUS[0]]})
        modules, findings = self.discover(swapped)
        self.assertEqual(2, len(findings))
        self.assertEqual(swapped, self.kept())
        self.assertEqual(GPUS[0], modules[ADDRESS_MODULES[GPUS[1]]])
