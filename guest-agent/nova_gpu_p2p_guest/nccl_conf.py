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
"""

from __future__ import annotations

from typing import List

#: Every comment line the agent writes starts with this.
MARK = '# nova-gpu-p2p-guest verify-p2p'
SETTING = 'NCCL_P2P_DISABLE=1'


def without_ours(text: str) -> str:
    """``text`` less the agent's block (its marked lines and setting)."""
    kept: List[str] = []
    ours = False
    for line in text.splitlines(keepends=True):
        if line.startswith(MARK):
            ours = True
            continue
        if ours and line.rstrip('\r\n') == SETTING:
            ours = False
            continue
        ours = False
        kept.append(line)
    return ''.join(kept)


def disabled(text: str, when: str, failures: List[str]) -> str:
    """``text`` with the agent's block first: P2P off, and why."""
    lines = ['%s, %s: GPU P2P failed on the data path, so NCCL must not '
             'use it in this instance.' % (MARK, when),
             '%s: a later check that passes removes these lines.' % MARK]
    lines.extend('%s: %s' % (MARK, failure.replace('=', ' '))
                 for failure in failures)
    lines.append(SETTING)
    return '\n'.join(lines) + '\n' + without_ours(text)
