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

"""The ``fabricmanager`` backend: HGX boards, NVLink within partitions.

On an HGX board (GPUs joined through NVSwitches) a guest gets NVLink only
between the GPUs of the NVIDIA Fabric Manager partition activated for it,
so two GPUs count as NVLink-joined exactly when some partition holds both.
The PCI tree, NUMA nodes and ACS come from sysfs, as with the ``sysfs``
backend; the partitions from Fabric Manager, which names GPUs by module
ID; each GPU's module ID from the static file's ``module_id``, or else
from NVML and the answers kept in ``[gpu_p2p] module_id_file``. That
file keeps the board's partition table too (:func:`kept_partitions`).
"""

import dataclasses

from oslo_log import log as logging

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import module_ids
from nova_gpu_p2p.topology import nvml
from nova_gpu_p2p.topology import static
from nova_gpu_p2p.topology import sysfs

LOG = logging.getLogger(__name__)


class FabricManagerBackend(sysfs.SysfsBackend):
    """The sysfs topology with Fabric Manager's partitions and NVLink."""

    capabilities = backends.Capabilities(partitions=True, module_ids=True)

    def discover(self) -> model.HostTopology:
        topology = super().discover()
        table = {partition.id: partition.modules
                 for partition in supported_partitions(self.conf)}
        _keep(table, self.conf.gpu_p2p.module_id_file)
        modules, findings = self._modules(
            [gpu.address for gpu in topology.gpus()])
        found, dropped = partitions.to_addresses(table.items(), modules)
        return dataclasses.replace(
            topology, fabric_partitions=found,
            nvlink_pairs=partitions.nvlink_pairs(found),
            gpu_brands=nvml.read_brands(topology),
            findings=topology.findings + findings + dropped)

    def _modules(self, gpus: list[str]
                 ) -> tuple[dict[int, str], tuple[str, ...]]:
        """Module ID -> GPU address, and findings.

        The static file's ``module_id`` values when it gives any, since
        the operator wrote them; else NVML and the kept answers.
        """
        given = _static_modules(self.conf)
        if not given:
            return module_ids.discover(self.conf.gpu_p2p.module_id_file,
                                       gpus)
        missing = sorted(set(gpus) - given.keys())
        findings = ()
        if missing:
            findings = (
                'no module_id is given in %s for %s, so the Fabric Manager '
                'partitions holding %s are left out'
                % (self.conf.gpu_p2p.static_topology_file,
                   module_ids.gpu_list(missing),
                   module_ids.it(missing)),)
        return ({module_id: address for address, module_id in given.items()
                 if address in gpus}, findings)


def _static_modules(conf) -> dict[str, int]:
    """GPU address -> the ``module_id`` the static topology file gives."""
    path = conf.gpu_p2p.static_topology_file
    return static.module_ids(static.read(path), path) if path else {}


def _keep(table: dict[int, frozenset[int]], path: str) -> None:
    """Keep Fabric Manager's partition table in ``path`` when it changed.

    Only for :func:`kept_partitions`: a failed write is logged and
    discovery goes on with Fabric Manager's answer. An empty answer never
    replaces a kept table, as a board's partitions never change.
    """
    try:
        if not table or table == module_ids.load_partitions(path):
            return
    except exception.BadModuleIdFile:
        pass  # replaced by Fabric Manager's answer, below
    problem = module_ids.save_partitions(path, table)
    if problem:
        LOG.warning('GPU P2P: the Fabric Manager partition table is not '
                    'kept in [gpu_p2p] module_id_file, so a restart of '
                    'Fabric Manager cannot be told what runs unless '
                    'nova-compute still knows: %s', problem)


def kept_partitions(conf) -> tuple[partitions.FabricPartition, ...]:
    """The partitions kept in ``[gpu_p2p] module_id_file``, by address.

    For when Fabric Manager cannot be asked: a restarted one answers no
    query until told which partitions run. Asks neither Fabric Manager
    nor NVML; a file that cannot be used is logged and gives none.
    """
    path = conf.gpu_p2p.module_id_file
    try:
        table = module_ids.load_partitions(path)
        given = _static_modules(conf) if table else {}
    except (exception.BadModuleIdFile, exception.TopologyError) as exc:
        LOG.warning('GPU P2P: no kept Fabric Manager partitions: %s', exc)
        return ()
    if not given:
        kept, problem = module_ids.load(path)
        if problem:
            LOG.warning('GPU P2P: no kept Fabric Manager partitions: %s',
                        problem)
        # One GPU per module: merging with nothing drops any duplicates.
        given, _ = module_ids.merge({}, kept)
    found, _ = partitions.to_addresses(
        table.items(),
        {module_id: address for address, module_id in given.items()})
    return found


def supported_partitions(conf) -> tuple[nvfm.Partition, ...]:
    """Every partition Fabric Manager supports on this board.

    Raises TopologyError naming what to check when Fabric Manager cannot
    be asked.
    """
    group = conf.gpu_p2p
    try:
        with nvfm.from_conf(conf) as fabric_manager:
            return fabric_manager.partitions()
    except exception.FmLibraryMissing as exc:
        raise exception.TopologyError(
            '%s; [gpu_p2p] fabric_manager_library = %s must name NVIDIA '
            'Fabric Manager\'s client library, libnvfm.so.1'
            % (exc, group.fabric_manager_library))
    except (exception.FmError, ValueError) as exc:
        raise exception.TopologyError(
            'cannot read the partitions of NVIDIA Fabric Manager at %s '
            '([gpu_p2p] fabric_manager_address): %s; check that '
            'nvidia-fabricmanager runs there in shared NVSwitch mode '
            '(FABRIC_MODE=1 in its fabricmanager.cfg)'
            % (group.fabric_manager_address, exc))
