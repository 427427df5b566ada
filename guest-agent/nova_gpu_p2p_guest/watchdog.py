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

"""The watchdog of ``verify-p2p``: the probe's process and its bounds.

A CUDA call that never returns cannot be interrupted inside the process
that made it, so :mod:`.p2p_probe` runs as a child that names each call
before making it, and this module reads those events under a bound per
call, counted from the call's start, and kills a child that overruns it.
What the child writes, on standard output and standard error, is read in
bounded pieces and kept bounded: a driver that prints megabytes, or
prints while a copy hangs, neither stalls nor extends it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import List, Optional, Tuple

from nova_gpu_p2p_guest import p2p_probe

#: How long a killed child may take to go (a process stuck in the driver
#: may never): then it is left behind, and said so.
REAP_SECONDS = 5.0
#: The longest line of the probe's output read as an event.
MAX_EVENT = 64 * 1024
#: How much of the end of a dead probe's standard error is quoted.
TAIL = 500


class Bounds:
    """How long each kind of CUDA call may stay silent, in seconds."""

    def __init__(self, setup: float, transfer: float) -> None:
        self.setup = setup
        self.transfer = transfer


def _spawn(request: dict) -> subprocess.Popen:
    """The probe as ``python -m``, finding this very package."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env['PYTHONPATH'] = os.pathsep.join(
        [here] + [p for p in [env.get('PYTHONPATH')] if p])
    return subprocess.Popen(
        [sys.executable, '-m', p2p_probe.__name__, json.dumps(request)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env, close_fds=True)


class Lines:
    """Complete lines of the child's output, each at most :data:`MAX_EVENT`.

    The probe's events are short; a longer line is the driver's noise and
    is dropped as it comes, so what is kept, and the work per read, stay
    bounded whatever the child writes (megabytes without a newline).
    """

    def __init__(self) -> None:
        self.pending = bytearray()
        self.dropping = False

    def feed(self, chunk: bytes) -> List[bytes]:
        lines = []
        start = 0
        while True:
            end = chunk.find(b'\n', start)
            if end < 0:
                break
            if not self.dropping:
                self.pending += chunk[start:end]
                if len(self.pending) <= MAX_EVENT:
                    lines.append(bytes(self.pending))
            self.pending.clear()
            self.dropping = False
            start = end + 1
        if not self.dropping:
            self.pending += chunk[start:]
            if len(self.pending) > MAX_EVENT:
                self.pending.clear()
                self.dropping = True
        return lines


def watch(request: dict, bounds: Bounds
          ) -> Tuple[List[dict], Optional[dict]]:
    """The probe's events, and how it stopped early (None: it finished).

    How: ``{'status': 'hung', 'failed' or 'refused', 'detail': why}``.

    Setup calls (cuInit, contexts, PTX compilation, allocation) get
    ``bounds.setup``; once the probe is ready every call gets
    ``bounds.transfer``. The bound counts from the call's start: whatever
    else the child prints meanwhile (a driver's messages) moves it not.
    """
    events: List[dict] = []
    call, ready, lines, said = 'starting the probe', False, Lines(), b''
    child = _spawn(request)
    out, err = child.stdout.fileno(), child.stderr.fileno()
    started = time.monotonic()
    try:
        while True:
            bound = bounds.transfer if ready else bounds.setup
            left = started + bound - time.monotonic()
            readable = select.select([out, err], [], [], max(left, 0))[0]
            if left <= 0 or not readable:
                return events, {'status': 'hung', 'detail': _kill(
                    child, '%s did not return within %g s' % (call, bound))}
            if err in readable:
                said = (said + os.read(err, 65536))[-TAIL:]
            if out not in readable:
                continue
            chunk = os.read(out, 65536)
            if not chunk:
                break
            for line in lines.feed(chunk):
                event = _event(line)
                if event is None:
                    continue
                if 'call' in event:
                    call, started = event['call'], time.monotonic()
                    continue
                ready = ready or bool(event.get('ready'))
                events.append(event)
        status = child.wait()
        if any(_ended(e) for e in events):
            return events, None
        said = _tail(said, err)
        return events, {'status': 'failed', 'detail': (
            'the probe died in %s (exit status %s)%s' % (
                call, status, ': ' + said if said else ''))}
    finally:
        child.stdout.close()
        child.stderr.close()


def _event(line: bytes) -> Optional[dict]:
    """The probe's event on ``line``; None for the driver's own output."""
    try:
        event = json.loads(line.decode('utf-8'))
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _tail(said: bytes, err: int) -> str:
    """The last :data:`TAIL` bytes the dead child wrote to standard error.

    Read as it came, the rest once it is gone: never more than that held.
    """
    while select.select([err], [], [], 0)[0]:
        chunk = os.read(err, 65536)
        if not chunk:
            break
        said = (said + chunk)[-TAIL:]
    return said.decode('utf-8', 'replace').strip()


def _ended(event: dict) -> bool:
    return bool(event.get('done') or 'skip' in event or 'error' in event
                or 'refuse' in event)


def _kill(child: subprocess.Popen, why: str) -> str:
    child.kill()
    try:
        child.wait(REAP_SECONDS)
    except subprocess.TimeoutExpired:
        why += '; its process %d did not exit when killed' % child.pid
    return why
