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
(:mod:`nova_gpu_p2p.scheduler.move_claims`). For ``required`` it then
hands on only the best-fitting few hosts that Nova's filters after it
pass, running those filters itself over batches of hosts, best fit
first, until it has enough (:mod:`nova_gpu_p2p.scheduler.host_bound`).
"""

from nova import conf as nova_conf
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_gpu_p2p import conf
from nova_gpu_p2p import driver_stat
from nova_gpu_p2p.scheduler import host_bound
from nova_gpu_p2p.scheduler import host_view
from nova_gpu_p2p.scheduler import nova_support

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)
conf.register_opts(CONF)


class GPUP2PCliqueFilter(filters.BaseHostFilter):
    """Hosts whose free GPUs hold a clique for a ``required`` request."""

    # Rebuild keeps the server's GPUs; there are no candidates to judge.
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        super().__init__()
        nova_support.check_nova()
        self._later: list | None = None

    def filter_all(self, filter_obj_list, spec_obj):
        """Nova's, with what the request is read once for all hosts.

        For ``required``, only the best few hosts Nova's filters after
        this one pass (:meth:`_bounded`).
        """
        if scheduler_utils.request_is_rebuild(spec_obj):
            # As Nova's _filter_one does without RUN_ON_REBUILD.
            yield from filter_obj_list
            return
        request = host_view.Request(spec_obj)
        passed = [host_state for host_state in filter_obj_list
                  if self._passes(host_state, spec_obj, request)]
        yield from self._bounded(passed, spec_obj)

    def _later_filters(self) -> list:
        """Nova's enabled filters after this one, loaded as Nova does."""
        if self._later is None:
            names = list(CONF.filter_scheduler.enabled_filters)
            ours = type(self).__name__
            after = names[names.index(ours) + 1:] if ours in names else []
            classes = {cls.__name__: cls for cls in
                       filters.HostFilterHandler().get_matching_classes(
                           CONF.filter_scheduler.available_filters)}
            self._later = [classes[name]() for name in after]
        return self._later

    def _bounded(self, hosts: list, spec_obj) -> list:
        """The hosts to hand on: :mod:`host_bound`'s rule for ``required``.

        Every host where the bound does not apply or cannot be judged.
        Nova's filters after this one judge the batches here, then once
        more the hosts handed on (those passed, so they pass again).
        """
        servers = (spec_obj.num_instances
                   if spec_obj.obj_attr_is_set('num_instances') else 1)
        need = host_bound.needed(servers, CONF.scheduler.max_attempts,
                                 CONF.gpu_p2p.spare_hosts)
        if (need is None or len(hosts) <= need
                or not host_view.wants_one_clique(spec_obj)):
            return hosts
        try:
            order = host_bound.ranked([_leftover(host) for host in hosts])
            later = self._later_filters()

            def judge(batch: list[int]) -> list[int]:
                objs = [hosts[index] for index in batch]
                for later_filter in later:
                    if not objs:
                        break
                    if later_filter.run_filter_for_index(0):
                        objs = list(later_filter.filter_all(objs, spec_obj)
                                    or ())
                passed = {id(host) for host in objs}
                return [index for index in batch
                        if id(hosts[index]) in passed]

            kept = host_bound.accepted(order, need, judge)
        except Exception:
            # Never fail scheduling because of us: Nova judges them all.
            LOG.exception('GPU P2P: could not choose the best-fitting '
                          'hosts; handing on all %d', len(hosts))
            return hosts
        LOG.debug('GPU P2P: handing on the %d best-fitting of %d hosts',
                  len(kept), len(hosts))
        return [hosts[index] for index in kept]

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
        if required and not nova_support.can_steer(type(self).__name__):
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


def _leftover(host_state) -> int | None:
    """What the weigher weighs the host by: its best fit's leftover."""
    found, judged = host_view.fits(host_state)
    return found[0].leftover if judged and found else None
