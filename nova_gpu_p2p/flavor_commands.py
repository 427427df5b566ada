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

What a P2P flavor needs, in one place: the PCI alias request, our two
extra specs, the placement trait for the clique size, Nova's CPU pinning
and NUMA node count, the image properties it relies on, and the nova.conf
settings that let nova-scheduler place ``hw:gpu_p2p_clique=required`` on
GPUs of one clique.
"""

import dataclasses
import shlex

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p import traits

MAX_GPUS = 16
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
P2P_FILTERS = ('PciPassthroughFilter', 'NUMATopologyFilter',
               CLIQUE_FILTER.rpartition('.')[2])


class InvalidFlavorRequest(ValueError):
    """The asked-for flavor cannot be a P2P flavor as given."""


@dataclasses.dataclass(frozen=True)
class FlavorRequest:
    gpus: int
    alias: str
    numa_nodes: int = 1
    name: str | None = None
    vcpus: int | None = None
    ram_mb: int | None = None
    disk_gb: int = 100

    @property
    def flavor_name(self) -> str:
        return self.name or 'gpu-p2p.%dx' % self.gpus

    @property
    def vcpu_count(self) -> int:
        # Enough dedicated CPUs to feed each GPU, split evenly over cells.
        return 8 * self.gpus if self.vcpus is None else self.vcpus

    @property
    def ram(self) -> int:
        return 65536 * self.gpus if self.ram_mb is None else self.ram_mb


def clique_trait(gpus: int) -> str:
    """The smallest clique-size trait that guarantees ``gpus`` in one."""
    return traits.GPU_P2P_CLIQUE[min(size for size in traits.CLIQUE_SIZES
                                     if size >= gpus)]


def validate(request: FlavorRequest) -> None:
    if not 2 <= request.gpus <= MAX_GPUS:
        raise InvalidFlavorRequest(
            '--gpus %d: a P2P flavor has 2 to %d GPUs (a clique holds at '
            'most %d)' % (request.gpus, MAX_GPUS, MAX_GPUS))
    if not request.alias or ':' in request.alias or ',' in request.alias:
        raise InvalidFlavorRequest(
            '--alias %r: give the name of a [pci] alias from nova.conf, '
            'without ":" or ","' % request.alias)
    if request.name is not None and (
            not request.name or not request.name.isprintable()):
        raise InvalidFlavorRequest(
            '--name %r: give a name of printable characters' % request.name)
    for flag, value in (('--vcpus', request.vcpu_count),
                        ('--ram', request.ram), ('--disk', request.disk_gb)):
        if value < 1:
            raise InvalidFlavorRequest('%s %d: must be at least 1'
                                       % (flag, value))
    if not 1 <= request.numa_nodes <= request.gpus:
        raise InvalidFlavorRequest(
            '--numa-nodes %d: between 1 and the number of GPUs (%d)'
            % (request.numa_nodes, request.gpus))
    if request.vcpu_count % request.numa_nodes:
        raise InvalidFlavorRequest(
            '--vcpus %d does not split evenly over %d NUMA nodes'
            % (request.vcpu_count, request.numa_nodes))
    if request.ram % request.numa_nodes:
        raise InvalidFlavorRequest(
            '--ram %d does not split evenly over %d NUMA nodes'
            % (request.ram, request.numa_nodes))


def properties(request: FlavorRequest) -> dict[str, str]:
    """The flavor's extra specs."""
    return {
        'pci_passthrough:alias': '%s:%d' % (request.alias, request.gpus),
        extra_specs.CLIQUE_KEY: extra_specs.CliqueMode.REQUIRED.value,
        extra_specs.NUMA_AFFINITY_KEY:
            extra_specs.NumaAffinity.REQUIRED.value,
        'trait:%s' % clique_trait(request.gpus): 'required',
        'trait:%s' % traits.GPU_NUMA_AFFINITY: 'required',
        'hw:cpu_policy': 'dedicated',
        'hw:numa_nodes': str(request.numa_nodes),
    }


def commands(request: FlavorRequest) -> list[str]:
    """Shell lines: create the flavor, set its properties, notes."""
    validate(request)
    name = shlex.quote(request.flavor_name)
    lines = ['openstack flavor create %s --vcpus %d --ram %d --disk %d' % (
        name, request.vcpu_count, request.ram, request.disk_gb)]
    props = ' \\\n'.join(
        '    --property %s=%s' % (key, shlex.quote(value))
        for key, value in properties(request).items())
    lines.append('openstack flavor set %s \\\n%s' % (name, props))
    lines.append(
        '# The image must use the q35 machine type (Nova\'s x86 default is '
        'pc), and UEFI for large-BAR GPUs:\n'
        '#   openstack image set --property hw_machine_type=q35 '
        '--property hw_firmware_type=uefi IMAGE\n'
        '# Large-BAR GPUs need the guest\'s physical address bits: '
        '[libvirt] cpu_mode = host-passthrough, or\n'
        '#   openstack --os-compute-api-version 2.85 flavor set %s '
        '--property hw:maxphysaddr_mode=emulate '
        '--property hw:maxphysaddr_bits=46' % name)
    return lines


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
    ]
