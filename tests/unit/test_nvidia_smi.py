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

import textwrap

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import nvidia_smi
from tests.unit import base


def parse(text: str, count: int = 4) -> dict[tuple[int, int], bool]:
    return nvidia_smi.parse_p2p(textwrap.dedent(text), count)


class TestParseP2P(base.TestCase):

    def test_two_cliques(self):
        self.assertEqual(
            {(0, 1): True, (2, 3): True, (0, 2): False, (0, 3): False,
             (1, 2): False, (1, 3): False},
            parse('''\
                GPU0 GPU1 GPU2 GPU3
                GPU0 X    OK   NS   NS
                GPU1 OK   X    CNS  NS
                GPU2 NS   CNS  X    OK
                GPU3 NS   NS   OK   X
                '''))

    def test_as_nvidia_smi_prints_it(self):
        # Tabs, a trailing tab, a header indented more than the rows,
        # lower-case codes, blank lines and the legend.
        text = ''.join(row + '\n' for row in (
            ' \tGPU0\tGPU1\t',
            ' GPU0\tX\tok\t',
            '',
            ' GPU1\tOK\tX\t',
            '',
            'Legend:',
            '',
            '  X    = Self',
            '  OK   = Status Ok',
            '  GPU0 = not a row'))
        self.assertEqual({(0, 1): True}, nvidia_smi.parse_p2p(text, 2))

    def test_columns_in_any_order(self):
        # Only OK is capable: an unknown code reads as not capable.
        self.assertEqual(
            {(0, 1): False, (0, 2): True, (1, 2): False},
            parse('''\
                GPU2 GPU0 GPU1
                GPU1 NEW  NEW  X
                GPU0 OK   X    NEW
                GPU2 X    OK   NEW
                ''', count=3))

    def test_one_gpu(self):
        self.assertEqual({}, parse('GPU0\nGPU0 X\n', count=1))


class TestParseP2PErrors(base.TestCase):

    def assertError(self, text: str, line: int, *words: str) -> str:
        exc = self.assertRaises(exception.NvidiaSmiMatrixError,
                                nvidia_smi.parse_p2p,
                                textwrap.dedent(text), 4, 10)
        self.assertEqual(line, exc.line, str(exc))
        for word in words:
            self.assertIn(word, str(exc))
        return str(exc)

    def test_empty(self):
        self.assertError('\n\nLegend:\n  X = Self\n', 10, 'no rows')

    def test_wrong_size(self):
        self.assertError('''\
            GPU0 GPU1 GPU2
            GPU0 X OK OK
            ''', 10, 'header must name each of the 4 GPUs once',
                         'GPU0 to GPU3', 'got GPU0 GPU1 GPU2')
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU2
            ''', 10, 'header must name each of the 4 GPUs once')
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X OK OK
            ''', 11, 'row GPU0 has 3 values; it needs 4, one per GPU')
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X OK OK OK
            GPU1 OK X OK OK
            GPU3 OK OK OK X
            ''', 10, 'no row for GPU2; the matrix needs one row per GPU')

    def test_unknown_label(self):
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU4
            ''', 10, "unknown GPU label 'GPU4'", 'of 4 GPUs, GPU0 to GPU3')
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X OK OK OK
            gpu1 OK X OK OK
            ''', 12, "unknown GPU label 'gpu1'")
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU03
            ''', 10, "unknown GPU label 'GPU03'")

    def test_duplicate_row(self):
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X OK OK OK
            GPU0 X OK OK OK
            ''', 12, 'second row for GPU0 (first on line 11)')

    def test_diagonal(self):
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X OK OK OK
            GPU1 OK OK OK OK
            ''', 12, "GPU1 to itself must be 'X', got 'OK'")
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X X OK OK
            ''', 11, "GPU0 to GPU1 is 'X', which only the diagonal may be",
                         'use OK or a not-supported code such as NS')

    def test_asymmetric(self):
        # Reported on the later of the two rows, naming the earlier.
        self.assertError('''\
            GPU0 GPU1 GPU2 GPU3
            GPU3 OK OK OK X
            GPU1 OK X  OK OK
            GPU2 OK OK X  OK
            GPU0 X  OK OK NS
            ''', 14, 'not symmetric', 'GPU3 to GPU0 is OK on line 11',
                         'GPU0 to GPU3 is NS', 'the same both ways')
