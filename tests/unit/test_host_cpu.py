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
import testtools

from nova_gpu_p2p.topology import host_cpu

SAPPHIRE_RAPIDS = ('processor\t: 0\nvendor_id\t: GenuineIntel\n'
                   'cpu family\t: 6\nmodel\t\t: 143\n'
                   'model name\t: Intel(R) Xeon(R) Platinum 8480+\n\n'
                   'processor\t: 1\nvendor_id\t: Other\n')


class TestHostCpu(testtools.TestCase):

    def test_intel(self):
        self.assertEqual({'vendor': 'GenuineIntel', 'familyid': 6,
                          'modelid': 143}, host_cpu.parse(SAPPHIRE_RAPIDS))

    def test_amd_family_as_cpuid_composes_it(self):
        # Linux adds base 0xf and extended 0xa (25); NCCL shifts the
        # extended family: 0xf + 0xa0.
        self.assertEqual({'vendor': 'AuthenticAMD', 'familyid': 175,
                          'modelid': 17}, host_cpu.parse(
            'vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n'))

    def test_not_x86_or_malformed(self):
        for text in ('processor\t: 0\nCPU implementer\t: 0x41\n',
                     'vendor_id\t: GenuineIntel\ncpu family\t: six\n'
                     'model\t\t: 143\n',
                     'vendor_id\t: GenuineIntel\ncpu family\t: 6\n',
                     'vendor_id\t: ' + 'x' * 13 + '\ncpu family\t: 6\n'
                     'model\t\t: 1\n', ''):
            self.assertIsNone(host_cpu.parse(text), text)

    def test_read(self):
        root = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(root, 'cpuinfo')
        self.assertIsNone(host_cpu.read(path))
        with open(path, 'w') as f:
            f.write(SAPPHIRE_RAPIDS)
        self.assertEqual(143, host_cpu.read(path)['modelid'])
