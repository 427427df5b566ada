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

"""The host's CUSTOM_GPU_P2P_FREE_<n> traits, read at each resource update.

Nova runs the resource update inside every claim: a domain that vanishes
while its GPUs are read (a delete racing a boot) must not fail the claim.
Then the last sizes known stay until the next update reads them again.
"""

from collections.abc import Iterable

from nova.virt.libvirt import host as libvirt_host
from oslo_log import log as logging

from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.guest import nova_guest
from nova_gpu_p2p.topology import host_gpus as host_gpus_mod
from nova_gpu_p2p import traits

LOG = logging.getLogger(__name__)


class FreeSizes:
    """:func:`nova_gpu_p2p.traits.free_traits` with the last known kept."""

    def __init__(self) -> None:
        self._last: set[str] = set()

    def traits(self, host: host_gpus_mod.HostGPUs,
               partitions: Iterable[partitions_mod.FabricPartition],
               libvirt: libvirt_host.Host) -> set[str]:
        """The sizes that fit now, by the GPUs every domain holds.

        Running or not: a stopped server keeps its GPUs.
        """
        try:
            held = {address
                    for guest in libvirt.list_guests(only_running=False)
                    for address in nova_guest.hostdev_addresses(
                        guest.get_xml_desc())}
        except Exception as error:
            LOG.warning('GPU P2P: the GPUs of this host\'s domains could not '
                        'be read (%s); CUSTOM_GPU_P2P_FREE_<n> stay as last '
                        'reported until the next resource update', error)
            return set(self._last)
        self._last = traits.free_traits(host, partitions, held)
        return set(self._last)
