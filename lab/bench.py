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

Each benchmark is a function registered with :func:`benchmark`; it returns the
callable to time. Guest XML generation is compared with Nova's stock driver
instead (:data:`~lab.bench_guest_xml.GUEST_XML`), so the numbers quoted in
release notes have one source. Besides time: the decision quality of ours and
the published workarounds on every corpus host, each document checked by
libvirt first (:data:`~lab.bench_quality.DECISION_QUALITY`), how XML generation
scales with GPUs and NUMA nodes (:data:`~lab.bench_guest_xml.SCALE`), the
memory of the cached topology (:data:`MEMORY`), config space through
nova-compute's privsep daemon, per call and batched, and how long a greenthread
waits while discovery runs under eventlet (both in :mod:`lab.bench_privsep`),
and ``hw:gpu_p2p_clique=required`` scheduling on a simulated cloud of corpus
hosts, Nova's order against the clique filter and best fit
(:data:`~lab.bench_scheduling.SCHEDULING`), and the NVLink guests get on an HGX
board with Fabric Manager, per strategy (:data:`~lab.bench_quality.FABRIC`).
Each section's size, full or ``--quick``: :mod:`lab.bench_sizes`.
"""

import argparse
from collections.abc import Callable
import gc
import json
import os
import sys
import timeit
import tracemalloc

# This checkout first, as stestr runs the tests: the numbers are this
# tree's even where an older copy of the package is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


from lab import cloud_runner  # noqa: E402
if '--child' not in sys.argv or 'cloned' in sys.argv:
    # The in-process clouds need it; the privsep and stall children
    # measure reads and stalls without it. Before anything that imports
    # Nova (cloud_filters does).
    cloud_runner.patch_first()
from lab import bench_guest_xml as guest  # noqa: E402
from lab import bench_privsep  # noqa: E402
from lab import bench_quality as quality  # noqa: E402
from lab import bench_scheduling as scheduling  # noqa: E402
from lab import bench_sizes  # noqa: E402
from lab import bench_tools  # noqa: E402
from lab import verify_p2p_bench  # noqa: E402
from nova_gpu_p2p import extra_specs  # noqa: E402
from nova_gpu_p2p.topology import discovery  # noqa: E402
from nova_gpu_p2p.topology import pci_ids  # noqa: E402
from tests.fixtures import hosts  # noqa: E402

BENCHMARKS: dict[str, Callable[[], Callable[[], object]]] = {}


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


#: Bytes the cached topology (host_gpus.HostGPUs) keeps, per corpus host.
MEMORY = 'topology_memory'
#: Discovery of the 16-GPU, ~500-function host must stay under this.
DISCOVERY_GOAL_S = 0.100


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


#: The guest agent's check of GPU P2P (lab/verify_p2p_bench.py).
VERIFY_P2P = 'verify_p2p'


def verify_p2p() -> dict:
    return verify_p2p_bench.run(mib=bench_sizes.SIZES.verify_p2p_mib,
                                rounds=bench_sizes.SIZES.verify_p2p_rounds)


def measure(func: Callable[[], object]) -> dict:
    """Best-of-five mean time per call, with enough calls per round."""
    sizes = bench_sizes.SIZES
    timer = timeit.Timer(func)
    number = 1
    if sizes.min_time:
        number, _ = timer.autorange()
        number = max(number, int(number * sizes.min_time / 0.2))
    best = min(timer.repeat(repeat=sizes.repeat, number=number)) / number
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
    return capacity_bench.run(bench_sizes.SIZES.capacity_hosts,
                              bench_sizes.SIZES.capacity_rounds)


def print_capacity(result: dict) -> None:
    from lab import capacity_bench
    capacity_bench.print_result(result)


#: Placement's answer with CUSTOM_GPU_P2P_FREE_<n> required (issue 47).
FREE_TRAIT = 'placement_free_trait'


def placement_free_trait() -> dict:
    """In fresh interpreters, as capacity_at_cloud_size.

    Placement as released, then with ``patches/placement``
    (:mod:`lab.patched_placement`), whose answers must have the same
    hosts, summaries and candidates per host
    (:func:`lab.placement_free_trait.answer_digest`). A 1000-host cloud
    takes about five minutes to build here, each time.
    """
    from lab import patched_placement
    from lab import placement_free_trait as free
    stock = bench_privsep.child('free_trait', timeout=3600)
    with patched_placement.copy() as path:
        fixed = bench_privsep.child('free_trait', timeout=3600,
                                    first_path=path)
    if stock['patched'] or not fixed['patched']:
        raise RuntimeError('placement_free_trait: the stock run imported a '
                           'patched placement or the fixed run did not')
    for released, patched in zip(stock['clouds'], fixed['clouds']):
        differ = [query for query in free.QUERIES
                  if released['%s_answer' % query]
                  != patched['%s_answer' % query]]
        if differ:
            raise RuntimeError(
                'placement_free_trait: patches/placement changed the answer '
                'to %s at %d hosts' % (', '.join(differ), released['hosts']))
    return {'clouds': stock['clouds'], 'fixed_clouds': fixed['clouds']}


def _child_free_trait() -> dict:
    from lab import patched_placement
    from lab import placement_free_trait as free
    return {'clouds': free.run(bench_sizes.SIZES.free_trait_clouds),
            'patched': patched_placement.is_patched()}


def print_free_trait(result: dict) -> None:
    from lab import placement_free_trait as free
    free.print_result(result['clouds'], result['fixed_clouds'])


def main(argv: list[str]) -> int:
    select = scheduling.SELECT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--json', help='also write the results here')
    parser.add_argument('names', nargs='*', help='benchmarks to run')
    parser.add_argument('--quick', action='store_true',
                        help='every section at its smallest size, to see '
                        'that it runs (CI); its numbers are not worth '
                        'quoting')
    parser.add_argument('--child', choices=('privsep', 'stall', 'capacity',
                                            'free_trait', 'cloned'),
                        help=argparse.SUPPRESS)
    parser.add_argument('--select-hosts', type=_numbers,
                        help='%s\'s cloud sizes, e.g. 100,200,500' % select)
    parser.add_argument('--select-shapes', type=lambda text: tuple(
        text.split(',')), help='%s\'s shapes, e.g. 4+4' % select)
    parser.add_argument('--select-gpus', type=_numbers,
                        help='%s\'s GPUs per request, e.g. 2,4' % select)
    parser.add_argument('--select-caps', type=lambda text: tuple(
        float(cap) for cap in text.split(',')),
        help='%s\'s placement caps per host, each cloud\'s requests '
        'asked under each in turn (default 2)' % select)
    parser.add_argument('--select-keep', type=int,
                        help='%s\'s [gpu_p2p] candidates_per_host' % select)
    parser.add_argument('--select-stock', action='store_const', const=True,
                        help='%s: each request also with stock Nova\'s '
                        'filters and weighers' % select)
    parser.add_argument('--select-batch', action='store_const', const=True,
                        help='%s: a --min 20 batch on each cloud too' % select)
    parser.add_argument('--select-free-trait', action='store_const',
                        const=True,
                        help='%s: computes report CUSTOM_GPU_P2P_FREE_<n>; '
                        'each required request also asked with a flavor '
                        'requiring its size' % select)
    parser.add_argument('--select-quiet', type=float, metavar='LOAD',
                        help='%s: before its requests, wait (up to 30 '
                        'minutes) for the load average to fall to LOAD'
                        % select)
    args = parser.parse_args(argv)
    sizes = bench_sizes.configure(args.quick, {
        'select_hosts': args.select_hosts,
        'select_shapes': args.select_shapes,
        'select_gpus': args.select_gpus,
        'select_caps': args.select_caps,
        'select_keep': args.select_keep,
        'select_stock': args.select_stock,
        'select_batch': args.select_batch,
        'select_free_trait': args.select_free_trait,
        'select_quiet': args.select_quiet})
    bench_privsep.configure(sizes.privsep_rounds, sizes.stall_rounds,
                            args.quick)
    if args.child:
        run = {'privsep': bench_privsep.child_privsep,
               'stall': bench_privsep.child_stall,
               'capacity': _child_capacity,
               'free_trait': _child_free_trait,
               'cloned': scheduling.child_cloned}[args.child]
        print(json.dumps(run()))
        return 0
    clouds = {guest.GUEST_XML: guest.guest_xml,
              quality.DECISION_QUALITY: quality.decision_quality_run,
              guest.SCALE: guest.guest_xml_scale,
              quality.FABRIC: quality.fabric_nvlink,
              select: scheduling.select_destinations_at_cloud_size,
              scheduling.SELECT_BATCHES:
                  scheduling.select_destinations_batches}
    children = {bench_privsep.PRIVSEP: bench_privsep.privsep_reads,
                bench_privsep.STALL: bench_privsep.greenthread_stall,
                VERIFY_P2P: verify_p2p, CAPACITY: capacity_at_cloud_size,
                FREE_TRAIT: placement_free_trait,
                scheduling.SELECT_CLONED:
                    scheduling.select_destinations_cloned}
    known = (set(BENCHMARKS) | set(clouds) | set(children)
             | {MEMORY, scheduling.SCHEDULING, scheduling.CLOUD_FILTERS})
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
    if scheduling.SCHEDULING in names:
        results[scheduling.SCHEDULING] = scheduling.clique_scheduling()
    if scheduling.CLOUD_FILTERS in names:
        results[scheduling.CLOUD_FILTERS] = (
            scheduling.scheduling_at_cloud_size())
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
        (guest.GUEST_XML, guest.print_guest_xml),
        (quality.DECISION_QUALITY, quality.print_decision_quality),
        (guest.SCALE, guest.print_guest_xml_scale),
        (MEMORY, lambda record: print_topology_memory(record, results)),
        (scheduling.SCHEDULING, scheduling.print_clique_scheduling),
        (scheduling.CLOUD_FILTERS,
         scheduling.print_scheduling_at_cloud_size),
        (quality.FABRIC, quality.print_fabric_nvlink),
        (select, scheduling.print_select_destinations_at_cloud_size),
        (scheduling.SELECT_BATCHES,
         scheduling.print_select_destinations_batches),
        (bench_privsep.PRIVSEP, bench_privsep.print_privsep_reads),
        (bench_privsep.STALL, bench_privsep.print_greenthread_stall),
        (VERIFY_P2P, verify_p2p_bench.print_result),
        (CAPACITY, print_capacity),
        (FREE_TRAIT, print_free_trait),
        (scheduling.SELECT_CLONED,
         scheduling.print_select_destinations_cloned))
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
