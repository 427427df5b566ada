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

"""Corpus hosts in Nova's in-process cloud, for ``tools/bench.py``.

Not a test module (stestr collects ``test_*`` only). For one corpus host,
:meth:`CorpusBenchCloud.decision_quality` boots an instance with all the
host's GPUs and one with half, and builds each instance's domain XML four
ways, from the same spawn arguments (:func:`demo_cloud.spawn_arguments`):

``stock``
    Nova's ``LibvirtDriver._get_guest_config``, as without this project.
``wrapper``
    The QEMU wrapper script's default: Nova's XML, and every NVIDIA GPU in
    clique 0. The script adds ``x-nv-gpudirect-clique=0`` to QEMU's
    ``-device`` arguments behind libvirt's back; here the same semantics
    are written as libvirt XML (an alias per GPU hostdev and a
    ``<qemu:override>`` entry), built with this project's config classes.
``sidecar``
    The KubeVirt sidecar recipe: Nova's XML plus one ``pxb-pcie`` per host
    NUMA node, with the devices of that node on root ports below it, and
    no cliques. The recipe writes the *host* node number into ``<node>``:
    it assumes guest node N is host node N, which is wrong wherever Nova
    maps guest cell 0 to host node 1 (or the guest has fewer cells than
    the host has nodes), and then the guest is told the wrong node.
``ours``
    ``GPUP2PLibvirtDriver._get_guest_config`` with default options.
``ours+agent``
    The same XML, with the guest agent in the guest: NCCL there reads the
    topology file the agent writes from the XML's fw_cfg description
    (:func:`decision_quality.nccl_with_agent`); only the
    ``nccl_host_class`` metric can differ from ``ours``.

:meth:`CorpusBenchCloud.scale` times ours against stock on the 16-GPU,
8-node host for growing GPU and NUMA node counts.
"""

from collections.abc import Callable
import itertools
import logging

from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import driver as libvirt_driver

from harness import corpus_xml
from harness import decision_quality
from harness import demo_cloud
from harness import nova_cloud as base
from nova_gpu_p2p import driver as gpu_driver
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import expander_buses
from nova_gpu_p2p.guest import nova_guest
from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p.topology import model

STRATEGIES = ('stock', 'wrapper', 'sidecar', 'ours')
#: ``ours`` with the guest agent: a row of its own, from ours' XML.
WITH_AGENT = 'ours+agent'
SIZES = ('all', 'half')
#: The instance asks for what our driver can do without refusing.
EXTRA_SPECS = {corpus_xml.CLIQUE_KEY: 'auto',
               corpus_xml.AFFINITY_KEY: 'preferred'}
SCALE_HOST = 'large-16gpu-8numa'
#: (GPUs, guest NUMA nodes): two GPUs per node, then eight GPUs on
#: 1, 2, 4 and 8 nodes.
GPU_SERIES = ((1, 1), (2, 1), (4, 2), (8, 4), (16, 8))
NODE_SERIES = ((8, 1), (8, 2), (8, 4), (8, 8))


def _stripped(guest: vconfig.LibvirtConfigGuest, plan: plan_mod.GuestPlan,
              nova: vconfig.LibvirtConfigGuest):
    """Applied as the driver would, without our decision record."""
    result = nova_guest.apply(guest, plan)
    result.metadata = list(nova.metadata)
    return result


def wrapper_config(guest: vconfig.LibvirtConfigGuest,
                   topology: model.HostTopology):
    """Nova's config with every NVIDIA GPU in clique 0 (see module doc)."""
    devices = nova_guest.instance_devices(guest, topology)
    plan = plan_mod.GuestPlan(
        request=extra_specs.parse({}), devices=tuple(devices),
        cliques={d.address: 0 for d in devices if d.nvidia_gpu})
    return _stripped(guest, plan, guest)


def sidecar_config(guest: vconfig.LibvirtConfigGuest,
                   topology: model.HostTopology):
    """Nova's config plus a pxb-pcie per host node, ``<node>`` = host node.

    Every passthrough device with a known host node goes below its node's
    bus; devices without one stay on the root bus, as in the recipe.
    """
    devices = [d for d in nova_guest.instance_devices(guest, topology)
               if d.known and d.numa_node is not None]
    used = {d.index for d in guest.devices
            if isinstance(d, vconfig.LibvirtConfigGuestController)
            and d.type == 'pci' and d.index is not None}
    layout = expander_buses.layout(
        devices, {node.id: node.id for node in topology.numa_nodes},
        expander_buses.Grouping.NUMA, used)
    plan = plan_mod.GuestPlan(request=extra_specs.parse({}),
                              devices=tuple(devices), buses=layout)
    return _stripped(guest, plan, guest)


def shape(facts: corpus_xml.HostFacts, size: str) -> dict:
    """GPUs, NICs, guest nodes, vCPUs and flavor keys of one instance.

    Guest nodes: the fewest host nodes with CPUs that hold its GPUs (all
    GPU-bearing ones where none suffice); Nova's default PCI NUMA policy
    where some choice of that many nodes holds all its devices, else
    ``preferred``, so that the boot reaches the driver.
    """
    gpus = len(facts.gpus) if size == 'all' else max(1, len(facts.gpus) // 2)
    nics = (len(facts.nics) if size == 'all'
            else max(1, len(facts.nics) // 2)) if facts.nics else 0
    return _shape(facts, gpus, nics)


def _shape(facts: corpus_xml.HostFacts, gpus: int, nics: int,
           guest_nodes: int | None = None) -> dict:
    per_node = {node: sum(facts.gpu_node[a] == node for a in facts.gpus)
                for node in facts.cpu_nodes}
    if guest_nodes is None:
        guest_nodes, held = 0, 0
        for node, count in sorted(per_node.items(), key=lambda i: -i[1]):
            if held >= gpus or not count:
                break
            guest_nodes, held = guest_nodes + 1, held + count
        guest_nodes = max(1, guest_nodes)
    specs = dict(EXTRA_SPECS)
    if not _fits_locally(facts, gpus, nics, guest_nodes):
        specs[corpus_xml.PCI_POLICY_KEY] = 'preferred'
    per_cell = min(corpus_xml.CPUS_PER_CELL, base.FAKE_CPUS // facts.all_nodes)
    return {'gpus': gpus, 'nics': nics, 'guest_nodes': guest_nodes,
            'vcpus': guest_nodes * per_cell, 'specs': specs}


def _fits_locally(facts: corpus_xml.HostFacts, gpus: int, nics: int,
                  guest_nodes: int) -> bool:
    """Whether Nova's legacy PCI NUMA policy can place the devices."""
    for nodes in itertools.combinations(facts.cpu_nodes, guest_nodes):
        near = set(nodes) | {None}
        if (sum(facts.gpu_node[a] in near for a in facts.gpus) >= gpus
                and sum(facts.nic_node.get(a) in near
                        for a in facts.nics) >= nics):
            return True
    return False


def _with_agent(ours: dict, xml: str,
                truth: decision_quality.HostTruth) -> dict:
    """Ours' metrics, NCCL's view taken with the guest agent's file.

    Where the agent cannot run (not installed, or it fails), that metric
    is n/a and the reason is kept.
    """
    found = {'metrics': dict(ours['metrics']), 'xml_bytes': ours['xml_bytes']}
    try:
        share = decision_quality.nccl_with_agent(
            xml, truth, decision_quality.run_guest_agent)
    except (ImportError, RuntimeError) as exc:
        share = decision_quality.Share(0, 0)
        found['agent_error'] = str(exc)
    found['metrics']['nccl_host_class'] = share.as_dict()
    return found


class CorpusBenchCloud(corpus_xml.CorpusXMLMixin, base.GPUHostsTestBase):
    """One corpus host; the four strategies' XML, or ours against stock."""

    #: Receives one dict per instance; the tool running us sets it.
    sink: Callable[[dict], None] = staticmethod(lambda found: None)
    corpus_host = 'hgx-8gpu-nvswitch-2numa'
    #: Timing parameters for :meth:`scale`.
    rounds = 7
    number = 10

    def setUp(self) -> None:
        super().setUp()
        # As nova-compute runs without debug: Nova's test fixture would
        # otherwise format every debug message of both drivers.
        root = logging.getLogger()
        self.addCleanup(root.setLevel, root.level)
        root.setLevel(logging.INFO)

    def _boot(self, facts: corpus_xml.HostFacts, want: dict) -> dict:
        flavor = self.gpu_flavor(want['gpus'], numa_nodes=want['guest_nodes'],
                                 nics=want['nics'], vcpus=want['vcpus'],
                                 extra_specs=want['specs'])
        server = self.api.post_server({'server': self._build_server(
            image_uuid=self.q35_image, flavor_id=flavor, networks='none')})
        server = self._wait_for_build(server)
        if server['OS-EXT-SRV-ATTR:host']:
            self._wait_for_compute(server)
        return server

    def _builders(self, facts: corpus_xml.HostFacts, server: dict
                  ) -> tuple[dict[str, Callable[[], str]], object]:
        """Each strategy's XML build for the server, and its instance."""
        drv = self.computes[facts.name].driver
        topology = self.topologies[facts.name]
        ctxt, instance, network_info, image_meta, disk_info, bdi = (
            demo_cloud.spawn_arguments(self, facts.name, server['id']))

        def stock_config():
            return libvirt_driver.LibvirtDriver._get_guest_config(
                drv, instance, network_info, image_meta, disk_info, None,
                bdi, ctxt)

        def ours() -> str:
            return gpu_driver.GPUP2PLibvirtDriver._get_guest_config(
                drv, instance, network_info, image_meta, disk_info, None,
                bdi, ctxt).to_xml()

        return {
            'stock': lambda: stock_config().to_xml(),
            'wrapper': lambda: wrapper_config(stock_config(),
                                              topology).to_xml(),
            'sidecar': lambda: sidecar_config(stock_config(),
                                              topology).to_xml(),
            'ours': ours,
        }, instance

    def decision_quality(self) -> None:
        """All and half the host's GPUs: four strategies' metrics each."""
        facts = self.start_corpus_host(self.corpus_host)
        topology = self.topologies[facts.name]
        truth = decision_quality.topology_truth(facts.expected, topology)
        for size in SIZES:
            want = shape(facts, size)
            record = {'host': facts.name, 'size': size,
                      'gpus': want['gpus'], 'nics': want['nics'],
                      'guest_nodes': want['guest_nodes'],
                      'flavor_specs': want['specs'],
                      'limits': list(facts.limits)}
            server = self._boot(facts, want)
            if server['status'] != 'ACTIVE':
                record['error'] = server['fault']['message']
                self.sink(record)
                continue
            builders, instance = self._builders(facts, server)
            record['host_cells'] = [c.id for c in
                                    instance.numa_topology.cells]
            record['pci_devices'] = sorted(
                d.address for d in instance.pci_devices)
            record['strategies'] = {}
            for name in STRATEGIES:
                xml = builders[name]()
                record['strategies'][name] = {
                    'metrics': {key: share.as_dict() for key, share in
                                decision_quality.evaluate(xml,
                                                          truth).items()},
                    'xml_bytes': len(xml)}
            record['strategies'][WITH_AGENT] = _with_agent(
                record['strategies']['ours'], xml, truth)
            self.sink(record)
            self._delete_and_wait(server)

    def scale(self) -> None:
        """Ours against stock on one host, GPU and node counts growing."""
        facts = self.start_corpus_host(SCALE_HOST)
        for series, shapes in (('gpus', GPU_SERIES), ('numa_nodes',
                                                      NODE_SERIES)):
            for gpus, nodes in shapes:
                want = _shape(facts, gpus, 0, guest_nodes=nodes)
                server = self._boot(facts, want)
                record = {'series': series, 'gpus': gpus,
                          'guest_nodes': nodes,
                          'flavor_specs': want['specs']}
                if server['status'] != 'ACTIVE':
                    record['error'] = server['fault']['message']
                    self.sink(record)
                    continue
                builders, _ = self._builders(facts, server)
                ours, stock = builders['ours'], builders['stock']
                record['ours_xml_bytes'] = len(ours())
                record['stock_xml_bytes'] = len(stock())
                record.update(demo_cloud.measure_pair(
                    ours, stock, self.rounds, self.number))
                self.sink(record)
                self._delete_and_wait(server)
