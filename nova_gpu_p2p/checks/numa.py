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

"""NUMA: GPUs that cannot get a NUMA-bound guest expander bus."""

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import model


def check_numa(topology: model.HostTopology) -> list[result.Check]:
    """GPUs that cannot get a NUMA-bound guest expander bus."""
    checks = []
    cpus = {node.id: node.cpus for node in topology.numa_nodes}
    unknown = [g.address for g in topology.gpus() if g.numa_node is None]
    if unknown:
        checks.append(result.warning(
            'NUMA',
            'firmware reports no NUMA node (-1) for %s: counted as SYS to '
            'every other GPU, and left on the guest root bus under '
            'hw:gpu_numa_affinity' % ', '.join(unknown),
            'update the system firmware or enable its NUMA / SRAT '
            'settings (for example NPS or SNC) so the ACPI tables give '
            'each root complex a proximity domain'))
    cpuless = [g for g in topology.gpus() if g.numa_node is not None
               and g.numa_node in cpus and not cpus[g.numa_node]]
    for gpu in cpuless:
        checks.append(result.warning(
            gpu.address,
            'on NUMA node %d, which has no CPUs: no guest NUMA cell can be '
            'on that node, so hw:gpu_numa_affinity leaves it on the guest '
            'root bus' % gpu.numa_node,
            'check the firmware\'s NUMA settings; keep this GPU out of '
            'NUMA-affine flavors'))
    return checks
