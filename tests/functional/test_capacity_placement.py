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

"""``openstack gpu p2p capacity`` against a bare placement, no Keystone.

Real placement (its WSGI app over SQLite), a clouds.yaml cloud with
``auth_type: none`` and ``placement_endpoint_override``, and the real
``openstack`` shell finding the plugin by its entry point
(:mod:`lab.capacity_cloud`). Servers with Nova: test_capacity_nova.
"""

import json
import os
import subprocess
import sys
import tempfile
import uuid

from keystoneauth1 import adapter
from keystoneauth1 import noauth
from keystoneauth1 import session
from prometheus_client import parser
import testtools

from lab import capacity_cloud as cloud
from nova_gpu_p2p import capacity
from nova_gpu_p2p.osc import placement_reader
from tests.fixtures import capacity_brute as brute

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def mixed_hosts(prefix: str, count: int) -> list[cloud.HostSpec]:
    """Pairs, quads, eights, lone GPUs, HGX boards.

    One host is disabled and one GPU reserved.
    """
    shapes = [[0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 0, 0, 1, 1, 1, 1],
              [0] * 8, [0, 0, None, None]]
    hosts = []
    for i in range(count):
        name = '%s%d' % (prefix, i)
        if i % 5 == 4:
            hosts.append(cloud.hgx_host(name))
        else:
            hosts.append(cloud.pcie_host(name, shapes[i % 4],
                                         disabled=i == 6))
    first = hosts[0]
    hosts[0] = cloud.HostSpec(first.name, (
        cloud.GpuSpec(first.gpus[0].address, 0, reserved=True),)
        + first.gpus[1:])
    return hosts


class BarePlacementTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = cloud.BarePlacement()
        self.placement.__enter__()
        self.addCleanup(self.placement.__exit__)
        directory = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, directory)
        self.clouds = self.placement.clouds_yaml(directory)
        self.addCleanup(os.unlink, self.clouds)

    def openstack(self, *argv: str) -> tuple[int, str, str]:
        return cloud.run_openstack(['gpu', 'p2p', 'capacity', *argv],
                                   self.clouds)

    def json_of(self, *argv: str):
        code, out, err = self.openstack('-f', 'json', *argv)
        self.assertEqual(0, code, err[-2000:])
        return json.loads(out)

    def truth(self) -> list[brute.Host]:
        return brute.read_placement(
            lambda path: self.placement.call('GET', path))

    def test_per_size_counts_match_brute_force(self):
        hosts = mixed_hosts('h', 10)
        self.placement.add_hosts(hosts)
        expected = brute.table(self.truth(), capacity.SIZES)
        self.assertEqual(expected, self.json_of())
        for seed in (1, 2):
            self.placement.fill(hosts, seed=seed, busy=0.4)
            expected = brute.table(self.truth(), capacity.SIZES)
            self.assertEqual(expected, self.json_of())
        # Fragmented: free GPUs, some of them stranded for 8.
        by_size = {row['Size']: row for row in expected}
        self.assertGreater(by_size[8]['Stranded GPUs'], 0)
        self.assertGreater(by_size[1]['Free GPUs'],
                           8 * by_size[8]['Placeable'])

    def test_bulk_built_cloud_reads_as_one_built_by_api(self):
        # The benchmark's clouds (lab/capacity_bench.py) are written into
        # placement's tables; placement's API must answer for them as for
        # its own, provider by provider (the brute force's reading) and
        # in the lists the command reads.
        hosts = mixed_hosts('b', 10)
        servers = cloud.servers_for(hosts, seed=3)
        self.placement.add_hosts_in_bulk(hosts, servers)
        truth = self.truth()
        self.assertEqual(sum(len(gpus) for _, gpus in servers.values()),
                         sum(not g.free for h in truth for g in h.gpus) - 1)
        self.assertEqual(brute.table(truth, capacity.SIZES), self.json_of())
        for consumer, (host, gpus) in servers.items():
            self.assertEqual(
                {cloud.gpu_uuid(host, g) for g in gpus}
                | {cloud.provider_uuid(host)},
                set(self.placement.call(
                    'GET', '/allocations/%s' % consumer)['allocations']))

    def test_calls_do_not_grow_with_hosts(self):
        client = adapter.Adapter(session.Session(auth=noauth.NoAuth()),
                                 service_type='placement',
                                 endpoint_override=self.placement.endpoint)
        calls = []
        for prefix, count in (('a', 5), ('b', 25)):
            self.placement.add_hosts(mixed_hosts(prefix, count))
            reader = placement_reader.Reader(client)
            reader.hosts()
            calls.append(reader.calls)
        self.assertEqual(calls[0], calls[1])

    def test_hosts_why_and_prometheus(self):
        hosts = [cloud.pcie_host('quads', [0, 0, 0, 0, 1, 1, 1, 1]),
                 cloud.hgx_host('hgx')]
        self.placement.add_hosts(hosts)
        blocker = str(uuid.uuid4())
        self.placement.allocate(blocker, 'quads', hosts[0].gpus[:1])
        board = str(uuid.uuid4())
        self.placement.allocate(board, 'hgx', hosts[1].gpus[1:3])
        rows = {row['Host']: row for row in self.json_of('--hosts')}
        self.assertEqual(4, rows['quads']['Largest Fit'])
        self.assertEqual('clique 0: 3/4, clique 1: 4/4',
                         rows['quads']['Free per Group'])
        self.assertEqual(4, rows['hgx']['Largest Fit'])
        why = self.json_of('--why', '8')
        self.assertEqual([('hgx', 'partition 7', 2, '%s (2 GPUs)' % board)],
                         [(r['Host'], r['Group'], r['Missing GPUs'],
                           r['Blocked By']) for r in why])
        why = self.json_of('--why', '4')
        self.assertEqual(0, why[0]['Missing GPUs'])
        code, out, err = self.openstack('-f', 'prometheus')
        self.assertEqual(0, code, err)
        families = {f.name: {s.labels['size']: s.value for s in f.samples}
                    for f in parser.text_string_to_metric_families(out)}
        table = {row['Size']: row for row in self.json_of()}
        for size, row in table.items():
            self.assertEqual(row['Placeable'], families[
                'openstack_gpu_p2p_placeable_servers'][str(size)])
            self.assertEqual(row['Stranded GPUs'], families[
                'openstack_gpu_p2p_stranded_gpus'][str(size)])
        path = os.path.join(os.path.dirname(self.clouds), 'gpu.prom')
        self.json_of('--textfile', path)
        self.addCleanup(os.unlink, path)
        with open(path) as f:
            self.assertEqual(out, f.read())

    def test_plan_moves_fit_by_placement(self):
        # Two pairs on 'frag', each half used by a one-GPU server; free
        # GPUs elsewhere in no clique: one move frees a pair.
        hosts = [cloud.pcie_host('frag', [0, 0, 1, 1]),
                 cloud.pcie_host('lone', [None, None])]
        self.placement.add_hosts(hosts)
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        self.placement.allocate(a, 'frag', hosts[0].gpus[0:1])
        self.placement.allocate(b, 'frag', hosts[0].gpus[2:3])
        plan = self.json_of('--plan', '2')
        self.assertEqual(1, len(plan), plan)
        self.assertEqual(('frag', 'lone'), (plan[0]['From'], plan[0]['To']))
        self.assertIn(plan[0]['Server'], (a, b))
        self.assertTrue(plan[0]['Command'].startswith(
            'openstack server migrate --os-compute-api-version 2.56 '
            '--host %s --wait %s' % (plan[0]['To'], plan[0]['Server'])))

    def test_bad_input_one_line(self):
        for argv, code, words in (
                (['--why', '0'], 2, 'invalid GPU count'),
                (['--plan', 'x'], 2, 'invalid GPU count'),
                (['--why', '2', '--plan', '2'], 2, 'not allowed with'),
                (['--resource-class', 'CUSTOM_NOPE'], 1,
                 'placement has no resource class CUSTOM_NOPE'),
                # Under a regular file: no directory can be made there.
                (['--textfile', self.clouds + '/gpu.prom'], 1,
                 'cannot write %s/gpu.prom' % self.clouds),
                (['--hosts', '-f', 'prometheus'], 1,
                 'the prometheus format shows only the per-size table')):
            found, out, err = self.openstack(*argv)
            self.assertEqual(code, found, (argv, err))
            self.assertIn(words, err)
            self.assertNotIn('Traceback', err)


class NoNovaTest(testtools.TestCase):

    def test_command_imports_no_nova(self):
        # Its own process: the whole command against a bare placement.
        result = subprocess.run(
            [sys.executable, '-m', 'lab.capacity_cloud', 'gpu', 'p2p',
             'capacity', '-f', 'json'], cwd=REPO, capture_output=True,
            text=True, timeout=600)
        self.assertEqual(0, result.returncode, result.stderr[-2000:])
        out, _, last = result.stdout.rstrip().rpartition('\n')
        self.assertEqual('nova modules imported: none', last)
        self.assertEqual(list(capacity.SIZES),
                         [row['Size'] for row in json.loads(out)])
