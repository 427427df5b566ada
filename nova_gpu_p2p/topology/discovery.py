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

"""Discovery as nova-compute and the CLI run it: backend, then cliques.

Never raises: a failed discovery logs one clear error and yields a host
with no GPUs, so nova-compute carries on with Nova's normal behaviour and
reports no P2P traits.
"""

from oslo_config import cfg
from oslo_log import log as logging

from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import consumer_gpus
from nova_gpu_p2p.topology import host_cliques as cliques_mod
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_ids

LOG = logging.getLogger(__name__)


def evaluate(topology: model.HostTopology, conf: cfg.ConfigOpts,
             level: link_class.LinkClass | None = None) -> host_gpus.HostGPUs:
    """Apply ``[gpu_p2p]`` (level, ACS policy, clique_map) to a topology.

    Reads the PCI ID database once, for which GPUs may have a clique.
    """
    group = conf.gpu_p2p
    kinds = gpu_kinds(topology, conf)
    return host_gpus.HostGPUs(
        topology=topology, kinds=kinds,
        cliques=cliques_mod.assign(
            topology, level or link_class.LinkClass[group.p2p_level],
            link_class.AcsPolicy(group.acs_policy),
            dict(group.clique_map), kinds.barred))


def gpu_kinds(topology: model.HostTopology,
              conf: cfg.ConfigOpts) -> consumer_gpus.GpuKinds:
    """Which GPUs are consumer GPUs, and which may have no clique."""
    group = conf.gpu_p2p
    return consumer_gpus.judge(topology, pci_ids.read(group.pci_ids_file),
                               group.allow_consumer_gpu_cliques,
                               tuple(group.trusted_gpu_models))


def discover(conf: cfg.ConfigOpts,
             previous: host_gpus.HostGPUs | None = None) -> host_gpus.HostGPUs:
    """Discover now; log only what changed since ``previous``.

    Runs on every periodic resource update, so an unchanged problem is not
    logged again every minute.
    """
    name = conf.gpu_p2p.topology_backend
    try:
        result = evaluate(backends.load(name, conf).discover(), conf)
    except Exception as exc:
        if previous is not None and previous.error == str(exc):
            return previous
        LOG.error('GPU topology discovery with [gpu_p2p] topology_backend '
                  '= %s failed: %s. Guests keep Nova\'s normal layout and '
                  'this host reports no GPU P2P traits until the next '
                  'periodic update succeeds.', name, exc)
        return host_gpus.HostGPUs(
            topology=model.HostTopology(functions={}),
            cliques=cliques_mod.Cliques(groups=(), ids={}), error=str(exc))
    known = set()
    if previous is not None:
        known = set(previous.topology.findings + previous.cliques.findings)
    for finding in result.topology.findings + result.cliques.findings:
        if finding not in known:
            LOG.warning('GPU topology: %s', finding)
    _log_identities(result.kinds,
                    previous.kinds if previous is not None else None)
    return result


def _log_identities(kinds: consumer_gpus.GpuKinds,
                    previous: consumer_gpus.GpuKinds | None) -> None:
    """Which rule decided each GPU's kind, at start and when it changes."""
    before = previous.models if previous is not None else {}
    for address, gpu in sorted(kinds.models.items()):
        if before.get(address) != gpu:
            LOG.info('GPU %s (%s) is a %s GPU: %s%s', address, gpu.label,
                     gpu.kind.value, gpu.rule,
                     '; to let it have a clique: %s' % gpu.lift
                     if gpu.lift and not kinds.allowed else '')
