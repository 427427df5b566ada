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
the callable to time. Later work adds topology discovery and guest XML
generation here, so the numbers quoted in release notes have one source.
"""

import argparse
import atexit
from collections.abc import Callable
import json
import shutil
import sys
import tempfile
import timeit

from oslo_config import cfg

from nova_gpu_p2p import conf
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.tests.fixtures import hosts
from nova_gpu_p2p.tests.fixtures import sysfs_builder
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import sysfs

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
    unknown = set(args.names) - set(BENCHMARKS)
    if unknown:
        parser.error('unknown benchmark(s): %s; known: %s' % (
            ', '.join(sorted(unknown)), ', '.join(sorted(BENCHMARKS))))
    results = {name: measure(BENCHMARKS[name]())
               for name in args.names or sorted(BENCHMARKS)}
    print('%-44s %14s' % ('benchmark', 'time per call'))
    for name, result in results.items():
        print('%-44s %11.3f ms' % (name, result['seconds_per_call'] * 1e3))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=2, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
