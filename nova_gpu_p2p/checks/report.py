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

"""``nova-gpu-p2p check``'s report, as ``nova-status upgrade check`` prints.

oslo.upgradecheck's table and its ``--json`` object, so that operators
read and parse it as they do Nova's own checks. Its ``UpgradeCommands``
runs one function per check and expects one result from each; ours have
already run, because how many results a concern gives depends on the host
(a line per GPU or per switch port), so each entry hands back its result.
"""

from collections.abc import Sequence
import json
import warnings

from oslo_upgradecheck import upgradecheck

from nova_gpu_p2p.checks import result

TITLE = 'GPU P2P Host Check Results'


def _given(commands: upgradecheck.UpgradeCommands,
           check: result.Check) -> result.Check:
    return check


class Report(upgradecheck.UpgradeCommands):
    """The results of one run, in oslo.upgradecheck's table."""

    display_title = TITLE

    def __init__(self, checks: Sequence[result.Check]) -> None:
        self._upgrade_checks = tuple(
            (check.subject, (_given, {'check': check})) for check in checks)


def print_table(checks: Sequence[result.Check]) -> None:
    """The boxed table, then a count of each result."""
    with warnings.catch_warnings():
        # oslo.upgradecheck (2.8) still passes prettytable's ALL, which
        # prettytable 3.12 deprecated: not the operator's concern.
        warnings.filterwarnings('ignore', message="the 'ALL' constant",
                                category=DeprecationWarning)
        Report(checks).check()
    print(', '.join('%s: %d' % (upgradecheck.UPGRADE_CHECK_MSG_MAP[code],
                                sum(1 for c in checks if c.code is code))
                    for code in reversed(result.Code)))


def to_json(checks: Sequence[result.Check]) -> str:
    """The object ``nova-status upgrade check --json`` prints.

    ``result`` is the code's number: 0 success, 1 warning, 2 failure.
    """
    return json.dumps({'name': TITLE, 'checks': [
        {'check': c.subject, 'result': c.code, 'details': c.details}
        for c in checks]})


def exit_status(checks: Sequence[result.Check]) -> int:
    """1 where anything failed: scripts and config management stop there.

    Not oslo's worst code (1 for a warning, 2 for a failure): a warning
    here is advice, such as a missing OVMF where BIOS guests do, and 2
    is every ``nova-gpu-p2p`` command's answer to bad input.
    """
    return 1 if any(c.code is result.Code.FAILURE for c in checks) else 0
