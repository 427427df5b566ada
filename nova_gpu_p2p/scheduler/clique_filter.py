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

"""Hand Nova's filters few, good allocation candidates per host.

For every request with GPUs, with PCI devices tracked in placement, the
filter keeps one candidate per distinct claim, best fit first and spread
over the host's cliques, at most ``[gpu_p2p] candidates_per_host`` of
them (:mod:`nova_gpu_p2p.scheduler.candidates`): Nova's own PCI and NUMA
filters after it cost milliseconds per candidate. For a flavor with
``hw:gpu_p2p_clique=required`` it keeps only candidates whose GPUs are
one host clique (on a Fabric Manager host: exactly one partition), best
fit first (see :mod:`nova_gpu_p2p.scheduler.clique_fit` and
:mod:`nova_gpu_p2p.scheduler.partition_fit`) so that the scheduler, which
claims a host's first candidate, takes the tightest fit, and drops the
host when nothing fits, and any host whose compute does not run the GPU
P2P driver now, whatever traits its provider kept
(:mod:`nova_gpu_p2p.driver_stat`). Requests without GPUs pass
untouched. On a move whose destination claim ignores placement (cold
migration, resize, evacuation, an unshelve after one of them) it keeps
only the candidate taking the GPUs Nova will claim, and refuses the host
for ``required`` where those are not one clique
(:mod:`nova_gpu_p2p.scheduler.move_claims`).
"""

from nova import conf as nova_conf
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_gpu_p2p import conf
from nova_gpu_p2p import driver_stat
from nova_gpu_p2p.scheduler import host_view

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)
conf.register_opts(CONF)


class GPUP2PCliqueFilter(filters.BaseHostFilter):
    """Hosts whose free GPUs hold a clique for a ``required`` request."""

    # Rebuild keeps the server's GPUs; there are no candidates to judge.
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        super().__init__()
        host_view.check_nova()

    def filter_all(self, filter_obj_list, spec_obj):
        """Nova's, with what the request is read once for all hosts."""
        if scheduler_utils.request_is_rebuild(spec_obj):
            # As Nova's _filter_one does without RUN_ON_REBUILD.
            yield from filter_obj_list
            return
        request = host_view.Request(spec_obj)
        for host_state in filter_obj_list:
            if self._passes(host_state, spec_obj, request):
                yield host_state

    def host_passes(self, host_state, spec_obj) -> bool:
        return self._passes(host_state, spec_obj, host_view.Request(spec_obj))

    def _passes(self, host_state, spec_obj, request: host_view.Request
                ) -> bool:
        required = host_view.wants_one_clique(spec_obj)
        if required and not driver_stat.running(
                getattr(host_state, 'stats', None)):
            # Traits outlive a rollback to another driver; this does not.
            LOG.debug('GPU P2P: %s does not run the GPU P2P compute '
                      'driver (its compute node has no %s stat): nothing '
                      'there would honour hw:gpu_p2p_clique=required',
                      host_state, driver_stat.KEY)
            return False
        if required and not host_view.can_steer(type(self).__name__):
            return True
        try:
            groups = host_view.request_groups(spec_obj)
            moved = None
            if request.claims_ignore_placement:
                moved = host_view.for_move(host_state, spec_obj, required,
                                           groups)
            if moved is not None:
                host_state.allocation_candidates = moved
                return bool(moved)
            kept, judged = host_view.pruned(
                host_state, required, CONF.gpu_p2p.candidates_per_host,
                groups, host_view.guest_cells(spec_obj))
        except Exception:
            # Never fail scheduling because of us: the compute's own check
            # still refuses GPUs that are not one clique.
            LOG.exception('GPU P2P: could not judge the GPUs of host %s; '
                          'passing it unchanged', host_state)
            return True
        if not judged:
            return True
        host_state.allocation_candidates = kept
        if not kept:
            LOG.debug('GPU P2P: no allocation candidate of %s has GPUs '
                      'of one clique', host_state)
            return False
        return True
