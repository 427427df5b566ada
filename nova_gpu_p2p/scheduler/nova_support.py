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


"""What nova-gpu-p2p's filter and weigher need of Nova's scheduler.

Nova internals they read, checked when nova-scheduler builds them (at its
start), and whether a claim follows the scheduler's choice of GPUs at all.
"""

import inspect

from nova import conf as nova_conf
from nova.pci import stats as pci_stats
from nova.scheduler import host_manager
from nova.scheduler import utils as scheduler_utils
from nova.virt import hardware
from oslo_log import log as logging

from nova_gpu_p2p import exception

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

_legacy_warned = False


def check_nova() -> None:
    """Refuse to load unless Nova's scheduler has what we read.

    The allocation candidates on a HostState, the pools of its PCI stats,
    the aggregate multiplier lookup and the NUMA fit and PCI pool code
    that predicts a move's claim (``host_view.move_claim``) are Nova
    internals; called when nova-scheduler builds the filter or weigher,
    at its start.
    """
    problems = []
    state = host_manager.HostState('host', 'node', None)
    for name in ('allocation_candidates', 'pci_stats', 'aggregates'):
        if not hasattr(state, name):
            problems.append('HostState has no %s' % name)
    if not hasattr(pci_stats.PciDeviceStats(None), 'pools'):
        problems.append('PciDeviceStats has no pools')
    params = tuple(inspect.signature(
        scheduler_utils.get_weight_multiplier).parameters)
    if params != ('host_state', 'multiplier_name', 'multiplier_config'):
        problems.append('get_weight_multiplier takes (%s)'
                        % ', '.join(params))
    for name, function, needed in (
            ('numa_fit_instance_to_host', hardware.numa_fit_instance_to_host,
             {'provider_mapping', 'limits', 'pci_requests', 'pci_stats'}),
            ('PciDeviceStats.apply_requests',
             pci_stats.PciDeviceStats.apply_requests,
             {'requests', 'provider_mapping', 'numa_cells'})):
        missing = needed - set(inspect.signature(function).parameters)
        if missing:
            problems.append('%s takes no %s' % (name,
                                                ', '.join(sorted(missing))))
    if problems:
        raise exception.IncompatibleNova(
            'nova-gpu-p2p\'s scheduler filter and weigher do not support '
            'this Nova release: %s. Install a nova-gpu-p2p release made for '
            'it.' % '; '.join(problems))


def can_steer(who: str) -> bool:
    """Whether the claim follows the scheduler's choice of GPUs.

    Only with ``[filter_scheduler] pci_in_placement``: legacy PCI tracking
    claims devices on the compute, by its own order. Said once per
    process; the compute's refusal stays the safety net.
    """
    global _legacy_warned
    if CONF.filter_scheduler.pci_in_placement:
        return True
    if not _legacy_warned:
        _legacy_warned = True
        LOG.warning(
            '%s: [filter_scheduler] pci_in_placement is off, so the '
            'scheduler cannot choose which GPUs a hw:gpu_p2p_clique=required '
            'server gets; the compute host refuses GPUs that are not one '
            'clique and the build is rescheduled. Turn on [pci] '
            'report_in_placement on GPU compute hosts and [filter_scheduler] '
            'pci_in_placement here.', who)
    return False
