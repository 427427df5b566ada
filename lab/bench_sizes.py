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

"""How much each ``tox -e bench`` section measures: the full run's sizes,
``--quick``'s, and this run's (:func:`configure`).
"""

import dataclasses

from lab import cloud_filters
from lab import verify_p2p_bench


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each section measures: the full run, or ``--quick``.

    ``--quick`` runs every section at its smallest size (one round, one
    call, a cloud of a host or two), so that CI sees each still runs; its
    numbers are not worth quoting.
    """

    #: measure(): best of this many rounds, each of at least min_time s
    #: (min_time 0: one call a round).
    repeat: int = 5
    min_time: float = 0.2
    guest_xml_rounds: int = 7
    guest_xml_calls: int = 30
    #: Corpus hosts decision quality boots on; empty: every one.
    decision_hosts: tuple[str, ...] = ()
    scale_rounds: int = 7
    scale_calls: int = 10
    #: (GPUs, guest nodes) of guest_xml_scale's two series; empty: all.
    scale_gpus: tuple[tuple[int, int], ...] = ()
    scale_nodes: tuple[tuple[int, int], ...] = ()
    scheduling_ops: int = 2000
    scheduling_rounds: int = 3
    #: scheduling_at_cloud_size's cloud sizes and placement's caps (0:
    #: two candidates per host).
    cloud_hosts: tuple[int, ...] = (10, 50, 100)
    cloud_caps: tuple[int, ...] = (cloud_filters.CAP, 0)
    #: select_destinations_at_cloud_size's cloud sizes and shapes (empty:
    #: every one).
    select_hosts: tuple[int, ...] = (10, 50, 100)
    select_shapes: tuple[str, ...] = ()
    #: GPU counts of its requests (empty: select_bench_cloud.REQUESTS).
    select_gpus: tuple[int, ...] = ()
    #: Its placement caps per host, each cloud's requests asked under
    #: each; and [gpu_p2p] candidates_per_host (None: the default).
    select_caps: tuple[float, ...] = (2,)
    select_keep: int | None = None
    #: Each request also with stock Nova's filters (ours left out), and a
    #: batch of select_bench_cloud.BATCH servers on each cloud, each way.
    select_stock: bool = False
    select_batch: bool = False
    #: select_bench_cloud's requests also with --free-trait flavors.
    select_free_trait: bool = False
    #: The load average select_bench_cloud waits for before its requests
    #: (None: no wait).
    select_quiet: float | None = None
    #: select_destinations_cloned's clouds: (hosts, real hosts where the
    #: servers fit; the others crowded clones), and placement's caps per
    #: host (one per compute node beyond a few hundred, as
    #: scheduling-scale.rst recommends).
    cloned_clouds: tuple[tuple[int, int], ...] = (
        (100, 10), (500, 10), (1000, 10))
    cloned_caps: tuple[float, ...] = (1,)
    #: select_destinations_batches' cloud sizes, shapes and servers per
    #: request (0: select_bench_cloud.BATCH, two per host at 10 hosts).
    batch_hosts: tuple[int, ...] = (10, 50)
    batch_shapes: tuple[str, ...] = ('4+4', 'hgx-fabric-manager')
    batch_size: int = 0
    #: fabric_nvlink's server sequences; empty: every one.
    fabric_sequences: tuple[tuple[int, ...], ...] = ()
    privsep_rounds: int = 7
    stall_rounds: int = 7
    #: verify_p2p's runs of the agent's check and MiB per transfer.
    verify_p2p_rounds: int = verify_p2p_bench.ROUNDS
    verify_p2p_mib: int = verify_p2p_bench.MIB
    #: capacity_at_cloud_size's clouds (hosts of 8 GPUs) and rounds.
    capacity_hosts: tuple[int, ...] = (100, 500, 1000)
    capacity_rounds: int = 3
    #: placement_free_trait's clouds: (hosts, hosts with four GPUs of a
    #: clique free): a tenth of each cloud, then as few as at 100 hosts.
    free_trait_clouds: tuple[tuple[int, int], ...] = (
        (100, 10), (500, 50), (1000, 100), (1000, 10))


FULL = Sizes()
QUICK = Sizes(
    repeat=1, min_time=0.0, guest_xml_rounds=1, guest_xml_calls=1,
    decision_hosts=('hgx-8gpu-nvswitch-2numa',), scale_rounds=1,
    scale_calls=1, scale_gpus=((1, 1), (4, 2)), scale_nodes=((8, 1), (8, 2)),
    scheduling_ops=200, scheduling_rounds=1, cloud_hosts=(2,),
    cloud_caps=(0,), select_hosts=(2,), select_shapes=('hgx-fabric-manager',),
    select_caps=(1,), select_stock=True, select_batch=True,
    select_free_trait=True,
    batch_hosts=(2,), batch_shapes=('hgx-fabric-manager',), batch_size=4,
    fabric_sequences=((2, 2, 4),), privsep_rounds=1, stall_rounds=1,
    verify_p2p_rounds=1, verify_p2p_mib=1, capacity_hosts=(20,),
    capacity_rounds=1, free_trait_clouds=((4, 1),),
    cloned_clouds=((3, 1),))
#: This run's sizes: :func:`configure` sets QUICK for --quick.
SIZES = FULL
#: Whether this run is --quick (its sizes may be QUICK's, changed).
QUICK_RUN = False


def configure(quick: bool, chosen: dict) -> Sizes:
    """Set this run's sizes: ``--quick``'s or the full run's.

    ``chosen``: the command line's options that change them (None: not
    given).
    """
    global SIZES, QUICK_RUN
    QUICK_RUN = quick
    SIZES = dataclasses.replace(QUICK if quick else FULL, **{
        name: value for name, value in chosen.items() if value is not None})
    return SIZES
