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

"""No file the product reads can hang it or exhaust its memory.

A FIFO nobody writes to once made each reader wait forever, and
``/dev/zero`` made it read forever: every reader now refuses both, each
test bounded in time so that a regression fails rather than hangs.
"""

import os

import fixtures

from nova_gpu_p2p.checks import fabric as fabric_checks
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import module_ids
from nova_gpu_p2p.topology import static
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p_guest import input_file
from tests.fixtures import deadline
from tests.unit import base

ZERO = '/dev/zero'


class TestInputFile(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.fifo = os.path.join(self.tmp, 'fifo')
        os.mkfifo(self.fifo)

    def hostile(self) -> tuple[str, str]:
        """A FIFO nobody writes to, and a device that never ends."""
        return self.fifo, ZERO

    def test_only_regular_files(self):
        for path in self.hostile() + (self.tmp,):
            error = self.assertRaises(OSError, deadline.run_briefly,
                                      input_file.read_text, path)
            self.assertEqual('not a regular file', error.strerror, path)
            self.assertEqual(path, error.filename)

    def test_bound_counts_bytes_read_not_st_size(self):
        path = os.path.join(self.tmp, 'file')
        with open(path, 'w') as f:
            f.write('12345')
        self.assertEqual('12345', input_file.read_text(path, 5))
        error = self.assertRaises(OSError, input_file.read_bytes, path, 4)
        self.assertEqual('more than 4 bytes', error.strerror)
        self.assertEqual(b'123', input_file.read_head(path, 3))

    def test_capture(self):
        for path in self.hostile():
            error = self.assertRaises(exception.TopologyError,
                                      deadline.run_briefly,
                                      capture.load, path)
            self.assertIn('not a regular file', str(error))

    def test_static_topology_file(self):
        for path in self.hostile():
            error = self.assertRaises(exception.TopologyError,
                                      deadline.run_briefly,
                                      static.read, path)
            self.assertIn('not a regular file', str(error))

    def test_fabric_manager_config(self):
        for path in self.hostile():
            config = deadline.run_briefly(fabric_checks.read_config, path)
            self.assertEqual('cannot read %s: not a regular file' % path,
                             config.problem)

    def test_module_id_file(self):
        for path in self.hostile():
            kept, problem = deadline.run_briefly(module_ids.load, path)
            self.assertEqual({}, kept)
            self.assertIn('not a regular file', problem)

    def test_pci_config_space(self):
        for path in self.hostile():
            self.assertRaises(OSError, deadline.run_briefly,
                              sysfs.read_config_direct, path, 4096)
