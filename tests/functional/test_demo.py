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

"""``tox -e demo``'s report of the demo server, as a reader gets it."""

import contextlib
import importlib.util
import io
import os
import re
import tempfile

import fixtures
from lxml import etree
from oslo_utils import importutils

from lab import demo_cloud
from nova_gpu_p2p.compute import driver
import tests
from tests.fixtures import waits

DEMO = os.path.join(tests.ROOT, 'lab', 'demo.py')


def load_demo():
    """lab/demo.py, which is a script, not a module of the package."""
    spec = importlib.util.spec_from_file_location('demo', DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DemoReportTest(waits.PatientWaits, demo_cloud.HGXCloud):

    def setUp(self):
        self.steps = []
        self.progress = self.steps.append
        super().setUp()

    def report(self, xml_path: str) -> str:
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            load_demo().report(self.found(), xml_path)
        return output.getvalue()

    def test_summary_first_and_the_xml_in_a_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'domain.xml')
        text = self.report(path)

        # tox -e demo showed each step while Nova worked, in order.
        expected = ('starting Nova\'s API', 'starting nova-compute',
                    'booting the 8-GPU server', 'the server is ACTIVE')
        self.assertEqual(len(expected), len(self.steps), self.steps)
        for step, start in zip(self.steps, expected):
            self.assertTrue(step.startswith(start), step)

        # The nova.conf line, copied as printed, loads our driver the way
        # Nova's loader does.
        (value,) = re.findall(r'^  compute_driver = (\S+)$', text, re.M)
        self.assertIs(driver.GPUP2PLibvirtDriver,
                      importutils.import_class('nova.virt.' + value))

        self.assertEqual(
            ['Host', 'Fabric', 'Flavor', 'Server', 'Partition', 'Cliques',
             'PCIe', 'vCPU', 'Inside', 'Domain'],
            re.findall(r'^== (\w+)', text, re.M))
        self.assertIn('-> 8 GPU(s) in 1 clique(s)', text)
        # Fabric Manager: module IDs not in PCI order, the board's
        # partitions, and the whole board activated before libvirt started
        # the server's domain.
        self.assertRegex(text, r'\n  0000:08:00\.0 .* 1\n')
        self.assertRegex(text, r'\n  3 +2 +1,3 +-\n')
        self.assertRegex(text, r'\n  0 +8 +1,2,3,4,5,6,7,8 +yes\n')
        self.assertIn("  fmActivateFabricPartition(0): FM_ST_SUCCESS\n"
                      "  -- libvirt starts the server's domain --\n"
                      "  active now: partition 0;", text)
        self.assertNotIn('<domain', text)
        with open(path, encoding='utf-8') as xml:
            written = xml.read()
        self.assertEqual(self.server['id'],
                         etree.fromstring(written).findtext('uuid'))
        self.assertEqual('  %d lines written to %s' % (
            written.count('\n'), path), text.splitlines()[-1])

        # "-": the same XML, after the summary.
        text = self.report('-')
        summary, _, printed = text.partition('== Domain XML Nova defined\n')
        self.assertNotIn('<domain', summary)
        self.assertEqual(written, printed)

    def test_each_run_writes_the_xml_to_a_new_file_it_names(self):
        demo = load_demo()
        self.useFixture(fixtures.MockPatchObject(
            demo.cloud_runner, 'run', return_value=[self.found()]))
        temp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatchObject(tempfile, 'tempdir', temp))
        paths = []
        for _ in range(2):
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                self.assertEqual(0, demo.main([]))
            (path,) = re.findall(r'^  \d+ lines written to (\S+)$',
                                 output.getvalue(), re.M)
            folder, name = os.path.split(path)
            self.assertEqual('domain.xml', name)
            self.assertEqual(temp, os.path.dirname(folder))
            self.assertTrue(os.path.basename(folder).startswith(
                'nova-gpu-p2p-demo-'), folder)
            self.assertEqual(self.server['id'],
                             etree.parse(path).findtext('uuid'))
            paths.append(path)
        self.assertNotEqual(paths[0], paths[1])

        # --xml names the file, and nothing is made in the temporary
        # directory.
        path = os.path.join(temp, 'named.xml')
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(0, demo.main(['--xml', path]))
        self.assertEqual(self.server['id'],
                         etree.parse(path).findtext('uuid'))
        self.assertEqual(
            {os.path.basename(os.path.dirname(p)) for p in paths}
            | {'named.xml'}, set(os.listdir(temp)))
