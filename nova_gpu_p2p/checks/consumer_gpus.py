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

"""Consumer GPUs: which GPUs may be promised P2P, as the database says.

The rule is :mod:`nova_gpu_p2p.topology.consumer_gpus`'s; this only
reports it.
"""

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import consumer_gpus

SUBJECT = 'consumer GPUs'
_KIND = consumer_gpus.Kind


def _names(kinds: consumer_gpus.GpuKinds, addresses: list[str]) -> str:
    """``0000:01:00.0, 0000:02:00.0 (GeForce RTX 4090 (10de:2684))``."""
    by_label: dict[str, list[str]] = {}
    for address in addresses:
        by_label.setdefault(kinds.models[address].label, []).append(address)
    return '; '.join('%s (%s)' % (', '.join(gpus), label)
                     for label, gpus in by_label.items())


def check_consumer_gpus(kinds: consumer_gpus.GpuKinds
                        ) -> list[result.Check]:
    """One row: every GPU professional, or which are not and what follows.

    Nothing where the host has no NVIDIA GPU (the GPUs row says so).
    """
    if not kinds.models:
        return []
    consumer = kinds.of_kind(_KIND.CONSUMER)
    unknown = kinds.of_kind(_KIND.UNKNOWN)
    source = ('names from %s' % kinds.database if kinds.database_error is None
              else kinds.database_error)
    if not consumer and not unknown:
        return [result.success(SUBJECT, 'none: every GPU is a professional '
                               'or data-center GPU (%s)' % source)]
    found = []
    if consumer:
        found.append('consumer GPUs %s' % _names(kinds, consumer))
    if unknown:
        found.append('GPUs not named by the PCI ID database %s (%s)'
                     % (_names(kinds, unknown), source))
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
               '[gpu_p2p] pci_ids_file' % result.see(result.Doc.CONSUMER_GPUS))
    return [result.warning(
        SUBJECT, '%s get no clique and no P2P trait, so P2P flavors do not '
        'get them' % '; '.join(found), fix)]
