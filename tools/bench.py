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
have one source.
"""

import argparse
import atexit
from collections.abc import Callable
import json
import os
import shutil
import sys
import tempfile
import timeit

# This checkout first, as stestr runs the tests: the numbers are this
# tree's even where an older copy of the package is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from oslo_config import cfg  # noqa: E402

from nova_gpu_p2p import conf  # noqa: E402
from nova_gpu_p2p import extra_specs  # noqa: E402
from nova_gpu_p2p.tests.fixtures import hosts  # noqa: E402
from nova_gpu_p2p.tests.fixtures import sysfs_builder  # noqa: E402
from nova_gpu_p2p.tests.functional import cloud_runner  # noqa: E402
from nova_gpu_p2p.topology import discovery  # noqa: E402
from nova_gpu_p2p.topology import sysfs  # noqa: E402

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


def _discovery(name: str) -> Callable[[], Callable[[], object]]:
    """Full discovery of a corpus host: read its sysfs tree, find cliques."""
    def setup() -> Callable[[], object]:
        root = tempfile.mkdtemp(dir=sysfs_builder.scratch_dir())
        atexit.register(shutil.rmtree, root, True)
        sysfs_builder.build(hosts.HOSTS[name], root)
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        opts([], default_config_files=[])
        opts.set_override('sysfs_root', root, group='gpu_p2p')
        backend = sysfs.SysfsBackend(opts,
                                     read_config=sysfs.read_config_direct)
        return lambda: discovery.evaluate(backend.discover(), opts)
    return setup


for _name in hosts.HOSTS:
    BENCHMARKS['discovery[%s]' % _name] = _discovery(_name)


#: Our guest XML against Nova's LibvirtDriver on the same instance: an
#: 8-GPU, 4-NIC, two-NUMA-cell server on the HGX-like host of the demo.
GUEST_XML = 'guest_xml[hgx-8gpu-2numa]'
#: Our guest XML may take at most this many times Nova's.
GOAL_RATIO = 1.10
GUEST_XML_ROUNDS = 7
GUEST_XML_CALLS = 30


def guest_xml() -> dict:
    """Median µs of our and Nova's guest config + to_xml, and the ratio.

    Both are timed in one in-process cloud, interleaved round by round,
    so the ratio holds even on a busy machine; above the goal, the result
    also says where our time goes (cProfile).
    """
    found = cloud_runner.run('bench_guest_xml', rounds=GUEST_XML_ROUNDS,
                             number=GUEST_XML_CALLS, goal=GOAL_RATIO)[0]
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


def measure(func: Callable[[], object], min_time: float = 0.2) -> dict:
    """Best-of-five mean time per call, with enough calls per round."""
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    number = max(number, int(number * min_time / 0.2))
    best = min(timer.repeat(repeat=5, number=number)) / number
    return {'seconds_per_call': best, 'calls_per_round': number}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--json', help='also write the results here')
    parser.add_argument('names', nargs='*', help='benchmarks to run')
    args = parser.parse_args(argv)
    known = set(BENCHMARKS) | {GUEST_XML}
    unknown = set(args.names) - known
    if unknown:
        parser.error('unknown benchmark(s): %s; known: %s' % (
            ', '.join(sorted(unknown)), ', '.join(sorted(known))))
    names = args.names or sorted(known)
    results = {name: measure(BENCHMARKS[name]())
               for name in names if name in BENCHMARKS}
    if GUEST_XML in names:
        try:
            results[GUEST_XML] = guest_xml()
        except cloud_runner.CloudFailed as exc:
            print(exc, file=sys.stderr)
            return 1
    print('%-44s %14s' % ('benchmark', 'time per call'))
    for name, result in results.items():
        print('%-44s %11.3f ms' % (name, result['seconds_per_call'] * 1e3))
    if GUEST_XML in results:
        print_guest_xml(results[GUEST_XML])
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=2, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
