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

"""The HGX host in Nova's cloud: GPUs given, partitions active (bench).

For ``lab/bench.py``: which GPUs servers get on an HGX board, and which
Fabric Manager partitions are active for them.

Not a test module (stestr collects ``test_*`` only). One compute on the
corpus' HGX host, GPUs in placement, candidates in PCI address order (as
:mod:`tests.functional.test_partition_scheduling` sets it up: there Nova's
first pair, modules 2 and 3, is no partition). :meth:`FabricBenchCloud.
nvlink` boots each of :data:`SEQUENCES` on the empty board, one server
after the other (``hw:gpu_p2p_clique=required``), hands a record per
sequence to :attr:`~FabricBenchCloud.sink`, and deletes the servers.

``OURS = True``: our filter and weigher, and the ``fabricmanager``
backend over the stand-in Fabric Manager (:mod:`tests.cloud.fake_fabric`),
whose active partitions the record gives as read after the boots; the
driver activates them. ``OURS = False``: Nova as it is, without our filter
and weigher; the compute reads the ``sysfs`` backend and never calls
Fabric Manager, as Nova's own driver does not, so nothing is active.
"""

from collections.abc import Callable
import sys
from unittest import mock

from lab import demo_cloud
from nova_gpu_p2p import extra_specs
from tests.cloud import fake_fabric
from tests.cloud import scheduling

#: GPU counts of the servers of each sequence, booted in this order; a
#: server of up to four GPUs on one guest NUMA node with one CPU (the
#: clique scheduling base's flavors), the whole board on two. The board
#: goes last: its sequence caps placement's candidates (see
#: :meth:`FabricBenchCloud._flavor`).
SEQUENCES = ((2, 2, 4), (4, 4), (1, 1, 2), (1, 2, 4), (2, 1, 1, 4), (8,))
BOARD_GPUS = 8
HOSTNAME = 'hgx-1'


class FabricBenchCloud(scheduling.CliqueSchedulingBase):
    """One HGX compute; our scheduling and Fabric Manager, or Nova's."""

    #: Receives one dict per sequence; the tool running us sets it.
    sink: Callable[[dict], None] = staticmethod(lambda found: None)
    #: Ours (True) or Nova as it is (False); the tool sets it.
    OURS = True
    #: GPU counts of the servers of each sequence (:data:`SEQUENCES`).
    sequences = SEQUENCES
    #: Each GPU's device_spec entry with its partitions, as ``topology
    #: --device-spec`` prints it on this host.
    PARTITIONED = True

    @property
    def STEERING(self) -> bool:
        """Read by the clique scheduling base: our filter and weigher."""
        return self.OURS

    def setUp(self) -> None:
        super().setUp()
        self.flags(p2p_level='SYS', group='gpu_p2p')
        self.fm = None
        if self.OURS:
            self.fm = fake_fabric.fabric_manager(self)
            patcher = mock.patch.dict(sys.modules,
                                      {'pynvml': demo_cloud.FakeNvml()})
            patcher.start()
            self.addCleanup(patcher.stop)
        self.start_gpu_compute(HOSTNAME, scheduling.HGX_HOST,
                               gpu_p2p_options={'p2p_level': 'SYS'})

    def _flavor(self, gpus: int) -> str:
        """The flavor of a server of ``gpus``; for the board, a cap first.

        Every candidate for all eight GPUs is the board: a few are as good
        as its 8! orderings, which placement would otherwise build from
        8^8 combinations (as test_partition_scheduling's whole board).
        """
        if gpus < BOARD_GPUS:
            return self.flavor(gpus)
        self.placement_fixture.conf_fixture.config(
            group='placement', max_allocation_candidates=20,
            allocation_candidates_generation_strategy='depth-first')
        return self.gpu_flavor(gpus, numa_nodes=2, vcpus=2, extra_specs={
            extra_specs.CLIQUE_KEY: 'required'})

    def nvlink(self) -> None:
        """Each sequence on the empty board: GPUs given, partitions active."""
        for sequence in self.sequences:
            servers = [self.boot_settled(self._flavor(gpus))
                       for gpus in sequence]
            record = {'sequence': list(sequence), 'ours': self.OURS,
                      'servers': [list(self.gpus(s)) for s in servers]}
            record['active'] = sorted(self.fm.active()) if self.fm else []
            for server in servers:
                self.delete(server)
            record['active_after_delete'] = (
                sorted(self.fm.active()) if self.fm else [])
            self.sink(record)
