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

"""Which hosts of a ``required`` request reach Nova's filters after ours.

Nova's ``PciPassthroughFilter`` and ``NUMATopologyFilter`` cost
milliseconds per host, so over every host of a large cloud they are most
of a request's time, while Nova needs only one host per server and
``[scheduler] max_attempts - 1`` alternates. The rule:

1. **How many** (:func:`needed`): one host per server of the request,
   the alternates, and ``[gpu_p2p] spare_hosts`` more, which leave Nova's
   weighers a choice among equally good fits. A ``--min N`` request
   keeps the hosts its first server's filtering passed for all the
   others (``nova.scheduler.manager._schedule``); a server changes only
   the host it takes, so N hosts that passed leave each later server one
   that still does.
2. **Best fit first** (:func:`ranked`): hosts by the free GPUs their best
   fit leaves in its clique (partition), as
   ``GPUP2PCliqueFitWeigher`` weighs them; ties keep Nova's order.
3. **Never lose a host Nova would take** (:func:`accepted`): Nova's
   filters after ours judge the hosts in that order, as many at a time
   as are still missing, until enough pass or none is left. A host they
   refuse is replaced by the next, in the same request: the request ends
   in NoValidHost only where no host passes them at all, as without the
   bound.

Pure functions over plain data; the filter runs Nova's filters.
"""

from collections.abc import Callable
from collections.abc import Sequence


def needed(servers: int, max_attempts: int, spare: int) -> int | None:
    """Hosts to hand on (rule 1); None to hand on every one.

    :param servers: the request's servers (``--min N``: N).
    :param max_attempts: ``[scheduler] max_attempts``: the chosen host
        and its alternates.
    :param spare: ``[gpu_p2p] spare_hosts``; negative: no bound.
    """
    if spare < 0:
        return None
    return max(1, servers) + max(0, max_attempts - 1) + spare


def ranked(leftovers: Sequence[int | None]) -> list[int]:
    """Host indexes, best fit first (rule 2).

    :param leftovers: each host's best fit's free GPUs left after the
        claim; None where the host was not judged (after every fit).
    """
    return sorted(range(len(leftovers)), key=lambda index: (
        leftovers[index] is None, leftovers[index] or 0, index))


def accepted(order: Sequence[int], need: int,
             judge: Callable[[list[int]], Sequence[int]]) -> list[int]:
    """The first ``need`` hosts of ``order`` that ``judge`` passes (rule 3).

    :param order: host indexes, best first (:func:`ranked`).
    :param judge: Nova's filters over a batch of host indexes: those it
        passes. Asked for as many at a time as are still missing.
    :returns: the passed indexes, in ``order``; fewer than ``need`` only
        where ``order`` ran out.
    """
    kept: list[int] = []
    start = 0
    while len(kept) < need and start < len(order):
        batch = list(order[start:start + need - len(kept)])
        start += len(batch)
        passed = set(judge(batch))
        kept.extend(index for index in batch if index in passed)
    return kept
