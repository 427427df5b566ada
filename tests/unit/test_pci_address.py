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

from nova_gpu_p2p import pci_address
from tests.unit import base


class TestNormalize(base.TestCase):

    def test_forms(self):
        for text, expected in (
                ('0000:81:00.0', '0000:81:00.0'),
                ('81:00.0', '0000:81:00.0'),
                ('0000:C1:1F.7', '0000:c1:1f.7'),
                ('1:2:3.4', '0001:02:03.4'),
                (' 0000:81:00.0 ', '0000:81:00.0')):
            self.assertEqual(expected, pci_address.normalize(text))

    def test_bad(self):
        for text in ('', '0000:81:00', '0000:81:20.0', '0000:81:00.8',
                     'g0:00.0', '00000:81:00.0', '0000:181:00.0', 'gpu0'):
            exc = self.assertRaises(ValueError, pci_address.normalize, text)
            self.assertIn("'%s'" % text, str(exc))
            self.assertIn('dddd:bb:ss.f', str(exc))


class TestOtherSpellings(base.TestCase):

    def test_is_sysfs(self):
        self.assertTrue(pci_address.is_sysfs('0000:8a:00.1'))
        for text in ('0000:8A:00.1', '8a:00.1', '0000:8a:00.1\n',
                     '0000:8a:00.8', '../0000:8a:00.1', None, b'0000:8a:00.1'):
            self.assertFalse(pci_address.is_sysfs(text), text)

    def test_from_fields(self):
        self.assertEqual('0000:8a:00.1', pci_address.from_fields(
            '0x0000', '0x8a', '0x00', '0x1'))
        self.assertEqual('0000:81:1f.7', pci_address.from_fields(
            '0000', '81', '1f', '7'))

    def test_from_nvml(self):
        self.assertEqual('0000:8a:00.0',
                         pci_address.from_nvml('00000000:8A:00.0'))
        self.assertEqual('0001:01:00.0',
                         pci_address.from_nvml('00000001:01:00.0'))
        for text in ('GPU-1234', '00000000:8a:00'):
            self.assertRaises(ValueError, pci_address.from_nvml, text)
