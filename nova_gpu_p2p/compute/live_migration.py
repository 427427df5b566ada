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

"""Live migration of a server whose devices the driver laid out: refused.

Nova's live migration of PCI devices rewrites only the hostdev source
addresses: the cliques, expander buses, NUMA distances and decision
record would reach the destination unchanged, describing the source
host's devices. A cold migration rebuilds them.
"""

from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs


def refusal(instance) -> str | None:
    """Why this instance may not be live-migrated; None when it may."""
    try:
        wanted = extra_specs.parse(instance.flavor.extra_specs).wanted
    except exception.InvalidExtraSpec:
        wanted = True  # unknown: fail closed
    if not wanted or not instance.pci_devices:
        return None
    return ('GPU P2P: live migration of a server with PCI devices and %s or '
            '%s in its flavor is not supported: its GPU P2P cliques, '
            'expander buses and NUMA distances would stay those of the '
            'source host; cold-migrate it (openstack server migrate) so '
            'they are rebuilt for the destination' % (
                extra_specs.CLIQUE_KEY, extra_specs.NUMA_AFFINITY_KEY))
