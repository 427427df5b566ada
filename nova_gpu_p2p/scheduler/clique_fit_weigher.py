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

"""Prefer the host whose best clique fits a ``required`` request tightest.

A host's weight is minus its *leftover*: the free GPUs its best-fit clique
keeps after the claim (:mod:`nova_gpu_p2p.scheduler.clique_fit`, rule 4),
on a Fabric Manager host those of the smallest partition enclosing its
best fit (:mod:`nova_gpu_p2p.scheduler.partition_fit`, rule 4).
Hosts where nothing fits weigh less than any host that fits. Requests
other than ``hw:gpu_p2p_clique=required`` weigh the same everywhere, so
the weigher changes nothing for them. The multiplier is
``[gpu_p2p] clique_fit_weight_multiplier``, overridden per aggregate by
the ``gpu_p2p_clique_fit_weight_multiplier`` metadata key.
"""

import math

from nova import conf as nova_conf
from nova.scheduler import utils
from nova.scheduler import weights
from nova_gpu_p2p_guest import errors
from oslo_log import log as logging

from nova_gpu_p2p import conf
from nova_gpu_p2p.scheduler import host_view
from nova_gpu_p2p.scheduler import nova_support

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)
conf.register_opts(CONF)


class GPUP2PCliqueFitWeigher(weights.BaseHostWeigher):
    """Tightest clique fit first, across hosts."""

    def __init__(self) -> None:
        super().__init__()
        nova_support.check_nova()

    def weight_multiplier(self, host_state) -> float:
        """The option, or the aggregate's; the default where not a number.

        A bad option (a ``$`` reference to nothing) or an aggregate's
        ``nan`` must not fail or unsort every request's weighing.
        """
        default = conf.option_default('clique_fit_weight_multiplier')
        try:
            value = utils.get_weight_multiplier(
                host_state, 'gpu_p2p_clique_fit_weight_multiplier',
                CONF.gpu_p2p.clique_fit_weight_multiplier)
        except Exception as exc:  # a bad option, read at each request
            LOG.error('GPU P2P: [gpu_p2p] clique_fit_weight_multiplier '
                      'cannot be read (%s); using %s',
                      errors.one_line(str(exc)), default)
            return default
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            LOG.warning('GPU P2P: clique fit weight multiplier %s of host '
                        '%s is not a finite number; using %s', value,
                        host_state, default)
            return default
        return value

    def _weigh_object(self, host_state, weight_properties) -> float | None:
        """Minus the leftover; None where nothing fits or nothing counts."""
        try:
            fits, judged = host_view.fits(host_state)
        except Exception:
            LOG.exception('GPU P2P: could not weigh the GPUs of host %s',
                          host_state)
            return None
        if not judged or not fits:
            return None
        return -float(fits[0].leftover)

    def weigh_objects(self, weighed_obj_list, weight_properties
                      ) -> list[float]:
        """Hosts without a fit weigh one less than the loosest fit."""
        if not (host_view.wants_one_clique(weight_properties)
                and nova_support.can_steer(type(self).__name__)):
            return [0.0] * len(weighed_obj_list)
        weights_ = [self._weigh_object(obj.obj, weight_properties)
                    for obj in weighed_obj_list]
        floor = min((w for w in weights_ if w is not None), default=0.0) - 1
        return [floor if w is None else w for w in weights_]
