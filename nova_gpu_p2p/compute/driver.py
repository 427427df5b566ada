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

"""The compute driver: Nova's libvirt driver plus GPU P2P awareness.

Nova loads it with ``[DEFAULT] compute_driver = gpu_p2p.GPUP2PLibvirtDriver``
(see the shim ``nova/virt/gpu_p2p.py``). Everything it decides is computed by
plain functions in this package; this class only connects them to Nova.
"""

from collections.abc import Callable
from collections.abc import Sequence
import time
from typing import Any

from nova import conf as nova_conf
from nova import exception as nova_exception
from nova.virt.libvirt import driver as libvirt_driver
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_gpu_p2p import claim_order
from nova_gpu_p2p.compute import action_events
from nova_gpu_p2p.compute import free_sizes
from nova_gpu_p2p.compute import live_migration
from nova_gpu_p2p.compute import outage
from nova_gpu_p2p import conf
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import driver_stat
from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.fabric import lifecycle
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.guest import metadata
from nova_gpu_p2p.guest import nova_guest
from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p import min_versions
from nova_gpu_p2p import native_thread
from nova_gpu_p2p import nova_fix
from nova_gpu_p2p import nova_signatures
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import fabricmanager
from nova_gpu_p2p.topology import host_cpu
from nova_gpu_p2p.topology import host_gpus as host_gpus_mod
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

conf.register_opts(CONF)


class HostCannotHonour(nova_exception.ComputeResourcesUnavailable):
    """This host cannot give the flavor what it requires; another may.

    Nova's compute manager turns it into a reschedule.
    """


class FlavorCannotBeHonoured(nova_exception.InvalidInput):
    """No host can: the flavor or image must change.

    Nova's compute manager aborts the build with this message as the
    instance fault, instead of trying other hosts. The fault keeps 255
    characters, after Nova's "Build of instance UUID aborted: ", so the
    message comes without InvalidInput's own prefix.
    """

    msg_fmt = '%(reason)s'


class GPUP2PLibvirtDriver(libvirt_driver.LibvirtDriver):
    """Nova's LibvirtDriver, with the host's GPU topology at hand."""

    def __init__(self, virtapi, read_only: bool = False) -> None:
        conf.validate(CONF)
        backends.validate(CONF)
        nova_signatures.check()
        super().__init__(virtapi, read_only=read_only)
        self._host_gpus: host_gpus_mod.HostGPUs | None = None
        self._device_trait_problems: list[str] = []
        self._partitions_seen: tuple[partitions_mod.FabricPartition, ...] = ()
        self._order_failed = False
        self._free_sizes = free_sizes.FreeSizes()
        self._outages = outage.Outages()
        self._rediscovery = outage.Retry(self.REDISCOVERY_INTERVAL_S)
        self._fabric = lifecycle.Lifecycle(
            lambda: nvfm.from_conf(CONF), self._fabric_partitions,
            self._running_devices, self._fm_session)
        LOG.info('nova-gpu-p2p driver loaded: topology_backend=%s, '
                 'p2p_level=%s, acs_policy=%s',
                 CONF.gpu_p2p.topology_backend, CONF.gpu_p2p.p2p_level,
                 CONF.gpu_p2p.acs_policy)

    @property
    def host_gpus(self) -> host_gpus_mod.HostGPUs:
        """The cached topology; discovered on first use."""
        if self._host_gpus is None:
            self.refresh_host_gpus()
        return self._host_gpus

    #: Discovery taking longer than this is logged. It takes about 0.1 s
    #: on a 500-function host, privsep included; the first may also start
    #: the privsep daemon (a second or two through rootwrap).
    DISCOVERY_BUDGET_S = 5.0

    #: While discovery failed for Fabric Manager, a start may discover
    #: again at most this often; the periodic update does regardless.
    REDISCOVERY_INTERVAL_S = 5.0

    def refresh_host_gpus(self) -> host_gpus_mod.HostGPUs:
        """Discover again, in a native thread: the greenthreads carry on.

        Under eventlet every greenthread of nova-compute shares one OS
        thread, and discovery (thousands of sysfs reads, NVML) never
        yields; :func:`native_thread.run` keeps the hub running meanwhile.
        """
        previous = self._host_gpus
        start = time.monotonic()
        try:
            found = native_thread.run(discovery.discover, CONF, previous)
        except Exception:  # the thread, not discovery: that never raises
            LOG.exception('GPU topology discovery could not run in a '
                          'native thread; keeping the previous topology '
                          '(discovering here when there is none yet)')
            found = previous or discovery.discover(CONF)
        elapsed = time.monotonic() - start
        if elapsed > self.DISCOVERY_BUDGET_S:
            LOG.warning('GPU topology discovery took %.2f s, more than its '
                        'budget of %.1f s (nova-compute went on meanwhile): '
                        'check for a slow sysfs or a stuck privsep daemon',
                        elapsed, self.DISCOVERY_BUDGET_S)
        self._host_gpus = found
        (self._outages.failed if found.error else self._outages.answered)()
        return found

    def _host_gpus_for_start(self) -> host_gpus_mod.HostGPUs:
        """The topology, discovered again if Fabric Manager failed it.

        Otherwise the host refused new builds until the next periodic
        update although Fabric Manager answered again. Never raises: any
        trouble keeps the cached topology, and its refusal.
        """
        host = self.host_gpus
        if (not host.error
                or not self._partitions_backend()
                or not self._rediscovery.due()):
            return host
        try:
            found = self.refresh_host_gpus()
        except Exception:
            LOG.exception('GPU P2P: discovery after a Fabric Manager outage '
                          'failed; keeping the cached topology')
            return host
        if not found.error:
            LOG.info('GPU P2P: Fabric Manager answers again: GPU topology '
                     'discovered, new builds are accepted')
        return found

    def get_available_resource(self, nodename):
        """Nova's periodic resource update: re-read the GPU topology too.

        GPUs get unbound, captures get replaced: once per period is often
        enough, and keeps discovery off the boot path. Partitions are
        reconciled first: a restarted Fabric Manager answers discovery
        only once told what runs. The resources carry the stat that tells
        the scheduler this driver runs here (:mod:`driver_stat`), and
        its PCI devices in the order of :meth:`_claim_ordered`.
        """
        self._fabric_quietly(self._fabric.reconcile)
        self.refresh_host_gpus()
        resources = super().get_available_resource(nodename)
        resources['stats'] = driver_stat.reported(resources.get('stats'))
        if 'pci_passthrough_devices' in resources:
            resources['pci_passthrough_devices'] = self._claim_ordered(
                resources['pci_passthrough_devices'])
        return resources

    def _claim_ordered(self, devices: str) -> str:
        """Nova's device list, GPUs grouped by partition or clique.

        So that the first free GPUs Nova's move claim takes on a host
        its tracker first saw with this order are one partition (clique)
        (:mod:`claim_order`). Any trouble reports Nova's order, logged
        once.
        """
        try:
            host = self.host_gpus
            if host.error:
                return devices
            groups = (tuple(p.gpus for p in host.topology.fabric_partitions)
                      or host.cliques.groups)
            found = jsonutils.loads(devices)
            keys = claim_order.group_keys(groups)
            result = claim_order.ordered(found, keys)
            if result == found:
                return devices
            return jsonutils.dumps(result)
        except Exception:
            if not self._order_failed:
                LOG.exception('GPU P2P: PCI devices reported in Nova\'s '
                              'order, not grouped by partition or clique')
            self._order_failed = True
            return devices

    def init_host(self, host):
        """Nova's start-up, then Fabric Manager's partitions reconciled.

        Stale ones are released before Nova restarts the servers of a
        rebooted host, each of which activates its own as it starts. No
        discovery has run yet: the partitions are those kept in
        ``[gpu_p2p] module_id_file`` (see :meth:`_fabric_partitions`).
        """
        super().init_host(host)
        self._fabric_quietly(self._fabric.reconcile)

    def _fabric_partitions(self) -> tuple[partitions_mod.FabricPartition, ...]:
        """The host's Fabric Manager partitions (none without it).

        While Fabric Manager is down, and discovery with it, the last
        known: a board's partitions never change. Until some discovery
        found them, those kept in ``[gpu_p2p] module_id_file``, so that a
        restarted nova-compute can tell a restarted Fabric Manager what
        runs without asking it; discovery only when none are kept.
        """
        if self._host_gpus is not None:
            found = self._host_gpus.topology.fabric_partitions
            if found:
                self._partitions_seen = found
        if not self._partitions_seen and self._partitions_backend():
            self._partitions_seen = fabricmanager.kept_partitions(CONF)
        if not self._partitions_seen and self._host_gpus is None:
            self._partitions_seen = self.host_gpus.topology.fabric_partitions
        return self._partitions_seen

    def _running_devices(self) -> dict[str, tuple[str, ...]]:
        """Instance UUID -> host PCI addresses, of each running domain."""
        guests = self._host.list_guests(only_running=True)
        return {guest.uuid: nova_guest.hostdev_addresses(guest.get_xml_desc())
                for guest in guests}

    def _fm_session(self, call: Callable[..., Any], *args: Any) -> Any:
        """A Fabric Manager session in a native thread; notes outages."""
        try:
            result = native_thread.run(call, *args)
        except exception.FmUnavailable:
            self._outages.failed()
            raise
        self._outages.answered()
        return result

    @staticmethod
    def _fabric_quietly(call) -> None:
        """Fabric Manager trouble is logged; nova-compute carries on."""
        try:
            call()
        except Exception:
            LOG.exception('GPU P2P: Fabric Manager partitions not '
                          'reconciled')

    def _create_guest(self, context, xml, instance, power_on=True,
                      pause=False, post_xml_callback=None):
        """Activate the instance's Fabric Manager partition, then start it.

        On an HGX host the GPUs idle on the ``nvidia`` driver; Nova's
        ``managed='yes'`` hostdevs have libvirt move them to vfio-pci as
        the domain starts (and back as it stops), and Fabric Manager must
        have their partition active by then (see
        :mod:`nova_gpu_p2p.fabric.lifecycle`). A new build whose
        partition cannot be activated goes to another host; an existing
        server starts anyway, reported as without NVLink.
        """
        if not (power_on or pause):
            return super()._create_guest(context, xml, instance,
                                         power_on, pause, post_xml_callback)
        new_build = nova_guest.is_new_build(instance)
        if not self._fabric_partitions() and new_build:
            self._host_gpus_for_start()
        if not self._fabric_partitions():
            unknown = self._partitions_unknown(instance)
            if unknown is not None and new_build:
                raise HostCannotHonour(reason='GPU P2P: ' + unknown)
            if unknown is not None:
                self._report_lost(context, instance, [unknown])
            return super()._create_guest(context, xml, instance,
                                         power_on, pause, post_xml_callback)
        required = extra_specs.requires_clique(instance.flavor.extra_specs)
        with self._fabric.starting(
                instance.uuid, nova_guest.hostdev_addresses(xml),
                exact_only=required and new_build) as activation:
            outcome = activation.outcome(new_build, required)
            if outcome.refusal is not None:
                LOG.error('GPU P2P: %s', outcome.refusal, instance=instance)
                raise HostCannotHonour(reason='GPU P2P: ' + outcome.refusal)
            if outcome.lost is not None:
                self._report_lost(context, instance, [outcome.lost])
            if outcome.note is not None:
                LOG.warning('GPU P2P: %s', outcome.note, instance=instance)
            return super()._create_guest(context, xml, instance,
                                         power_on, pause, post_xml_callback)

    @staticmethod
    def _partitions_backend() -> bool:
        """Whether the topology backend activates partitions for servers."""
        return backends.capabilities(
            CONF.gpu_p2p.topology_backend).partitions

    def _partitions_unknown(self, instance) -> str | None:
        """Why GPUs get no partition on a host whose FM never answered.

        None off Fabric Manager hosts and for servers without NVIDIA
        devices. Unknowns fail closed: such a GPU cannot run CUDA.
        """
        gpus = sorted(device.address for device in instance.pci_devices or ()
                      if device.vendor_id == model.NVIDIA_VENDOR_HEX)
        if not self._partitions_backend() or not gpus:
            return None
        return ('no Fabric Manager partition is known on this host (%s), so '
                'GPUs %s get none: no NVLink, and no CUDA until one holding '
                'them is active' % (self.host_gpus.error or 'none reported',
                                    ', '.join(gpus)))

    def _destroy(self, instance):
        """Nova's destroy, then release what no running domain holds."""
        super()._destroy(instance)
        self._fabric_quietly(self._fabric.release)

    def _libvirt_version(self) -> tuple[int, int, int]:
        return min_versions.unpack(self._host.get_connection().getLibVersion())

    def _qemu_version(self) -> tuple[int, int, int]:
        return min_versions.unpack(self._host.get_connection().getVersion())

    def p2p_traits(self) -> set[str]:
        """Our traits this host should carry now (none when disabled)."""
        host = self.host_gpus
        if not CONF.gpu_p2p.report_traits or host.error:
            return set()
        free = (self._free_sizes.traits(host, self._fabric_partitions(),
                                        self._host)
                if CONF.gpu_p2p.report_free_traits else set())
        return (traits.p2p_traits(host.topology, host.cliques) | free
                | traits.numa_affinity(host.topology,
                                       self._libvirt_version(),
                                       self._qemu_version()))

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        """Nova's provider tree, plus our traits on the compute node.

        Only the traits in :data:`nova_gpu_p2p.traits.OWNED` are added or
        removed; any other trait, an operator's included, is left alone.
        Runs on every periodic update, right after get_available_resource
        re-read the topology, so the traits follow the host.
        """
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        wanted = self.p2p_traits()
        stale = (traits.OWNED - wanted) & provider_tree.data(nodename).traits
        if stale:
            provider_tree.remove_traits(nodename, *stale)
        if wanted:
            provider_tree.add_traits(nodename, *wanted)
        if CONF.pci.report_in_placement:
            self._check_device_traits(provider_tree, nodename)

    def _check_device_traits(self, provider_tree, nodename: str) -> None:
        """Warn when a GPU's device provider or entry lacks its clique.

        Nova names a PCI device's provider ``<nodename>_<ADDRESS>`` and
        rewrites its traits from ``[pci] device_spec`` on every update, so
        this only checks what the operator configured (see
        :mod:`nova_gpu_p2p.device_spec_tags`); a problem is logged when it
        first appears, not every period.
        """
        ids = self.host_gpus.cliques.ids
        provider_traits = {}
        for address in ids:
            name = device_spec_tags.provider_name(nodename, address)
            if provider_tree.exists(name):
                provider_traits[address] = provider_tree.data(name).traits
        functions = self.host_gpus.topology.functions
        spec_tags = device_spec_tags.configured_tags(
            CONF.pci.device_spec,
            [(a, functions[a].vendor, functions[a].device) for a in ids])
        problems = device_spec_tags.topology_problems(
            self.host_gpus.topology, ids, provider_traits, spec_tags)
        for problem in problems:
            if problem not in self._device_trait_problems:
                LOG.warning('GPU P2P: %s', problem)
        self._device_trait_problems = problems

    def _host_phys_bits(self) -> int | None:
        maxphysaddr = self._host.get_capabilities().host.cpu.maxphysaddr
        return maxphysaddr.bits if maxphysaddr is not None else None

    def _get_guest_config(self, instance, network_info, image_meta,
                          disk_info, rescue=None, block_device_info=None,
                          context=None, *args, **kwargs):
        """Nova's guest config, plus cliques, expander buses and distances.

        Runs for every boot, hard reboot, resize, migration, unshelve,
        rebuild and evacuation, so the layout is regenerated each time
        from the flavor and the devices Nova claimed for this host. Only
        a new build is refused; an existing server gets what the host can
        give now, and the loss is reported (:meth:`_report_lost`).
        """
        guest = super()._get_guest_config(
            instance, network_info, image_meta, disk_info, rescue,
            block_device_info, context, *args, **kwargs)
        new_build = nova_guest.is_new_build(instance)
        try:
            request = extra_specs.parse(instance.flavor.extra_specs)
        except exception.InvalidExtraSpec as exc:
            if new_build:
                raise FlavorCannotBeHonoured(reason=str(exc)) from exc
            self._report_lost(context, instance, [str(exc)])
            return guest
        if not request.wanted:
            return guest
        host = self._host_gpus_for_start()
        plan = plan_mod.decide(
            request, nova_guest.instance_devices(guest, host.topology),
            host, nova_guest.read_facts(guest, instance,
                                        self._libvirt_version(),
                                        self._host_phys_bits(),
                                        self._qemu_version(),
                                        host_cpu.read()),
            plan_mod.Options.from_conf(CONF))
        if plan.refusal is not None:
            message = 'GPU P2P: %s' % plan.refusal.message
            LOG.error(message, instance=instance)
            if plan.refusal.reschedule:
                raise HostCannotHonour(reason=message)
            raise FlavorCannotBeHonoured(reason=plan.refusal.message)
        for note in plan.notes:
            LOG.warning('GPU P2P: %s', note, instance=instance)
        for line in plan.info:
            LOG.info('GPU P2P: %s', line, instance=instance)
        if plan.lost:
            self._report_lost(context, instance, plan.lost)
        LOG.info(metadata.summary(plan), instance=instance)
        return nova_guest.apply(guest, plan)

    def _guest_add_pci_devices(self, guest, instance):
        """Nova's, over the devices on this node only (:mod:`nova_fix`)."""
        super()._guest_add_pci_devices(guest, nova_fix.on_its_node(instance))

    def _report_lost(self, context, instance, lost: Sequence[str]) -> None:
        """Say, once, what ``required`` asked for and a server goes without.

        One WARNING in nova-compute's log and a failed instance action
        event whose details the tenant sees with ``openstack server event
        show`` (Nova keeps 255 characters of them: the reason comes first).
        During a Fabric Manager or discovery outage, once per outage.
        """
        if not self._outages.first_report(instance.uuid):
            LOG.debug('GPU P2P: already reported in this outage: %s',
                      ' | '.join(lost), instance=instance)
            return
        LOG.warning('GPU P2P: the server keeps running without what its '
                    'flavor requires (a new build would be refused on this '
                    'host): %s', ' | '.join(lost), instance=instance)
        action_events.record(context, instance, action_events.LOST,
                             'GPU P2P layout degraded: %s'
                             % ' | '.join(lost))

    def check_can_live_migrate_source(self, context, instance,
                                      dest_check_data,
                                      block_device_info=None):
        """Refuse to live-migrate a server whose devices we laid out.

        Nova's live migration of PCI devices rewrites only the hostdev
        source addresses: the cliques, expander buses, NUMA distances and
        decision record would reach the destination unchanged, describing
        the source host's devices. A cold migration rebuilds them.
        """
        reason = live_migration.refusal(instance)
        if reason is not None:
            LOG.warning(reason, instance=instance)
            action_events.record(
                context, instance, action_events.LIVE_MIGRATION, reason)
            raise nova_exception.MigrationPreCheckError(reason=reason)
        return super().check_can_live_migrate_source(
            context, instance, dest_check_data,
            block_device_info=block_device_info)
