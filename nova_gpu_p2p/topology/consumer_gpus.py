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

"""Which GPUs may be promised GPUDirect P2P at all.

A clique tells the guest driver that P2P works. On GeForce cards in a
VFIO guest it does not (NVIDIA/nccl#2335): the driver grants peer access
and ``nvidia-smi topo -p2p r`` says OK, but the mapping is a private
mirror, so NCCL hangs and copy-engine transfers return wrong data
silently; Cloud Hypervisor documents the clique for data-center GPUs
only. The rule:

1. A GPU whose name in the host's PCI ID database
   (:mod:`~nova_gpu_p2p.topology.pci_ids`) says GeForce or TITAN is a
   *consumer* GPU.
2. A GPU the database does not name (none installed, unreadable, or too
   old to list the device) is *unknown*.
3. Every other NVIDIA GPU (RTX PRO, RTX 6000 Ada, L40S, A100, H100, B200,
   ...) is *professional*.

Consumer and unknown GPUs are barred from cliques unless the operator
sets ``[gpu_p2p] allow_consumer_gpu_cliques``: unknowns fail closed.
"""

import dataclasses
import enum
import re

from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_ids

#: The option that lifts the bar, as messages name it.
ALLOW_OPTION = '[gpu_p2p] allow_consumer_gpu_cliques'
_CONSUMER_NAME = re.compile(r'\b(geforce|titan)\b', re.IGNORECASE)


class Kind(str, enum.Enum):
    PROFESSIONAL = 'professional'
    CONSUMER = 'consumer'
    UNKNOWN = 'unknown'


@dataclasses.dataclass(frozen=True)
class GpuModel:
    """One GPU's device ID, its name in the database, and its kind."""

    device: int
    name: str | None
    kind: Kind

    @property
    def label(self) -> str:
        """``GeForce RTX 4090 (10de:2684)``, or the IDs alone."""
        ids = '%s:%04x' % (model.NVIDIA_VENDOR_HEX, self.device)
        return '%s (%s)' % (self.name, ids) if self.name else ids


def kind_of(name: str | None) -> Kind:
    if name is None:
        return Kind.UNKNOWN
    if _CONSUMER_NAME.search(name):
        return Kind.CONSUMER
    return Kind.PROFESSIONAL


@dataclasses.dataclass(frozen=True)
class GpuKinds:
    """One reading of the database: each GPU's model, which are barred."""

    #: NVIDIA GPU address -> its model.
    models: dict[str, GpuModel] = dataclasses.field(default_factory=dict)
    #: GPU address -> why it may have no clique; empty when allowed.
    barred: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The database read; None where none was found.
    database: str | None = None
    #: Why the database gave no names; None when it was read.
    database_error: str | None = None
    #: ``[gpu_p2p] allow_consumer_gpu_cliques``.
    allowed: bool = False

    def of_kind(self, kind: Kind) -> list[str]:
        return sorted(a for a, gpu in self.models.items() if gpu.kind is kind)


def _reason(gpu: GpuModel, database: pci_ids.Database) -> str:
    if gpu.kind is Kind.CONSUMER:
        return ('%s is a consumer GPU (GeForce or TITAN): GPUDirect P2P '
                'between such GPUs in a VM can hang NCCL or return wrong '
                'data; set %s = true only after verifying P2P on these '
                'cards and driver' % (gpu.label, ALLOW_OPTION))
    why = database.error or 'not listed in %s' % database.path
    return ('%s is not named by the PCI ID database (%s), so whether it is '
            'a consumer GPU is unknown; install or update the database '
            '(see troubleshooting: Consumer GPUs) or set %s = true'
            % (gpu.label, why, ALLOW_OPTION))


def judge(topology: model.HostTopology, database: pci_ids.Database,
          allow: bool) -> GpuKinds:
    """Name and judge every NVIDIA GPU; bar the non-professional ones."""
    models = {}
    for gpu in topology.gpus():
        name = database.names.get(gpu.device)
        models[gpu.address] = GpuModel(gpu.device, name, kind_of(name))
    barred = {} if allow else {
        address: _reason(gpu, database)
        for address, gpu in sorted(models.items())
        if gpu.kind is not Kind.PROFESSIONAL}
    return GpuKinds(models=models, barred=barred, database=database.path,
                    database_error=database.error, allowed=allow)
