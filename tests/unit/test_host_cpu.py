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

"""The host CPU's identity as NCCL reads it, from /proc/cpuinfo."""

import os

import fixtures

from nova_gpu_p2p.topology import host_cpu
from tests.unit import base

SAPPHIRE_RAPIDS = ('processor\t: 0\nvendor_id\t: GenuineIntel\n'
                   'cpu family\t: 6\nmodel\t\t: 143\n'
                   'model name\t: Intel(R) Xeon(R) Platinum 8480+\n\n'
                   'processor\t: 1\nvendor_id\t: Other\n')


class TestHostCpu(base.TestCase):

    def read(self, text):
        root = self.useFixture(fixtures.TempDir()).path
        if text is not None:
            with open(os.path.join(root, 'cpuinfo'), 'w') as f:
                f.write(text)
        return host_cpu.read(root)

    def test_intel(self):
        self.assertEqual({'vendor': 'GenuineIntel', 'familyid': 6,
                          'modelid': 143}, self.read(SAPPHIRE_RAPIDS))

    def test_amd_family_as_cpuid_composes_it(self):
        # Linux adds base 0xf and extended 0xa (25); NCCL shifts the
        # extended family: 0xf + 0xa0.
        self.assertEqual({'vendor': 'AuthenticAMD', 'familyid': 175,
                          'modelid': 17}, self.read(
            'vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n'))

    def test_not_x86_malformed_or_missing(self):
        for text in ('processor\t: 0\nCPU implementer\t: 0x41\n',
                     'vendor_id\t: GenuineIntel\ncpu family\t: six\n'
                     'model\t\t: 143\n',
                     'vendor_id\t: GenuineIntel\ncpu family\t: 6\n',
                     'vendor_id\t: Genuine<Intel\ncpu family\t: 6\n'
                     'model\t\t: 1\n', '', None):
            self.assertIsNone(self.read(text), text)

    def test_a_fifo_is_no_answer(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.mkfifo(os.path.join(root, 'cpuinfo'))
        self.assertIsNone(host_cpu.read(root))
