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

"""What discovery found on the host, as plain data for the pure rules.

Kept apart from :mod:`nova_gpu_p2p.topology.discovery`, which loads the
backends, so that the guest plan reads it without the plugin loader.
"""

import dataclasses

from nova_gpu_p2p.topology import consumer_gpus
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model


@dataclasses.dataclass(frozen=True)
class HostGPUs:
    """What the driver caches between periodic resource updates."""

    topology: model.HostTopology
    cliques: cliques_mod.Cliques
    #: Why discovery failed; None when it worked.
    error: str | None = None
    #: Each NVIDIA GPU's name and kind (consumer or not).
    kinds: consumer_gpus.GpuKinds = consumer_gpus.GpuKinds()
    #: Link classes already computed for this topology, so that guest
    #: builds between two discoveries do not walk the tree again.
    _links: dict = dataclasses.field(default_factory=dict, compare=False,
                                     repr=False)

    def link(self, a: str, b: str,
             acs_policy: link_class.AcsPolicy) -> link_class.LinkClass:
        """:func:`link_class.effective_class`, once per pair and policy."""
        key = (frozenset((a, b)), acs_policy)
        if key not in self._links:
            self._links[key] = link_class.effective_class(
                self.topology, a, b, acs_policy)
        return self._links[key]
