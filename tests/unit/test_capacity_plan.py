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

"""Defragmentation plans against every move set tried by brute force."""

import dataclasses
import itertools
import random

from nova_gpu_p2p import capacity
from nova_gpu_p2p import capacity_plan
from tests.fixtures import capacity_brute as brute
from tests.unit import base
from tests.unit import test_capacity


@dataclasses.dataclass
class Cloud:
    hosts: list[brute.Host]
    #: Consumer -> (host name, its GPU providers).
    servers: dict[str, tuple[str, tuple[str, ...]]]


def random_cloud(rng: random.Random) -> Cloud:
    """Hosts filled by servers of 1, 2 and 4 GPUs, each as the rule says."""
    hosts = []
    servers = {}
    for index in range(rng.randint(2, 4)):
        host = test_capacity.random_host(rng, index)
        host = dataclasses.replace(host, gpus=tuple(
            dataclasses.replace(g, free=True, resource_class=host.gpus[0]
                                .resource_class) for g in host.gpus),
            disabled=host.disabled and rng.random() < 0.5)
        for _ in range(rng.randint(0, 6)):
            fitting = brute.fitting_sets(host, rng.choice((1, 1, 2, 4)))
            if not fitting:
                continue
            taken = rng.choice(fitting)
            name = 'server-%d' % len(servers)
            servers[name] = (host.name, tuple(sorted(taken)))
            host = dataclasses.replace(host, gpus=tuple(
                dataclasses.replace(g, free=g.free and g.provider not in taken)
                for g in host.gpus))
        hosts.append(host)
    return Cloud(hosts, servers)


def consumers(cloud: Cloud) -> dict[str, capacity_plan.Consumer]:
    rc = {g.provider: g.resource_class for h in cloud.hosts for g in h.gpus}
    return {name: capacity_plan.Consumer(name, tuple((p, rc[p])
                                                     for p in gpus))
            for name, (_, gpus) in cloud.servers.items()}


def _fits(host: brute.Host, server: capacity_plan.Consumer) -> bool:
    rc = server.resource_class
    return any(all(g.resource_class == rc for g in host.gpus
                   if g.provider in found)
               for found in brute.fitting_sets(host, len(server.gpus)))


def _freed(host: brute.Host, providers) -> brute.Host:
    return dataclasses.replace(host, gpus=tuple(
        dataclasses.replace(g, free=g.free or g.provider in providers)
        for g in host.gpus))


def fewest_moves(cloud: Cloud, size: int) -> int | None:
    """Every set of servers of a host, sent to every choice of hosts."""
    servers = consumers(cloud)
    best = None
    for host in cloud.hosts:
        if host.disabled:
            continue
        mine = [s for name, s in servers.items()
                if cloud.servers[name][0] == host.name]
        others = [h for h in cloud.hosts
                  if h.name != host.name and not h.disabled]
        for k in range(0, len(mine) + 1):
            if best is not None and k >= best:
                break
            for combo in itertools.combinations(mine, k):
                freed = _freed(host, {p for s in combo for p, _ in s.gpus})
                if not brute.fitting_sets(freed, size):
                    continue
                if any(all(_fits(t, s) for s, t in zip(combo, targets))
                       for targets in itertools.permutations(others, k)):
                    best = k
                    break
    return best


def carry_out(cloud: Cloud, found: capacity_plan.Plan) -> dict:
    """The hosts after the plan's moves, each checked as it is made."""
    hosts = {h.name: h for h in cloud.hosts}
    for move in found.moves:
        target = hosts[move.target.name]
        assert move.target.name != move.source.name
        assert not target.disabled and _fits(target, move.consumer), move
        taken = next(f for f in brute.fitting_sets(
            target, len(move.consumer.gpus)) if all(
                g.resource_class == move.consumer.resource_class
                for g in target.gpus if g.provider in f))
        hosts[target.name] = dataclasses.replace(target, gpus=tuple(
            dataclasses.replace(g, free=g.free and g.provider not in taken)
            for g in target.gpus))
        hosts[move.source.name] = _freed(
            hosts[move.source.name], {p for p, _ in move.consumer.gpus})
    return hosts


class PlanTest(base.TestCase):

    def test_random_clouds_fewest_moves_that_work(self):
        rng = random.Random(4444)
        planned = 0
        for trial in range(120):
            cloud = random_cloud(rng)
            hosts = [test_capacity.as_placement_shows(h)
                     for h in cloud.hosts]
            servers = consumers(cloud)
            holders = {}
            for server in servers.values():
                for provider, _ in server.gpus:
                    holders.setdefault(provider, []).append(server)
            for size in (2, 4, 8):
                found = capacity_plan.plan(
                    capacity.nears(hosts, size), size, hosts, holders,
                    lambda host, consumer: True)
                expected = fewest_moves(cloud, size)
                why = 'trial %d, size %d' % (trial, size)
                if expected is None:
                    self.assertIsNone(found, why)
                    continue
                self.assertIsNotNone(found, why)
                self.assertEqual(expected, len(found.moves), why)
                self.assertEqual(len(found.moves), len(
                    {m.target.name for m in found.moves}), why)
                after = carry_out(cloud, found)
                self.assertTrue(brute.fitting_sets(
                    after[found.host.name], size), why)
                planned += bool(found.moves)
        # The clouds are fragmented enough for plans to be needed.
        self.assertGreater(planned, 30)

    def test_no_room_no_plan_and_commands(self):
        gpus = tuple(capacity.Gpu('a%d' % i, 0, None, 0) for i in range(2))
        source = capacity.Host('a', gpus, uuid='root-a')
        target = capacity.Host('b', (
            capacity.Gpu('b0', 1, test_capacity.MODELS[0], 0),),
            uuid='root-b')
        server = capacity_plan.Consumer(
            'srv', (('a0', test_capacity.MODELS[0]),))
        other = capacity_plan.Consumer(
            'oth', (('a1', test_capacity.MODELS[0]),))
        holders = {'a0': [server], 'a1': [other]}
        hosts = [source, target]
        nears = capacity.nears(hosts, 2)
        self.assertIsNone(capacity_plan.plan(nears, 2, hosts, holders,
                                             lambda h, c: True))
        # Room for one of them: still no plan (each needs a host).
        target2 = dataclasses.replace(target, name='c', gpus=(
            capacity.Gpu('c0', 1, test_capacity.MODELS[0], 0),))
        hosts = [source, target, target2]
        found = capacity_plan.plan(nears, 2, hosts, holders,
                                   lambda h, c: True)
        self.assertEqual({'b', 'c'}, {m.target.name for m in found.moves})
        self.assertEqual(['oth', 'srv'], sorted(
            m.consumer.uuid for m in found.moves))
        self.assertIsNone(capacity_plan.plan(
            nears, 2, hosts, holders, lambda h, c: h.name == 'b'))
        move = found.moves[0]
        self.assertEqual(
            'openstack server migrate --os-compute-api-version 2.56 '
            '--host %s --wait %s && openstack server resize confirm %s'
            % (move.target.name, move.consumer.uuid, move.consumer.uuid),
            capacity_plan.commands(found)[0])
