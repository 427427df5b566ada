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

"""The agent's one error, and how every message quotes input: one line."""

from __future__ import annotations


class Problem(Exception):
    """What stops the agent: one line, exit status 2."""


#: The most of a quoted value a message shows.
QUOTE_LIMIT = 80


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as every message that quotes input shows it.

    On one line and escaped (``repr``'s rules: a newline, an escape code,
    any character Python would not print shows as its escape), so input
    can neither add a line to a log nor drive a terminal; cut at ``limit``
    characters. Never raises: an integer past Python's digit limit or a
    structure nested past its recursion limit is named, not shown.
    """
    try:
        text = repr(value)
    except ValueError:  # an integer past sys.get_int_max_str_digits()
        text = '<an integer of %d bits>' % value.bit_length()
    except RecursionError:
        text = '<a %s nested too deep to show>' % type(value).__name__
    return text if len(text) <= limit else text[:limit - 3] + '...'


def one_line(text: str) -> str:
    """A whole message on one line: what it quotes unquoted is escaped.

    The last guard of both command lines, for a message built before
    :func:`quoted` reached it: every character Python would not print
    (a newline, an escape code) shows as its escape.
    """
    return ''.join(char if char.isprintable() else repr(char)[1:-1]
                   for char in text)
