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

"""Clique-aware scheduling for ``hw:gpu_p2p_clique=required``.

Enable in nova-scheduler's nova.conf::

    [filter_scheduler]
    pci_in_placement = True
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_gpu_p2p.scheduler.GPUP2PCliqueFilter
    enabled_filters = ...,GPUP2PCliqueFilter,PciPassthroughFilter,
                      NUMATopologyFilter
    weight_classes = nova.scheduler.weights.all_weighers,
                     nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher

The rule is in :mod:`nova_gpu_p2p.scheduler.clique_fit`; on a host with
NVIDIA Fabric Manager partitions, in
:mod:`nova_gpu_p2p.scheduler.partition_fit`.
"""

from nova_gpu_p2p.scheduler.clique_filter import GPUP2PCliqueFilter
from nova_gpu_p2p.scheduler.clique_fit_weigher import GPUP2PCliqueFitWeigher

__all__ = ['GPUP2PCliqueFilter', 'GPUP2PCliqueFitWeigher']
