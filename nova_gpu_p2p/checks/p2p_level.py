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

"""The cliques ``p2p_level`` gives this host, and what another would give.

The grouping itself is :mod:`nova_gpu_p2p.topology.host_cliques`'s; this
only reports it.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import os

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits as traits_mod


def _traits_text(found: Iterable[str]) -> str:
    return ' '.join(sorted(found)) or '(none)'


def no_gpu(topology: model.HostTopology,
           sysfs_root: str | None) -> result.Check:
    """FAIL: no NVIDIA GPU; where they were looked for, and why that may be.

    :param sysfs_root: the sysfs tree the GPUs were looked for in (every
        backend but ``static``, whose file always lists some, finds them
        there); None for a capture.
    """
    if sysfs_root is None:
        where = 'the capture'
        fix = ('capture the GPU host: sudo nova-gpu-p2p capture --output '
               'FILE')
    else:
        where = os.path.join(sysfs_root, 'bus', 'pci', 'devices')
        fix = ('sysfs lists GPUs whatever driver they are bound to (nvidia, '
               'vfio-pci or none): if "lspci -nn -d 10de:" lists some, %s '
               'is not this host\'s sysfs (--sysfs-root, [gpu_p2p] '
               'sysfs_root); if it lists none, the host does not see them: '
               'check that they are seated and powered, and the '
               'firmware\'s PCIe settings' % sysfs_root)
    others = [f for f in topology.functions.values()
              if f.vendor == model.NVIDIA_VENDOR_ID]
    message = 'no NVIDIA GPU found in %s' % where
    if others:
        message += (' (%d other NVIDIA PCI functions, such as NVSwitches '
                    'or audio)' % len(others))
    return result.failure('GPUs', message + ': nothing for P2P flavors '
                          'to use', fix)


def check_p2p_level(topology: model.HostTopology,
                    level: link_class.LinkClass,
                    acs_policy: link_class.AcsPolicy,
                    clique_map: Mapping[str, int] | None = None,
                    extra_traits: Iterable[str] = (),
                    sysfs_root: str | None = '/sys',
                    barred: Mapping[str, str] | None = None
                    ) -> list[result.Check]:
    """The cliques ``p2p_level`` gives, and what another level would give.

    :param extra_traits: traits decided elsewhere (NUMA affinity), to show
        the whole set the host would report.
    :param sysfs_root: where GPUs were looked for, see :func:`no_gpu`.
    :param barred: GPUs that may have no clique (consumer GPUs), and why.
    """
    gpus = topology.gpus()
    if not gpus:
        return [no_gpu(topology, sysfs_root)]
    cliques = host_cliques.assign(topology, level, acs_policy, clique_map,
                                  barred)
    groups = cliques.with_id()
    largest = cliques.largest()
    alone = cliques.without_id()
    found = traits_mod.p2p_traits(topology, cliques) | set(extra_traits)
    others = []
    nearest_with_clique = None
    for other in link_class.LinkClass:
        if other is level or (other is link_class.LinkClass.NV
                              and not topology.nvlink_pairs):
            continue
        size = host_cliques.assign(topology, other, acs_policy,
                                   clique_map, barred).largest()
        if size >= 2 and other > level and nearest_with_clique is None:
            nearest_with_clique = other
        if size != largest:
            others.append('at %s: %d' % (other.name, size))
    subject = 'p2p_level %s' % level.name
    message = ('%d clique%s, largest %d GPUs; %d of %d GPUs in no clique; '
               'traits: %s' % (len(groups), '' if len(groups) == 1 else 's',
                               largest, len(alone), len(gpus),
                               _traits_text(found)))
    if others:
        message += '; largest clique %s' % ', '.join(others)
    if len(gpus) < 2:
        return [result.success(subject, 'one NVIDIA GPU, no peer: no '
                               'clique; traits: %s' % _traits_text(found))]
    if largest >= 2:
        return [result.success(subject, message)]
    fix = ('raise [gpu_p2p] p2p_level to %s if P2P over that path is fast '
           'enough for your workloads' % nearest_with_clique.name
           if nearest_with_clique is not None else
           'no level gives a clique: check the consumer GPUs line above'
           if len(cliques.barred) >= len(gpus) - 1 else
           'no level gives a clique: check the ACS lines above')
    return [result.warning(subject, message + ': P2P flavors do not '
                           'land here', fix)]
