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


def switches(topology: model.HostTopology) -> list[model.PCIFunction]:
    """The host's NVSwitch functions, by address."""
    return sorted((f for f in topology.functions.values()
                   if f.is_nvswitch), key=lambda f: f.address)


def check_nvswitch(topology: model.HostTopology) -> list[result.Check]:
    """NVSwitch fabric the PCIe-only backends cannot see."""
    found = [f.address for f in switches(topology)]
    if not found or topology.nvlink_pairs or topology.p2p_overrides:
        return []
    return [result.warning(
        'NVSwitch',
        '%d NVSwitch functions (%s) but no NVLink in the topology: '
        'cliques follow PCIe only, and are smaller than the fabric allows'
        % (len(found), ', '.join(found)),
        'with Fabric Manager in shared NVSwitch mode, set [gpu_p2p] '
        'topology_backend = fabricmanager; otherwise topology_backend = '
        'static with the "nvidia-smi topo -p2p r" matrix in '
        'static_topology_file')]


def check_bindings(topology: model.HostTopology,
                   driver: str | None) -> list[result.Check]:
    """Each NVSwitch on ``driver``: Fabric Manager's, or the guest's.

    Nothing where the driver they need is not known.
    """
    found = switches(topology)
    if driver is None or not found:
        return []
    why = ('Fabric Manager on this host drives them' if driver == 'nvidia'
           else 'a whole-board server takes them with its GPUs')
    wrong = [f for f in found if f.driver != driver]
    if not wrong:
        return [result.success('NVSwitch', '%d NVSwitch functions on %s: %s'
                               % (len(found), driver, why))]
    return [result.failure(
        f.address, 'NVSwitch bound to %s, not %s: %s' % (
            f.driver or 'no driver', driver, why),
        'driverctl set-override %s %s' % (f.address, driver))
        for f in wrong]
