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

"""Which allocation candidates placement returns for N GPUs, and how fast.

With PCI devices in placement, Nova asks for N GPUs of one alias as N
request groups of one device each (``group_policy=none``), and every GPU
is a child provider of its compute node with one unit. Placement 16.0
builds every *ordered* assignment of free GPUs to those groups
(``n!/(n-k)!`` per host: 43680 for 4 of 16 GPUs, 518918400 for 8 of 16)
before it cuts the answer to the query's ``limit`` (Nova's ``[scheduler]
max_placement_results``), in the order of a Python set of candidates.
``[placement] max_allocation_candidates`` stops the generation early
instead, keeping the first candidates of each host: permutations in
lexicographic order over the host's GPUs as a Python set of provider IDs
lists them, which is no order an operator can choose. Whether a candidate
whose GPUs are one clique is among those Nova receives is what
:class:`~nova_gpu_p2p.scheduler.GPUP2PCliqueFilter` depends on.

:func:`~lab.placement_runner.measure` answers that with the real code: Nova's
own request building from the documented flavor
(:func:`~lab.placement_answer.nova_query`) and placement's WSGI application
over in-memory SQLite (placement's ``PlacementFixture``), one case per forked
process so that a case can be stopped after ``timeout`` seconds or when it
outgrows ``memory_mb``. A case's ``seed`` stands for the luck of a real cloud:
it is placement's ``PYTHONHASHSEED`` and moves the providers' database IDs, the
two things besides the settings that decide which candidates come first.
:func:`~lab.candidate_filters.filter_seconds` times what Nova's scheduler then
spends on each candidate. ``python -m lab.placement_scale`` prints the tables
of ``doc/source/scheduling-scale.rst``.
"""

import argparse
import collections
from collections.abc import Iterable
from collections.abc import Sequence
import json
import statistics
import sys

from lab import candidate_filters as filters
from lab import placement_answer as placed
from lab import placement_cases as model
from lab import placement_runner as runner


def _busy(gpus: Sequence[int]) -> str:
    if not gpus:
        return '-'
    if len(gpus) > 2 and list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return '%d-%d' % (gpus[0], gpus[-1])
    return ','.join(str(gpu) for gpu in gpus)


def _time(rows: Sequence[dict], timeout: float) -> str:
    if any(row['status'] == 'timeout' for row in rows):
        return '> %g s' % timeout
    failed = [row['status'] for row in rows if row['status'] != 'ok']
    if failed:
        return failed[0].split(':')[0]
    return '%.2f s' % statistics.median(row['seconds'] for row in rows)


def _hosts_kept(rows: Sequence[dict], field: str) -> str:
    """Per host, whether (one seed) or on how many seeds it kept one."""
    kept = [sum(1 for value in values if value)
            for values in zip(*(row[field] for row in rows))]
    if len(rows) == 1:
        return '/'.join('yes' if count else 'no' for count in kept)
    return '/'.join(str(count) for count in kept) + ' of %d' % len(rows)


COLUMNS = ('GPUs', 'cliques', 'req', 'hosts', 'busy', 'settings', 'time',
           'MB', 'candidates/host', 'one-clique/host', 'GPU sets',
           'fit kept', 'best fit kept')


def table(records: Iterable[dict], timeout: float = 60.0) -> str:
    """The records as a reStructuredText table, one row over all seeds.

    Times are medians; counts are the first seed's; MB is what the GET
    added, or what a stopped case held; "GPU sets" counts
    the distinct sets among the one-clique candidates; "fit kept" says on
    how many seeds each host kept a one-clique candidate.
    """
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for row in records:
        groups[(row['gpus'], row['layout'], row['request'], row['hosts'],
                tuple(row['busy']), row['settings'])].append(row)
    lines = []
    for (gpus, layout, request, hosts, busy, name), rows in groups.items():
        done = [row for row in rows if row['status'] == 'ok']
        cells = [str(gpus), layout, str(request), str(hosts), _busy(busy),
                 name, _time(rows, timeout)]
        if len(done) == len(rows):
            first = done[0]
            cells += ['%.0f' % max(row['peak_mb'] for row in done),
                      '/'.join(map(str, first['candidates']))]
            if first['fit_exists']:
                cells += ['/'.join(map(str, first['fitting'])),
                          '/'.join(map(str, first['fitting_sets'])),
                          _hosts_kept(done, 'fitting'),
                          _hosts_kept(done, 'best_fit_kept')]
            else:
                cells.append('none fits')
        elif any('resident_mb' in row for row in rows):
            held = max(row.get('resident_mb', 0) for row in rows)
            cells.append('%.0f held' % held)
        lines.append(cells)
    return _table(COLUMNS, lines)


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A reStructuredText simple table; short rows leave cells empty."""
    widths = [max(len(cells[i]) for cells in [columns, *rows]
                  if i < len(cells)) for i in range(len(columns))]
    rule = '  '.join('=' * width for width in widths)
    lines = [rule, _row(columns, widths), rule]
    lines += [_row(cells, widths) for cells in rows]
    lines.append(rule)
    return '\n'.join(lines)


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return '  '.join(cell.ljust(width)
                     for cell, width in zip(cells, widths)).rstrip()


#: The shapes :func:`~lab.candidate_filters.filter_seconds` is shown for.
FILTER_SHAPES = ((model.Layout((4, 4)), 2), (model.Layout((4, 4)), 4),
                 (model.Layout((2, 2, 2, 2)), 2), (model.Layout((8, 8)), 2),
                 (model.Layout((8, 8)), 4), (model.Layout((8, 8)), 8),
                 (model.Layout((4, 4, 4, 4)), 2),
                 (model.Layout((4, 4, 4, 4)), 4))


def filter_table(candidates: int = 200,
                 shapes: Sequence[tuple[model.Layout, int]] = FILTER_SHAPES
                 ) -> str:
    """:func:`~lab.candidate_filters.filter_seconds` for ``shapes``."""
    rows = []
    for layout, request in shapes:
        found = filters.filter_seconds(layout, request, candidates)
        rows.append([str(layout.gpus), layout.name, str(request),
                     '%.0f%%' % (found['fitting'] * 100),
                     '%.1f' % found['nova_filters_first'],
                     '%.1f' % found['ours_first']])
    return _table(('GPUs', 'cliques', 'req', 'one-clique',
                   'ms, Nova\'s filters first', 'ms, ours first'), rows)


def small_cap_table(hosts: Sequence[int] = (1, 3, 50)) -> str:
    """16-GPU hosts under the recommended cap: placement, then the filter.

    The cap is :func:`~lab.placement_cases.recommended`'s.

    In this process (every answer is small): placement's GET time, what
    it returned per host, and whether GPUP2PCliqueFilter handed Nova a
    one-clique (``fit``) and best-fit candidate on every host
    (:func:`~lab.candidate_filters.filtered`).
    """
    rows = []
    for count in hosts:
        for layout, request in ((model.Layout((8, 8)), 4),
                                (model.Layout((8, 8)), 8),
                                (model.Layout((4, 4, 4, 4)), 4)):
            for busy in model.BUSY + ((0, 4, 8),) * (len(layout.cliques) == 4):
                case = model.Case(layout, request, count, busy,
                                  model.recommended(count))
                query, microversion = placed.nova_query(
                    request, case.settings.max_placement_results)
                candidates, stats = placed.answer(case, query, microversion)
                judged = placed.judge(case, candidates)
                built = filters.filtered(case, candidates)
                rows.append([
                    str(layout.gpus), layout.name, str(request), str(count),
                    _busy(busy), str(case.settings.max_allocation_candidates),
                    '%.2f s' % stats['seconds'],
                    str(sum(judged['candidates'])),
                    str(sum(judged['fitting'])),
                    '%d/%d' % (sum(built['built_fit']), count),
                    '%d/%d' % (sum(built['built_best_fit']), count)])
    return _table(('GPUs', 'cliques', 'req', 'hosts', 'busy', 'cap',
                   'placement', 'candidates', 'one-clique', 'filter: fit',
                   'best fit'), rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--timeout', type=float, default=60.0,
                        help='seconds before a case is stopped')
    parser.add_argument('--memory-mb', type=int, default=4096,
                        help='growth of a case\'s address space that '
                        'stops it')
    parser.add_argument('--hosts', type=int, nargs='+', default=[1, 3])
    parser.add_argument('--seeds', type=int,
                        help='run every case under seeds 0..N-1 (default 1, '
                        'with --luck 8)')
    parser.add_argument('--luck', action='store_true',
                        help='the cases of luck_cases() instead')
    parser.add_argument('--filters', action='store_true',
                        help='time the scheduler filters per candidate '
                        'instead')
    parser.add_argument('--small-cap', action='store_true',
                        help='the recommended cap on 16-GPU hosts, with '
                        'the filter, instead')
    parser.add_argument('--json', help='also write the records here')
    parser.add_argument('--quick', action='store_true',
                        help='the first case (shape) of the table only, '
                        'on one host: to see that it runs (CI)')
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        runner.worker(args.worker, args.timeout, args.memory_mb)
        return
    if args.filters:
        print(filter_table(*((2, FILTER_SHAPES[:1]) if args.quick else ())))
        return
    if args.small_cap:
        print(small_cap_table(hosts=(1,) if args.quick else (1, 3, 50)))
        return
    cases = (model.luck_cases(args.seeds or 8) if args.luck
             else model.default_cases(hosts=args.hosts, seeds=args.seeds or 1))
    if args.quick:
        cases = cases[:1]
    records = runner.measure(cases, args.timeout, args.memory_mb,
                             progress=lambda row: print(
                                 table([row], args.timeout).splitlines()[3],
                                 file=sys.stderr, flush=True))
    if args.json:
        with open(args.json, 'w') as out:
            json.dump(records, out, indent=1)
    print(table(records, args.timeout))


if __name__ == '__main__':
    main()
