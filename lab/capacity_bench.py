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

"""``openstack gpu p2p capacity`` at cloud size, against real placement.

Clouds of 8-GPU hosts (four of five PCIe hosts with pairs, quads or an
eight; every fifth an HGX board with its partitions), about half their
GPUs held by servers, in placement's WSGI app over SQLite
(:mod:`lab.capacity_cloud`). Timed: the command's work beyond the
client's start-up (:class:`~nova_gpu_p2p.osc.placement_reader.Reader`
and :func:`~nova_gpu_p2p.capacity.cloud_sizes`, best of ``rounds``), its
placement calls, and the whole ``openstack gpu p2p capacity -f json``
run in this process (the shell and its plugins already imported).
"""

import contextlib
import io
import logging
import tempfile
import time

from keystoneauth1 import adapter
from keystoneauth1 import noauth
from keystoneauth1 import session

from lab import capacity_cloud as cloud
from nova_gpu_p2p import capacity
from nova_gpu_p2p.osc import placement_reader

#: The goal at 1000 hosts (issue 44), in seconds.
GOAL_SECONDS = 3.0
SHAPES = ([0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 0, 0, 1, 1, 1, 1], [0] * 8)


def hosts_of(count: int) -> list[cloud.HostSpec]:
    return [cloud.hgx_host('node%04d' % i) if i % 5 == 4
            else cloud.pcie_host('node%04d' % i, SHAPES[i % 3])
            for i in range(count)]


def _quiet_logs() -> None:
    """No debug log records.

    The fixtures leave a root handler that would print every
    keystoneauth request and answer, and the shell sets the root level
    to debug each run.
    """
    logging.disable(logging.INFO)


def measure(count: int, rounds: int) -> dict:
    """One cloud of ``count`` hosts: build, then time the reads."""
    with cloud.BarePlacement() as placement, \
            contextlib.ExitStack() as stack:
        hosts = hosts_of(count)
        _quiet_logs()
        start = time.perf_counter()
        placement.add_hosts_in_bulk(hosts,
                                    cloud.servers_for(hosts, seed=count))
        built = time.perf_counter() - start
        client = adapter.Adapter(session.Session(auth=noauth.NoAuth()),
                                 service_type='placement',
                                 endpoint_override=placement.endpoint)
        seconds, cpu = [], []
        for _ in range(rounds):
            _quiet_logs()
            start, start_cpu = time.perf_counter(), time.process_time()
            reader = placement_reader.Reader(client)
            rows = capacity.cloud_sizes(reader.hosts())
            seconds.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        clouds = placement.clouds_yaml(directory)
        command, command_cpu = [], []
        for _ in range(2):
            _quiet_logs()
            start, start_cpu = time.perf_counter(), time.process_time()
            with contextlib.redirect_stderr(io.StringIO()):
                code, _, err = cloud.run_openstack(
                    ['gpu', 'p2p', 'capacity', '-f', 'json'], clouds)
            command.append(time.perf_counter() - start)
            command_cpu.append(time.process_time() - start_cpu)
            if code:
                raise RuntimeError(err[-500:])
    return {'hosts': count, 'gpus': 8 * count, 'build_seconds': built,
            'seconds': min(seconds), 'cpu_seconds': min(cpu),
            'calls': reader.calls,
            'command_seconds': min(command),
            'command_cpu_seconds': min(command_cpu),
            'placeable_8': [r.placeable for r in rows if r.size == 8][0]}


def run(hosts: tuple[int, ...], rounds: int) -> dict:
    return {'records': [measure(count, rounds) for count in hosts],
            'goal_seconds': GOAL_SECONDS}


def print_result(result: dict) -> None:
    print('\nopenstack gpu p2p capacity against real placement '
          '(8 GPUs a host; goal <= %.0f s at 1000 hosts beyond start-up)'
          % result['goal_seconds'])
    print('(read+math: placement and the client share this process; CPU: '
          'their CPU time, what the wall time is on an idle machine)')
    print('%7s %7s %12s %8s %7s %15s %8s' % (
        'hosts', 'GPUs', 'read+math s', 'CPU s', 'calls', 'command s (CPU)',
        'built s'))
    for r in result['records']:
        print('%7d %7d %12.3f %8.3f %7d %7.3f (%5.3f) %8.1f' % (
            r['hosts'], r['gpus'], r['seconds'], r['cpu_seconds'],
            r['calls'], r['command_seconds'], r['command_cpu_seconds'],
            r['build_seconds']))
