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

"""Nova's own in-process cloud, with our driver as the compute driver."""

import copy
import json
import os
import sysconfig

import fixtures
from lxml import etree
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base as libvirt_base

from nova_gpu_p2p.compute import driver
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder

#: libvirt and QEMU versions the GPU hosts report, as on a current
#: distribution: Nova shapes its XML by them.
LIBVIRT_VERSION = 10000000
QEMU_VERSION = 8002000
GPU_ALIAS = 'gpu'
NIC_ALIAS = 'nic'


def api_paste_config() -> str:
    """Where Nova's api-paste.ini is in this environment.

    Nova's test config expects it beside the nova package, as in a source
    checkout; a nova wheel installs it under the environment's etc/nova/.
    """
    candidates = [
        os.path.join(sysconfig.get_path('data'), 'etc', 'nova',
                     'api-paste.ini'),
        os.path.join(sysconfig.get_path('purelib'), 'etc', 'nova',
                     'api-paste.ini'),
    ]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise RuntimeError('Nova\'s api-paste.ini not found in %s' % candidates)


class _PasteConfigMixin:

    def _setup_services(self):
        self.flags(api_paste_config=api_paste_config(), group='wsgi')
        super()._setup_services()


class APITestBase(_PasteConfigMixin, integrated_helpers._IntegratedTestBase):
    """Real API, conductor, scheduler and placement; Nova's fake driver."""

    ADMIN_API = True
    microversion = 'latest'


class GPUP2PServersTestBase(_PasteConfigMixin, libvirt_base.ServersTestBase):
    """Nova's libvirt functional base, with our driver loaded by name."""

    ADMIN_API = True
    microversion = 'latest'

    def _setup_compute_service(self):
        # Compute services are started by each test, once it has described
        # the host (see ServersTestBase.start_compute).
        self.flags(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')


def pci_info(topology: model.HostTopology) -> fakelibvirt.HostPCIDevicesInfo:
    """Nova's fake libvirt node devices for the host's GPUs and NICs.

    The test double knows PCI domain 0 only; functions elsewhere are left
    out (no functional test host has any).
    """
    info = fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=0, num_vfs=0)
    for function in sorted(topology.functions.values(),
                           key=lambda f: f.address):
        if not (function.is_nvidia_gpu or function.is_nic):
            continue
        domain, bus, rest = function.address.split(':')
        slot, fn = rest.split('.')
        if int(domain, 16):
            continue
        info.add_device(
            'PCI', int(bus, 16), int(slot, 16), int(fn),
            iommu_group=function.iommu_group or 0,
            numa_node=function.numa_node,
            vend_id='%04x' % function.vendor,
            prod_id='%04x' % function.device,
            driver_name=function.driver or 'vfio-pci')
    return info


#: Host CPUs of every fake GPU host: Nova's libvirt functional base mocks
#: 16 online CPUs, and hosts in one test share [compute] cpu_dedicated_set.
FAKE_CPUS = 8


def host_info(topology: model.HostTopology) -> fakelibvirt.HostInfo:
    """Nova's fake host with the same NUMA nodes, fewer CPUs.

    Every node gets an equal share of :data:`FAKE_CPUS`; Nova's host NUMA
    topology (not the sysfs tree) then says which CPUs belong to which
    node, as on a real host where both agree.
    """
    nodes = len(topology.numa_nodes)
    return fakelibvirt.HostInfo(cpu_nodes=nodes, cpu_sockets=1,
                                cpu_cores=FAKE_CPUS // nodes,
                                cpu_threads=1, kB_mem=64 * 1024 * 1024)


class GPUHostsTestBase(GPUP2PServersTestBase):
    """Compute hosts built from the topology corpus, GPUs and all.

    Each compute reads its own corpus host: the sysfs tree for our
    driver, and Nova's libvirt test double with the same PCI devices,
    NUMA nodes and CPUs for Nova's PCI tracker and CPU pinning.
    """

    #: Computes of one corpus host read one sysfs tree, written once
    #: (:meth:`start_gpu_compute`): for clouds of hundreds of computes
    #: whose trees no test changes.
    SHARED_TREES = False

    def setUp(self):
        super().setUp()
        self.sysfs_roots = {}
        #: Corpus host -> (tree root, topology) with :attr:`SHARED_TREES`.
        self._shared_trees: dict[str, tuple[str, model.HostTopology]] = {}
        self.topologies = {}
        #: Hostname -> [gpu_p2p] options that compute discovers with
        #: (topology_backend, ...), on top of the test's own.
        self.gpu_p2p_options: dict[str, dict[str, object]] = {}
        original = driver.GPUP2PLibvirtDriver.refresh_host_gpus
        roots = self.sysfs_roots

        def refresh(compute_driver):
            # One process runs every compute: read this compute's tree.
            hostname = compute_driver._host.get_hostname()
            root = roots.get(hostname)
            if root is None:
                return original(compute_driver)
            self.flags(sysfs_root=root, group='gpu_p2p')
            options = self.gpu_p2p_options.get(hostname)
            if not options:
                return original(compute_driver)
            # Only for this discovery: the other computes keep theirs.
            saved = {name: nova_conf.CONF.gpu_p2p[name] for name in options}
            self.flags(group='gpu_p2p', **options)
            try:
                return original(compute_driver)
            finally:
                self.flags(group='gpu_p2p', **saved)

        self.useFixture(fixtures.MockPatchObject(
            driver.GPUP2PLibvirtDriver, 'refresh_host_gpus', refresh))
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            sysfs.read_config_direct))
        self.defined_xml: dict[str, str] = {}
        self._record_defined_xml()
        self.pci_aliases: set[tuple[str, int, int]] = set()
        # Nova's default machine type for x86 is still "pc": a P2P image
        # says q35, as the operator docs tell.
        self.q35_image = self.q35_image_with()
        # As GPU clouds run: the guest gets the host's physical address
        # bits, so large-BAR GPUs fit in the 64-bit PCI hole.
        self.flags(cpu_mode='host-passthrough', group='libvirt')

    def q35_image_with(self, **properties: str) -> str:
        """A q35 image (plus ``properties``) in Nova's Glance fixture."""
        image = copy.deepcopy(self.glance.image1)
        image.pop('id')
        image['properties'] = dict(image['properties'],
                                   hw_machine_type='q35', **properties)
        return self.glance.create(None, image)['id']

    def boot(self, flavor_id: str, image: str | None = None,
             expected_state: str = 'ACTIVE', **kwargs) -> dict:
        return self._create_server(
            flavor_id=flavor_id, image_uuid=image or self.q35_image,
            networks='none', expected_state=expected_state, **kwargs)

    def _add_pci_aliases(self, topology: model.HostTopology) -> None:
        """PCI aliases ``gpu`` and ``nic`` for this host's products too."""
        for function in topology.functions.values():
            if function.is_nvidia_gpu:
                self.pci_aliases.add((GPU_ALIAS, function.vendor,
                                      function.device))
            elif function.is_nic:
                self.pci_aliases.add((NIC_ALIAS, function.vendor,
                                      function.device))
        specs = [{'vendor_id': '%04x' % vendor, 'product_id': '%04x' % device}
                 for _, vendor, device in sorted(self.pci_aliases)]
        self.flags(
            device_spec=[json.dumps(spec) for spec in specs],
            alias=[json.dumps(dict(spec, name=name, device_type='type-PCI'))
                   for (name, _, _), spec in zip(sorted(self.pci_aliases),
                                                 specs)],
            group='pci')

    def start_gpu_compute(self, hostname: str, corpus_host: str,
                          gpu_p2p_options: dict[str, object] | None = None,
                          **kwargs) -> model.HostTopology:
        """Start a compute on a corpus host.

        :param gpu_p2p_options: ``[gpu_p2p]`` options of this compute's
            topology discovery only (see :attr:`gpu_p2p_options`); guest
            configs are built with the test's own.
        """
        if gpu_p2p_options:
            self.gpu_p2p_options[hostname] = dict(gpu_p2p_options)
        root, topology = self._corpus_tree(corpus_host)
        self.flags(sysfs_root=root, group='gpu_p2p')
        self._add_pci_aliases(topology)
        self.sysfs_roots[hostname] = root
        self.topologies[hostname] = topology
        info = host_info(topology)
        self.flags(cpu_dedicated_set='0-%d' % (FAKE_CPUS - 1),
                   cpu_shared_set=None, group='compute')
        kwargs.setdefault('libvirt_version', LIBVIRT_VERSION)
        kwargs.setdefault('qemu_version', QEMU_VERSION)
        self.start_compute(hostname, host_info=info,
                           pci_info=pci_info(topology), **kwargs)
        return topology

    def _corpus_tree(self, corpus_host: str
                     ) -> tuple[str, model.HostTopology]:
        """A sysfs tree of the corpus host and its topology.

        The compute's driver discovers its own from the tree again when
        it starts; this one is for Nova's test double and the test.
        """
        shared = self._shared_trees.get(corpus_host)
        if shared:
            return shared
        tree = self.useFixture(sysfs_builder.SysfsTree(
            hosts.HOSTS[corpus_host]))
        self.flags(sysfs_root=tree.root, group='gpu_p2p')
        found = tree.root, sysfs.SysfsBackend(
            nova_conf.CONF, read_config=sysfs.read_config_direct).discover()
        if self.SHARED_TREES:
            self._shared_trees[corpus_host] = found
        return found

    def _record_defined_xml(self) -> None:
        """Keep the XML each domain was last defined with, by UUID.

        The test double keeps only a few parsed fields of a definition and
        its XMLDesc rebuilds a canned document; the tests need exactly what
        Nova passed to libvirt.
        """
        original = fakelibvirt.Domain.__init__
        defined = self.defined_xml

        def init(domain, connection, xml, *args, **kwargs):
            original(domain, connection, xml, *args, **kwargs)
            defined[etree.fromstring(xml).findtext('uuid')] = xml

        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, '__init__', init))

    def domain_xml(self, server: dict) -> etree._Element:
        """The domain XML Nova last defined for the server."""
        return etree.fromstring(self.defined_xml[server['id']])

    def gpu_flavor(self, gpus: int, numa_nodes: int = 1, nics: int = 0,
                   vcpus: int = 4, extra_specs: dict | None = None
                   ) -> str:
        aliases = ['%s:%d' % (GPU_ALIAS, gpus)] if gpus else []
        if nics:
            aliases.append('%s:%d' % (NIC_ALIAS, nics))
        specs = {'hw:cpu_policy': 'dedicated',
                 'hw:numa_nodes': str(numa_nodes)}
        if aliases:
            specs['pci_passthrough:alias'] = ','.join(aliases)
        specs.update(extra_specs or {})
        return self._create_flavor(vcpu=vcpus, memory_mb=2048,
                                   extra_spec=specs)


def _source_address(hostdev: etree._Element) -> str:
    """A hostdev's host PCI address; libvirt numbers hex or decimal."""
    source = hostdev.find('./source/address')
    return '%04x:%02x:%02x.%x' % tuple(
        int(source.get(name), 0)
        for name in ('domain', 'bus', 'slot', 'function'))


def hostdevs(xml: etree._Element) -> dict[str, etree._Element]:
    """PCI hostdevs by host address."""
    return {_source_address(dev): dev
            for dev in xml.findall('./devices/hostdev[@type="pci"]')}
