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

"""``openstack gpu p2p capacity``: what ``required`` servers fit now.

The command is glue: :mod:`placement_reader` reads, :mod:`capacity` and
:mod:`capacity_plan` decide, cliff formats (``-f table|json|yaml|csv|
value``, and ``-f prometheus`` from :mod:`prometheus`).
"""

import argparse

from nova_gpu_p2p_guest import atomic_file
from osc_lib.command import command
from osc_lib import exceptions

from nova_gpu_p2p import capacity
from nova_gpu_p2p import capacity_plan
from nova_gpu_p2p.osc import placement_reader
from nova_gpu_p2p.osc import prometheus

#: The largest server the command reasons about (a GB200 NVL72 rack's
#: partitions stop at 72 GPUs).
MAX_GPUS = 72
WHY_COLUMNS = ('Host', 'Group', 'Free GPUs', 'Missing GPUs', 'Blocked By')
PLAN_COLUMNS = ('Server', 'GPUs', 'From', 'To', 'Command')


def gpu_count(text: str) -> int:
    """A server size for ``--why`` and ``--plan``: 1 to MAX_GPUS."""
    if not text.isdigit() or not 1 <= int(text) <= MAX_GPUS:
        raise argparse.ArgumentTypeError(
            'invalid GPU count %r: a whole number from 1 to %d'
            % (text, MAX_GPUS))
    return int(text)


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            'invalid number %r: a whole number of 1 or more' % text)
    return int(text)


class Capacity(command.Lister):
    """GPU P2P capacity: required servers of each size that fit now.

    Reads placement only (any placement endpoint: clouds.yaml,
    OS_CLOUD, --os-*). CPU, RAM and disk are not considered.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            '--hosts', action='store_true',
            help='per host: free GPUs in each clique or partition and the '
            'largest required server that fits now')
        mode.add_argument(
            '--why', metavar='<gpus>', type=gpu_count,
            help='the hosts that come closest to taking a required server '
            'of this many GPUs, and the servers (consumer IDs) that block '
            'each')
        mode.add_argument(
            '--plan', metavar='<gpus>', type=gpu_count,
            help='the fewest cold migrations that free one clique or '
            'partition for a required server of this many GPUs, as the '
            'openstack commands to run (nothing is changed)')
        parser.add_argument(
            '--limit', metavar='<hosts>', type=positive, default=10,
            help='hosts --why lists and --plan considers, closest first '
            '(default 10); their blocking GPUs are read one call each')
        parser.add_argument(
            '--resource-class', metavar='<class>', action='append',
            default=[], dest='resource_classes',
            help='a GPU resource class besides Nova\'s CUSTOM_PCI_10DE_* '
            '(a [pci] device_spec resource_class); repeatable')
        parser.add_argument(
            '--textfile', metavar='<path>',
            help='also write the per-size table as Prometheus gauges to '
            'this file (node_exporter\'s textfile collector), replaced '
            'whole')
        return parser

    def take_action(self, parsed_args):
        # This run's connection: OSC caches a plugin's client on its
        # ClientManager class, for the process (plugin.make_client).
        reader = placement_reader.Reader(
            self.app.client_manager.sdk_connection.placement,
            parsed_args.resource_classes)
        try:
            hosts = reader.hosts()
            if parsed_args.why:
                return self._why(reader, hosts, parsed_args)
            if parsed_args.plan:
                return self._plan(reader, hosts, parsed_args)
        except placement_reader.PlacementError as exc:
            raise exceptions.CommandError(str(exc))
        if parsed_args.hosts:
            return capacity.HOST_COLUMNS, capacity.host_rows(hosts)
        rows = capacity.cloud_sizes(hosts)
        if parsed_args.textfile:
            try:
                atomic_file.write_output(parsed_args.textfile,
                                         prometheus.exposition(rows))
            except OSError as exc:
                raise exceptions.CommandError('cannot write %s: %s' % (
                    parsed_args.textfile, exc.strerror or exc))
        return capacity.SIZE_COLUMNS, [row.row() for row in rows]

    def _why(self, reader, hosts, parsed_args):
        nears = capacity.closest(hosts, parsed_args.why, parsed_args.limit)
        holders = reader.holders(g for near in nears for g in near.held)
        rows = []
        for near in nears:
            blocking = {}
            for gpu in near.held:
                for consumer in holders.get(gpu.provider, ()):
                    blocking[consumer.uuid] = len(consumer.gpus)
                if not holders.get(gpu.provider):
                    blocking['reserved'] = blocking.get('reserved', 0) + 1
            rows.append((near.host.name, near.group.label, near.group.free,
                         near.missing, ', '.join(
                             '%s (%d GPUs)' % item
                             for item in sorted(blocking.items())) or '-'))
        return WHY_COLUMNS, rows

    def _plan(self, reader, hosts, parsed_args):
        size = parsed_args.plan
        considered = {near.host.name for near in capacity.closest(
            hosts, size, parsed_args.limit)}
        nears = [near for near in capacity.nears(hosts, size)
                 if near.host.name in considered]
        holders = reader.holders(g for near in nears for g in near.held)
        consumers = {c.uuid: c for found in holders.values() for c in found}
        found = capacity_plan.plan(nears, size, hosts, holders,
                                   reader.room(consumers.values()))
        if found is None:
            raise exceptions.CommandError(
                'no plan frees a clique or partition for a required server '
                'of %d GPUs on the %d closest hosts: each blocking server '
                'needs another host that fits it now (see --why %d)'
                % (size, len(considered), size))
        if not found.moves:
            self.app.stderr.write(
                'A required server of %d GPUs fits now (%s of %s): nothing '
                'to move.\n' % (size, found.group.label, found.host.name))
        return PLAN_COLUMNS, [
            (move.consumer.uuid, len(move.consumer.gpus), move.source.name,
             move.target.name, line)
            for move, line in zip(found.moves,
                                  capacity_plan.commands(found))]
