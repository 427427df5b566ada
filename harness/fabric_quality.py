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
    Servers whose GPUs are exactly one of the board's partitions: the
    only GPU sets NVLink can ever be given to, whoever activates what.
``cross_tenant``
    Of the GPU pairs of two different servers, those that share an active
    partition: one tenant's GPUs reach another's over NVLink (goal 0%).
``cuda_ready``
    GPUs in some active partition. On an NVSwitch board CUDA in the guest
    fails with error 802 (system not ready) on a GPU in none (goal 100%).

Pure functions over addresses; the host's truth is its partitions
(:class:`nova_gpu_p2p.topology.model.FabricPartition`).
"""

from collections.abc import Iterable
from collections.abc import Sequence
import itertools

from harness import decision_quality
from nova_gpu_p2p.fabric import partitions as fabric_partitions
from nova_gpu_p2p.topology import model

#: The metrics, in the order the benchmark prints them.
METRICS = ('nvlink_pairs', 'one_partition', 'cross_tenant', 'cuda_ready')
#: Metrics whose goal is 0%: a hit is a fault.
GOAL_NONE = frozenset(('cross_tenant',))


def score(servers: Sequence[Sequence[str]],
          partitions: Sequence[model.FabricPartition],
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
    in_active = {gpu for p in live for gpu in p.gpus}
    gpus = [gpu for server in servers for gpu in server]
    return {
        'nvlink_pairs': decision_quality.Share(
            sum(pair in linked for pair in own), len(own)),
        'one_partition': decision_quality.Share(
            sum(frozenset(server) in sets for server in servers),
            len(servers)),
        'cross_tenant': decision_quality.Share(
            sum(pair in linked for pair in across), len(across)),
        'cuda_ready': decision_quality.Share(
            sum(gpu in in_active for gpu in gpus), len(gpus)),
    }
