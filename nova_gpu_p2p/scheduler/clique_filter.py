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

"""Keep only the allocation candidates whose GPUs form one clique.

For a flavor with ``hw:gpu_p2p_clique=required`` and PCI devices tracked
in placement, the filter drops every candidate whose GPUs are not all in
one host clique (on a Fabric Manager host: not exactly one partition),
orders the rest best fit first (see
:mod:`nova_gpu_p2p.scheduler.clique_fit` and
:mod:`nova_gpu_p2p.scheduler.partition_fit`) so that the scheduler, which
claims a host's first candidate, takes the tightest fit, and drops the
host when nothing fits. Every other request passes untouched.
"""

from nova.scheduler import filters
from oslo_log import log as logging

from nova_gpu_p2p.scheduler import host_view

LOG = logging.getLogger(__name__)


class GPUP2PCliqueFilter(filters.BaseHostFilter):
    """Hosts whose free GPUs hold a clique for a ``required`` request."""

    # Rebuild keeps the server's GPUs; there are no candidates to judge.
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        super().__init__()
        host_view.check_nova()

    def host_passes(self, host_state, spec_obj) -> bool:
        if not host_view.wants_one_clique(spec_obj):
            return True
        if not host_view.can_steer(type(self).__name__):
            return True
        try:
            fits, judged = host_view.fits(host_state)
        except Exception:
            # Never fail scheduling because of us: the compute's own check
            # still refuses GPUs that are not one clique.
            LOG.exception('GPU P2P: could not judge the GPUs of host %s; '
                          'passing it unchanged', host_state)
            return True
        if not judged:
            return True
        candidates = host_state.allocation_candidates
        host_state.allocation_candidates = [candidates[fit.index]
                                            for fit in fits]
        if not fits:
            LOG.debug('GPU P2P: no allocation candidate of %s has GPUs '
                      'of one clique', host_state)
            return False
        return True
