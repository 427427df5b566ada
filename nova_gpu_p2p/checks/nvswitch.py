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

"""NVSwitch: a fabric the PCIe-only topology backends cannot see."""

from nova_gpu_p2p.checks import result
from nova_gpu_p2p.topology import model


def check_nvswitch(topology: model.HostTopology) -> list[result.Check]:
    """NVSwitch fabric the PCIe-only backends cannot see."""
    switches = sorted(
        f.address for f in topology.functions.values()
        if f.vendor == model.NVIDIA_VENDOR_ID and not f.is_gpu
        and f.base_class == 0x06 and not f.is_bridge)
    if not switches or topology.nvlink_pairs or topology.p2p_overrides:
        return []
    return [result.warning(
        'NVSwitch',
        '%d NVSwitch functions (%s) but no NVLink in the topology: '
        'cliques follow PCIe only, and are smaller than the fabric allows'
        % (len(switches), ', '.join(switches)),
        'set [gpu_p2p] topology_backend = static with the '
        '"nvidia-smi topo -p2p r" matrix in static_topology_file')]
