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

"""Numbers people type: ASCII decimal digits, the one rule.

Every tag, option and argument that holds a number goes through
:func:`parse`. ``str.isdigit()`` is true for ``'²'`` (which ``int()``
then refuses with a ValueError nobody catches) and for ``'٦'`` (which
``int()`` reads as 6); ``int()`` alone also takes ``' 7'``, ``'+7'`` and
``'1_0'``, and refuses more than 4300 digits. Nova, QEMU and Fabric
Manager read only ASCII digits, so nothing else is a number here.
"""

import re

#: Longer than any value a tag or option can hold in range, short enough
#: that ``int()`` never meets its digit limit.
MAX_DIGITS = 30
_DECIMAL = re.compile('[0-9]{1,%d}' % MAX_DIGITS)


def parse(text: object) -> int | None:
    """The number ``text`` spells in ASCII decimal digits; None if not one.

    No sign, no spaces, no separators: callers strip what their syntax
    allows around the number before asking.
    """
    if not isinstance(text, str) or _DECIMAL.fullmatch(text) is None:
        return None
    return int(text)
