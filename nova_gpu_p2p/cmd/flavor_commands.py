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

"""The ``openstack`` commands that define a P2P flavor.

What a P2P flavor needs, in one place: the PCI alias request and its
placement group policy, our two extra specs, the placement trait for the
clique size, Nova's CPU pinning and NUMA node count, the guest physical
address bits large BARs need, the image properties it relies on, and the
nova.conf settings that let nova-scheduler place
``hw:gpu_p2p_clique=required`` on GPUs of one clique. And for a whole
HGX board (Fabric Manager's full passthrough mode), the PCI alias of its
NVSwitches, which go to the guest with the GPUs.
"""

from collections.abc import Iterable
import dataclasses
import json
import shlex
import unicodedata

from nova_gpu_p2p_guest import errors
from oslo_utils import units

from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import pcihole64
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits

MAX_GPUS = 16
#: Defaults per GPU: enough dedicated CPUs and RAM to feed it.
VCPUS_PER_GPU = 8
RAM_GIB_PER_GPU = 64
#: Nova's flavor keys for the guest CPU's physical address bits.
MAXPHYSADDR_MODE_KEY = 'hw:maxphysaddr_mode'
MAXPHYSADDR_BITS_KEY = 'hw:maxphysaddr_bits'
#: Nova's flavor key for how placement may share providers between
#: numbered request groups.
GROUP_POLICY_KEY = 'group_policy'
#: The small 64-bit BAR (BAR3) NVIDIA GPUs have beside the large BAR1.
NVIDIA_BAR3 = 32 * units.Mi
#: Nova's own ``[filter_scheduler]`` defaults, which a nova.conf setting
#: replaces: ours are added to them, not put in their place.
NOVA_DEFAULT_FILTERS = ('ComputeFilter', 'ComputeCapabilitiesFilter',
                        'ImagePropertiesFilter',
                        'ServerGroupAntiAffinityFilter',
                        'ServerGroupAffinityFilter')
NOVA_ALL_FILTERS = 'nova.scheduler.filters.all_filters'
NOVA_ALL_WEIGHERS = 'nova.scheduler.weights.all_weighers'
#: What a P2P flavor asks of the scheduler: its PCI alias, its guest NUMA
#: cells, and GPUs of one clique.
CLIQUE_FILTER = 'nova_gpu_p2p.scheduler.GPUP2PCliqueFilter'
CLIQUE_WEIGHER = 'nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher'
#: Ours first: it costs microseconds a candidate and leaves Nova's two,
#: which check every candidate at milliseconds each, only the one-clique
#: ones (doc/source/scheduling-scale.rst).
P2P_FILTERS = (CLIQUE_FILTER.rpartition('.')[2], 'PciPassthroughFilter',
               'NUMATopologyFilter')
#: A whole HGX board (H100/H200): its GPUs and the NVSwitch functions
#: that join them, all for one guest in Fabric Manager's full passthrough
#: mode (FABRIC_MODE=0), where the guest runs Fabric Manager itself.
BOARD_GPUS = 8
BOARD_NVSWITCHES = 4
NVSWITCH_PRODUCT_ID = 0x22a3
DEFAULT_NVSWITCH_ALIAS = 'nvswitch'


def _round_up(value: int, multiple: int) -> int:
    multiple = max(multiple, 1)
    return -(-value // multiple) * multiple


@dataclasses.dataclass(frozen=True)
class FlavorRequest:
    gpus: int
    alias: str
    numa_nodes: int = 1
    name: str | None = None
    vcpus: int | None = None
    ram_mb: int | None = None
    disk_gb: int = 100
    #: One GPU's 64-bit BARs in bytes, which size the guest's 64-bit PCI
    #: hole; None where they are not known.
    gpu_bars: tuple[int, ...] | None = None
    #: The whole board, its NVSwitches included (``--whole-board``).
    whole_board: bool = False
    #: The NVSwitches' ``[pci] alias`` name; None: the default.
    nvswitch_alias: str | None = None
    #: Require ``CUSTOM_GPU_P2P_FREE_<gpus>`` (``--free-trait``).
    free_trait: bool = False

    @property
    def flavor_name(self) -> str:
        return self.name or 'gpu-p2p.%dx%s' % (
            self.gpus, '-board' if self.whole_board else '')

    @property
    def switch_alias(self) -> str:
        return self.nvswitch_alias or DEFAULT_NVSWITCH_ALIAS

    @property
    def vcpu_count(self) -> int:
        """Given, or 8 per GPU, rounded up to split evenly over the cells.

        Nova refuses a flavor whose vCPUs or RAM its guest NUMA nodes
        cannot share evenly.
        """
        if self.vcpus is not None:
            return self.vcpus
        return _round_up(VCPUS_PER_GPU * self.gpus, self.numa_nodes)

    @property
    def ram(self) -> int:
        """Given, or 64 GiB per GPU, in whole GiB per guest NUMA node."""
        if self.ram_mb is not None:
            return self.ram_mb
        return _round_up(RAM_GIB_PER_GPU * self.gpus, self.numa_nodes) * 1024


def nvidia_bars(bar_gib: int) -> tuple[int, ...]:
    """An NVIDIA GPU's 64-bit BARs, from its large one (BAR1) in GiB.

    Its 32 MiB BAR3 counts: 8 x 128 GiB fit a 1 TiB hole, but not with
    eight more BARs, however small (nova-compute sizes the hole by all).
    """
    return (bar_gib * units.Gi, NVIDIA_BAR3)


def largest_bars(gpus: Iterable[model.PCIFunction]
                 ) -> tuple[int, ...] | None:
    """The 64-bit BARs of the GPU that needs the most; None without GPUs.

    A flavor's alias may ask for any of a host's GPU models: size it for
    the largest.
    """
    return max((gpu.bars64 for gpu in gpus), key=pcihole64.needed,
               default=None)


def guest_hole(request: FlavorRequest) -> pcihole64.Hole64 | None:
    """The 64-bit PCI hole nova-compute will give such a guest.

    As ``[gpu_p2p] pcihole64 = auto`` sizes it, for a guest CPU that is
    not the host's; None where the GPUs' BARs are not known.
    """
    if request.gpu_bars is None:
        return None
    return pcihole64.plan('auto', request.gpu_bars * request.gpus,
                          request.ram * units.Mi,
                          pcihole64.QEMU_DEFAULT_PHYS_BITS)


def maxphysaddr_bits(request: FlavorRequest) -> int | None:
    """``hw:maxphysaddr_bits`` for the hole.

    None where QEMU's default bits hold it, or the BARs are not known.
    """
    hole = guest_hole(request)
    if hole is None or hole.problem is None:
        return None
    return pcihole64.min_phys_bits(hole.size, request.ram * units.Mi)


def clique_trait(gpus: int) -> str:
    """The smallest clique-size trait that guarantees ``gpus`` in one."""
    return traits.GPU_P2P_CLIQUE[min(size for size in traits.CLIQUE_SIZES
                                     if size >= gpus)]


#: Nova's API keeps vCPUs, RAM and disk in 32-bit signed integers
#: (``parameter_types.flavor_param_positive``: at most 0x7FFFFFFF).
MAX_FLAVOR_INT = 2 ** 31 - 1
#: Nova's flavor name (``parameter_types.name``): 1 to 255 characters.
MAX_NAME = 255


def _nova_printable(char: str) -> bool:
    """A character Nova's API takes in a name (``_is_printable``).

    Nova builds its name pattern from the Basic Multilingual Plane only,
    so a character beyond U+FFFE is refused there too.
    """
    category = unicodedata.category(char)
    return (ord(char) < 0xffff and not category.startswith('C')
            and (not category.startswith('Z') or category == 'Zs'))


def _validate_name(name: str) -> None:
    """What Nova's API accepts as a flavor name (``valid_name_regex``)."""
    if not 1 <= len(name) <= MAX_NAME:
        raise exception.InvalidFlavorRequest(
            '--name %s: Nova takes names of 1 to %d characters, this has '
            '%d' % (errors.quoted(name), MAX_NAME, len(name)))
    if not all(map(_nova_printable, name)):
        raise exception.InvalidFlavorRequest(
            '--name %s: give a name of printable characters'
            % errors.quoted(name))
    if name[0].isspace() or name[-1].isspace():
        raise exception.InvalidFlavorRequest(
            '--name %s: Nova refuses a name that starts or ends with a '
            'space' % errors.quoted(name))


def _validate_alias(flag: str, name: str) -> None:
    if not name or ':' in name or ',' in name:
        raise exception.InvalidFlavorRequest(
            '%s %s: give the name of a [pci] alias from nova.conf, '
            'without ":" or ","' % (flag, errors.quoted(name)))


def _validate_board(request: FlavorRequest) -> None:
    """``--whole-board`` and ``--nvswitch-alias``: only together, 8 GPUs."""
    if not request.whole_board:
        if request.nvswitch_alias is not None:
            raise exception.InvalidFlavorRequest(
                '--nvswitch-alias %s: only with --whole-board'
                % errors.quoted(request.nvswitch_alias))
        return
    if request.gpus != BOARD_GPUS:
        raise exception.InvalidFlavorRequest(
            '--whole-board --gpus %d: a whole HGX board is %d GPUs and its '
            '%d NVSwitches; give --gpus %d' % (
                request.gpus, BOARD_GPUS, BOARD_NVSWITCHES, BOARD_GPUS))
    if request.free_trait:
        raise exception.InvalidFlavorRequest(
            '--free-trait: not with --whole-board (a whole board is no '
            'clique or partition of the host; its servers need every GPU '
            'and NVSwitch free, which placement counts itself)')
    _validate_alias('--nvswitch-alias', request.switch_alias)
    if request.switch_alias == request.alias:
        raise exception.InvalidFlavorRequest(
            '--nvswitch-alias %s: the GPUs\' alias; the NVSwitches need '
            'one of their own' % errors.quoted(request.switch_alias))


def validate(request: FlavorRequest) -> None:
    if not 2 <= request.gpus <= MAX_GPUS:
        raise exception.InvalidFlavorRequest(
            '--gpus %d: a P2P flavor has 2 to %d GPUs (a clique holds at '
            'most %d)' % (request.gpus, MAX_GPUS, MAX_GPUS))
    _validate_alias('--alias', request.alias)
    _validate_board(request)
    if request.name is not None:
        _validate_name(request.name)
    # Nova's API: vCPUs and RAM at least 1, disk at least 0 (a server
    # that boots from a volume has no root disk on the host).
    for flag, value, low in (('--vcpus', request.vcpu_count, 1),
                             ('--ram', request.ram, 1),
                             ('--disk', request.disk_gb, 0)):
        if value < low:
            raise exception.InvalidFlavorRequest('%s %d: must be at least %d'
                                                 % (flag, value, low))
        if value > MAX_FLAVOR_INT:
            raise exception.InvalidFlavorRequest(
                '%s %d: must be at most %d, Nova\'s limit'
                % (flag, value, MAX_FLAVOR_INT))
    bits = maxphysaddr_bits(request)
    if bits is not None and bits > pcihole64.MAX_PHYS_BITS:
        raise exception.InvalidFlavorRequest(
            'GPUs with a %s BAR (--bar-gib, else this host\'s largest) need '
            '%d guest address bits; QEMU allows %d to %d '
            '(hw:maxphysaddr_bits)' % (
                _size(max(request.gpu_bars or (0,))), bits,
                pcihole64.MIN_PHYS_BITS, pcihole64.MAX_PHYS_BITS))
    if not 1 <= request.numa_nodes <= request.gpus:
        raise exception.InvalidFlavorRequest(
            '--numa-nodes %d: between 1 and the number of GPUs (%d)'
            % (request.numa_nodes, request.gpus))
    # Only given values can be uneven: the defaults are rounded up.
    for flag, value in (('--vcpus', request.vcpu_count),
                        ('--ram', request.ram)):
        if value % request.numa_nodes:
            lower = value - value % request.numa_nodes
            raise exception.InvalidFlavorRequest(
                '%s %d does not split evenly over --numa-nodes %d (Nova '
                'gives each guest NUMA node the same share): give %s%d' % (
                    flag, value, request.numa_nodes,
                    '%d or ' % lower if lower else '',
                    lower + request.numa_nodes))


def properties(request: FlavorRequest) -> dict[str, str]:
    """The flavor's extra specs.

    A whole board asks for its NVSwitches too, and for no clique: the
    guest's own Fabric Manager gives its GPUs NVLink through the switches,
    so PCIe cliques (and the clique-size trait, which a board whose PCIe
    cliques are smaller than 8 lacks) do not apply.
    """
    alias = '%s:%d' % (request.alias, request.gpus)
    if request.whole_board:
        alias += ',%s:%d' % (request.switch_alias, BOARD_NVSWITCHES)
    specs = {
        'pci_passthrough:alias': alias,
        # With PCI in placement, Nova asks for each GPU in a numbered
        # request group of its own (two or more here), and without a
        # policy warns on every request before it picks 'none' itself:
        # 'none' is Nova's own choice, stated. ('isolate' would forbid two
        # groups one provider, such as two VFs of one PF for a NIC alias.)
        GROUP_POLICY_KEY: 'none',
        extra_specs.CLIQUE_KEY: extra_specs.CliqueMode.REQUIRED.value,
        extra_specs.NUMA_AFFINITY_KEY:
            extra_specs.NumaAffinity.REQUIRED.value,
        'trait:%s' % clique_trait(request.gpus): 'required',
        'trait:%s' % traits.GPU_NUMA_AFFINITY: 'required',
        'hw:cpu_policy': 'dedicated',
        'hw:numa_nodes': str(request.numa_nodes),
    }
    bits = maxphysaddr_bits(request)
    if bits is not None:
        # emulate: the bits are the flavor's whatever the CPU mode, and
        # Nova schedules to hosts whose CPUs have as many.
        specs[MAXPHYSADDR_MODE_KEY] = 'emulate'
        specs[MAXPHYSADDR_BITS_KEY] = str(bits)
    if request.free_trait:
        # Placement then returns only hosts where the server fits now
        # (doc/source/scheduling-scale.rst, "Hosts where it fits").
        specs['trait:%s' % traits.GPU_P2P_FREE[request.gpus]] = 'required'
    if request.whole_board:
        del specs[extra_specs.CLIQUE_KEY]
        del specs['trait:%s' % clique_trait(request.gpus)]
    return specs


def _size(size: int) -> str:
    return ('%d GiB' % (size // units.Gi) if size >= units.Gi
            else '%d MiB' % (size // units.Mi))


def _address_bits_note(request: FlavorRequest) -> str:
    """Why the flavor has hw:maxphysaddr_* or not, or how to size them."""
    hole = guest_hole(request)
    if hole is None:
        return (
            '# No NVIDIA GPU here to size the guest\'s 64-bit PCI hole by: '
            'large-BAR GPUs (such as 8 x 128 GiB)\n'
            '# need hw:maxphysaddr_mode=emulate and hw:maxphysaddr_bits. '
            'Run this on a GPU compute host, or give --bar-gib.')
    bars = '%d GPUs with %s BARs' % (
        request.gpus, _size(max(request.gpu_bars, default=0)))
    if hole.problem is None:
        return ('# %s fit the guest\'s %d physical address bits: no '
                'hw:maxphysaddr_* needed.'
                % (bars, pcihole64.QEMU_DEFAULT_PHYS_BITS))
    return (
        '# hw:maxphysaddr_*: %s need a %s 64-bit PCI hole, beyond the %d '
        'physical address bits\n'
        '# QEMU gives a guest CPU that is not the host\'s. nova-api takes '
        'these keys with nova-gpu-p2p installed.'
        % (bars, _size(hole.size), pcihole64.QEMU_DEFAULT_PHYS_BITS))


def commands(request: FlavorRequest) -> list[str]:
    """Shell lines: create the flavor, set its properties, notes."""
    validate(request)
    name = shlex.quote(request.flavor_name)
    lines = []
    if request.free_trait:
        # A required trait placement does not know fails the query (400)
        # instead of finding no host; until some host has had that many
        # GPUs free, none has reported it.
        lines.append('openstack --os-placement-api-version 1.6 trait create '
                     '%s' % traits.GPU_P2P_FREE[request.gpus])
    lines.append('openstack flavor create %s --vcpus %d --ram %d --disk %d'
                 % (name, request.vcpu_count, request.ram, request.disk_gb))
    props = ' \\\n'.join(
        '    --property %s=%s' % (key, shlex.quote(value))
        for key, value in properties(request).items())
    lines.append('openstack flavor set %s \\\n%s' % (name, props))
    lines.append(
        '# The image must use the q35 machine type (Nova\'s x86 default is '
        'pc), and UEFI for large-BAR GPUs:\n'
        '#   openstack image set --property hw_machine_type=q35 '
        '--property hw_firmware_type=uefi IMAGE')
    lines.append(_address_bits_note(request))
    if request.whole_board:
        lines.append(
            '# Whole board: for hosts whose Fabric Manager runs in full '
            'passthrough mode (FABRIC_MODE=0);\n'
            '# the guest gets the %d GPUs and %d NVSwitches and runs '
            'Fabric Manager (nvidia-fabricmanager) itself.'
            % (BOARD_GPUS, BOARD_NVSWITCHES))
    return lines


def whole_board_settings(request: FlavorRequest) -> list[str]:
    """The nova.conf lines that offer a board's NVSwitches to its flavor.

    No ``numa_policy``: Nova's default (legacy), as for the GPU alias.
    The switches sit on one host NUMA node, where the flavor's guest NUMA
    nodes, one per node of the board, give the server a cell.
    """
    ids = {'vendor_id': '%04x' % model.NVIDIA_VENDOR_ID,
           'product_id': '%04x' % NVSWITCH_PRODUCT_ID}
    return [
        '# Whole-board servers: nova-api and each HGX compute host whose '
        'Fabric Manager runs in full passthrough mode (FABRIC_MODE=0):',
        '[pci]',
        'alias = %s' % json.dumps(dict(name=request.switch_alias, **ids,
                                       device_type='type-PCI')),
        '# and on those compute hosts, beside the GPUs\' entries (the '
        'NVSwitches bound to vfio-pci):',
        'device_spec = %s' % json.dumps(ids),
        '',
    ]


def scheduler_settings() -> list[str]:
    """The nova.conf lines ``hw:gpu_p2p_clique=required`` is placed with.

    With GPUs in placement, nova-scheduler picks GPUs of one clique and the
    compute's claim follows; without, the compute refuses GPUs that are
    not one clique and the build is rescheduled. Lines of nova.conf
    (comments included), to be pasted under the hosts they name.
    """
    return [
        '# hw:gpu_p2p_clique=required: nova-scheduler picks free GPUs of '
        'one clique with these nova.conf settings',
        '# (see "Scheduling required flavors" in the nova-gpu-p2p '
        'documentation).',
        '# Each GPU compute host, then restart nova-compute (Nova cannot '
        'turn report_in_placement off again):',
        '[pci]',
        'report_in_placement = True',
        '# and, before broader device_spec entries, the lines that',
        '#   sudo nova-gpu-p2p topology --device-spec --config-file '
        '/etc/nova/nova.conf',
        '# prints: each GPU\'s clique trait and gpu_p2p_clique tag.',
        '',
        '# nova-api, nova-conductor and nova-scheduler, once every GPU '
        'compute host reports to placement:',
        '[filter_scheduler]',
        'pci_in_placement = True',
        '# nova-scheduler only; keep any other filters you enable:',
        'available_filters = %s' % NOVA_ALL_FILTERS,
        'available_filters = %s' % CLIQUE_FILTER,
        'enabled_filters = %s' % ','.join(NOVA_DEFAULT_FILTERS + P2P_FILTERS),
        'weight_classes = %s,%s' % (NOVA_ALL_WEIGHERS, CLIQUE_WEIGHER),
        '# and [scheduler] max_placement_results, with placement.conf\'s '
        'max_allocation_candidates,',
        '# at twice the compute nodes (see "Scheduling required flavors at '
        'scale").',
    ]
