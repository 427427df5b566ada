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

"""The upstream patch series (patches/nova, patches/placement) and their
tool, tools/upstream_patches.py."""

import pathlib
import shutil
import subprocess
import sys

import fixtures

from lab import patched_placement
from tests.unit import base

PATCHES = pathlib.Path(__file__).resolve().parents[2] / 'patches'
TOOL = PATCHES.parent / 'tools' / 'upstream_patches.py'


def _tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args],
                          capture_output=True, text=True)


class TestSeries(base.TestCase):

    def test_each_series_lists_every_patch(self):
        for project in ('nova', 'placement'):
            series = PATCHES / project
            listed = (series / 'series').read_text().split()
            self.assertEqual(
                sorted(p.name for p in series.glob('*.patch')),
                sorted(listed), project)

    def test_placement_series_applies_to_this_placement(self):
        """Placement 16 here, 15 under the nova33 environment."""
        import placement
        run = _tool('--project', 'placement', 'check',
                    str(pathlib.Path(placement.__file__).parents[1]))
        self.assertEqual(0, run.returncode, run.stdout)
        self.assertIn(': applies', run.stdout)

    def test_placement_series_carries_its_test(self):
        text = ''.join(path.read_text()
                       for path in (PATCHES / 'placement').glob('*.patch'))
        self.assertIn('+    def narrow_anchors(self, root_ids):', text)
        self.assertIn('+    def test_later_groups_only_read_trees_of_'
                      'earlier_groups(self):', text)

    def test_placement_series_carries_the_per_root_limit(self):
        """The option, its tests and the release note upstream asks for."""
        text = ''.join(path.read_text()
                       for path in (PATCHES / 'placement').glob('*.patch'))
        self.assertIn("+        'max_allocation_candidates_per_root',", text)
        self.assertIn('+    def test_max_allocation_candidates_per_root('
                      'self):', text)
        self.assertIn('+    def test_max_allocation_candidates_per_root_'
                      'counts_accepted(self):', text)
        self.assertIn('+++ b/releasenotes/notes/max-allocation-candidates-'
                      'per-root-', text)

    def test_release_notes_only_where_the_target_has_them(self):
        """Not created in site-packages; applied to a source tree."""
        import placement
        source = pathlib.Path(placement.__file__).parent
        for source_tree in (False, True):
            target = pathlib.Path(self.useFixture(fixtures.TempDir()).path)
            shutil.copytree(source, target / 'placement',
                            ignore=shutil.ignore_patterns('__pycache__'))
            if source_tree:
                (target / 'releasenotes' / 'notes').mkdir(parents=True)
            run = _tool('--project', 'placement', 'apply', str(target))
            self.assertEqual(0, run.returncode, run.stdout)
            self.assertEqual(
                ['placement', 'releasenotes'][:1 + source_tree],
                sorted(path.name for path in target.iterdir()))
            self.assertEqual(
                source_tree,
                any(target.glob('releasenotes/notes/max-allocation-'
                                'candidates-per-root-*.yaml')))

    def test_tool_bad_target_one_line(self):
        for project in ('nova', 'placement'):
            run = _tool('--project', project, 'check',
                        self.useFixture(fixtures.TempDir()).path)
            self.assertEqual(1, run.returncode, run.stderr)
            self.assertEqual(1, len(run.stdout.splitlines()), run.stdout)
            self.assertIn('holds no %s package' % project, run.stdout)

    def test_unknown_project_refused(self):
        run = _tool('--project', 'glance', 'check')
        self.assertEqual(2, run.returncode)
        self.assertIn("invalid choice: 'glance'", run.stderr)


class TestPatchedPlacementCopy(base.TestCase):
    """What the benchmark times placement as patched with."""

    def test_a_child_imports_the_patched_copy(self):
        self.assertFalse(patched_placement.is_patched())
        with patched_placement.copy() as path:
            stamp = pathlib.Path(path, 'placement',
                                 '.placement-patches-applied')
            self.assertEqual(
                (PATCHES / 'placement' / 'series').read_text().split(),
                stamp.read_text().split())
            run = subprocess.run(
                [sys.executable, '-c',
                 'from lab import patched_placement; '
                 'print(patched_placement.is_patched())'],
                capture_output=True, text=True,
                env={'PYTHONPATH': path, 'PATH': '/usr/bin:/bin'},
                cwd=str(PATCHES.parent))
        self.assertEqual('True', run.stdout.strip(), run.stderr)
        self.assertFalse(pathlib.Path(path).exists())


class TestAnswerDigest(base.TestCase):
    """How the benchmark tells that the patched placement answered alike."""

    @staticmethod
    def answer(*gpus: str, traits=('A', 'B')) -> dict:
        """One candidate per GPU named, on a host of four GPUs."""
        summaries = {'host': {'resources': {}, 'traits': list(traits),
                              'root_provider_uuid': 'host'}}
        summaries.update({
            gpu: {'resources': {'PGPU': {'capacity': 1, 'used': 0}},
                  'traits': [], 'root_provider_uuid': 'host'}
            for gpu in ('gpu-a', 'gpu-b', 'gpu-c', 'gpu-d')})
        return {
            'allocation_requests': [
                {'allocations': {gpu: {'resources': {'PGPU': 1}}},
                 'mappings': {'group-0': [gpu]}} for gpu in gpus],
            'provider_summaries': summaries}

    @staticmethod
    def digest(answer: dict) -> str:
        from lab import placement_free_trait
        return placement_free_trait.answer_digest(answer)

    def test_which_candidates_fill_the_cap_does_not_count(self):
        """Nor their order, nor the order of a provider's traits."""
        self.assertEqual(
            self.digest(self.answer('gpu-a', 'gpu-b')),
            self.digest(self.answer('gpu-d', 'gpu-c', traits=('B', 'A'))))

    def test_a_candidate_or_trait_less_counts(self):
        both = self.digest(self.answer('gpu-a', 'gpu-b'))
        self.assertNotEqual(both, self.digest(self.answer('gpu-a')))
        self.assertNotEqual(both, self.digest(
            self.answer('gpu-a', 'gpu-b', traits=('A',))))
