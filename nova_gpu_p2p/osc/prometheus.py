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

"""The per-size capacity table as Prometheus gauges.

Written with prometheus_client's exposition format, for ``-f prometheus``
(a cliff list formatter) and ``--textfile`` (node_exporter's textfile
collector).
"""

from collections.abc import Iterable
from collections.abc import Sequence

from cliff.formatters import base
import prometheus_client

from nova_gpu_p2p import capacity

PREFIX = 'openstack_gpu_p2p_'


def exposition(rows: Iterable[capacity.SizeRow]) -> str:
    """The gauges, one sample per server size."""
    registry = prometheus_client.CollectorRegistry()
    gauges = {
        'placeable': prometheus_client.Gauge(
            PREFIX + 'placeable_servers', 'Required P2P servers of this '
            'many GPUs that could land now, this size alone', ['size'],
            registry=registry),
        'free': prometheus_client.Gauge(
            PREFIX + 'free_gpus', 'GPUs placement could allocate now',
            ['size'], registry=registry),
        'stranded': prometheus_client.Gauge(
            PREFIX + 'stranded_gpus', 'Free GPUs in no free clique or '
            'partition of this size', ['size'], registry=registry),
        'fragmentation': prometheus_client.Gauge(
            PREFIX + 'fragmentation_ratio', 'Share of free GPUs that '
            'servers of this size could not use (1 - size x placeable / '
            'free)', ['size'], registry=registry),
    }
    for row in rows:
        size = str(row.size)
        gauges['placeable'].labels(size).set(row.placeable)
        gauges['free'].labels(size).set(row.free)
        gauges['stranded'].labels(size).set(row.stranded)
        gauges['fragmentation'].labels(size).set(row.fragmentation)
    return prometheus_client.generate_latest(registry).decode('ascii')


class PrometheusFormatter(base.ListFormatter):
    """``-f prometheus``: only for ``openstack gpu p2p capacity``'s table."""

    def add_argument_group(self, parser):
        pass

    def emit_list(self, column_names: Sequence[str], data, stdout,
                  parsed_args):
        if tuple(column_names) != capacity.SIZE_COLUMNS:
            raise ValueError(
                'the prometheus format shows only the per-size table of '
                '"openstack gpu p2p capacity" (no --hosts, --why, --plan, '
                '-c), not columns %s' % ', '.join(column_names))
        stdout.write(exposition(
            capacity.SizeRow(size, placeable, free, stranded)
            for size, placeable, free, stranded, _ in data))
