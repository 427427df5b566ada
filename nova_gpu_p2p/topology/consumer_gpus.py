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
only. Each NVIDIA GPU is judged from the device first, then from the
host's PCI ID database (:mod:`~nova_gpu_p2p.topology.pci_ids`), so that a
data-center GPU newer than the database keeps its clique. The first rule
that applies decides (doc/source/troubleshooting.rst, "Consumer GPUs",
has the evidence):

*Consumer* (barred unless ``allow_consumer_gpu_cliques``), when any of:

1. NVML's brand (``nvml`` and ``fabricmanager`` backends, GPUs on the
   NVIDIA driver) is GeForce, GeForce RTX, TITAN or TITAN RTX;
2. the device ID is a known exception, a CMP mining card: GeForce
   silicon without display outputs, so a 3D controller like a data-center
   GPU, and missing from older databases;
3. the database's name of the device, or of its subsystem (a TITAN V CEO
   Edition is 10de:1dba, the Quadro GV100's device ID, told apart only by
   its subsystem 10de:12eb), says GeForce, TITAN, GTX or CMP (also
   "GeForce3" and "GTXTITAN").

*Unknown* (barred, fail closed) where the subsystem is unknown and the
database names a consumer card among the device's subsystems.

*Professional*, the first of:

4. NVML's brand is any other it names (Tesla, NVIDIA, NVIDIA RTX,
   Quadro, ...); a brand NVML's table lacks (a capture's ``geforce``, a
   newer driver's value) is *unknown* unless the operator vouches (7),
   whatever the backend that read it;
5. the device is a 3D controller (PCI class 0x0302: no display) on a
   board NVIDIA built (subsystem vendor 10de), as every data-center GPU
   from V100 to B300 is; a mobile GeForce is a 3D controller too, behind
   the laptop's own GPU, but on its maker's board (subsystem vendor Dell,
   Lenovo, ...), so it falls to the rules below;
6. the database names its product (``[...]``: "GA102GL [RTX A6000]"),
   and nothing above said consumer (workstation cards are display
   controllers, class 0x0300); a chip's code name alone ("GP102",
   Debian 12's "GN21-X11" for an RTX 4090 Laptop GPU) names no product;
7. the operator vouches for the model in ``[gpu_p2p] trusted_gpu_models``.

Otherwise *unknown*: a display-class GPU, or one on another maker's
board, that nothing names stays barred.
"""

import dataclasses
import enum
import re

from nova_gpu_p2p_guest import errors

from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_ids

#: The option that lifts the bar, as messages name it.
ALLOW_OPTION = '[gpu_p2p] allow_consumer_gpu_cliques'
#: The option that vouches for one model, as messages name it.
TRUST_OPTION = '[gpu_p2p] trusted_gpu_models'
#: Anywhere in a name: "GeForce3", "GTXTITAN-6GD5", "CMP 170HX".
_CONSUMER_NAME = re.compile(r'geforce|titan|gtx|\bcmp\b', re.IGNORECASE)
#: A product name, as the database brackets it after the chip's.
_PRODUCT = re.compile(r'\[[^]]*\w[^]]*\]')
#: PCI class codes of display controllers, less the programming interface.
VGA_CLASS = 0x0300
THREE_D_CLASS = 0x0302
#: ``nvmlBrandType_t`` names (pynvml's ``NVML_BRAND_*``) as the rule
#: spells them, by the nvml backend and in captures alike. Any other
#: brand, a capture's ``geforce`` or ``""`` or a value newer than this
#: table, is unknown and fails closed.
NVML_BRANDS = {
    'QUADRO': 'Quadro', 'TESLA': 'Tesla', 'NVS': 'NVS', 'GRID': 'GRID',
    'GEFORCE': 'GeForce', 'TITAN': 'TITAN', 'NVIDIA_VAPPS': 'NVIDIA vApps',
    'NVIDIA_VPC': 'NVIDIA VPC', 'NVIDIA_VCS': 'NVIDIA VCS',
    'NVIDIA_VWS': 'NVIDIA RTX vWS', 'NVIDIA_CLOUD_GAMING': 'NVIDIA Cloud '
    'Gaming', 'QUADRO_RTX': 'Quadro RTX', 'NVIDIA_RTX': 'NVIDIA RTX',
    'NVIDIA': 'NVIDIA', 'GEFORCE_RTX': 'GeForce RTX',
    'TITAN_RTX': 'TITAN RTX',
}
#: NVML brands of consumer cards.
CONSUMER_BRANDS = frozenset({'GeForce', 'GeForce RTX', 'TITAN', 'TITAN RTX'})
#: CMP mining cards (pci.ids 2026.10): 3D controllers of GeForce silicon.
#: Debian 12's database lacks the first five.
CMP_DEVICES = frozenset({
    0x15c2, 0x1d83, 0x1d84, 0x1dc1, 0x1df4, 0x1e09, 0x1f0b, 0x2082,
    0x20c2, 0x2189, 0x220d, 0x248a})


class Kind(str, enum.Enum):
    PROFESSIONAL = 'professional'
    CONSUMER = 'consumer'
    UNKNOWN = 'unknown'


@dataclasses.dataclass(frozen=True, order=True)
class ModelId:
    """``vendor:device[:subvendor:subdevice]``, as lspci -nn shows IDs."""

    vendor: int
    device: int
    subsystem: tuple[int, int] | None = None

    def __str__(self) -> str:
        text = '%04x:%04x' % (self.vendor, self.device)
        if self.subsystem:
            text += ':%04x:%04x' % self.subsystem
        return text

    def matches(self, gpu: model.PCIFunction) -> bool:
        return ((self.vendor, self.device) == (gpu.vendor, gpu.device)
                and self.subsystem in (None, subsystem(gpu)))


_MODEL_ID = re.compile(r'^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})'
                       r'(?::([0-9a-fA-F]{4}):([0-9a-fA-F]{4}))?$')


def parse_model_id(text: str) -> ModelId:
    """One ``trusted_gpu_models`` entry; ValueError says what is allowed."""
    match = _MODEL_ID.match(text.strip())
    if match is None:
        raise ValueError(
            "%s is not vendor:device or vendor:device:subvendor:subdevice "
            "in hex, as lspci -nn shows them (for example 10de:2bb1 or "
            "10de:2bb1:10de:204b)" % errors.quoted(text.strip()))
    vendor, device, sub_vendor, sub_device = (
        None if part is None else int(part, 16) for part in match.groups())
    if vendor != model.NVIDIA_VENDOR_ID:
        raise ValueError("%s is not an NVIDIA GPU: only vendor %s GPUs "
                         "get cliques" % (errors.quoted(text.strip()),
                                          model.NVIDIA_VENDOR_HEX))
    return ModelId(vendor, device, None if sub_vendor is None
                   else (sub_vendor, sub_device))


def subsystem(gpu: model.PCIFunction) -> tuple[int, int] | None:
    if gpu.subsystem_vendor is None or gpu.subsystem_device is None:
        return None
    return gpu.subsystem_vendor, gpu.subsystem_device


def consumer_name(name: str | None) -> bool:
    return bool(name and _CONSUMER_NAME.search(name))


@dataclasses.dataclass(frozen=True)
class GpuModel:
    """One GPU's IDs, its name in the database, its kind and why."""

    device: int
    name: str | None
    kind: Kind
    #: Subsystem vendor and device; None where the backend cannot say.
    subsystem: tuple[int, int] | None = None
    #: Which rule decided, and on what evidence.
    rule: str = ''
    #: For a GPU that is not professional: what would let it have a
    #: clique.
    lift: str | None = None

    @property
    def ids(self) -> str:
        text = '%s:%04x' % (model.NVIDIA_VENDOR_HEX, self.device)
        if self.subsystem:
            text += ' subsystem %04x:%04x' % self.subsystem
        return text

    @property
    def label(self) -> str:
        """``GeForce RTX 4090 (10de:2684)``, or the IDs alone."""
        ids = '%s:%04x' % (model.NVIDIA_VENDOR_HEX, self.device)
        return '%s (%s)' % (self.name, ids) if self.name else ids


def _named(what: str, name: str) -> str:
    return "the PCI ID database names %s '%s'" % (what, name)


def _consumer_rule(gpu: model.PCIFunction, database: pci_ids.Database,
                   brand: str | None) -> str | None:
    """Rules 1 to 3: why it is a consumer GPU; None where none says so."""
    if brand in CONSUMER_BRANDS:
        return "NVML's brand is %s" % brand
    if gpu.device in CMP_DEVICES:
        return ('10de:%04x is a CMP mining card: GeForce silicon without '
                'display outputs' % gpu.device)
    name = database.names.get(gpu.device)
    if consumer_name(name):
        return _named('the device', name)
    sub = subsystem(gpu)
    sub_name = (database.subsystems.get((gpu.device,) + sub)
                if sub else None)
    if consumer_name(sub_name):
        return _named('its subsystem %04x:%04x' % sub, sub_name)
    return None


def _professional_rule(gpu: model.PCIFunction, database: pci_ids.Database,
                       brand: str | None,
                       trusted: tuple[ModelId, ...]) -> str | None:
    """Rules 4 to 7: why it is no consumer GPU; None where nothing says."""
    if brand in NVML_BRANDS.values():
        return "NVML's brand is %s" % brand
    if (gpu.class_code >> 8 == THREE_D_CLASS
            and gpu.subsystem_vendor == model.NVIDIA_VENDOR_ID):
        return ('a 3D controller (class 0x0302, no display) on a board '
                'NVIDIA built (subsystem vendor 10de), as data-center GPUs '
                'are')
    name = database.names.get(gpu.device)
    if name and _PRODUCT.search(name):
        return _named('the device', name)
    return _vouched(gpu, trusted)


def _vouched(gpu: model.PCIFunction,
             trusted: tuple[ModelId, ...]) -> str | None:
    """Rule 7: the operator's entry for this model, if any."""
    vouched = [str(entry) for entry in trusted if entry.matches(gpu)]
    if vouched:
        return 'vouched for by %s entry %s' % (TRUST_OPTION, vouched[0])
    return None


def _shared_with_consumer(gpu: model.PCIFunction,
                          database: pci_ids.Database) -> str | None:
    """A consumer card of this device ID, where no subsystem tells."""
    if subsystem(gpu) is not None:
        return None
    for (vendor, device), name in sorted(
            database.subsystems_of(gpu.device).items()):
        if consumer_name(name):
            return ("10de:%04x is also a consumer card (subsystem %04x:%04x "
                    "'%s'), and this GPU's subsystem is unknown"
                    % (gpu.device, vendor, device, name))
    return None


def _unknown_rule(gpu: model.PCIFunction, database: pci_ids.Database) -> str:
    name = database.names.get(gpu.device)
    why = database.error or (
        "%s names only its chip, '%s'" % (database.path, name) if name
        else 'not listed in %s' % database.path)
    kind = {VGA_CLASS: 'a display controller (class 0x0300)',
            THREE_D_CLASS: 'a 3D controller (class 0x0302)'}.get(
                gpu.class_code >> 8,
                'a display-class device (class 0x%06x)' % gpu.class_code)
    if subsystem(gpu) is None:
        board = 'whose board maker (subsystem) is unknown'
    elif gpu.subsystem_vendor == model.NVIDIA_VENDOR_ID:
        board = 'on an NVIDIA board'
    else:
        board = 'on a board of subsystem vendor %04x, not NVIDIA' % (
            gpu.subsystem_vendor)
    return ('%s %s, that neither NVML nor the PCI ID database names (%s)'
            % (kind, board, why))


def _lift_unknown(gpu: model.PCIFunction) -> str:
    ids = ModelId(gpu.vendor, gpu.device)
    sub = subsystem(gpu)
    board = (' (or %s for this board only)' % ModelId(
        gpu.vendor, gpu.device, sub) if sub else '')
    return ('install a PCI ID database that names it (see troubleshooting: '
            'Consumer GPUs), or, once you know it is no GeForce or TITAN, '
            'add %s%s to %s' % (ids, board, TRUST_OPTION))


def judge_gpu(gpu: model.PCIFunction, database: pci_ids.Database,
              brand: str | None = None,
              trusted: tuple[ModelId, ...] = ()) -> GpuModel:
    """One NVIDIA GPU's kind, the rule that decided and what lifts it."""
    found = dict(device=gpu.device, name=database.names.get(gpu.device),
                 subsystem=subsystem(gpu))
    rule = _consumer_rule(gpu, database, brand)
    if rule:
        return GpuModel(kind=Kind.CONSUMER, rule=rule, lift=(
            'set %s = true, only after verifying P2P bandwidth and data '
            'inside a guest on these cards and driver' % ALLOW_OPTION),
            **found)
    rule = _shared_with_consumer(gpu, database) if brand is None else None
    if rule:
        return GpuModel(kind=Kind.UNKNOWN, rule=rule, lift=(
            'use a topology backend that reads subsystem IDs (sysfs, nvml, '
            'fabricmanager), or set %s = true' % ALLOW_OPTION), **found)
    if brand is not None and brand not in NVML_BRANDS.values():
        vouched = _vouched(gpu, trusted)
        if vouched:
            return GpuModel(kind=Kind.PROFESSIONAL, rule=vouched, **found)
        return GpuModel(kind=Kind.UNKNOWN, rule=(
            "NVML's brand %s is none this version knows (fail closed)"
            % errors.quoted(brand)), lift=_lift_unknown(gpu), **found)
    rule = _professional_rule(gpu, database, brand, trusted)
    if rule:
        return GpuModel(kind=Kind.PROFESSIONAL, rule=rule, **found)
    return GpuModel(kind=Kind.UNKNOWN, rule=_unknown_rule(gpu, database),
                    lift=_lift_unknown(gpu), **found)


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
    #: The database's ``Version:``, where it says.
    database_version: str | None = None

    def of_kind(self, kind: Kind) -> list[str]:
        return sorted(a for a, gpu in self.models.items() if gpu.kind is kind)


def reason(gpu: GpuModel) -> str:
    """Why a GPU that is not professional gets no clique, and the fix."""
    if gpu.kind is Kind.CONSUMER:
        return ('%s is a consumer GPU (GeForce or TITAN): %s; GPUDirect P2P '
                'between such GPUs in a VM can hang NCCL or return wrong '
                'data; %s' % (gpu.label, gpu.rule, gpu.lift))
    return ('%s may be a consumer GPU: %s; %s'
            % (gpu.label, gpu.rule, gpu.lift))


def judge(topology: model.HostTopology, database: pci_ids.Database,
          allow: bool, trusted: tuple[ModelId, ...] = ()) -> GpuKinds:
    """Name and judge every NVIDIA GPU; bar the non-professional ones."""
    models = {gpu.address: judge_gpu(gpu, database,
                                     topology.gpu_brands.get(gpu.address),
                                     tuple(trusted))
              for gpu in topology.gpus()}
    barred = {} if allow else {
        address: reason(gpu) for address, gpu in sorted(models.items())
        if gpu.kind is not Kind.PROFESSIONAL}
    return GpuKinds(models=models, barred=barred, database=database.path,
                    database_error=database.error, allowed=allow,
                    database_version=database.version)
