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

"""``/etc/nccl.conf``: turn NCCL's P2P off where ``verify-p2p`` saw it fail.

NCCL reads ``~/.nccl.conf`` then ``/etc/nccl.conf`` when it starts, a
``NAME=VALUE`` a line, and sets each name that is not set yet: the first
assignment wins and the environment wins over both. It has no comment
syntax; a line without ``=`` is skipped, so the agent's comment lines
never hold one. The agent's lines all start with :data:`MARK` (and the
setting follows them): they go first in the file, so they win over a
later ``NCCL_P2P_DISABLE`` line, and they are the only lines the agent
ever removes, when a later check passes.

The file is the user's, in whatever bytes they wrote (UTF-8 comments,
Latin-1, a byte order mark, Windows line ends): it is edited as bytes,
lines ending at ``\n`` as NCCL reads them, and every byte the agent did
not write is kept as it was. What the agent writes is ASCII, one line per
failure whatever the failure's text holds.
"""

from __future__ import annotations

from typing import List

from nova_gpu_p2p_guest import errors

#: Every comment line the agent writes starts with this.
MARK = b'# nova-gpu-p2p-guest verify-p2p'
SETTING = b'NCCL_P2P_DISABLE=1'


def _lines(data: bytes) -> List[bytes]:
    """``data``'s lines as NCCL splits them (at ``\n``), each with its end."""
    lines = [line + b'\n' for line in data.split(b'\n')]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def without_ours(data: bytes) -> bytes:
    """``data`` less the agent's block (its marked lines and setting)."""
    kept: List[bytes] = []
    ours = False
    for line in _lines(data):
        if line.startswith(MARK):
            ours = True
            continue
        if ours and line.rstrip(b'\r\n') == SETTING:
            ours = False
            continue
        ours = False
        kept.append(line)
    return b''.join(kept)


def _comment(text: str) -> bytes:
    """One marked line of ASCII, whatever ``text`` holds."""
    line = '%s: %s' % (MARK.decode('ascii'), errors.one_line(text))
    return line.replace('=', ' ').encode('ascii', 'backslashreplace')


def disabled(data: bytes, when: str, failures: List[str]) -> bytes:
    """``data`` with the agent's block first: P2P off, and why."""
    lines = [_comment('%s: GPU P2P failed on the data path, so NCCL must '
                      'not use it in this instance.' % when),
             _comment('a later check that passes removes these lines.')]
    lines.extend(_comment(failure) for failure in failures)
    lines.append(SETTING)
    return b'\n'.join(lines) + b'\n' + without_ours(data)
