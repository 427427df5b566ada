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

""":mod:`lab.placement_scale`'s cases in forked children: one fresh
interpreter per hash seed, one child per case, stopped on time or memory.
"""

import collections
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
import dataclasses
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time

import tests

from lab import placement_answer as placed
from lab import placement_cases as model


def _child(case: model.Case, job: dict, memory_mb: int, out_fd: int) -> None:
    """Run one case in a forked child, its address space capped."""
    cap = int((placed._statm_mb(0) + memory_mb) * 2 ** 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        result = placed.run_case(case, job['query'], job['microversion'])
    except MemoryError:
        result = {'status': 'memory'}
    except Exception as error:
        text = str(error)
        result = {'status': 'memory' if 'MemoryError' in text
                  else 'error: %s' % text[:300]}
    with os.fdopen(out_fd, 'w') as out:
        json.dump(result, out)


def _forked(case: model.Case, job: dict, timeout: float,
            memory_mb: int) -> dict:
    """:func:`~lab.placement_answer.run_case` in a child.

    The child is stopped after ``timeout`` seconds.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(case, job, memory_mb, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    chunks = []
    with os.fdopen(read_fd, 'rb') as answer:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([answer], [], [], left)[0]:
                resident = placed._statm_mb(1, pid)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {'status': 'timeout', 'resident_mb': resident}
            chunk = answer.read1(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {'status': 'died (wait status %d)' % status}
    return json.loads(b''.join(chunks))


def worker(jobs_path: str, timeout: float, memory_mb: int) -> None:
    """Run the jobs of one seed; a JSON line per job on stdout.

    What a case with fewer hosts showed to be too slow is not run again
    with more hosts or another ``limit``: placement generates the same
    candidates per host whatever the limit, and more hosts only add.
    """
    out = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    too_slow: dict[tuple, int] = {}
    with open(jobs_path) as jobs:
        for line in jobs:
            job = json.loads(line)
            case = model.Case.from_json(job['case'])
            key = (case.layout, case.request, case.busy,
                   case.settings.generation)
            if case.hosts >= too_slow.get(key, sys.maxsize):
                result = {'status': 'timeout', 'skipped': True}
            else:
                result = _forked(case, job, timeout, memory_mb)
                if result['status'] == 'timeout':
                    too_slow[key] = min(case.hosts,
                                        too_slow.get(key, sys.maxsize))
            out.write(json.dumps(result) + '\n')
            out.flush()


def record(case: model.Case, result: dict) -> dict:
    """One flat row: what the case was, and what came back."""
    settings = dataclasses.asdict(case.settings)
    settings['settings'] = settings.pop('name')
    return dict(settings, layout=case.layout.name, gpus=case.layout.gpus,
                request=case.request, hosts=case.hosts,
                busy=list(case.busy), seed=case.seed, **result)


def measure(cases: Iterable[model.Case] | None = None, timeout: float = 60.0,
            memory_mb: int = 4096,
            progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Run the cases; a record for each.

    The cases default to :func:`~lab.placement_cases.default_cases`.

    Every case runs in a forked child of a fresh interpreter started
    with the case's ``PYTHONHASHSEED``; a child is stopped after
    ``timeout`` seconds (``status`` "timeout") or when its address space
    grows by ``memory_mb`` ("memory"). A record has the settings' fields
    (``settings`` is the name), the case's shape (``layout``, ``gpus``,
    ``request``, ``hosts``, ``busy``, ``seed``), ``status``, and for
    "ok" ``seconds`` (GET plus JSON parsing), ``response_mb``,
    ``peak_mb``, :func:`~lab.placement_answer.judge`'s per-host lists
    ``candidates``, ``fitting``, ``fitting_sets``, ``best_fit_kept`` and
    ``fit_exists``;
    for "timeout" ``resident_mb``, what the case held when it was stopped
    (none where it was skipped, ``skipped``). ``progress`` is called with
    each record as it comes.
    """
    cases = list(model.default_cases() if cases is None else cases)
    queries = {}
    for case in cases:
        key = _query_key(case)
        if key not in queries:
            queries[key] = placed.nova_query(*key)
    by_seed = collections.defaultdict(list)
    for index, case in enumerate(cases):
        by_seed[case.seed].append(index)
    records: dict[int, dict] = {}
    for seed, indices in by_seed.items():
        results = _run_worker([cases[i] for i in indices], queries, seed,
                              timeout, memory_mb)
        for index, result in zip(indices, results):
            records[index] = record(cases[index], result)
            if progress is not None:
                progress(records[index])
    return [records[index] for index in range(len(cases))]


def _query_key(case: model.Case) -> tuple:
    return (case.request, case.settings.max_placement_results,
            case.settings.alias_clique)


def _worker_env(seed: int) -> dict[str, str]:
    """The worker's environment: its hash seed, and this very checkout."""
    checkout = tests.ROOT
    path = os.pathsep.join(
        filter(None, [checkout, os.environ.get('PYTHONPATH')]))
    return dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=path)


def _run_worker(cases: list[model.Case], queries: dict, seed: int,
                timeout: float, memory_mb: int) -> Iterator[dict]:
    """Results of :func:`worker` for the cases of one seed, as they come."""
    with tempfile.NamedTemporaryFile('w', suffix='.jsonl') as jobs, \
            tempfile.TemporaryFile('w+') as errors:
        for case in cases:
            query, microversion = queries[_query_key(case)]
            jobs.write(json.dumps({'case': case.to_json(), 'query': query,
                                   'microversion': microversion}) + '\n')
        jobs.flush()
        with subprocess.Popen(
                [sys.executable, '-m', 'lab.placement_scale', '--worker',
                 jobs.name,
                 '--timeout', str(timeout), '--memory-mb', str(memory_mb)],
                stdout=subprocess.PIPE, stderr=errors, text=True,
                env=_worker_env(seed)) as worker:
            count = 0
            for line in worker.stdout:
                count += 1
                yield json.loads(line)
        if count != len(cases):
            errors.seek(0)
            raise RuntimeError('placement_scale worker stopped after %d of '
                               '%d cases:\n%s' % (count, len(cases),
                                                  errors.read()[-4000:]))
