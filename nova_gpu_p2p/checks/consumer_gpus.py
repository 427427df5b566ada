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

"""Consumer GPUs: which GPUs may be promised P2P, and which rule said so.

The rule is :mod:`nova_gpu_p2p.topology.consumer_gpus`'s; this only
reports it.
"""

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import consumer_gpus

SUBJECT = 'consumer GPUs'
_KIND = consumer_gpus.Kind


def _by_rule(kinds: consumer_gpus.GpuKinds, addresses: list[str],
             lift: bool = False) -> str:
    """``0000:01:00.0, 0000:02:00.0 (GeForce RTX 4090 (10de:2684)): rule``.

    GPUs of one model decided by one rule share a part.
    """
    groups: dict[tuple[str, str, str | None], list[str]] = {}
    for address in addresses:
        gpu = kinds.models[address]
        groups.setdefault((gpu.label, gpu.rule, gpu.lift if lift else None),
                          []).append(address)
    return '; '.join('%s (%s): %s%s' % (', '.join(gpus), label, rule,
                                        ' (to lift: %s)' % how if how else '')
                     for (label, rule, how), gpus in groups.items())


def _source(kinds: consumer_gpus.GpuKinds) -> str:
    if kinds.database_error is not None:
        return kinds.database_error
    if kinds.database_version:
        return 'names from %s, version %s' % (kinds.database,
                                              kinds.database_version)
    return 'names from %s' % kinds.database


def check_consumer_gpus(kinds: consumer_gpus.GpuKinds
                        ) -> list[result.Check]:
    """One row: which GPUs are not professional, what follows, and why.

    Each GPU is named with the rule that decided it. Nothing where the
    host has no NVIDIA GPU (the GPUs row says so).
    """
    if not kinds.models:
        return []
    consumer = kinds.of_kind(_KIND.CONSUMER)
    unknown = kinds.of_kind(_KIND.UNKNOWN)
    professional = kinds.of_kind(_KIND.PROFESSIONAL)
    if not consumer and not unknown:
        return [result.success(SUBJECT, 'none: every GPU is a professional '
                               'or data-center GPU (%s): %s' % (
                                   _source(kinds),
                                   _by_rule(kinds, professional)))]
    found = []
    if consumer:
        found.append('consumer GPUs %s' % _by_rule(kinds, consumer,
                                                   not kinds.allowed))
    if unknown:
        found.append('GPUs that may be consumer GPUs %s (%s)'
                     % (_by_rule(kinds, unknown, not kinds.allowed),
                        _source(kinds)))
    if kinds.allowed:
        return [result.warning(
            SUBJECT, '%s may share cliques: %s = true' % (
                '; '.join(found), consumer_gpus.ALLOW_OPTION),
            'keep it only where GPUDirect P2P bandwidth and data were '
            'verified inside a guest on these cards and driver; %s'
            % result.see(result.Doc.CONSUMER_GPUS))]
    fix = ('none needed for consumer GPUs: their P2P in a VM can hang NCCL '
           'or return wrong data (%s)' % result.see(result.Doc.CONSUMER_GPUS))
    if unknown:
        fix = ('install or update the PCI ID database (%s), or name it with '
               '[gpu_p2p] pci_ids_file; or vouch for the model in %s'
               % (result.see(result.Doc.CONSUMER_GPUS),
                  consumer_gpus.TRUST_OPTION))
    return [result.warning(
        SUBJECT, '%s get no clique and no P2P trait, so P2P flavors do not '
        'get them' % '; '.join(found), fix)]
