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

"""``tox -e bench``'s scheduling sections: ``hw:gpu_p2p_clique=required``
on a simulated cloud of corpus hosts (:data:`SCHEDULING`), the filters
over a whole cloud's candidates (:data:`CLOUD_FILTERS`), and Nova's
select_destinations on in-process clouds (:data:`SELECT`,
:data:`SELECT_BATCHES`).
"""

import collections
import dataclasses
import functools
import os

from lab import bench_sizes
from lab import bench_tools
from lab import cloud_filters
from lab import cloud_runner
from lab import scheduling_sim
from nova_gpu_p2p import conf
from nova_gpu_p2p.scheduler import clique_fit


#: ``required`` boots and deletes on a simulated cloud of corpus hosts.
SCHEDULING = 'clique_scheduling'
SCHEDULING_SEED = 14
SCHEDULING_COLUMNS = (
    ('placed_first', 'placed 1st try'),
    ('placed_rescheduled', 'after resched.'),
    ('rejected_fit_free', 'rej. fit free'),
    ('rejected_no_fit', 'rej. no fit'),
    ('refusals', 'refusals'),
)


def _cliques(host: scheduling_sim.Host) -> str:
    """``16 GPUs: 8 x 2``, ``6 GPUs: 1 x 5, 1 alone``."""
    sizes = collections.Counter(
        size for group, size in clique_fit.free_per_group(
            host.gpus).items() if group.clique is not None)
    alone = sum(gpu.clique is None for gpu in host.gpus)
    parts = ['%d x %d' % (n, size) for size, n in sorted(sizes.items())]
    if alone:
        parts.append('%d alone' % alone)
    return '%d GPUs: %s' % (len(host.gpus), ', '.join(parts))


def clique_scheduling() -> dict:
    """Each policy and host order on one seeded sequence; best-of time."""
    cloud = scheduling_sim.corpus_cloud()
    capacity = sum(len(host.gpus) for host in cloud)
    ops = scheduling_sim.random_ops(bench_sizes.SIZES.scheduling_ops,
                                    SCHEDULING_SEED, capacity)
    runs = []
    for order in scheduling_sim.HostOrder:
        for policy in scheduling_sim.Policy:
            run = functools.partial(scheduling_sim.replay, cloud, ops,
                                    policy, order)
            outcomes = run()
            runs.append({
                'policy': policy.value, 'order': order.value,
                'seconds': bench_tools.best(
                    run, bench_sizes.SIZES.scheduling_rounds),
                'metrics': dataclasses.asdict(
                    scheduling_sim.metrics(outcomes)),
                'by_size': {size: dataclasses.asdict(scheduling_sim.metrics(
                    [o for o in outcomes if o.boot.gpus == size]))
                    for size in scheduling_sim.SIZES}})
    return {'seed': SCHEDULING_SEED, 'ops': len(ops),
            'boots': runs[0]['metrics']['boots'],
            'sizes': scheduling_sim.SIZES,
            'size_weights': scheduling_sim.SIZE_WEIGHTS,
            'load': scheduling_sim.LOAD, 'gpus': capacity,
            'max_attempts': scheduling_sim.MAX_ATTEMPTS,
            'hosts': {host.name: _cliques(host) for host in cloud},
            'runs': runs}


def print_clique_scheduling(result: dict) -> None:
    print('\nClique scheduling, simulated (tests/'
          'scheduling_sim.py): seed %d, %d ops, %d hw:gpu_p2p_clique='
          'required boots of %s GPUs (weights %s) and deletes, offered load '
          '%.2f x %d GPUs, [scheduler] max_attempts %d' % (
              result['seed'], result['ops'], result['boots'],
              '/'.join(map(str, result['sizes'])),
              ':'.join(map(str, result['size_weights'])), result['load'],
              result['gpus'], result['max_attempts']))
    for name, cliques in result['hosts'].items():
        print('  %-30s %s' % (name, cliques))
    header = '  %-7s %-9s' % ('order', 'policy') + ''.join(
        ' %14s' % title for _, title in SCHEDULING_COLUMNS) + (
        ' %6s %9s %9s %8s' % ('free', 'idle brk.', 'stranded', 'sim ms'))
    print(header)
    for run in result['runs']:
        found = run['metrics']
        print('  %-7s %-9s' % (run['order'], run['policy']) + ''.join(
            ' %14d' % found[key] for key, _ in SCHEDULING_COLUMNS)
            + ' %6.1f %9.2f %9.2f %8.1f' % (
                found['mean_free'], found['mean_idle_broken'],
                found['mean_stranded'], run['seconds'] * 1e3))
    print('\n  Rejected by size, fit free / no fit:')
    for run in result['runs']:
        print('  %-7s %-9s' % (run['order'], run['policy']) + ''.join(
            '  %dG %d/%d' % (size, found['rejected_fit_free'],
                             found['rejected_no_fit'])
            for size, found in run['by_size'].items()))
    print('\n  rej. fit free: rejected while some host had enough free GPUs '
          'in one clique (goal 0); rej. no fit: nothing fitted anywhere; '
          'refusals: compute refusals (reschedules); free, idle brk., '
          'stranded: mean over boots of the free GPUs, of those in cliques '
          'with some GPU in use, and of those last free in their clique; '
          'order spread: most free GPUs first, stack: fewest (Nova\'s '
          'PCIWeigher)')


#: NVLink given on the HGX host with Fabric Manager, per strategy.
CLOUD_FILTERS = 'scheduling_at_cloud_size'


def scheduling_at_cloud_size() -> dict:
    """Nova's candidate filters at 10, 50, 100 hosts: stock and ours.

    lab/cloud_filters.py: the candidates placement returns under the
    recommended settings, Nova's PciPassthroughFilter and
    NUMATopologyFilter over all of them (stock, per-candidate time x
    candidates) or over what GPUP2PCliqueFilter keeps with the default
    [gpu_p2p] candidates_per_host (ours, timed).
    """
    keep = {opt.dest: opt.default for opt in conf.OPTS}[
        'candidates_per_host']
    return {'keep': keep, 'caps': {
        str(cap): [cloud_filters.run(case, keep, cap or 2 * case.hosts)
                   for case in cloud_filters.cases(
                       bench_sizes.SIZES.cloud_hosts)]
        for cap in bench_sizes.SIZES.cloud_caps}}


def print_scheduling_at_cloud_size(result: dict) -> None:
    print('\nScheduling at cloud size: Nova\'s candidate filters per '
          'request (lab/cloud_filters.py; placement\'s cap shared '
          'breadth-first, half the hosts with two GPUs of clique 0 in use; '
          'shape/GPUs/flavor/hosts; stock = Nova\'s filters over every '
          'candidate; ours = GPUP2PCliqueFilter, candidates_per_host %d, '
          'then Nova\'s)' % result['keep'])
    for cap, rows in result['caps'].items():
        print('  placement cap: %s' % (
            cap if cap != '0' else '2 per host'))
        print('  %-26s %10s %7s %9s %8s %8s %12s %8s' % (
            'case', 'candidates', 'handed', 'stock s', 'ours s', 'fitting',
            'fitting kept', 'all NK'))
        for row in rows:
            print('  %-26s %10d %7d %9.1f %8.2f %8d %12d %8d' % (
                row['case'], row['candidates'], row['handed_on'],
                row['stock_seconds'], row['ours_seconds'],
                row['hosts_fitting'], row['hosts_kept'],
                row['hosts_rejected_all']))


SELECT = 'select_destinations_at_cloud_size'
SELECT_CLOUD = 'select_bench_cloud.SelectCloud'


def select_destinations_at_cloud_size() -> dict:
    """Nova's whole select_destinations per request, 10 to 500 hosts.

    lab/select_bench_cloud.py: an in-process cloud per shape and
    size, under the settings scheduling-scale.rst recommends.
    """
    # Nova's functional test code, only where an in-process cloud runs.
    from lab import select_bench_cloud
    sizes = ({'sizes': bench_sizes.SIZES.select_gpus}
             if bench_sizes.SIZES.select_gpus else {})
    if bench_sizes.QUICK_RUN and bench_sizes.SIZES.select_batch:
        # Two cloud hosts, one running a pair: three free halves.
        sizes['batch_size'] = 2
    return {'candidates_per_host': bench_sizes.SIZES.select_keep, 'records': [
        record for hosts in bench_sizes.SIZES.select_hosts
        for shape in (bench_sizes.SIZES.select_shapes
                      or select_bench_cloud.SHAPES)
        for record in _with_load(cloud_runner.run(
            'select', cloud=SELECT_CLOUD, shape=shape, hosts=hosts,
            caps_per_host=bench_sizes.SIZES.select_caps,
            candidates_per_host=bench_sizes.SIZES.select_keep,
            compare_stock=bench_sizes.SIZES.select_stock,
            with_batch=bench_sizes.SIZES.select_batch,
            quiet_load=bench_sizes.SIZES.select_quiet,
            free_trait=bench_sizes.SIZES.select_free_trait,
            progress=lambda step: '  ' + step, **sizes))]}


def _flavor(row: dict) -> str:
    """required, required+free (``--free-trait``) or plain."""
    if not row['required']:
        return 'plain'
    return 'required+free' if row.get('free_trait') else 'required'


def _with_load(records: list[dict]) -> list[dict]:
    """Each record with the load average after its cloud ran."""
    load = os.getloadavg()[0]
    return [dict(record, load_average=load) for record in records]


def print_select_destinations_at_cloud_size(result: dict) -> None:
    print('\nScheduling at cloud size: Nova\'s select_destinations per '
          'request (lab/select_bench_cloud.py; placement\'s cap per host '
          'as given, breadth-first; GPUP2PCliqueFilter first, '
          'candidates_per_host %s; every other host running a required '
          'pair)' % ('default' if result['candidates_per_host'] is None
                     else result['candidates_per_host']))
    _print_select_rows(result['records'])


def _print_select_rows(all_records: list[dict]) -> None:
    """The table of each request, then the batches and the start times."""
    print('  %-20s %5s %4s %4s %-13s %-5s %8s %11s %8s %9s %6s %6s %6s '
          '%7s %6s %10s %8s %6s %5s %4s' % (
              'shape', 'hosts', 'cap', 'GPUs', 'flavor', 'nova', 'select s',
              'placement s',
              'states s', 'filters s', 'ours s', 'NUMA s', 'PCI s',
              'weigh s', 'claim', 'candidates', 'fitting', 'kept', 'one',
              'best') + ' placed')
    records = [row for row in all_records if not row.get('batch')]
    for row in records:
        by_class = row['filter_seconds_by_class']
        print('  %-20s %5d %4g %4d %-13s %-5s %8.2f %11.2f %8.2f %9.2f %6.2f '
              '%6.2f %6.2f %7.2f %6.2f %10d %8d %6d %5s %4s' % (
                  row['shape'], row['hosts'], row['cap_per_host'],
                  row['gpus'],
                  _flavor(row),
                  'stock' if row.get('stock') else 'ours',
                  row['select_seconds'], row['placement_seconds'],
                  row['host_state_seconds'], row['filter_seconds'],
                  by_class.get('GPUP2PCliqueFilter', 0.0),
                  by_class.get('NUMATopologyFilter', 0.0),
                  by_class.get('PciPassthroughFilter', 0.0),
                  row['weigher_seconds'], row['claim_seconds'],
                  row['candidates'], row['hosts_fitting'], row['hosts_kept'],
                  'yes' if row['one_group'] else 'no',
                  'yes' if row['best_fit'] else 'no')
              + (' yes' if row.get('placed', True) else ' no'))
    batches = [row for row in all_records if row.get('batch')]
    if batches:
        print_select_destinations_batches({'records': batches})
    starts = {(row['shape'], row['hosts']): row for row in records}
    for (shape, size), row in starts.items():
        print('  %s, %d hosts: cloud started in %.0f s; load average %.1f '
              'after its requests' % (shape, size, row['start_seconds'],
                                      row['load_average']))
    print('  cap: placement\'s cap per host (and Nova\'s limit); '
          'states: Nova\'s host states (database); filters: all of them, '
          'with the candidates\' copies; ours, NUMA, PCI: '
          'GPUP2PCliqueFilter, NUMATopologyFilter, PciPassthroughFilter '
          'within it; weigh: the weighers; claim: the claim in placement; '
          'fitting: hosts with a free set that fits the flavor; kept: '
          'hosts Nova\'s filters passed; one: the GPUs claimed are one '
          'clique (Fabric Manager: one partition); best: and leave as few '
          'free in their clique (half board) as any fitting claim could; '
          'nova: ours (GPUP2PCliqueFilter and weigher) or stock (Nova\'s '
          'filters and weighers alone, same cloud and settings); ours s '
          'holds Nova\'s filters over the batches it hands them; '
          'required+free: the flavor also requires CUSTOM_GPU_P2P_FREE_<n> '
          '(nova-gpu-p2p flavor --free-trait)')


SELECT_CLONED = 'select_destinations_cloned'


def select_destinations_cloned() -> dict:
    """Whole requests at 100 to 1000 hosts, in fresh interpreters.

    lab/select_bench_cloud.py with :attr:`SelectCloud.real_hosts`: the
    hosts where a server fits are real nova-computes, every other host a
    clone of one's records, crowded (:mod:`lab.cloned_hosts`). Once with
    placement as released, once with ``patches/placement``
    (:mod:`lab.patched_placement`); ``--quick`` only the latter.
    """
    from lab import bench_privsep
    from lab import patched_placement
    sizes = bench_sizes.SIZES
    options = [*(('--select-quiet', str(sizes.select_quiet))
                 if sizes.select_quiet is not None else ()),
               *(('--select-gpus', ','.join(map(str, sizes.select_gpus)))
                 if sizes.select_gpus else ())]
    with patched_placement.copy() as path:
        patched = bench_privsep.child('cloned', timeout=7200,
                                      first_path=path, options=options)
    # --quick: the patched run only, which also goes through the patched
    # copy; the two runs share every other line.
    released = ({'patched': False, 'records': []} if bench_sizes.QUICK_RUN
                else bench_privsep.child('cloned', timeout=7200,
                                         options=options))
    if released['patched'] or not patched['patched']:
        raise RuntimeError('%s: the released run imported a patched '
                           'placement or the patched run did not'
                           % SELECT_CLONED)
    return {'records': released['records'] + patched['records']}


def child_cloned() -> dict:
    """:func:`select_destinations_cloned`'s clouds in this interpreter."""
    from lab import patched_placement
    patched = patched_placement.is_patched()
    sizes = bench_sizes.SIZES
    return {'patched': patched, 'records': [
        dict(record, placement='patched' if patched else 'released')
        for hosts, real in sizes.cloned_clouds
        for record in _with_load(cloud_runner.run(
            'select', cloud=SELECT_CLOUD, shape=CLONED_SHAPE, hosts=hosts,
            real_hosts=real, busy=False, free_trait=True,
            caps_per_host=sizes.cloned_caps, compare_stock=True,
            with_batch=True, batch_size=real * CLONED_BATCH_PER_HOST,
            quiet_load=sizes.select_quiet,
            **({'sizes': sizes.select_gpus} if sizes.select_gpus else {})))]}


#: The clones' shape: a clique of four each side, so that a crowded
#: clone (one GPU of each clique held) keeps six free GPUs, which
#: placement counts, and no free clique of four.
CLONED_SHAPE = '4+4'
#: Servers of a batch per real host: one on each free clique of four.
CLONED_BATCH_PER_HOST = 2


def print_select_destinations_cloned(result: dict) -> None:
    print('\nScheduling at 100 to 1000 hosts: Nova\'s select_destinations '
          'per request (lab/select_bench_cloud.py, lab/cloned_hosts.py; the '
          'hosts where a server fits real, every other a clone of one\'s '
          'records with one GPU of each clique held; cap per host as given, '
          'breadth-first; computes report CUSTOM_GPU_P2P_FREE_<n>)')
    for placement in ('released', 'patched'):
        rows = [row for row in result['records']
                if row['placement'] == placement]
        if not rows:
            continue
        print('  placement %s%s:' % (placement, (
            '' if placement == 'released'
            else ' (patches/placement)')))
        _print_select_rows(rows)


SELECT_BATCHES = 'select_destinations_batches'
#: Batches of select_bench_cloud.BATCH required 4-GPU servers: on 10
#: hosts of 8 GPUs they must pack two per host.


def select_destinations_batches() -> dict:
    """``--min 20 --max 20`` of required 4-GPU servers, 10 and 50 hosts.

    lab/select_bench_cloud.py's batch: idle hosts, the recommended
    settings; one request's select_destinations beside a single one's.
    """
    batch = ({'batch_size': bench_sizes.SIZES.batch_size}
             if bench_sizes.SIZES.batch_size else {})
    return {'records': [
        record for hosts in bench_sizes.SIZES.batch_hosts
        for shape in bench_sizes.SIZES.batch_shapes
        for record in cloud_runner.run('batch', cloud=SELECT_CLOUD,
                                       shape=shape, hosts=hosts,
                                       busy=False, **batch)]}


def print_select_destinations_batches(result: dict) -> None:
    print('\nScheduling batches: one request for N required servers '
          '(lab/select_bench_cloud.py; idle hosts, settings as above)')
    print('  %-20s %5s %-5s %-13s %7s %4s %8s %12s %9s %11s %9s %6s %8s' % (
        'shape', 'hosts', 'nova', 'flavor', 'servers', 'GPUs', 'select s',
        'per server s', 'single s', 'placement s', 'filters s', 'hosts',
        'one'))
    for row in result['records']:
        print('  %-20s %5d %-5s %-13s %7d %4d %8.2f %12.3f %9.2f %11.2f '
              '%9.2f %6s %8s' % (
                  row['shape'], row['hosts'],
                  'stock' if row.get('stock') else 'ours',
                  _flavor(row),
                  row['servers'], row['gpus'],
                  row['select_seconds'], row['per_server_seconds'],
                  row['single_seconds'], row['placement_seconds'],
                  row['filter_seconds'],
                  '%d/%d' % (row['hosts_used'], row['most_per_host']),
                  '%d/%d' % (row['one_group'], row['servers'])))
    print('  hosts: hosts used / most servers on one; one: servers whose '
          'GPUs are one clique (Fabric Manager: one partition); single: '
          'select_destinations of one such server on the same cloud')
