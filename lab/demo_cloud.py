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

"""One HGX-like host in Nova's in-process cloud, for the demo and bench.

Not a test module (stestr collects ``test_*`` only): ``lab/demo.py`` and
``lab/bench.py`` run :class:`HGXCloud` methods by name, because Nova's
functional fixtures only work inside a testtools ``TestCase``. Each method
hands what it found to :attr:`HGXCloud.sink`, which the tool prints.

The host is the corpus' ``hgx-8gpu-nvswitch-2numa`` PCI tree (eight H100s
and four NICs under two root complexes, one per NUMA node, and four
NVSwitches). Its PCI tree alone puts the GPUs of different NUMA nodes at
``SYS``, so the driver uses the ``fabricmanager`` backend: NVIDIA Fabric
Manager's partitions, from the stand-in ``libnvfm.so.1``
(:mod:`tests.fixtures.fake_fm`, an H100 board), give NVLink within each
partition, and the whole-board partition makes the eight one clique. FM
names GPUs by module ID, which the backend reads through NVML, simulated
here (:class:`FakeNvml`, modules not in PCI order as on HGX boards). The
driver activates the server's partition before libvirt starts its domain;
:func:`fake_fabric.record_starts` notes where in FM's call log each start
fell.
"""

from collections.abc import Callable
import cProfile
import dataclasses
import gc
import logging
import pstats
import statistics
import sys
import time
import types
from unittest import mock

from lxml import etree
from nova import conf as nova_conf
from nova import context as nova_context
from nova import objects
from nova.virt.libvirt import blockinfo
from nova.virt.libvirt import driver as libvirt_driver

from lab import pci_xml
from nova_gpu_p2p.compute import driver as gpu_driver
from nova_gpu_p2p import conf
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import module_ids
from nova_gpu_p2p.topology import sysfs
from tests.cloud import fake_fabric
from tests.cloud import nova_cloud as base
from tests.fixtures import qemu_override

CORPUS_HOST = 'hgx-8gpu-nvswitch-2numa'
HOSTNAME = 'hgx-1'
GPUS = 8
NICS = 4
NUMA_NODES = 2
VCPUS = 8
EXTRA_SPECS = {
    'hw:gpu_p2p_clique': 'required',
    'hw:gpu_numa_affinity': 'required',
}
CONF = nova_conf.CONF
#: Shown by the tools: which topology backend decides the cliques, and how.
BACKEND_NOTE = (
    'fabricmanager: the PCI tree, NUMA nodes and NICs come from the host\'s '
    'sysfs (the corpus tree); NVLink comes from NVIDIA Fabric Manager\'s '
    'partitions (shared NVSwitch mode), here a stand-in libnvfm.so.1 built '
    'from tests/fixtures/nvfm with an H100 board\'s partitions: GPUs of one '
    'partition reach each other over the NVSwitches (link class NV), and '
    'the whole-board partition holds all 8. Fabric Manager names GPUs by '
    'module ID, which NVML (simulated here) tells while a GPU is on the '
    'nvidia driver; the backend keeps the answers in [gpu_p2p] '
    'module_id_file for the GPU\'s time on vfio-pci.')
#: H100 SXM: 18 NVLinks, 5 + 4 + 4 + 5 of them to the four NVSwitches.
NVLINKS_PER_SWITCH = (5, 4, 4, 5)


def nvswitches(topology: model.HostTopology) -> list[str]:
    """NVIDIA functions that are no GPU: the NVSwitches."""
    return sorted(f.address for f in topology.functions.values()
                  if f.vendor == model.NVIDIA_VENDOR_ID
                  and not f.is_nvidia_gpu)


class FakeNvml(types.ModuleType):
    """Just enough of pynvml for the nvml backend; handles are addresses.

    A real NVML sees only GPUs bound to the NVIDIA driver: on a host whose
    GPUs are bound to vfio-pci, use the static backend with a matrix
    captured before binding (doc/source/static-topology.rst) instead.
    """

    NVML_FEATURE_DISABLED = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__('pynvml')
        self.gpus: list[str] = []
        self.link_to: list[str] = []

    @staticmethod
    def _bus_id(address: str) -> str:
        return '0000' + address.upper()

    def nvmlInit(self) -> None:
        """Find the GPUs and NVSwitches in the host's (fake) sysfs tree."""
        topology = sysfs.SysfsBackend(
            CONF, read_config=sysfs.read_config_direct).discover()
        self.gpus = [gpu.address for gpu in topology.gpus()]
        switches = nvswitches(topology)
        self.link_to = [switches[index]
                        for index, count in enumerate(NVLINKS_PER_SWITCH)
                        for _ in range(count)]

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return self.gpus[index]

    def nvmlDeviceGetPciInfo(self, handle: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(busId=self._bus_id(handle))

    def nvmlDeviceGetNvLinkState(self, handle: str, link: int) -> int:
        return self.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: str, link: int
                                         ) -> types.SimpleNamespace:
        return types.SimpleNamespace(busId=self._bus_id(self.link_to[link]))

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: str,
                                            link: int) -> int:
        return self.NVML_NVLINK_DEVICE_TYPE_SWITCH

    def nvmlDeviceGetModuleId(self, handle: str) -> int:
        return fake_fabric.MODULE_IDS[handle]


@dataclasses.dataclass
class Found:
    """What one run saw; the tools format it."""

    topology: model.HostTopology
    #: Host GPU address -> the host's clique ID, from discovery.
    host_cliques: dict[str, int | None]
    #: Host NUMA node -> its CPUs, as Nova's (fake) libvirt host reports.
    host_node_cpus: dict[int, list[int]]
    extra_specs: dict[str, str]
    server: dict
    xml: etree._Element
    #: The compute driver class Nova loaded, module and name.
    driver: str
    #: The ``[DEFAULT] compute_driver`` Nova loaded it by.
    compute_driver: str
    #: (libvirt, QEMU) versions the host reports, as integers.
    versions: tuple[int, int]
    #: The effective [gpu_p2p] options.
    options: dict[str, object]
    timings: dict | None = None
    #: Our functions by cumulative time, when the bench profiled them.
    hotspots: list[dict] | None = None
    #: Fabric Manager's call log, one ``<call> [<argument>] <status>`` a
    #: line, and where libvirt started the server's domain in it.
    fm_calls: list[str] = dataclasses.field(default_factory=list)
    domain_starts: list[int] = dataclasses.field(default_factory=list)
    #: Partition IDs Fabric Manager has active now.
    fm_active: set[int] = dataclasses.field(default_factory=set)
    #: GPU address -> HGX module ID, as the backend kept them in
    #: ``[gpu_p2p] module_id_file``.
    module_ids: dict[str, int] = dataclasses.field(default_factory=dict)


def cliques(xml: etree._Element) -> dict[str, int]:
    """Host GPU address -> the clique ID QEMU is told, read from the XML."""
    by_alias = qemu_override.cliques_by_alias(xml)
    result = {}
    for hostdev in xml.iterfind('./devices/hostdev'):
        alias = hostdev.find('alias')
        if alias is not None and alias.get('name') in by_alias:
            host = pci_xml.address(hostdev.find('./source/address'))
            result[host] = by_alias[alias.get('name')]
    return result


@dataclasses.dataclass
class ExpanderBus:
    index: int
    bus_nr: int
    guest_node: int
    #: (root port index, root port slot, host address of its device)
    ports: list[tuple[int, int, str | None]]


def expander_buses(xml: etree._Element) -> list[ExpanderBus]:
    """Each pcie-expander-bus, its root ports and the device on each."""
    on_bus: dict[int, str] = {}
    for hostdev in xml.iterfind('./devices/hostdev'):
        address = hostdev.find('./address')
        if address is not None and address.get('bus') is not None:
            on_bus[pci_xml.number(address.get('bus'))] = pci_xml.address(
                hostdev.find('./source/address'))
    controllers = xml.findall("./devices/controller[@type='pci']")
    result = []
    for bus in controllers:
        if bus.get('model') != 'pcie-expander-bus':
            continue
        index = int(bus.get('index'))
        ports = []
        for port in controllers:
            address = port.find('address')
            if (port.get('model') == 'pcie-root-port'
                    and address is not None
                    and pci_xml.number(address.get('bus')) == index):
                ports.append((int(port.get('index')),
                              pci_xml.number(address.get('slot')),
                              on_bus.get(int(port.get('index')))))
        result.append(ExpanderBus(
            index=index, bus_nr=int(bus.find('target').get('busNr')),
            guest_node=int(bus.findtext('./target/node')), ports=ports))
    return result


@dataclasses.dataclass
class GuestCell:
    id: int
    vcpus: str
    #: Host NUMA node(s) of its memory, from <numatune>.
    host_nodes: str
    #: vCPU -> host CPUs it is pinned to, from <cputune>.
    pinning: dict[int, str]
    distances: dict[int, int]


def _cpu_set(text: str) -> list[int]:
    cpus = []
    for part in text.split(','):
        low, _, high = part.partition('-')
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def guest_cells(xml: etree._Element) -> list[GuestCell]:
    """Nova's guest NUMA cells with their vCPU pinning, from the XML."""
    pins = {int(pin.get('vcpu')): pin.get('cpuset')
            for pin in xml.iterfind('./cputune/vcpupin')}
    nodes = {memnode.get('cellid'): memnode.get('nodeset')
             for memnode in xml.iterfind('./numatune/memnode')}
    cells = []
    for cell in xml.iterfind('./cpu/numa/cell'):
        vcpus = _cpu_set(cell.get('cpus'))
        cells.append(GuestCell(
            id=int(cell.get('id')), vcpus=cell.get('cpus'),
            host_nodes=nodes.get(cell.get('id'), '?'),
            pinning={vcpu: pins.get(vcpu, '-') for vcpu in vcpus},
            distances={int(s.get('id')): int(s.get('value'))
                       for s in cell.iterfind('./distances/sibling')}))
    return cells


def measure_pair(ours: Callable[[], object], stock: Callable[[], object],
                 rounds: int = 7, number: int = 20) -> dict:
    """Median time per call of two callables, interleaved in one run.

    Both run in every round, in alternating order, so both meet the same
    machine state (caches, clock, other load) and their ratio is fair even
    when absolute times drift during the run.
    """
    samples: dict[str, list[float]] = {'ours': [], 'stock': []}
    ours()
    stock()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for index in range(rounds):
            order = [('ours', ours), ('stock', stock)]
            if index % 2:
                order.reverse()
            for name, func in order:
                start = time.perf_counter()
                for _ in range(number):
                    func()
                samples[name].append((time.perf_counter() - start) / number)
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    ours_s = statistics.median(samples['ours'])
    stock_s = statistics.median(samples['stock'])
    return {'ours_seconds': ours_s, 'stock_seconds': stock_s,
            'ratio': ours_s / stock_s, 'rounds': rounds,
            'calls_per_round': number,
            'ours_samples': samples['ours'],
            'stock_samples': samples['stock']}


def _short(filename: str) -> str:
    """A module path from the package on, wherever it is installed."""
    if '/site-packages/' in filename:
        return filename.rsplit('/site-packages/', 1)[1]
    if '/nova_gpu_p2p/' in filename:
        return 'nova_gpu_p2p/' + filename.rsplit('/nova_gpu_p2p/', 1)[1]
    return filename


def _profile(func: Callable[[], object], calls: int) -> dict:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        func()
    profile.disable()
    return pstats.Stats(profile).stats


def hotspots(ours: Callable[[], object], stock: Callable[[], object],
             calls: int = 100, top: int = 14) -> list[dict]:
    """Where our extra time goes: our functions, to_xml and the two configs.

    Per call of ``ours``, under cProfile (which inflates small functions):
    cumulative and self time of each, and the cumulative time of the same
    function when ``stock`` runs, so that Nova's share is told apart.
    """
    ours_stats = _profile(ours, calls)
    stock_stats = _profile(stock, calls)
    rows = []
    for key, (_, ncalls, tottime, cumtime, _) in ours_stats.items():
        filename, line, name = key
        mine = '/nova_gpu_p2p/' in filename and '/tests/' not in filename
        if not mine and name not in ('to_xml', '_get_guest_config'):
            continue
        short = _short(filename)
        stock_cumtime = stock_stats.get(key, (0, 0, 0, 0, 0))[3]
        rows.append({'function': '%s:%d(%s)' % (short, line, name),
                     'calls': ncalls / calls,
                     'cumulative_us': cumtime / calls * 1e6,
                     'self_us': tottime / calls * 1e6,
                     'stock_cumulative_us': stock_cumtime / calls * 1e6})
    rows.sort(key=lambda row: -row['cumulative_us'])
    return rows[:top]


def spawn_arguments(case: base.GPUHostsTestBase, hostname: str,
                    server_id: str) -> tuple:
    """What Nova's spawn passes to _get_guest_xml, built the same way.

    (context, instance, network_info, image_meta, disk_info,
    block_device_info) of a server on compute ``hostname``; shared with
    the decision-quality benchmark so both time the same arguments.
    """
    ctxt = nova_context.get_admin_context()
    instance = objects.Instance.get_by_uuid(
        ctxt, server_id,
        expected_attrs=['flavor', 'numa_topology', 'pci_devices',
                        'pci_requests', 'system_metadata', 'info_cache',
                        'resources', 'device_metadata'])
    block_device_info = case.computes[
        hostname].manager._get_instance_block_device_info(ctxt, instance)
    image_meta = objects.ImageMeta.from_instance(instance)
    disk_info = blockinfo.get_disk_info(
        CONF.libvirt.virt_type, instance, image_meta, block_device_info)
    return (ctxt, instance, instance.get_network_info(), image_meta,
            disk_info, block_device_info)


class HGXCloud(base.GPUHostsTestBase):
    """An 8-GPU HGX-like host and one server with all its GPUs and NICs."""

    #: Receives a :class:`Found` per run; the tool running us sets it.
    sink: Callable[[Found], None] = staticmethod(lambda found: None)
    #: Told each step while Nova works (the demo shows them).
    progress: Callable[[str], None] = staticmethod(lambda step: None)
    #: Timing parameters for :meth:`bench_guest_xml`.
    rounds = 7
    number = 20
    #: Profile our driver when the ratio is above this.
    goal = 1.10

    def setUp(self) -> None:
        self.progress('starting Nova\'s API, conductor, scheduler and '
                      'placement...')
        super().setUp()
        self.fm = fake_fabric.fabric_manager(self)
        self.domain_starts = fake_fabric.record_starts(self, self.fm)
        # The backend imports pynvml at every discovery.
        patcher = mock.patch.dict(sys.modules, {'pynvml': FakeNvml()})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.progress('starting nova-compute with the driver over the HGX '
                      'host: discovery, Fabric Manager, placement traits...')
        self.start_gpu_compute(HOSTNAME, CORPUS_HOST)
        self.compute_driver = self.computes[HOSTNAME].driver
        self.flavor_id = self.gpu_flavor(
            GPUS, numa_nodes=NUMA_NODES, nics=NICS, vcpus=VCPUS,
            extra_specs=EXTRA_SPECS)
        self.progress('booting the %d-GPU server: scheduler, PCI claim, '
                      'partition activation, guest XML, libvirt...' % GPUS)
        self.server = self.boot(self.flavor_id)
        self.progress('the server is %s' % self.server['status'])

    def found(self) -> Found:
        drv = self.compute_driver
        host = drv.host_gpus
        cells = drv._host.get_capabilities().host.topology.cells
        return Found(
            topology=host.topology,
            host_cliques=dict(host.cliques.ids),
            host_node_cpus={cell.id: sorted(cpu.id for cpu in cell.cpus)
                            for cell in cells},
            extra_specs=self.api.api_get(
                '/flavors/%s/os-extra_specs' % self.flavor_id
            ).body['extra_specs'],
            server=self.server,
            xml=self.domain_xml(self.server),
            driver='%s.%s' % (type(drv).__module__, type(drv).__qualname__),
            compute_driver=CONF.compute_driver,
            versions=(drv._host.get_connection().getLibVersion(),
                      drv._host.get_connection().getVersion()),
            options={opt.dest: CONF.gpu_p2p[opt.dest]
                     for _, opts in conf.list_opts() for opt in opts},
            fm_calls=self.fm.calls(), domain_starts=list(self.domain_starts),
            fm_active=self.fm.active(),
            module_ids=module_ids.load(CONF.gpu_p2p.module_id_file)[0])

    def demo(self) -> None:
        """The server is ACTIVE (setUp waited): report what was built."""
        self.assertEqual('ACTIVE', self.server['status'])
        self.sink(self.found())

    def _spawn_arguments(self) -> tuple:
        """What Nova's spawn passes to _get_guest_xml, built the same way."""
        return spawn_arguments(self, HOSTNAME, self.server['id'])

    def bench_guest_xml(self) -> None:
        """Guest XML generation: our _get_guest_config against Nova's.

        Both run on the same driver object with the same arguments, each
        followed by ``to_xml()`` as in Nova's ``_get_guest_xml``, so the
        difference is exactly what our override adds. Logging is at INFO,
        as nova-compute runs without ``debug``: Nova's test fixture would
        otherwise format every debug message of both.
        """
        drv = self.compute_driver
        ctxt, instance, network_info, image_meta, disk_info, bdi = (
            self._spawn_arguments())

        def build(config: Callable) -> Callable[[], str]:
            def run() -> str:
                return config(drv, instance, network_info, image_meta,
                              disk_info, None, bdi, ctxt).to_xml()
            return run

        ours = build(gpu_driver.GPUP2PLibvirtDriver._get_guest_config)
        stock = build(libvirt_driver.LibvirtDriver._get_guest_config)
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.INFO)
        self.addCleanup(root.setLevel, level)
        ours_xml, stock_xml = ours(), stock()
        self.assertIn('pcie-expander-bus', ours_xml)
        self.assertIn('x-nv-gpudirect-clique', ours_xml)
        self.assertNotIn('pcie-expander-bus', stock_xml)
        self.assertNotIn('x-nv-gpudirect-clique', stock_xml)
        result = measure_pair(ours, stock, self.rounds, self.number)
        result.update(ours_xml_bytes=len(ours_xml),
                      stock_xml_bytes=len(stock_xml))
        found = self.found()
        found.timings = result
        if result['ratio'] > self.goal:
            found.hotspots = hotspots(ours, stock)
        self.sink(found)
