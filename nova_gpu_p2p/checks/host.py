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

"""Every check of a host, in the order an operator fixes things."""

from collections.abc import Iterable
from collections.abc import Mapping

from nova_gpu_p2p.checks import acs
from nova_gpu_p2p.checks import consumer_gpus
from nova_gpu_p2p.checks import fabric as fabric_mod
from nova_gpu_p2p.checks import firmware
from nova_gpu_p2p.checks import guest_links
from nova_gpu_p2p.checks import numa
from nova_gpu_p2p.checks import nvswitch
from nova_gpu_p2p.checks import p2p_level
from nova_gpu_p2p.checks import placement
from nova_gpu_p2p.checks import result
from nova_gpu_p2p.checks import scheduler_settings
from nova_gpu_p2p.checks import versions as versions_mod
from nova_gpu_p2p.checks import vfio
from nova_gpu_p2p.topology import consumer_gpus as consumer_gpus_mod
from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p import traits as traits_mod


def check_findings(findings: Iterable[str]) -> list[result.Check]:
    """What discovery found odd, one row (the ACS row: unreadable config)."""
    odd = [finding for finding in findings
           if finding != sysfs.UNREADABLE_CONFIG]
    return [result.warning('discovery', '; '.join(odd))] if odd else []


def host_checks(topology: model.HostTopology,
                versions: versions_mod.HostVersions,
                level: link_class.LinkClass,
                acs_policy: link_class.AcsPolicy,
                clique_map: Mapping[str, int] | None = None,
                sysfs_root: str | None = '/sys',
                root: str = '/',
                bindings: model.HostTopology | None = None,
                pci: placement.PciSettings | None = None,
                fabric: fabric_mod.FabricFacts | None = None,
                kinds: consumer_gpus_mod.GpuKinds | None = None,
                scheduler: scheduler_settings.SchedulerSettings | None = None,
                host_cpu: dict | None = None) -> list[result.Check]:
    """Every check, in the order an operator fixes things.

    :param bindings: where driver and IOMMU group facts come from when the
        topology backend does not read sysfs (static, nvml); defaults to
        ``topology``.
    :param pci: nova.conf's ``[pci]`` settings; None when no nova.conf
        was read, and then scheduling is not judged.
    :param fabric: an HGX host's Fabric Manager facts; None elsewhere, or
        for a capture.
    :param kinds: which GPUs are consumer GPUs; None: every GPU may have a
        clique, and no row for it.
    :param scheduler: nova-scheduler's settings from the nova.conf read;
        None when none was read.
    :param host_cpu: this host's CPU as NCCL reads it; None for a capture.
    """
    bindings = bindings if bindings is not None else topology
    barred = kinds.barred if kinds is not None else {}
    cliques = host_cliques.assign(topology, level, acs_policy, clique_map,
                                  barred)
    numa_traits: set[str] = set()
    if versions.libvirt is not None and versions.qemu is not None:
        numa_traits = traits_mod.numa_affinity(topology, versions.libvirt,
                                               versions.qemu)
    checks = versions_mod.check_versions(versions, topology,
                                         cliques.largest() >= 2)
    checks.append(firmware.check_firmware(root))
    checks.append(vfio.check_iommu(bindings, sysfs_root, root))
    checks.extend(vfio.check_bindings(
        bindings, idle_on_nvidia=fabric is not None and fabric.shared))
    checks.extend(acs.check_acs(topology, acs_policy, level))
    checks.extend(numa.check_numa(topology))
    checks.extend(guest_links.check_guest_links(topology, versions,
                                                host_cpu))
    if fabric is None:
        checks.extend(nvswitch.check_nvswitch(topology))
    else:
        checks.extend(fabric_mod.check_fabric(fabric, topology, bindings,
                                              pci))
    if kinds is not None:
        checks.extend(consumer_gpus.check_consumer_gpus(kinds))
    checks.extend(p2p_level.check_p2p_level(
        topology, level, acs_policy, clique_map, numa_traits, sysfs_root,
        barred))
    if pci is not None:
        checks.extend(placement.check_placement(topology, cliques, pci))
    if scheduler is not None:
        checks.extend(scheduler_settings.check_scheduler(scheduler))
    # The consumer GPUs line says why those GPUs have no clique.
    said = set(host_cliques.why_barred(barred))
    checks.extend(check_findings(
        f for f in topology.findings + cliques.findings if f not in said))
    return checks


def unread_host_checks(versions: versions_mod.HostVersions, error: str,
                       root: str = '/',
                       fabric: fabric_mod.FabricFacts | None = None
                       ) -> list[result.Check]:
    """What can be judged when the GPU topology could not be read."""
    checks = versions_mod.check_versions(
        versions, model.HostTopology(functions={}), False)
    checks.append(firmware.check_firmware(root))
    checks.append(result.failure(
        'GPU topology', error,
        'fix [gpu_p2p] topology_backend and its options, then run '
        '"nova-gpu-p2p topology"'))
    if fabric is not None:
        checks.extend(fabric_mod.check_unread(fabric))
    return checks
