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

"""What guests on an HGX board get from Fabric Manager, judged afterwards.

The benchmark boots servers on an HGX host and then asks Fabric Manager
(the stand-in library, in the tests) which partitions are active. From
that alone, and the servers' GPUs as Nova claimed them, it scores:

``nvlink_pairs``
    Of the GPU pairs inside one server, those that reach each other over
    NVLink: both GPUs in one active partition of two or more (goal 100%).
``one_partition``
    Servers of two or more GPUs whose GPUs are exactly one of the board's
    partitions: the only GPU sets NVLink can ever be given to, whoever
    activates what (one GPU always is one).
``cross_tenant``
    Of the GPU pairs of two different servers, those that share an active
    partition: one tenant's GPUs reach another's over NVLink (goal 0%).
``cuda_ready``
    GPUs in some active partition. On an NVSwitch board CUDA in the guest
    fails with error 802 (system not ready) on a GPU in none (goal 100%).

Pure functions over addresses; the host's truth is its partitions
(:class:`nova_gpu_p2p.fabric.partitions.FabricPartition`).

The strategies (:data:`STRATEGIES`) differ in which GPUs Nova gives a
server and in which partitions are active. The benchmark measures two
clouds: Nova as it is (its scheduler's GPUs; its driver never calls
Fabric Manager) and ours (our filter's GPUs; the partitions the driver
activated, read from Fabric Manager). The QEMU wrapper and the KubeVirt
sidecar recipe change only the guest's XML or QEMU command line, so on
an HGX board they are Nova's GPUs with nothing active. Two operator
workarounds on Nova's GPUs are computed, not measured: the whole-board
partition activated once by hand, and a hook that activates each server's
partition (:func:`nova_gpu_p2p.fabric.partitions.for_instance`, the rule
our driver follows) before its domain starts.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import itertools

from lab import decision_quality
from nova_gpu_p2p.fabric import partitions as fabric_partitions

#: The metrics, in the order the benchmark prints them.
METRICS = ('nvlink_pairs', 'one_partition', 'cross_tenant', 'cuda_ready')
#: Metrics whose goal is 0%: a hit is a fault.
GOAL_NONE = frozenset(('cross_tenant',))


def score(servers: Sequence[Sequence[str]],
          partitions: Sequence[fabric_partitions.FabricPartition],
          active: Iterable[int]) -> dict[str, decision_quality.Share]:
    """The metrics of the module doc for servers on one board.

    :param servers: each server's GPUs, by host PCI address.
    :param partitions: every partition the board supports.
    :param active: IDs of the partitions active while the servers run.
    """
    active_ids = frozenset(active)
    live = [p for p in partitions if p.id in active_ids]
    linked = fabric_partitions.nvlink_pairs(live)
    sets = {frozenset(p.gpus) for p in partitions}
    own = [frozenset(pair) for gpus in servers
           for pair in itertools.combinations(sorted(gpus), 2)]
    across = [frozenset((a, b)) for first, second in itertools.combinations(
        servers, 2) for a in first for b in second]
    multi = [server for server in servers if len(server) > 1]
    in_active = {gpu for p in live for gpu in p.gpus}
    gpus = [gpu for server in servers for gpu in server]
    return {
        'nvlink_pairs': decision_quality.Share(
            sum(pair in linked for pair in own), len(own)),
        'one_partition': decision_quality.Share(
            sum(frozenset(server) in sets for server in multi), len(multi)),
        'cross_tenant': decision_quality.Share(
            sum(pair in linked for pair in across), len(across)),
        'cuda_ready': decision_quality.Share(
            sum(gpu in in_active for gpu in gpus), len(gpus)),
    }


def whole_board(partitions: Sequence[fabric_partitions.FabricPartition],
                servers: Sequence[Sequence[str]],
                measured: Iterable[int]) -> frozenset[int]:
    """An operator's one-off activation: the partition of the whole board."""
    return frozenset({max(partitions, key=lambda p: len(p.gpus)).id})


def per_server_hook(partitions: Sequence[fabric_partitions.FabricPartition],
                    servers: Sequence[Sequence[str]],
                    measured: Iterable[int]) -> frozenset[int]:
    """A hook's activations: each server's partition, or its 1-GPU ones."""
    return frozenset(partition_id for gpus in servers
                     for partition_id in fabric_partitions.for_instance(
                         partitions, gpus).ids)


def as_measured(partitions: Sequence[fabric_partitions.FabricPartition],
                servers: Sequence[Sequence[str]],
                measured: Iterable[int]) -> frozenset[int]:
    """What Fabric Manager said was active."""
    return frozenset(measured)


Active = Callable[[Sequence[fabric_partitions.FabricPartition],
                   Sequence[Sequence[str]], Iterable[int]], frozenset[int]]
#: Strategy -> (whose cloud's GPUs: ours or Nova's, what is active).
STRATEGIES: dict[str, tuple[bool, Active]] = {
    'stock': (False, as_measured),
    'wrapper': (False, as_measured),
    'sidecar': (False, as_measured),
    'stock + whole board by hand': (False, whole_board),
    'stock + per-server hook': (False, per_server_hook),
    'ours': (True, as_measured),
}


def pooled(records: Iterable[Mapping],
           partitions: Sequence[fabric_partitions.FabricPartition]
           ) -> dict[str, dict[str, decision_quality.Share]]:
    """Each strategy's metrics over the benchmark's sequences.

    :param records: one per sequence and cloud: ``ours`` (which cloud),
        ``servers`` (each server's GPUs) and ``active`` (the partition
        IDs Fabric Manager had active after the boots).
    """
    records = list(records)
    found = {}
    for name, (ours, active) in STRATEGIES.items():
        totals = {metric: [0, 0] for metric in METRICS}
        for record in records:
            if record['ours'] != ours:
                continue
            shares = score(record['servers'], partitions, active(
                partitions, record['servers'], record['active']))
            for metric, share in shares.items():
                totals[metric][0] += share.hits
                totals[metric][1] += share.total
        found[name] = {metric: decision_quality.Share(*totals[metric])
                       for metric in METRICS}
    return found
