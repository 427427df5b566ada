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

"""How long ``nova-gpu-p2p-guest verify-p2p`` takes: 8 GPUs, 64 MiB.

Measured on the stand-in driver (tests/fixtures/cuda/fake_cuda.c), where
every GPU's memory is host memory and every copy a memcpy on this
machine, and estimated for real GPUs from the bytes each run moves. Per
ordered pair: host to GPU A once; then for each of the three paths
(copy engine, SM stores, SM loads) B's buffer cleared (GPU-local), A
into B (P2P), the host buffer poisoned (a host copy), B back to the
host, and one comparison on the host.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from nova_gpu_p2p_guest import p2p_probe

from tests.fixtures import fake_cuda

AGENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), 'guest-agent')
GPUS = 8
MIB = 64
ROUNDS = 3
GOAL_SECONDS = 10.0
#: GB/s of a GPU-to-GPU write, one direction, for the estimate.
P2P_GBPS = {'NVLink 4 (H100 SXM)': 370.0, 'PCIe Gen5 x16': 50.0}
#: GB/s of the host copies from pageable memory (no pinned buffers), a
#: guest on PCIe Gen5: about a quarter of the link, on purpose low.
HOST_GBPS = 12.0
#: Transfers per ordered pair: one per path.
PATHS = len(p2p_probe.PATHS)


def _run_once(directory: str, gpus: int, mib: int) -> dict:
    result = os.path.join(directory, 'p2p-verification.json')
    env = dict(os.environ, PYTHONPATH=AGENT,
               **fake_cuda.environment(gpus=gpus))
    start = time.monotonic()
    subprocess.run(
        [sys.executable, '-m', 'nova_gpu_p2p_guest', 'verify-p2p',
         '--library', fake_cuda.library(), '--result', result,
         '--nccl-conf', os.path.join(directory, 'nccl.conf'),
         '--console', os.path.join(directory, 'console'),
         '--mib', str(mib)],
        check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.monotonic() - start
    with open(result) as f:
        found = json.load(f)
    if found['status'] != 'passed':
        raise RuntimeError('the stand-in check did not pass: %s'
                           % found['failures'])
    return {'wall_seconds': wall, 'seconds': found['seconds'],
            'pairs': len(found['pairs'])}


def _host_seconds(size: int) -> tuple[float, float]:
    """One comparison and one poisoning of ``size`` bytes, best of three."""
    a, b = bytearray(os.urandom(size)), bytearray(size)
    b[:] = a
    compare = poison = float('inf')
    for _ in range(3):
        start = time.perf_counter()
        if a != b:
            raise AssertionError('equal buffers compare unequal')
        middle = time.perf_counter()
        b[:] = a
        compare = min(compare, middle - start)
        poison = min(poison, time.perf_counter() - middle)
    return compare, poison


def run(gpus: int = GPUS, mib: int = MIB, rounds: int = ROUNDS) -> dict:
    size = mib << 20
    with tempfile.TemporaryDirectory() as directory:
        runs = [_run_once(directory, gpus, mib) for _ in range(rounds)]
    pairs = gpus * (gpus - 1)
    transfers = PATHS * pairs
    moved = {'host_to_gpu': pairs * size, 'gpu_to_gpu': transfers * size,
             'gpu_to_host': transfers * size, 'gpu_local': transfers * size,
             'host_local': transfers * size}
    compare, poison = (seconds * transfers
                       for seconds in _host_seconds(size))
    start = time.perf_counter()
    os.urandom(size)
    random = time.perf_counter() - start
    host = (moved['host_to_gpu'] + moved['gpu_to_host']) / HOST_GBPS / 1e9
    return {
        'gpus': gpus, 'mib': mib, 'pairs': pairs,
        'stand_in_seconds': statistics.median(r['seconds'] for r in runs),
        'stand_in_wall_seconds': statistics.median(
            r['wall_seconds'] for r in runs),
        'bytes_moved': moved, 'compare_seconds': compare,
        'poison_seconds': poison,
        'host_copy_seconds': host, 'random_seconds': random,
        'estimate_seconds': {
            link: host + moved['gpu_to_gpu'] / gbps / 1e9 + compare
            + poison + random for link, gbps in P2P_GBPS.items()}}


def print_result(result: dict) -> None:
    moved = result['bytes_moved']
    print('\nverify-p2p, %d GPUs (%d ordered pairs), %d MiB per transfer '
          '(goal: under %g s)' % (result['gpus'], result['pairs'],
                                  result['mib'], GOAL_SECONDS))
    print('  measured on the stand-in driver (GPU memory and copies are '
          'host memory and memcpy here): %.2f s of its own, %.2f s with '
          'the process' % (result['stand_in_seconds'],
                           result['stand_in_wall_seconds']))
    print('  moved: %.1f GB GPU to GPU, %.1f GB host to GPU, %.1f GB GPU to '
          'host, %.1f GB cleared on the GPUs' % tuple(
              moved[k] / 1e9 for k in ('gpu_to_gpu', 'host_to_gpu',
                                       'gpu_to_host', 'gpu_local')))
    print('  estimate on GPUs: host copies %.2f s at %g GB/s; as measured '
          'here, the comparisons %.2f s, the poisoning %.2f s and the run\'s '
          'random bytes %.2f s; plus P2P:' % (
              result['host_copy_seconds'], HOST_GBPS,
              result['compare_seconds'], result['poison_seconds'],
              result['random_seconds']))
    for link, seconds in result['estimate_seconds'].items():
        print('    %-28s %6.2f s (P2P at %g GB/s)' % (
            link, seconds, P2P_GBPS[link]))
    print('  not counted: the driver starting and compiling the kernel '
          '(cuInit, contexts: seconds on 8 GPUs)')
