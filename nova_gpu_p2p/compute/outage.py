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

"""Fabric Manager and discovery outages, as the driver reports them.

One start of a server during an outage meets it twice (the cached
discovery error, then the failed activation), and every start meets it
again: :class:`Outages` keeps the lost layout to one report per server
per outage. :class:`Retry` lets a build try discovery again before it is
refused, without a dead Fabric Manager slowing every build.
"""

from collections.abc import Callable
import threading
import time


class Outages:
    """Which servers were already told of the current outage.

    An outage starts when a call fails after one succeeded (or before any
    did) and ends at the next that succeeds.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down = False
        self._told: set[str] = set()

    def failed(self) -> None:
        """A Fabric Manager or discovery call failed."""
        with self._lock:
            if not self._down:
                self._told = set()
            self._down = True

    def answered(self) -> None:
        """A Fabric Manager or discovery call succeeded."""
        with self._lock:
            self._down = False

    def first_report(self, uuid: str) -> bool:
        """Whether to report this server's lost layout now.

        Always outside an outage (the host itself changed: each start is
        news); within one, only the first time.
        """
        with self._lock:
            if not self._down:
                return True
            if uuid in self._told:
                return False
            self._told.add(uuid)
            return True


class Retry:
    """At most one try per ``interval`` seconds, whoever asks.

    So only one build in that time waits for a dead Fabric Manager's
    connection timeout; the others keep the cached refusal.
    """

    def __init__(self, interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._interval = interval
        self._clock = clock
        self._last: float | None = None

    def due(self) -> bool:
        """Whether to try now; if so, the next try is ``interval`` away."""
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last < self._interval:
                return False
            self._last = now
            return True
