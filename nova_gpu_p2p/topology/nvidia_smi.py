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

"""The P2P matrix ``nvidia-smi topo -p2p r`` prints, read as pasted.

nvidia-smi prints a header row of ``GPU<i>`` labels, one row per GPU with a
status code per column (``X`` on the diagonal, ``OK`` for a P2P capable
pair, ``NS``, ``CNS``, ... for one that is not), then a legend. Columns are
separated by tabs or spaces and need not line up; codes are read in any
case. Only ``OK`` counts as capable, so that a code a newer driver adds
reads as not capable.
"""

import itertools
import re

from nova_gpu_p2p_guest import errors

from nova_gpu_p2p import exception

P2P_OK = 'OK'
SELF = 'X'

#: nvidia-smi's labels; at most 9 digits, which int() reads at once.
_LABEL = re.compile(r'GPU(0|[1-9][0-9]{0,8})')


def parse_p2p(text: str, count: int,
              first_line: int = 1) -> dict[tuple[int, int], bool]:
    """Whether each pair ``(a, b)``, ``a < b``, of ``count`` GPUs is capable.

    ``first_line`` is the line number of the text's first line in the file
    it came from, so that errors name the file's lines. Raises
    NvidiaSmiMatrixError naming what is wrong and what is allowed.
    """
    rows = _rows(text, first_line)
    if not rows:
        raise exception.NvidiaSmiMatrixError(
            first_line, 'the matrix has no rows before its '
            'legend; paste what nvidia-smi topo '
            '-p2p r prints')
    (header_line, header), body = rows[0], rows[1:]
    columns = [_label(token, header_line, count) for token in header]
    if len(set(columns)) != len(columns) or len(columns) != count:
        raise exception.NvidiaSmiMatrixError(
            header_line, 'the header must name each of the %d GPUs once '
            '(GPU0 to GPU%d), got %s'
            % (count, count - 1, errors.one_line(' '.join(header))))
    cells: dict[tuple[int, int], str] = {}
    row_lines: dict[int, int] = {}
    for line, tokens in body:
        row = _label(tokens[0], line, count)
        if row in row_lines:
            raise exception.NvidiaSmiMatrixError(
                line, 'a second row for GPU%d (first on line '
                '%d); give one row per GPU'
                % (row, row_lines[row]))
        row_lines[row] = line
        if len(tokens) - 1 != len(columns):
            raise exception.NvidiaSmiMatrixError(
                line, 'row GPU%d has %d values; it needs %d, one per GPU'
                % (row, len(tokens) - 1, len(columns)))
        for column, value in zip(columns, tokens[1:]):
            cells[row, column] = _cell(value.upper(), row, column, line)
    missing = sorted(set(range(count)) - set(row_lines))
    if missing:
        raise exception.NvidiaSmiMatrixError(
            header_line, 'no row for %s; the matrix needs one row per GPU'
            % ', '.join('GPU%d' % i for i in missing))
    capable = {}
    for a, b in itertools.combinations(range(count), 2):
        if (cells[a, b] == P2P_OK) != (cells[b, a] == P2P_OK):
            first, second = sorted((a, b), key=row_lines.get)
            raise exception.NvidiaSmiMatrixError(
                row_lines[second], 'not symmetric: GPU%d to GPU%d is %s on '
                'line %d but GPU%d to GPU%d is %s; P2P must be the same both '
                'ways' % (first, second, cells[first, second],
                          row_lines[first], second, first,
                          cells[second, first]))
        capable[a, b] = cells[a, b] == P2P_OK
    return capable


def _rows(text: str, first_line: int) -> list[tuple[int, list[str]]]:
    """The non-blank rows before the legend, with their line numbers."""
    rows = []
    for offset, row_text in enumerate(text.splitlines()):
        tokens = row_text.split()
        if tokens and tokens[0].lower().startswith('legend'):
            break
        if tokens:
            rows.append((first_line + offset, tokens))
    return rows


def _label(token: str, line: int, count: int) -> int:
    match = _LABEL.fullmatch(token)
    if match is None or int(match.group(1)) >= count:
        raise exception.NvidiaSmiMatrixError(
            line, "unknown GPU label %s; the matrix is of %d GPUs, GPU0 "
            "to GPU%d" % (errors.quoted(token), count, count - 1))
    return int(match.group(1))


def _cell(value: str, row: int, column: int, line: int) -> str:
    if row == column and value != SELF:
        raise exception.NvidiaSmiMatrixError(
            line, "GPU%d to itself must be '%s', got %s"
            % (row, SELF, errors.quoted(value)))
    if row != column and value == SELF:
        raise exception.NvidiaSmiMatrixError(
            line, "GPU%d to GPU%d is '%s', which only the diagonal may be; "
            "use %s or a not-supported code such as NS"
            % (row, column, SELF, P2P_OK))
    return value
