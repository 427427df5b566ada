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

"""Corpus hosts in Nova's in-process cloud, for ``lab/bench.py``.

Not a test module (stestr collects ``test_*`` only). For one corpus host,
:meth:`CorpusBenchCloud.decision_quality` boots an instance with all the
host's GPUs and one with half, then, on hosts with two NUMA nodes with
CPUs, the ``crossed`` instances (:func:`crossed_shapes`), where Nova fits
guest cell 0 onto a host node other than 0. Each instance's domain XML is
built six ways from the same spawn arguments
(:func:`demo_cloud.spawn_arguments`):

``stock``
    Nova's ``LibvirtDriver._get_guest_config``, as without this project.
``wrapper``
    The QEMU wrapper script (:mod:`lab.baselines.wrapper`) with the
    map it ships: every GPU of the host in clique 0. Nova's XML; the
    script rewrites the QEMU command line libvirt makes of it.
``wrapper-best``
    The same script with an operator's correct static map for the host
    (:func:`tests.fixtures.expected_cliques.clique_map`).
``sidecar``
    The KubeVirt sidecar recipe (:mod:`lab.baselines.sidecar`) on
    Nova's XML: one ``pxb-pcie`` per host NUMA node, ``<node>`` = the host
    node number, devices on root ports below it, no cliques.
``ours``
    ``GPUP2PLibvirtDriver._get_guest_config`` with default options.
``ours+agent``
    The same XML, with the guest agent in the guest: NCCL there reads the
    topology file the agent writes from the XML's fw_cfg description
    (:func:`decision_quality.nccl_with_agent`); only the
    ``nccl_host_class`` metric can differ from ``ours``.

Every document goes through libvirt first (:mod:`lab.libvirt_check`):
refused XML scores zero, and cliques are read from the QEMU command line
libvirt makes (after the wrapper, for the wrapper). Without libvirtd the
record says so and the scores are from the XML alone, unvalidated; the
wrapper, which needs libvirt's command line, is then not scored.

:meth:`CorpusBenchCloud.scale` times ours against stock on the 16-GPU,
8-node host for growing GPU and NUMA node counts.
"""

from collections.abc import Callable
import itertools
import logging
import shlex

from nova.virt.libvirt import driver as libvirt_driver

from lab.baselines import sidecar
from lab.baselines import wrapper
from lab import decision_quality
from lab import demo_cloud
from lab import libvirt_check
from nova_gpu_p2p.compute import driver as gpu_driver
from tests.cloud import corpus_xml
from tests.cloud import nova_cloud as base
from tests.fixtures import expected_cliques

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


def wrapper_maps(facts: corpus_xml.HostFacts) -> dict[str, dict[str, int]]:
    """Each wrapper strategy's GPU_CLIQUE_MAP for the host."""
    return {'wrapper': wrapper.default_map(facts.expected.addresses),
            'wrapper-best': expected_cliques.clique_map(facts.name)}


def score(xmls: dict[str, str], maps: dict[str, dict[str, int]],
          truth: decision_quality.HostTruth,
          check: Callable[[str], libvirt_check.Verdict]) -> dict:
    """Each strategy's metrics, after libvirt's verdict on its XML.

    :param xmls: strategy -> domain XML (the wrappers' is stock's).
    :param maps: wrapper strategy -> its clique map.
    """
    found = {}
    verdicts: dict[str, libvirt_check.Verdict] = {}
    for name, xml in xmls.items():
        if name not in maps:
            verdicts[name] = check(xml)
        verdict = verdicts.get(name) or verdicts['stock']
        record = {'xml_bytes': len(xml), 'libvirt': verdict.as_dict()}
        cliques = None
        if verdict.argv is not None:
            argv = shlex.split(verdict.argv)
            if name in maps:
                argv = wrapper.wrap(argv, maps[name])
            cliques = decision_quality.argv_cliques(shlex.join(argv))
        elif name in maps and verdict.accepted is None:
            record['not_scored'] = ('the wrapper rewrites the QEMU command '
                                    'line, which needs libvirtd')
            found[name] = record
            continue
        record['metrics'] = {
            key: share.as_dict() for key, share in decision_quality.evaluate(
                xml, truth, cliques, verdict.accepted is not False).items()}
        found[name] = record
    return found


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


def crossed_shapes(facts: corpus_xml.HostFacts) -> list[dict]:
    """Instances Nova fits with guest cell 0 on a host node other than 0.

    A *filler* server (one GPU, pinned CPUs, one cell) goes first: Nova
    puts a PCI-requesting cell on the node with the most free devices,
    node 0 on every corpus host (ties keep node order). ``crossed``: the
    filler takes all of node 0's CPUs, and a one-cell instance with the
    GPUs and NICs of the second CPU node lands on that node.
    ``crossed-2cell``: the filler leaves node 0 one CPU, and a two-cell
    instance whose cell 0 needs two CPUs (``hw:numa_cpus``) cannot start
    on node 0: Nova tries host cells in turn and puts cell 0 elsewhere,
    cell 1 on node 0 or another node. The record keeps the host nodes
    Nova chose; whether they crossed is judged from them, not assumed.
    """
    if len(facts.cpu_nodes) < 2:
        return []
    first, second = facts.cpu_nodes[:2]
    per_node = base.FAKE_CPUS // facts.all_nodes

    def on(nodes, addresses, node_of):
        return sum(node_of.get(a) in nodes for a in addresses)

    specs = dict(EXTRA_SPECS)
    shapes = []
    gpus = on({second}, facts.gpus, facts.gpu_node)
    if gpus:
        shapes.append({
            'size': 'crossed', 'gpus': gpus, 'guest_nodes': 1,
            'nics': on({second}, facts.nics, facts.nic_node),
            'vcpus': min(corpus_xml.CPUS_PER_CELL, per_node),
            'specs': specs, 'filler_vcpus': per_node})
    if per_node >= 2:
        both = {first, second}
        shapes.append({
            'size': 'crossed-2cell',
            'gpus': on(both, facts.gpus, facts.gpu_node) - 1,
            'nics': on(both, facts.nics, facts.nic_node), 'guest_nodes': 2,
            'vcpus': 3, 'filler_vcpus': per_node - 1,
            'specs': dict(specs, **{
                'hw:numa_cpus.0': '0,1', 'hw:numa_cpus.1': '2',
                'hw:numa_mem.0': '1024', 'hw:numa_mem.1': '1024'})})
    return shapes


def _with_agent(ours: dict, xml: str,
                truth: decision_quality.HostTruth) -> dict:
    """Ours' metrics, NCCL's view taken with the guest agent's file.

    Where the agent cannot run (not installed, or it fails), that metric
    is n/a and the reason is kept; where libvirt refused ours' XML, it
    scores zero as the rest.
    """
    found = {'metrics': dict(ours['metrics']), 'xml_bytes': ours['xml_bytes'],
             'libvirt': ours['libvirt']}
    try:
        share = decision_quality.nccl_with_agent(
            xml, truth, decision_quality.run_guest_agent)
    except (ImportError, RuntimeError) as exc:
        share = decision_quality.Share(0, 0)
        found['agent_error'] = str(exc)
    if ours['libvirt']['accepted'] is False:
        share = decision_quality.Share(0, share.total)
    found['metrics']['nccl_host_class'] = share.as_dict()
    return found


class CorpusBenchCloud(corpus_xml.CorpusXMLMixin, base.GPUHostsTestBase):
    """One corpus host; the strategies' XML, or ours against stock."""

    #: Receives one dict per instance; the tool running us sets it.
    sink: Callable[[dict], None] = staticmethod(lambda found: None)
    corpus_host = 'hgx-8gpu-nvswitch-2numa'
    #: Timing parameters for :meth:`scale`, and its (GPUs, guest nodes).
    rounds = 7
    number = 10
    gpu_series = GPU_SERIES
    node_series = NODE_SERIES

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
        """Stock's and ours' XML build for the server, and its instance."""
        drv = self.computes[facts.name].driver
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

        return {'stock': lambda: stock_config().to_xml(),
                'ours': ours}, instance

    def _score(self, facts: corpus_xml.HostFacts,
               truth: decision_quality.HostTruth, want: dict, size: str,
               server: dict) -> dict:
        record = {'host': facts.name, 'size': size, 'gpus': want['gpus'],
                  'nics': want['nics'], 'guest_nodes': want['guest_nodes'],
                  'flavor_specs': want['specs'],
                  'limits': list(facts.limits), 'libvirt': self.libvirt_status}
        if server['status'] != 'ACTIVE':
            record['error'] = server['fault']['message']
            return record
        builders, instance = self._builders(facts, server)
        record['host_cells'] = [c.id for c in instance.numa_topology.cells]
        record['crossed'] = record['host_cells'] != list(
            range(len(record['host_cells'])))
        record['pci_devices'] = sorted(
            d.address for d in instance.pci_devices)
        stock = builders['stock']()
        xmls = {'stock': stock, 'wrapper': stock, 'wrapper-best': stock,
                'sidecar': sidecar.apply(stock, truth.node),
                'ours': builders['ours']()}
        record['strategies'] = score(xmls, wrapper_maps(facts), truth,
                                     self.check)
        record['strategies'][WITH_AGENT] = _with_agent(
            record['strategies']['ours'], xmls['ours'], truth)
        return record

    def decision_quality(self) -> None:
        """Each instance shape: the strategies' metrics (module doc)."""
        self.libvirt_status = libvirt_check.unavailable() or 'checked'
        self.check = (libvirt_check.check
                      if self.libvirt_status == 'checked'
                      else lambda xml: libvirt_check.Verdict(
                          None, self.libvirt_status))
        facts = self.start_corpus_host(self.corpus_host)
        topology = self.topologies[facts.name]
        truth = decision_quality.topology_truth(facts.expected, topology)
        for size in SIZES:
            want = shape(facts, size)
            server = self._boot(facts, want)
            self.sink(self._score(facts, truth, want, size, server))
            self._delete_and_wait(server)
        for want in crossed_shapes(facts):
            filler = self._boot(facts, {
                'gpus': 1, 'nics': 0, 'guest_nodes': 1, 'specs': {},
                'vcpus': want['filler_vcpus']})
            server = self._boot(facts, want)
            self.sink(self._score(facts, truth, want, want['size'], server))
            self._delete_and_wait(server)
            self._delete_and_wait(filler)

    def scale(self) -> None:
        """Ours against stock on one host, GPU and node counts growing."""
        facts = self.start_corpus_host(SCALE_HOST)
        for series, shapes in (('gpus', self.gpu_series),
                               ('numa_nodes', self.node_series)):
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
