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

"""``tox -e bench``: time the project's hot paths, print a table, write JSON.

Each benchmark is a function registered with :func:`benchmark`; it returns
the callable to time. Guest XML generation is compared with Nova's stock
driver instead (:data:`GUEST_XML`), so the numbers quoted in release notes
have one source. Besides time: the decision quality of ours and the
published workarounds on every corpus host, each document checked by
libvirt first (:data:`DECISION_QUALITY`), how XML generation scales
with GPUs and NUMA nodes (:data:`SCALE`), the memory of the cached
topology (:data:`MEMORY`), config space through nova-compute's privsep
daemon, per call and batched, and how long a greenthread waits while
discovery runs under eventlet (both in :mod:`lab.bench_privsep`), and
``hw:gpu_p2p_clique=required`` scheduling on a simulated cloud of corpus
hosts, Nova's order against the clique filter and best fit
(:data:`SCHEDULING`), and the NVLink guests get on an HGX board with
Fabric Manager, per strategy (:data:`FABRIC`).
"""

import argparse
import collections
from collections.abc import Callable
import dataclasses
import functools
import gc
import json
import math
import os
import sys
import timeit
import tracemalloc

# This checkout first, as stestr runs the tests: the numbers are this
# tree's even where an older copy of the package is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


from lab import cloud_runner  # noqa: E402
if '--child' not in sys.argv:
    # The in-process clouds need it; the privsep and stall children
    # measure reads and stalls without it. Before anything that imports
    # Nova (cloud_filters does).
    cloud_runner.patch_first()
from lab import bench_privsep  # noqa: E402
from lab import bench_tools  # noqa: E402
from lab import cloud_filters  # noqa: E402
from lab import decision_quality  # noqa: E402
from lab import fabric_quality  # noqa: E402
from lab import scheduling_sim  # noqa: E402
from lab import verify_p2p_bench  # noqa: E402
from nova_gpu_p2p import conf  # noqa: E402
from nova_gpu_p2p import extra_specs  # noqa: E402
from nova_gpu_p2p.fabric import partitions  # noqa: E402
from nova_gpu_p2p.scheduler import clique_fit  # noqa: E402
from nova_gpu_p2p.topology import discovery  # noqa: E402
from nova_gpu_p2p.topology import pci_ids  # noqa: E402
from tests.fixtures import fake_fm  # noqa: E402
from tests.fixtures import hosts  # noqa: E402

BENCHMARKS: dict[str, Callable[[], Callable[[], object]]] = {}


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each section measures: the full run, or ``--quick``.

    ``--quick`` runs every section at its smallest size (one round, one
    call, a cloud of a host or two), so that CI sees each still runs; its
    numbers are not worth quoting.
    """

    #: measure(): best of this many rounds, each of at least min_time s
    #: (min_time 0: one call a round).
    repeat: int = 5
    min_time: float = 0.2
    guest_xml_rounds: int = 7
    guest_xml_calls: int = 30
    #: Corpus hosts decision quality boots on; empty: every one.
    decision_hosts: tuple[str, ...] = ()
    scale_rounds: int = 7
    scale_calls: int = 10
    #: (GPUs, guest nodes) of guest_xml_scale's two series; empty: all.
    scale_gpus: tuple[tuple[int, int], ...] = ()
    scale_nodes: tuple[tuple[int, int], ...] = ()
    scheduling_ops: int = 2000
    scheduling_rounds: int = 3
    #: scheduling_at_cloud_size's cloud sizes and placement's caps (0:
    #: two candidates per host).
    cloud_hosts: tuple[int, ...] = (10, 50, 100)
    cloud_caps: tuple[int, ...] = (cloud_filters.CAP, 0)
    #: select_destinations_at_cloud_size's cloud sizes and shapes (empty:
    #: every one).
    select_hosts: tuple[int, ...] = (10, 50, 100)
    select_shapes: tuple[str, ...] = ()
    #: GPU counts of its requests (empty: select_bench_cloud.REQUESTS).
    select_gpus: tuple[int, ...] = ()
    #: Its placement caps per host, each cloud's requests asked under
    #: each; and [gpu_p2p] candidates_per_host (None: the default).
    select_caps: tuple[float, ...] = (2,)
    select_keep: int | None = None
    #: Each request also with stock Nova's filters (ours left out), and a
    #: batch of select_bench_cloud.BATCH servers on each cloud, each way.
    select_stock: bool = False
    select_batch: bool = False
    #: select_destinations_batches' cloud sizes, shapes and servers per
    #: request (0: select_bench_cloud.BATCH, two per host at 10 hosts).
    batch_hosts: tuple[int, ...] = (10, 50)
    batch_shapes: tuple[str, ...] = ('4+4', 'hgx-fabric-manager')
    batch_size: int = 0
    #: fabric_nvlink's server sequences; empty: every one.
    fabric_sequences: tuple[tuple[int, ...], ...] = ()
    privsep_rounds: int = 7
    stall_rounds: int = 7
    #: verify_p2p's runs of the agent's check and MiB per transfer.
    verify_p2p_rounds: int = verify_p2p_bench.ROUNDS
    verify_p2p_mib: int = verify_p2p_bench.MIB
    #: capacity_at_cloud_size's clouds (hosts of 8 GPUs) and rounds.
    capacity_hosts: tuple[int, ...] = (100, 500, 1000)
    capacity_rounds: int = 3


FULL = Sizes()
QUICK = Sizes(
    repeat=1, min_time=0.0, guest_xml_rounds=1, guest_xml_calls=1,
    decision_hosts=('hgx-8gpu-nvswitch-2numa',), scale_rounds=1,
    scale_calls=1, scale_gpus=((1, 1), (4, 2)), scale_nodes=((8, 1), (8, 2)),
    scheduling_ops=200, scheduling_rounds=1, cloud_hosts=(2,),
    cloud_caps=(0,), select_hosts=(2,), select_shapes=('hgx-fabric-manager',),
    select_caps=(2, 1), select_stock=True, select_batch=True,
    batch_hosts=(2,), batch_shapes=('hgx-fabric-manager',), batch_size=4,
    fabric_sequences=((2, 2, 4),), privsep_rounds=1, stall_rounds=1,
    verify_p2p_rounds=1, verify_p2p_mib=1, capacity_hosts=(20,),
    capacity_rounds=1)
#: This run's sizes: main() sets QUICK for --quick.
SIZES = FULL
#: Whether this run is --quick (its sizes may be QUICK's, changed).
QUICK_RUN = False


def benchmark(func: Callable[[], Callable[[], object]]):
    BENCHMARKS[func.__name__] = func
    return func


@benchmark
def parse_flavor_extra_specs() -> Callable[[], object]:
    specs = {'hw:gpu_p2p_clique': 'required',
             'hw:gpu_numa_affinity': 'preferred',
             'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2'}
    return lambda: extra_specs.parse(specs)


#: What ``discovery[host]`` times, and what it leaves to other benchmarks.
DISCOVERY_NOTE = (
    'discovery[host]: discovery.discover, the call nova-compute\'s '
    'refresh_host_gpus makes ([gpu_p2p] topology_backend = sysfs, loaded by '
    'name), on the corpus host\'s tree (files on tmpfs, config space read '
    'from the tree as for any sysfs_root other than /sys); the host\'s own '
    '/sys goes through nova\'s privsep daemon: %s (the tree bound over /sys) '
    'and %s time that path' % ('privsep_config_reads',
                               'discovery_greenthread_stall'))


def _discovery(name: str) -> Callable[[], Callable[[], object]]:
    """Full discovery of a corpus host as nova-compute calls it."""
    def setup() -> Callable[[], object]:
        opts = bench_tools.opts(bench_tools.tree(name))
        # As every periodic update after the first: findings already
        # logged are not logged again.
        previous = discovery.discover(opts)
        return lambda: discovery.discover(opts, previous)
    return setup


for _name in hosts.HOSTS:
    BENCHMARKS['discovery[%s]' % _name] = _discovery(_name)


@benchmark
def pci_ids_read_system() -> Callable[[], object]:
    """The PCI ID database read each discovery adds on a real host.

    This machine's database (the first of pci_ids.SEARCH_PATHS:
    /usr/share/misc/pci.ids with Debian's package pci.ids), read once per
    discovery to tell consumer GPUs; discovery[host] reads the tests' few
    lines (tests/fixtures/pci.ids) instead.
    """
    return lambda: pci_ids.read()


#: Our guest XML against Nova's LibvirtDriver on the same instance: an
#: 8-GPU, 4-NIC, two-NUMA-cell server on the HGX-like host of the demo.
GUEST_XML = 'guest_xml[hgx-8gpu-2numa]'
#: Our guest XML may take at most this many times Nova's.
GOAL_RATIO = 1.10


def guest_xml() -> dict:
    """Median µs of our and Nova's guest config + to_xml, and the ratio.

    Both are timed in one in-process cloud, interleaved round by round,
    so the ratio holds even on a busy machine; above the goal, the result
    also says where our time goes (cProfile).
    """
    found = cloud_runner.run('bench_guest_xml',
                             rounds=SIZES.guest_xml_rounds,
                             number=SIZES.guest_xml_calls, goal=GOAL_RATIO)[0]
    timings = found.timings
    result = {
        'seconds_per_call': timings['ours_seconds'],
        'stock_seconds_per_call': timings['stock_seconds'],
        'ratio': timings['ratio'],
        'goal_ratio': GOAL_RATIO,
        'within_goal': timings['ratio'] <= GOAL_RATIO,
        'rounds': timings['rounds'],
        'calls_per_round': timings['calls_per_round'],
        'ours_samples': timings['ours_samples'],
        'stock_samples': timings['stock_samples'],
        'ours_xml_bytes': timings['ours_xml_bytes'],
        'stock_xml_bytes': timings['stock_xml_bytes'],
    }
    if found.hotspots:
        result['hotspots'] = found.hotspots
    return result


def print_guest_xml(result: dict) -> None:
    print('\nGuest XML generation, %s: _get_guest_config + to_xml, median '
          'of %d interleaved rounds x %d calls' % (
              GUEST_XML, result['rounds'], result['calls_per_round']))
    print('  %-40s %11.1f us  (%d bytes of XML)' % (
        'ours (GPUP2PLibvirtDriver)', result['seconds_per_call'] * 1e6,
        result['ours_xml_bytes']))
    print('  %-40s %11.1f us  (%d bytes of XML)' % (
        'stock (nova LibvirtDriver)', result['stock_seconds_per_call'] * 1e6,
        result['stock_xml_bytes']))
    print('  %-40s %11.3f     goal <= %.2f: %s' % (
        'ratio', result['ratio'], result['goal_ratio'],
        'met' if result['within_goal'] else 'MISSED'))
    if result.get('hotspots'):
        print('\n  Where our time goes (cProfile, us per guest; profiling '
              'inflates small calls):')
        print('  %-64s %6s %9s %9s %9s' % ('function', 'calls', 'cumul.',
                                           'self', 'in stock'))
        for row in result['hotspots']:
            print('  %-64s %6.0f %9.1f %9.1f %9.1f' % (
                row['function'][-64:], row['calls'], row['cumulative_us'],
                row['self_us'], row['stock_cumulative_us']))


#: The strategies x five metrics on every corpus host, from the XML.
DECISION_QUALITY = 'decision_quality'
STRATEGY_NOTES = {
    'stock': 'Nova\'s LibvirtDriver, as without this project',
    'wrapper': 'Nova\'s XML; the QEMU wrapper script (lab/baselines/'
               'wrapper.py) rewrites the -device vfio-pci arguments of '
               'libvirt\'s QEMU command line with the map it ships: every '
               'GPU of the host in clique 0',
    'wrapper-best': 'the same script with an operator\'s correct static '
                    'map for the host (its P2P groups at PXB, from the '
                    'hand-written tests/fixtures/expected_cliques.py)',
    'sidecar': 'Nova\'s XML + the KubeVirt sidecar recipe (lab/'
               'baselines/sidecar.py, lxml): one pxb-pcie per host NUMA '
               'node, <node> = the host node number (it assumes guest node '
               'N is host node N), no cliques',
    'ours': 'GPUP2PLibvirtDriver, default [gpu_p2p] options (NCCL: the '
            'guest\'s sysfs alone, no guest agent)',
    'ours+agent': 'the same XML, NCCL reading the topology file the guest '
                  'agent writes from its fw_cfg description',
}
METRIC_TITLES = {
    'p2p_enabled': 'P2P on',
    'p2p_false': 'false P2P',
    'numa_match': 'NUMA match',
    'gpu_nic_bus': 'GPU/NIC bus',
    'nccl_host_class': 'NCCL = host',
}
METRIC_NOTES = {
    'p2p_enabled': 'GPU pairs P2P capable on the host (<= PXB, ACS '
                   'routed) that share a clique in the guest; goal 100%',
    'p2p_false': 'GPU pairs NOT P2P capable that share a clique all the '
                 'same; goal 0%',
    'numa_match': 'passthrough devices whose guest node (<node> of the '
                  'pxb-pcie above them; none on the root bus) is the guest '
                  'cell bound to their host node; goal 100%',
    'gpu_nic_bus': 'GPU/NIC pairs on one host root complex that sit below '
                   'one expander bus in the guest (both on the root bus '
                   'does not count: that bus holds every device)',
    'nccl_host_class': 'GPU-GPU and GPU-NIC pairs that NCCL in the guest '
                       'classifies (PIX/PXB/PHB/SYS, by NCCL\'s rules, '
                       'from the guest sysfs tree the XML implies) as the '
                       'host\'s class (ACS routed; nvidia-smi NODE is '
                       'NCCL\'s PHB); goal 100%',
}
#: Ours against stock for 1-16 GPUs and 1-8 NUMA nodes.
SCALE = 'guest_xml_scale'
#: Bytes the cached topology (host_gpus.HostGPUs) keeps, per corpus host.
MEMORY = 'topology_memory'
#: Discovery of the 16-GPU, ~500-function host must stay under this.
DISCOVERY_GOAL_S = 0.100


def decision_quality_run() -> list[dict]:
    """Every corpus host, all and half its GPUs, four strategies."""
    records = []
    for name in SIZES.decision_hosts or hosts.HOSTS:
        records.extend(cloud_runner.run(
            'decision_quality', cloud='bench_cloud.CorpusBenchCloud',
            corpus_host=name))
    return records


def _instance(record: dict) -> str:
    text = '%s %dG' % (record['size'], record['gpus'])
    if record['nics']:
        text += '+%dN' % record['nics']
    if record.get('host_cells') is not None:
        text += ' n%s' % ','.join(map(str, record['host_cells']))
    return text


def _share(metric: dict) -> str:
    return str(decision_quality.Share(metric['hits'], metric['total']))


def _pooled(records: list[dict], crossed: bool | None = None
            ) -> dict[str, dict[str, list[int]]]:
    """Hits and totals per strategy and metric; ``crossed``: only those."""
    totals = {s: {m: [0, 0] for m in decision_quality.METRICS}
              for s in STRATEGY_NOTES}
    for record in records:
        if 'error' in record or (crossed is not None
                                 and record['crossed'] != crossed):
            continue
        for strategy, found in record['strategies'].items():
            for metric, value in found.get('metrics', {}).items():
                totals[strategy][metric][0] += value['hits']
                totals[strategy][metric][1] += value['total']
    return totals


def refusals(records: list[dict]) -> dict[str, list[str]]:
    """Strategy -> '<host> <instance>: <libvirt's reason>' per refusal."""
    found: dict[str, list[str]] = {s: [] for s in STRATEGY_NOTES}
    for record in records:
        for strategy, result in record.get('strategies', {}).items():
            if result['libvirt']['accepted'] is False:
                found[strategy].append('%s %s: %s' % (
                    record['host'], _instance(record),
                    result['libvirt']['reason']))
    return found


def print_decision_quality(records: list[dict]) -> None:
    print('\nDecision quality: each strategy\'s domain XML through libvirt '
          '(virt-xml-validate, virsh domxml-to-native), then parsed back, '
          'with the cliques of QEMU\'s command line, against hosts.EXPECTED '
          'and the host topology; refused XML scores zero')
    unchecked = sorted({r['libvirt'] for r in records
                        if r['libvirt'] != 'checked'})
    for reason in unchecked:
        print('\n  *** UNVALIDATED: libvirt could not check the XML (%s); '
              'the scores below are from the XML alone, and the wrapper, '
              'which needs libvirt\'s QEMU command line, is not scored ***\n'
              % reason)
    header = '%-26s %-22s %-12s' % ('host', 'instance', 'strategy') + ''.join(
        ' %-13s' % METRIC_TITLES[m] for m in decision_quality.METRICS)
    print(header)
    print('-' * len(header))
    for record in records:
        if 'error' in record:
            print('%-26s %-22s boot failed: %s' % (
                record['host'], _instance(record), record['error'][:60]))
            continue
        for strategy, found in record['strategies'].items():
            row = '%-26s %-22s %-12s' % (record['host'], _instance(record),
                                         strategy)
            if 'metrics' not in found:
                print(row + ' not scored: ' + found['not_scored'])
                continue
            row += ''.join(' %-13s' % _share(found['metrics'][m])
                           for m in decision_quality.METRICS)
            if found['libvirt']['accepted'] is False:
                row += ' REFUSED by libvirt'
            print(row)
    print('-' * len(header))
    for title, crossed in (('all instances (pooled)', None),
                           ('crossed only (pooled)', True)):
        for strategy, metrics in _pooled(records, crossed).items():
            print('%-26s %-22s %-12s' % (title, '', strategy)
                  + ''.join(' %-13s' % decision_quality.Share(*metrics[m])
                            for m in decision_quality.METRICS))
    print('\n  XML libvirt refused (scored zero; false P2P n/a):')
    for strategy, found in refusals(records).items():
        print('  %-12s %d of %d' % (strategy + ':', len(found), sum(
            'strategies' in r for r in records)))
        for line in found:
            print('    %s' % line)
    print('\n  instance: all or half of the GPUs Nova is offered, or '
          'crossed (a filler server holds host node 0\'s CPUs, so Nova '
          'fits guest cell 0 on another node: one cell with the second '
          'node\'s devices, or two cells, cell 0 needing two CPUs); G GPUs '
          '+ N NICs, nX,Y: host nodes of its guest cells (hw:numa_nodes = '
          'the host nodes its GPUs need; hw:gpu_p2p_clique=auto, '
          'hw:gpu_numa_affinity=preferred); n/a: nothing to count')
    for metric in decision_quality.METRICS:
        print('  %-12s %s' % (METRIC_TITLES[metric] + ':',
                              METRIC_NOTES[metric]))
    for strategy, note in STRATEGY_NOTES.items():
        print('  %-12s %s' % (strategy + ':', note))
    limits = sorted({(r['host'], limit) for r in records
                     for limit in r.get('limits', ())})
    for host, limit in limits:
        print('  limit of the test double on %s: %s' % (host, limit))
    errors = sorted({(r['host'], found['agent_error'])
                     for r in records for found in r.get(
                         'strategies', {}).values() if 'agent_error' in found})
    for host, error in errors:
        print('  guest agent not run on %s: %s' % (host, error))


def _growth(xs: list[int], ys: list[float]) -> dict:
    """Straight-line fit and log-log slope of ``ys`` over ``xs``."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx
    base = mean_y - slope * mean_x
    total = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - base - slope * x) ** 2 for x, y in zip(xs, ys))
    loglog = (math.log(ys[-1] / ys[0]) / math.log(xs[-1] / xs[0])
              if ys[0] > 0 and ys[-1] > 0 else None)
    return {'fixed_seconds': base, 'seconds_per_unit': slope,
            'r_squared': 1 - residual / total if total else 1.0,
            'growth': ys[-1] / ys[0] if ys[0] else None,
            'loglog_slope': loglog}


def _verdict(growth: dict) -> str:
    slope = growth['loglog_slope']
    if slope is None:
        return 'n/a'
    if slope <= 0.9:
        return 'sublinear'
    if slope <= 1.1:
        return 'linear'
    return 'superlinear'


def guest_xml_scale() -> dict:
    """Ours and stock per GPU and NUMA node count; fits of both series."""
    series = {name: value for name, value in (
        ('gpu_series', SIZES.scale_gpus),
        ('node_series', SIZES.scale_nodes)) if value}
    records = cloud_runner.run('scale', cloud='bench_cloud.CorpusBenchCloud',
                               rounds=SIZES.scale_rounds,
                               number=SIZES.scale_calls, **series)
    result = {'records': records, 'goal_ratio': GOAL_RATIO,
              'rounds': SIZES.scale_rounds, 'calls': SIZES.scale_calls,
              'host': 'large-16gpu-8numa', 'analysis': {}}
    for series, unit in (('gpus', 'gpus'), ('numa_nodes', 'guest_nodes')):
        rows = [r for r in records if r['series'] == series
                and 'error' not in r]
        if len(rows) < 2:
            continue
        xs = [r[unit] for r in rows]
        # Sizes are timed minutes apart on a shared machine: the fastest
        # round of each is the least disturbed by other load.
        ours = [min(r['ours_samples']) for r in rows]
        stock = [min(r['stock_samples']) for r in rows]
        result['analysis'][series] = {
            'x': xs, 'ours': _growth(xs, ours), 'stock': _growth(xs, stock),
            'added': _growth(xs, [o - s for o, s in zip(ours, stock)]),
        }
    return result


def print_guest_xml_scale(result: dict) -> None:
    print('\nGuest XML generation by size, %s, ours against stock on the '
          'same instance (median of %d interleaved rounds x %d calls; '
          'hw:gpu_p2p_clique=auto, hw:gpu_numa_affinity=preferred, no NICs)'
          % (result['host'], result['rounds'], result['calls']))
    print('  %-10s %5s %6s %11s %11s %8s  %s' % (
        'series', 'GPUs', 'nodes', 'stock ms', 'ours ms', 'ratio',
        'goal <= %.2f' % result['goal_ratio']))
    for record in result['records']:
        if 'error' in record:
            print('  %-10s %5d %6d  boot failed: %s' % (
                record['series'], record['gpus'], record['guest_nodes'],
                record['error'][:60]))
            continue
        print('  %-10s %5d %6d %11.2f %11.2f %8.3f  %s' % (
            record['series'], record['gpus'], record['guest_nodes'],
            record['stock_seconds'] * 1e3, record['ours_seconds'] * 1e3,
            record['ratio'],
            'met' if record['ratio'] <= result['goal_ratio'] else 'MISSED'))
    print('\nScale (fastest round per size; fit t = fixed + per-unit x; '
          'log-log slope from the first to the last size; <= 0.9 '
          'sublinear, <= 1.1 linear)')
    for series, found in result['analysis'].items():
        unit = 'GPU' if series == 'gpus' else 'node'
        for who in ('ours', 'stock', 'added'):
            growth = found[who]
            print('  %-10s %-6s %d->%d %ss: x%.2f time, log-log slope %.2f '
                  '(%s); %.2f ms + %.3f ms/%s (R^2 %.2f)' % (
                      series, who, found['x'][0], found['x'][-1], unit,
                      growth['growth'] or 0, growth['loglog_slope'] or 0,
                      _verdict(growth), growth['fixed_seconds'] * 1e3,
                      growth['seconds_per_unit'] * 1e3, unit,
                      growth['r_squared']))
    print('  (added = ours - stock: what this driver adds per guest build;'
          ' the numa_nodes series keeps 8 GPUs, so with 1 or 2 nodes most '
          'GPUs have no guest cell and stay on the root bus)')


def topology_memory() -> dict:
    """Bytes one cached host_gpus.HostGPUs keeps, per corpus host.

    tracemalloc around a second discovery (the first warms the caches
    discovery shares between calls), with the result kept alive.
    """
    result = {}
    for name in hosts.HOSTS:
        discover = _discovery(name)()
        discover()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            host = discover()
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        result[name] = {'bytes': after - before, 'peak_bytes': peak - before,
                        'pci_functions': len(host.topology.functions),
                        'gpus': len(host.topology.gpus())}
    return result


def print_topology_memory(result: dict, timings: dict) -> None:
    print('\nDiscovery and the cached topology (host_gpus.HostGPUs; '
          'tracemalloc of what one discovery keeps)')
    print('  %-28s %9s %5s %13s %11s %11s' % (
        'host', 'functions', 'GPUs', 'discovery ms', 'cached KiB',
        'peak KiB'))
    for name, found in result.items():
        timing = timings.get('discovery[%s]' % name)
        print('  %-28s %9d %5d %13s %11.1f %11.1f' % (
            name, found['pci_functions'], found['gpus'],
            '%.2f' % (timing['seconds_per_call'] * 1e3) if timing else '-',
            found['bytes'] / 1024, found['peak_bytes'] / 1024))
    print('  %s' % DISCOVERY_NOTE)
    goal = timings.get('discovery[%s]' % bench_tools.DISCOVERY_GOAL_HOST)
    if goal:
        print('  discovery of %s: %.1f ms, goal < %.0f ms: %s' % (
            bench_tools.DISCOVERY_GOAL_HOST, goal['seconds_per_call'] * 1e3,
            DISCOVERY_GOAL_S * 1e3,
            'met' if goal['seconds_per_call'] < DISCOVERY_GOAL_S
            else 'MISSED'))


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
    ops = scheduling_sim.random_ops(SIZES.scheduling_ops, SCHEDULING_SEED,
                                    capacity)
    runs = []
    for order in scheduling_sim.HostOrder:
        for policy in scheduling_sim.Policy:
            run = functools.partial(scheduling_sim.replay, cloud, ops,
                                    policy, order)
            outcomes = run()
            runs.append({
                'policy': policy.value, 'order': order.value,
                'seconds': bench_tools.best(run, SIZES.scheduling_rounds),
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
                   for case in cloud_filters.cases(SIZES.cloud_hosts)]
        for cap in SIZES.cloud_caps}}


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
    sizes = {'sizes': SIZES.select_gpus} if SIZES.select_gpus else {}
    if QUICK_RUN and SIZES.select_batch:
        # Two cloud hosts, one running a pair: three free halves.
        sizes['batch_size'] = 2
    return {'candidates_per_host': SIZES.select_keep, 'records': [
        record for hosts in SIZES.select_hosts
        for shape in SIZES.select_shapes or select_bench_cloud.SHAPES
        for record in _with_load(cloud_runner.run(
            'select', cloud=SELECT_CLOUD, shape=shape, hosts=hosts,
            caps_per_host=SIZES.select_caps,
            candidates_per_host=SIZES.select_keep,
            compare_stock=SIZES.select_stock,
            with_batch=SIZES.select_batch, **sizes))]}


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
    print('  %-20s %5s %4s %4s %-8s %-5s %8s %11s %8s %9s %6s %6s %6s '
          '%7s %6s %10s %8s %6s %5s %4s' % (
              'shape', 'hosts', 'cap', 'GPUs', 'flavor', 'nova', 'select s',
              'placement s',
              'states s', 'filters s', 'ours s', 'NUMA s', 'PCI s',
              'weigh s', 'claim', 'candidates', 'fitting', 'kept', 'one',
              'best') + ' placed')
    records = [row for row in result['records'] if not row.get('batch')]
    for row in records:
        by_class = row['filter_seconds_by_class']
        print('  %-20s %5d %4g %4d %-8s %-5s %8.2f %11.2f %8.2f %9.2f %6.2f '
              '%6.2f %6.2f %7.2f %6.2f %10d %8d %6d %5s %4s' % (
                  row['shape'], row['hosts'], row['cap_per_host'],
                  row['gpus'],
                  'required' if row['required'] else 'plain',
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
    batches = [row for row in result['records'] if row.get('batch')]
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
          'holds Nova\'s filters over the batches it hands them')


SELECT_BATCHES = 'select_destinations_batches'
#: Batches of select_bench_cloud.BATCH required 4-GPU servers: on 10
#: hosts of 8 GPUs they must pack two per host.


def select_destinations_batches() -> dict:
    """``--min 20 --max 20`` of required 4-GPU servers, 10 and 50 hosts.

    lab/select_bench_cloud.py's batch: idle hosts, the recommended
    settings; one request's select_destinations beside a single one's.
    """
    batch = {'batch_size': SIZES.batch_size} if SIZES.batch_size else {}
    return {'records': [
        record for hosts in SIZES.batch_hosts for shape in SIZES.batch_shapes
        for record in cloud_runner.run('batch', cloud=SELECT_CLOUD,
                                       shape=shape, hosts=hosts,
                                       busy=False, **batch)]}


def print_select_destinations_batches(result: dict) -> None:
    print('\nScheduling batches: one request for N required servers '
          '(lab/select_bench_cloud.py; idle hosts, settings as above)')
    print('  %-20s %5s %-5s %7s %4s %8s %12s %9s %11s %9s %6s %8s' % (
        'shape', 'hosts', 'nova', 'servers', 'GPUs', 'select s',
        'per server s', 'single s', 'placement s', 'filters s', 'hosts',
        'one'))
    for row in result['records']:
        print('  %-20s %5d %-5s %7d %4d %8.2f %12.3f %9.2f %11.2f %9.2f %6s '
              '%8s' % (
                  row['shape'], row['hosts'],
                  'stock' if row.get('stock') else 'ours',
                  row['servers'], row['gpus'],
                  row['select_seconds'], row['per_server_seconds'],
                  row['single_seconds'], row['placement_seconds'],
                  row['filter_seconds'],
                  '%d/%d' % (row['hosts_used'], row['most_per_host']),
                  '%d/%d' % (row['one_group'], row['servers'])))
    print('  hosts: hosts used / most servers on one; one: servers whose '
          'GPUs are one clique (Fabric Manager: one partition); single: '
          'select_destinations of one such server on the same cloud')


FABRIC = 'fabric_nvlink'
FABRIC_CLOUD = 'fabric_bench_cloud.FabricBenchCloud'
FABRIC_TITLES = {'nvlink_pairs': 'NVLink pairs (goal 100%)',
                 'one_partition': 'servers of 2+ on one partition',
                 'cross_tenant': 'cross-tenant NVLink (goal 0%)',
                 'cuda_ready': 'CUDA-ready GPUs (goal 100%)'}


def fabric_nvlink() -> dict:
    """Nova's cloud and ours on the HGX host; each strategy's metrics."""
    sequences = ({'sequences': SIZES.fabric_sequences}
                 if SIZES.fabric_sequences else {})
    records = [record for ours in (False, True)
               for record in cloud_runner.run('nvlink', cloud=FABRIC_CLOUD,
                                              OURS=ours, **sequences)]
    board, _ = partitions.to_addresses(
        fake_fm.H100_PARTITIONS.items(), hosts.HGX_MODULES)
    return {'records': records, 'strategies': {
        name: {metric: share.as_dict() for metric, share in found.items()}
        for name, found in fabric_quality.pooled(records, board).items()}}


def print_fabric_nvlink(result: dict) -> None:
    print('\nNVLink on an HGX board (H100, the stand-in Fabric Manager), '
          'hw:gpu_p2p_clique=required servers booted in sequence on the '
          'empty board, then deleted:')
    for record in result['records']:
        print('  %-5s %-12s %s; active after the boots: %s, after the '
              'deletes: %s' % (
                  'ours' if record['ours'] else 'Nova',
                  '+'.join(map(str, record['sequence'])) + ' GPUs',
                  ' | '.join(','.join(a[5:7] for a in gpus)
                             for gpus in record['servers']),
                  record['active'] or 'none',
                  record['active_after_delete'] or 'none'))
    print('  %-28s' % 'strategy' + ''.join(
        ' %-30s' % FABRIC_TITLES[m] for m in fabric_quality.METRICS))
    for name, metrics in result['strategies'].items():
        print('  %-28s' % name + ''.join(
            ' %-30s' % _share(metrics[m]) for m in fabric_quality.METRICS))
    print('  GPUs by PCI bus number; stock, wrapper and sidecar: Nova\'s '
          'scheduler and GPUs, no Fabric Manager call (the wrapper and the '
          'sidecar change only the guest\'s XML or QEMU command line); by '
          'hand and hook: computed on Nova\'s GPUs; ours: our filter\'s '
          'GPUs and the partitions our driver activated, as Fabric Manager '
          'reports them')


#: The guest agent's check of GPU P2P (lab/verify_p2p_bench.py).
VERIFY_P2P = 'verify_p2p'


def verify_p2p() -> dict:
    return verify_p2p_bench.run(mib=SIZES.verify_p2p_mib,
                                rounds=SIZES.verify_p2p_rounds)


def measure(func: Callable[[], object]) -> dict:
    """Best-of-five mean time per call, with enough calls per round."""
    timer = timeit.Timer(func)
    number = 1
    if SIZES.min_time:
        number, _ = timer.autorange()
        number = max(number, int(number * SIZES.min_time / 0.2))
    best = min(timer.repeat(repeat=SIZES.repeat, number=number)) / number
    return {'seconds_per_call': best, 'calls_per_round': number}


def _numbers(text: str) -> tuple[int, ...]:
    """``100,200,500`` as numbers, for argparse."""
    try:
        return tuple(int(number) for number in text.split(','))
    except ValueError:
        raise argparse.ArgumentTypeError(
            'not a comma-separated list of numbers: %r' % text)


#: ``openstack gpu p2p capacity`` against real placement (issue 44).
CAPACITY = 'capacity_at_cloud_size'


def capacity_at_cloud_size() -> dict:
    """In a fresh interpreter: the other sections patch eventlet in."""
    return bench_privsep.child('capacity')


def _child_capacity() -> dict:
    from lab import capacity_bench
    return capacity_bench.run(SIZES.capacity_hosts, SIZES.capacity_rounds)


def print_capacity(result: dict) -> None:
    from lab import capacity_bench
    capacity_bench.print_result(result)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--json', help='also write the results here')
    parser.add_argument('names', nargs='*', help='benchmarks to run')
    parser.add_argument('--quick', action='store_true',
                        help='every section at its smallest size, to see '
                        'that it runs (CI); its numbers are not worth '
                        'quoting')
    parser.add_argument('--child', choices=('privsep', 'stall', 'capacity'),
                        help=argparse.SUPPRESS)
    parser.add_argument('--select-hosts', type=_numbers,
                        help='%s\'s cloud sizes, e.g. 100,200,500' % SELECT)
    parser.add_argument('--select-shapes', type=lambda text: tuple(
        text.split(',')), help='%s\'s shapes, e.g. 4+4' % SELECT)
    parser.add_argument('--select-gpus', type=_numbers,
                        help='%s\'s GPUs per request, e.g. 2,4' % SELECT)
    parser.add_argument('--select-caps', type=lambda text: tuple(
        float(cap) for cap in text.split(',')),
        help='%s\'s placement caps per host, each cloud\'s requests '
        'asked under each in turn (default 2)' % SELECT)
    parser.add_argument('--select-keep', type=int,
                        help='%s\'s [gpu_p2p] candidates_per_host' % SELECT)
    parser.add_argument('--select-stock', action='store_const', const=True,
                        help='%s: each request also with stock Nova\'s '
                        'filters and weighers' % SELECT)
    parser.add_argument('--select-batch', action='store_const', const=True,
                        help='%s: a --min 20 batch on each cloud too' % SELECT)
    args = parser.parse_args(argv)
    global SIZES, QUICK_RUN
    QUICK_RUN = args.quick
    SIZES = QUICK if args.quick else FULL
    chosen = {'select_hosts': args.select_hosts,
              'select_shapes': args.select_shapes,
              'select_gpus': args.select_gpus,
              'select_caps': args.select_caps,
              'select_keep': args.select_keep,
              'select_stock': args.select_stock,
              'select_batch': args.select_batch}
    SIZES = dataclasses.replace(SIZES, **{
        name: value for name, value in chosen.items() if value is not None})
    bench_privsep.configure(SIZES.privsep_rounds, SIZES.stall_rounds,
                            QUICK_RUN)
    if args.child:
        run = {'privsep': bench_privsep.child_privsep,
               'stall': bench_privsep.child_stall,
               'capacity': _child_capacity}[args.child]
        print(json.dumps(run()))
        return 0
    clouds = {GUEST_XML: guest_xml, DECISION_QUALITY: decision_quality_run,
              SCALE: guest_xml_scale, FABRIC: fabric_nvlink,
              SELECT: select_destinations_at_cloud_size,
              SELECT_BATCHES: select_destinations_batches}
    children = {bench_privsep.PRIVSEP: bench_privsep.privsep_reads,
                bench_privsep.STALL: bench_privsep.greenthread_stall,
                VERIFY_P2P: verify_p2p, CAPACITY: capacity_at_cloud_size}
    known = (set(BENCHMARKS) | set(clouds) | set(children)
             | {MEMORY, SCHEDULING, CLOUD_FILTERS})
    unknown = set(args.names) - known
    if unknown:
        parser.error('unknown benchmark(s): %s; known: %s' % (
            ', '.join(sorted(unknown)), ', '.join(sorted(known))))
    names = args.names or sorted(known)
    results = {name: measure(BENCHMARKS[name]())
               for name in names if name in BENCHMARKS}
    timed = list(results)
    if MEMORY in names:
        results[MEMORY] = topology_memory()
    if SCHEDULING in names:
        results[SCHEDULING] = clique_scheduling()
    if CLOUD_FILTERS in names:
        results[CLOUD_FILTERS] = scheduling_at_cloud_size()
    for name, run in children.items():
        if name in names:
            results[name] = run()
    for name, run in clouds.items():
        if name not in names:
            continue
        try:
            results[name] = run()
        except cloud_runner.CloudFailed as exc:
            print(exc, file=sys.stderr)
            return 1
    print('%-44s %14s' % ('benchmark', 'time per call'))
    for name in timed:
        print('%-44s %11.3f ms' % (name,
                                   results[name]['seconds_per_call'] * 1e3))
    printers = (
        (GUEST_XML, print_guest_xml),
        (DECISION_QUALITY, print_decision_quality),
        (SCALE, print_guest_xml_scale),
        (MEMORY, lambda record: print_topology_memory(record, results)),
        (SCHEDULING, print_clique_scheduling),
        (CLOUD_FILTERS, print_scheduling_at_cloud_size),
        (FABRIC, print_fabric_nvlink),
        (SELECT, print_select_destinations_at_cloud_size),
        (SELECT_BATCHES, print_select_destinations_batches),
        (bench_privsep.PRIVSEP, bench_privsep.print_privsep_reads),
        (bench_privsep.STALL, bench_privsep.print_greenthread_stall),
        (VERIFY_P2P, verify_p2p_bench.print_result),
        (CAPACITY, print_capacity))
    for section, printer in printers:
        if section in results:
            printer(results[section])
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(results, run='quick' if args.quick else 'full'),
                      f, indent=2, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
