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

"""Whether moves to this host claim what placement allocates.

Nova without the project's move-claim fix (:mod:`nova_gpu_p2p.nova_fix`)
claims a move's destination GPUs in its pool order, which a restarted
nova-compute reads in PCI address order; this row says so, and what
moves to this host will do.
"""

from nova_gpu_p2p.checks import result

TITLE = 'Nova move claims'


def check_move_claims(carried: bool, fabric_host: bool) -> result.Check:
    """The row for the Nova this host runs.

    :param carried: Nova carries the fix (:func:`nova_fix.carried`).
    :param fabric_host: the host has Fabric Manager partitions.
    """
    group = 'partition' if fabric_host else 'clique'
    if carried:
        return result.success(
            TITLE, 'Nova carries the move-claim fix: a cold migration, '
            'resize, evacuation (any microversion) or unshelve to this host '
            'claims the GPUs the scheduler chose, one %s, after any '
            'nova-compute restart' % group)
    return result.warning(
        TITLE, 'Nova lacks the move-claim fix: a cold migration, resize or '
        'evacuation to this host claims its first free GPUs on the NUMA '
        'nodes Nova fits, in the order of the [pci] device_spec order tags '
        '(PCI address order without them, once nova-compute restarted); '
        'where they are not one %s, as on a node whose GPUs 1-GPU servers '
        'split, a required server\'s move is refused (NoValidHost, the '
        'server keeps running where it is) and an auto server\'s lands on '
        'them' % group,
        'apply the series in patches/nova to Nova on every node; %s'
        % result.see(result.Doc.NOVA_MOVE_CLAIMS))
