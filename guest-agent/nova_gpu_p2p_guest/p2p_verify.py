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

"""``verify-p2p``: prove GPU P2P on the data path before NCCL trusts it.

CUDA's peer checks and ``nvidia-smi topo -p2p r`` can say OK while peer
writes land in a private mirror the owner never reads (NVIDIA/nccl#2335)
or arrive corrupted: only data written by one GPU and read back on the
other shows it. :mod:`.p2p_probe` moves the data, in a child process
:mod:`.watchdog` watches: a CUDA call that has not returned within its
bound is a hang, reported with its pair, path and call, and the child is
killed; the pairs that do not involve the GPUs that stopped answering are then
checked by a fresh child.

A failure turns NCCL's P2P off in this instance (:mod:`.nccl_conf`),
says so a line per failed pair on standard error (the journal, under
systemd) and on the console (``openstack console log show``), and is an
exit status of 1. Either way the result, pairs, bytes and GB/s per
direction and path, goes to a JSON file beside the NCCL topology file.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from typing import Dict, List, Optional, TextIO, Tuple

from nova_gpu_p2p_guest import atomic_file
from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import input_file
from nova_gpu_p2p_guest import nccl_conf
from nova_gpu_p2p_guest import p2p_probe
from nova_gpu_p2p_guest import watchdog

DEFAULT_RESULT = '/var/run/nvidia-topologyd/p2p-verification.json'
DEFAULT_NCCL_CONF = '/etc/nccl.conf'
DEFAULT_CONSOLE = '/dev/console'
DEFAULT_LIBRARY = 'libcuda.so.1'
FORMAT_VERSION = 1
PATH_NAMES = {p2p_probe.COPY_ENGINE: 'copy engine',
              p2p_probe.SM_STORES: 'SM stores',
              p2p_probe.SM_LOADS: 'SM loads'}
#: A path's statuses that are no failure.
FINE = ('passed', p2p_probe.UNREADABLE)
#: How long the console may take no output before the rest is dropped.
CONSOLE_STALL_SECONDS = 2.0

Pair = Tuple[int, int]


class UsageError(Exception):
    """An option this guest cannot run the check with: a usage error.

    Nothing is checked and nothing turned off; the command line says so
    as argparse says it (exit status 2).
    """

    def __init__(self, option: str, why: str) -> None:
        super().__init__(why)
        self.option = option


def _gpu(gpus: List[dict], index: int) -> str:
    found = [g for g in gpus if g['index'] == index]
    return 'GPU %d (%s)' % (index, found[0]['pci_bus_id'] if found
                            else 'unknown')


class Check:
    """One run of the check: its pairs, what each path gave, problems."""

    def __init__(self, library: str, size: int,
                 bounds: watchdog.Bounds) -> None:
        self.library = library
        self.size = size
        self.bounds = bounds
        self.gpus: List[dict] = []
        self.peers: List[Pair] = []
        self.driver_version: Optional[int] = None
        self.skip: Optional[str] = None
        self.problems: List[str] = []
        self.paths: Dict[Pair, Dict[str, dict]] = {}
        self.stalled: Dict[int, str] = {}  # GPU -> why it is not used

    def run(self) -> None:
        pairs: Optional[List[Pair]] = None
        while True:
            events, stopped = watchdog.watch(
                {'library': self.library, 'bytes': self.size,
                 'pairs': pairs}, self.bounds)
            where = self._take(events)
            if stopped is None or self.skip:
                return
            if where is None:  # in setup: no pair to blame
                self.problems.append(stopped['detail'])
                return
            pair, path = where
            self.paths.setdefault(pair, {})[path] = stopped
            for gpu in pair:
                self.stalled.setdefault(gpu, 'GPU %d was left out after GPU '
                                        '%d -> GPU %d %s' % (
                                            gpu, *pair, stopped['status']))
            pairs = [p for p in self.peers if p not in self.paths
                     and not set(p) & set(self.stalled)]
            if not pairs:
                return

    def _take(self, events: List[dict]) -> Optional[Tuple[Pair, str]]:
        """Record the events; the pair and path left unfinished, if any."""
        where = None
        for event in events:
            if 'gpus' in event and not self.gpus:
                self.gpus = event['gpus']
                self.peers = [tuple(p) for p in event['peers']]
                self.driver_version = event['driver_version']
            elif 'skip' in event:
                self.skip = event['skip']
            elif 'refuse' in event:
                raise UsageError(event['option'], event['refuse'])
            elif 'error' in event:
                self.problems.append(event['error'])
            elif 'begin' in event:
                where = (tuple(event['begin']), event['path'])
            elif 'pair' in event:
                entry = {k: event[k] for k in (
                    'status', 'bytes', 'seconds', 'gbps', 'detail')
                    if event.get(k) is not None}
                self.paths.setdefault(tuple(event['pair']), {})[
                    event['path']] = entry
                where = None
        return where

    def pair_entries(self) -> List[dict]:
        entries = []
        for pair in self.peers:
            paths = self.paths.get(pair, {})
            entry: dict = {'src': pair[0], 'dst': pair[1]}
            why = ', '.join(self.stalled[g] for g in pair
                            if g in self.stalled) or (
                '; '.join(self.problems) or 'the check stopped')
            for path in p2p_probe.PATHS:
                entry[path] = paths.get(path, {
                    'status': 'not_checked', 'detail': why})
            entries.append(entry)
        return entries

    def failures(self, entries: List[dict]) -> List[str]:
        """One line per failed pair, naming it and each failed path.

        One line whatever the driver said (a fault handler's stack):
        these go to NCCL's config, the journal and the console.
        """
        lines = []
        for entry in entries:
            bad = ['%s %s: %s' % (PATH_NAMES[path],
                                  entry[path]['status'].replace('_', ' '),
                                  entry[path].get('detail', ''))
                   for path in p2p_probe.PATHS
                   if entry[path]['status'] not in FINE]
            if bad:
                lines.append('%s -> %s: %s' % (
                    _gpu(self.gpus, entry['src']),
                    _gpu(self.gpus, entry['dst']), '; '.join(bad)))
        lines = lines + self.problems if self.gpus else self.problems
        return [errors.one_line(line) for line in lines]


def verify(library: str, size: int, bounds: watchdog.Bounds) -> dict:
    """Run the check; the result, as the JSON file has it."""
    started = time.time()
    clock = time.monotonic()
    check = Check(library, size, bounds)
    check.run()
    entries = check.pair_entries()
    failures = check.failures(entries)
    result: dict = {
        'format': FORMAT_VERSION,
        'started': time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                 time.gmtime(started)),
        'bytes_per_transfer': size,
        'gpus': check.gpus, 'driver_version': check.driver_version,
        'pairs': entries,
        'not_peer_capable': [
            [g['index'], h['index']] for g in check.gpus
            for h in check.gpus if g is not h
            and (g['index'], h['index']) not in check.peers],
        'failures': failures}
    if check.skip:
        result.update(status='skipped', reason=check.skip)
    elif failures:
        result.update(status='failed', reason='%d failure%s' % (
            len(failures), '' if len(failures) == 1 else 's'))
    elif not check.peers:
        result.update(status='skipped', reason=(
            'CUDA says none of the %d GPUs can access another: NCCL does '
            'not use P2P here, nothing to verify' % len(check.gpus)))
    else:
        result.update(status='passed', reason='%d ordered pairs' % len(
            entries))
    result['seconds'] = round(time.monotonic() - clock, 3)
    return result


def _console(path: str, lines: List[str]) -> Optional[str]:
    """Each line on the console; why not, where it could not take them all.

    No console is no error (stderr has the lines). Opened without O_CREAT:
    where ``path`` is missing nothing is made; refused where another user
    could have chosen what it reaches (:func:`atomic_file.planted`); and
    never waited on: a FIFO nobody reads is refused, and a console that
    takes nothing for :data:`CONSOLE_STALL_SECONDS` (stopped by XOFF, a
    hung serial line) is left with what it took.
    """
    why = atomic_file.planted(path)
    if why:
        return 'refusing %s: %s' % (path, why)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY
                     | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = memoryview(''.join(line + '\n' for line in lines).encode(
            'utf-8', 'backslashreplace'))
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                if not select.select([], [fd], [], CONSOLE_STALL_SECONDS)[1]:
                    return '%s took no output for %g s; %d bytes left ' \
                           'unwritten' % (path, CONSOLE_STALL_SECONDS,
                                          len(data))
    except OSError:
        pass
    finally:
        os.close(fd)
    return None


def _nccl_conf(path: str, failures: Optional[List[str]], when: str
               ) -> Optional[str]:
    """Rewrite ``path``: P2P off, or the agent's old lines gone.

    None where nothing changes, else what was done. The file is read and
    written as bytes (:mod:`.nccl_conf`), up to a document's size.
    """
    try:
        old = input_file.read_bytes(path, input_file.MAX_DOCUMENT)
    except FileNotFoundError:
        old = b''
    except OSError as exc:
        raise errors.Problem('cannot read %s: %s' % (
            path, exc.strerror or exc))
    if failures is None:
        new = nccl_conf.without_ours(old)
        done = 'removed the NCCL_P2P_DISABLE an earlier check set in %s'
    else:
        new = nccl_conf.disabled(old, when, failures)
        done = 'set NCCL_P2P_DISABLE=1 in %s'
    if new == old:
        return None
    try:
        atomic_file.write_output(path, new)
    except OSError as exc:
        raise errors.Problem('cannot write %s: %s' % (
            path, exc.strerror or exc))
    return done % path


def report(result: dict, result_path: str, nccl_conf_path: str,
           console: str, prog: str) -> int:
    """Act on the result; the exit status (1: P2P failed).

    On a failure the lines go out even where the NCCL config cannot be
    written: then they say that P2P is still on. NCCL's config first, the
    result file next, then standard error and the console, which may be
    slow: neither can keep the others from being written. Every line is
    one line (:func:`errors.one_line`) and starts with ``prog``.
    """
    status = result['status']
    out = sys.stderr if result_path == '-' else sys.stdout
    disabled = False
    lines: List[str] = []
    if status == 'failed':
        lines = ['GPU P2P FAILED: %s' % failure
                 for failure in result['failures']]
        try:
            done = _nccl_conf(nccl_conf_path, result['failures'],
                              result['started'])
            disabled = True
            lines.append('%s; the result is in %s' % (
                done or 'NCCL_P2P_DISABLE=1 was already first in %s'
                % nccl_conf_path, result_path))
        except errors.Problem as exc:
            lines.append('NCCL P2P is NOT turned off: %s' % exc)
    result['nccl_p2p_disabled_by_this_check'] = disabled
    _write_result(result_path, result)
    lines = ['%s: %s' % (prog, errors.one_line(line)) for line in lines]
    if status == 'skipped':
        _say(prog, 'verify-p2p skipped: %s' % result['reason'], out)
    for line in lines:
        print(line, file=sys.stderr)
    if lines:
        why = _console(console, lines)
        if why:
            _say(prog, 'console: %s' % why, sys.stderr)
    if status == 'passed':
        done = _nccl_conf(nccl_conf_path, None, result['started'])
        if done:
            _say(prog, done, out)
        _say(prog, 'GPU P2P verified: %s' % _summary(result), out)
    return 1 if status == 'failed' else 0


def _say(prog: str, text: str, out: TextIO) -> None:
    print('%s: %s' % (prog, errors.one_line(text)), file=out)


def _write_result(path: str, result: dict) -> None:
    try:
        atomic_file.write_output(
            path, json.dumps(result, indent=1, sort_keys=True) + '\n')
    except OSError as exc:
        raise errors.Problem('cannot write %s: %s' % (
            path, exc.strerror or exc))


def _summary(result: dict) -> str:
    speeds = [(entry[path]['gbps'], entry['src'], entry['dst'], path)
              for entry in result['pairs'] for path in p2p_probe.PATHS
              if entry[path].get('gbps')]
    text = '%d ordered pairs of %d GPUs, copy engine, SM stores and SM ' \
           'loads, %d MiB each, in %.1f s' % (
               len(result['pairs']), len(result['gpus']),
               result['bytes_per_transfer'] >> 20, result['seconds'])
    if speeds:
        gbps, src, dst, path = min(speeds)
        text += '; slowest %.1f GB/s (GPU %d -> GPU %d, %s)' % (
            gbps, src, dst, PATH_NAMES[path])
    if result['not_peer_capable']:
        text += '; %d ordered pairs CUDA gives no peer access (NCCL does ' \
                'not use P2P there): %s' % (
                    len(result['not_peer_capable']), ', '.join(
                        '%d -> %d' % tuple(p)
                        for p in result['not_peer_capable']))
    return text
