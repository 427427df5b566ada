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

"""Scheduling: the GPUs in placement, each with its clique.

Judged only from a nova.conf's ``[pci]``; the rules for a device_spec
entry are :mod:`nova_gpu_p2p.device_spec_tags`'s.
"""

import dataclasses

from nova_gpu_p2p.checks import result
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p.topology import model


@dataclasses.dataclass(frozen=True)
class PciSettings:
    """The ``[pci]`` options of nova.conf that scheduling by clique needs."""

    report_in_placement: bool
    #: ``[pci] device_spec`` values, in order.
    device_specs: tuple[str, ...] = ()


def check_placement(topology: model.HostTopology,
                    cliques: host_cliques.Cliques,
                    pci: PciSettings) -> list[result.Check]:
    """Whether nova-scheduler can give a ``required`` server one clique here.

    It can only when the GPUs are in placement, and it learns each GPU's
    clique from the ``gpu_p2p_clique`` tag of the GPU's device_spec entry
    (the trait there shows the clique in placement). With GPUs in
    placement Nova rewrites each GPU provider's traits from that entry, so
    the entry is judged as the provider and the pools will be.
    """
    if not pci.report_in_placement:
        if cliques.largest() < 2:
            return []
        return [result.warning(
            'placement',
            '[pci] report_in_placement is off, so the GPUs are not in '
            'placement: nova-scheduler cannot give a '
            'hw:gpu_p2p_clique=required server GPUs of one clique here; '
            'this host refuses GPUs that are not one clique and the build '
            'is rescheduled',
            'set [pci] report_in_placement = True and the [pci] '
            'device_spec lines of "nova-gpu-p2p topology --device-spec", '
            'restart nova-compute, then [filter_scheduler] '
            'pci_in_placement = True for nova-api, nova-conductor and '
            'nova-scheduler (see "Scheduling required flavors")')]
    functions = topology.functions
    spec_tags = device_spec_tags.configured_tags(
        pci.device_specs, [(a, functions[a].vendor, functions[a].device)
                           for a in cliques.ids])
    ranks = device_spec_tags.topology_ranks(topology, cliques.ids)
    problems = device_spec_tags.problems_by_gpu(
        cliques.ids,
        {address: device_spec_tags.entry_traits(tags)
         for address, tags in spec_tags.items()},
        spec_tags,
        device_spec_tags.partition_sizes(topology.fabric_partitions), ranks)
    checks = []
    for address, problem in problems.items():
        # "GPU <address> is in ... but ...: <what to do>".
        message, _, fix = problem.partition(': ')
        checks.append(result.warning(
            '[pci] device_spec %s' % address, message, fix))
    if checks:
        return checks
    in_cliques = [a for a, clique in cliques.ids.items() if clique is not None]
    offered = [a for a in in_cliques if a in spec_tags]
    return [result.success(
        'placement',
        '[pci] report_in_placement on: %d of %d GPUs in cliques offered by '
        '[pci] device_spec, each with its clique trait and %s tag'
        % (len(offered), len(in_cliques), device_spec_tags.CLIQUE_TAG))
    ] + _order_checks(topology, spec_tags, ranks)


def _order_checks(topology: model.HostTopology,
                  spec_tags: dict[str, dict[str, str]],
                  ranks: dict[str, int]) -> list[result.Check]:
    """A warning where the entries' order tags are missing or stale."""
    wrong = device_spec_tags.misordered(spec_tags, ranks)
    if not wrong:
        return []
    return [result.warning(
        '[pci] device_spec order',
        'the entries of %d GPUs (first %s) lack the order tags (%s1, '
        '...) of the claim order: on a Nova without the move-claim fix a cold '
        'migration, resize or evacuation to this host after a nova-compute '
        'restart claims its first free GPUs in PCI address order, and a '
        'required server\'s move is refused where they are not one %s'
        % (len(wrong), wrong[0], device_spec_tags.ORDER_TAG_PREFIX,
           'partition' if topology.fabric_partitions else 'clique'),
        'set the [pci] device_spec lines "nova-gpu-p2p topology '
        '--device-spec" prints and restart nova-compute')]
