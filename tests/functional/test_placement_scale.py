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

"""The documented settings: a one-clique candidate from a small answer.

A 16-GPU host of four cliques of four, one GPU of each of the first three
in use: only clique 3 holds a 4-GPU ``required`` server. Nova's query for
the documented flavor goes to placement's real WSGI application. Under
the settings of doc/source/scheduling-scale.rst placement returns two
candidates, neither on clique 3, and ``GPUP2PCliqueFilter`` builds one
there from the host's pools; before the filter did, placement's answer
alone had to hold one: at a cap of 10000 it did, at Nova's default 1000
it does not. One host and a ``limit`` no lower than placement's cap: the
answer depends on neither the hash seed nor the host order.
"""

import configparser
import dataclasses
import json
import os
import re
import subprocess
import sys

import fixtures
import testtools

from lab import candidate_filters as checks
from lab import placement_answer as placed
from lab import placement_cases as model
from nova_gpu_p2p import conf
import tests

DOC = os.path.join(tests.ROOT, 'doc', 'source', 'scheduling-scale.rst')
#: Four cliques of four; one GPU in use in each of cliques 0, 1 and 2.
HOST = model.Case(
    model.Layout((4, 4, 4, 4)), request=4, busy=(0, 4, 8))


def documented_settings() -> dict[str, configparser.ConfigParser]:
    """The ini blocks of the page, by the file their first line names."""
    with open(DOC) as page:
        text = page.read()
    blocks = {}
    for block in re.findall(r'\.\. code-block:: ini\n\n((?:   .*\n|\n)+)',
                            text):
        lines = [line[3:] for line in block.splitlines()]
        name = lines[0].lstrip('# ').split()[0]
        parser = configparser.ConfigParser()
        parser.read_string('\n'.join(lines))
        blocks[name] = parser
    return blocks


class PlacementScaleTest(testtools.TestCase):

    def answer(self, settings: model.Settings
               ) -> tuple[model.Case, list[list[str]]]:
        case = dataclasses.replace(HOST, settings=settings)
        query, microversion = placed.nova_query(
            case.request, settings.max_placement_results)
        candidates, _ = placed.answer(case, query, microversion)
        return case, candidates

    def run_case(self, settings: model.Settings) -> dict:
        return placed.judge(*self.answer(settings))

    def test_documented_settings_are_the_measured_ones(self):
        blocks = documented_settings()
        placement = blocks['placement.conf']
        nova = blocks['nova.conf']
        with open(DOC) as page:
            hosts = int(re.search(r'Two candidates per compute node '
                                  r'\(here (\d+)\)', page.read())[1])
        self.assertEqual(model.DOC_HOSTS, hosts)
        recommended = model.recommended(hosts)
        self.assertEqual(
            (recommended.max_allocation_candidates,
             recommended.generation_strategy,
             recommended.optimize_for_wide_provider_trees,
             recommended.max_placement_results),
            (placement.getint('placement', 'max_allocation_candidates'),
             placement.get('placement',
                           'allocation_candidates_generation_strategy'),
             placement.getboolean('workarounds',
                                  'optimize_for_wide_provider_trees'),
             nova.getint('scheduler', 'max_placement_results')))
        # Ours first, so Nova's costly candidate filters see only the
        # one-clique candidates (lab.candidate_filters.filter_seconds).
        # The default, as measured (tox -e bench --
        # scheduling_at_cloud_size).
        self.assertEqual(
            {opt.dest: opt.default for opt in conf.OPTS}[
                'candidates_per_host'],
            nova.getint('gpu_p2p', 'candidates_per_host'))
        enabled = nova.get('filter_scheduler', 'enabled_filters').split(',')
        ours = enabled.index('GPUP2PCliqueFilter')
        for nova_filter in checks.NOVA_FILTERS:
            self.assertLess(ours, enabled.index(nova_filter.__name__))

    def test_the_filter_builds_the_only_fitting_clique(self):
        case, candidates = self.answer(model.recommended(1))
        # Placement stopped at its cap of two: neither is on clique 3.
        self.assertEqual(
            {'candidates': [model.PER_HOST], 'fitting': [0]},
            {key: placed.judge(case, candidates)[key]
             for key in ('candidates', 'fitting')})
        self.assertEqual({'built_fit': [True], 'built_best_fit': [True]},
                         checks.filtered(case, candidates))

    def test_a_cap_of_10000_kept_it_without_the_filter(self):
        result = self.run_case(model.CAP_10000)
        self.assertTrue(result['fit_exists'])
        self.assertGreater(result['fitting'][0], 0)
        self.assertEqual([True], result['best_fit_kept'])
        # Placement stopped at its cap: not every candidate was built.
        self.assertEqual(
            [model.CAP_10000.max_allocation_candidates],
            result['candidates'])

    def test_a_cap_of_1000_loses_it(self):
        cap = model.NOVA_LIMIT
        result = self.run_case(dataclasses.replace(
            model.CAP_10000, name='cap 1000',
            max_placement_results=cap, max_allocation_candidates=cap))
        self.assertEqual([cap], result['candidates'])
        self.assertEqual([0], result['fitting'])


class CommandLineTest(testtools.TestCase):
    """``python -m lab.placement_scale``'s tables, each in its quick mode.

    The tables of scheduling-scale.rst come from it: each must still run
    (the full ones take up to an hour).
    """

    def table(self, *args: str) -> list[str]:
        """The rows the command prints, after its header."""
        proc = subprocess.run(
            [sys.executable, '-m', 'lab.placement_scale', '--quick', *args],
            cwd=tests.ROOT, capture_output=True, text=True, timeout=600)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        lines = proc.stdout.splitlines()
        # A reStructuredText table: a rule, the header, a rule, rows, a
        # rule.
        self.assertTrue(lines[0].startswith('='), proc.stdout)
        self.assertEqual(lines[0], lines[2])
        self.assertEqual(lines[0], lines[-1])
        return lines[3:-1]

    def records(self, *args: str) -> list[dict]:
        """The one case's record: placement answered in time."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'records.json')
        self.assertEqual(1, len(self.table('--timeout', '300', '--json',
                                           path, *args)))
        with open(path) as f:
            records = json.load(f)
        self.assertEqual(['ok'], [record['status'] for record in records])
        return records

    def test_placement_answers(self):
        self.records()

    def test_luck(self):
        self.records('--luck')

    def test_filters(self):
        self.assertEqual(1, len(self.table('--filters')))

    def test_small_cap(self):
        # One host of each 16-GPU shape, each with its busy GPUs: the
        # filter builds a fitting and best-fit candidate on every one.
        rows = self.table('--small-cap')
        self.assertTrue(rows)
        for row in rows:
            self.assertEqual(['1/1', '1/1'], row.split()[-2:], row)
