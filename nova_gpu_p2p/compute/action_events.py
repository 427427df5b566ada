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

"""The instance action events through which a tenant sees what we did.

Failed events, with the reason as their details: ``openstack server event
show`` (microversion 2.84 and later) shows what an existing server lost and
why a live migration was refused, where nova-compute's log is out of reach.
"""

from nova import conf as nova_conf
from nova import objects
from oslo_log import log as logging

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

#: An existing server runs without what its flavor requires.
LOST = 'gpu_p2p_required_layout_lost'
#: A live migration was refused before it began.
LIVE_MIGRATION = 'gpu_p2p_live_migration_refused'


def record(context, instance, event: str, message: str) -> None:
    """A failed instance action event carrying ``message`` as its details.

    Best effort: the server's operation goes on whatever happens here
    (no context, no action to attach to, conductor trouble).
    """
    if context is None:
        return
    try:
        objects.InstanceActionEvent.event_start(
            context, instance.uuid, event, want_result=False, host=CONF.host)
        objects.InstanceActionEvent.event_finish_with_failure(
            context, instance.uuid, event, exc_val=message, exc_tb=message,
            want_result=False)
    except Exception as exc:
        LOG.warning('GPU P2P: could not record instance action event %s: '
                    '%s', event, exc, instance=instance)
