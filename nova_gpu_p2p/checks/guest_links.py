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

"""Which PCIe link bandwidths a guest's NCCL sees, with and without the agent.

NCCL weighs each path by its slowest PCIe link and the socket-to-socket
rate of the CPU (:mod:`..topology.nccl_links`, :mod:`..topology.host_cpu`).
In a guest it reads either the guest agent's topology file, which carries
the host's links and CPU, or else the guest's own sysfs, where each
device's link is the lower of its own and its guest root port's: the
driver sets the root ports to the host's link (``x-speed``/``x-width``),
which QEMU shows up to 16 GT/s before 9.2.
"""

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.checks import versions as versions_mod
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import nccl_links

SUBJECT = 'guest PCIe links'
_AGENT = ('with the guest agent (nova-gpu-p2p-guest) NCCL reads the host\'s '
          'links and CPU from its topology file')


def _version(version) -> str:
    return '.'.join(map(str, version))


def check_guest_links(topology: model.HostTopology,
                      versions: versions_mod.HostVersions,
                      host_cpu: dict | None) -> list[result.Check]:
    """One row: what guests' sysfs shows, and what the agent adds."""
    devices = [f for f in topology.functions.values()
               if f.is_gpu or f.is_nic]
    links = {f.address: nccl_links.nccl_link(topology, f) for f in devices}
    known = {a: link for a, link in links.items()
             if nccl_links.gts(link['link_speed']) is not None}
    if not known:
        return []
    cpu = ('; this host\'s CPU for NCCL\'s socket-to-socket rate: %s '
           'family %d model %d (a guest with a named CPU model reports '
           'that model; the agent\'s file gives NCCL this one)' % (
               host_cpu['vendor'], host_cpu['familyid'],
               host_cpu['modelid']) if host_cpu else '')
    if versions.libvirt is None or versions.qemu is None:
        return [result.warning(
            SUBJECT, 'libvirt or QEMU version unknown: cannot say what '
            'guests\' root ports show; ' + _AGENT + cpu)]
    if versions.libvirt < min_versions.LIBVIRT_QEMU_OVERRIDE:
        return [result.warning(
            SUBJECT, 'libvirt %s has no <qemu:override>: guest root ports '
            'keep QEMU\'s default 16 GT/s x32, and guests without the '
            'agent read each device\'s own link, not this host\'s; %s%s'
            % (_version(versions.libvirt), _AGENT, cpu),
            'upgrade libvirt to %s or later'
            % _version(min_versions.LIBVIRT_QEMU_OVERRIDE))]
    fast = sorted(a for a, link in known.items()
                  if nccl_links.gts(link['link_speed']) > 16.0)
    if fast and versions.qemu < min_versions.QEMU_PCIE_GEN5:
        return [result.warning(
            SUBJECT, 'QEMU %s shows guest root ports at 16 GT/s at most: '
            'guests without the agent read %d devices\' %s links (%s) as '
            '16 GT/s (half their bandwidth to NCCL and nvidia-smi); %s%s'
            % (_version(versions.qemu), len(fast),
               known[fast[0]]['link_speed'], ', '.join(fast), _AGENT, cpu),
            'upgrade QEMU to %s or later, or install nova-gpu-p2p-guest '
            'in GPU images' % _version(min_versions.QEMU_PCIE_GEN5))]
    return [result.success(
        SUBJECT, 'guests\' root ports carry this host\'s links (%d GPUs '
        'and NICs): NCCL and nvidia-smi in a guest read the host\'s link '
        'bandwidths from sysfs; the host\'s switches (NCCL\'s path types) '
        'and CPU reach NCCL only through the guest agent\'s topology file '
        '(nova-gpu-p2p-guest)%s' % (len(known), cpu))]
