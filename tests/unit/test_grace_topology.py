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

"""Grace hosts: each GPU's socket, memory nodes, memory BARs and SMMU.

The GH200 and GB200 corpus hosts' sysfs trees through the sysfs backend,
a capture of them back, and the commands that show them.
"""

import dataclasses
import json
import os

from nova_gpu_p2p.checks import versions
from nova_gpu_p2p.checks import vfio
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import grace
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_cli
from tests.unit import test_corpus

GiB = 1 << 30


class TestGraceDiscovery(base.TestCase):

    def check(self, name: str, topology: model.HostTopology) -> None:
        case = hosts.GRACE_CASES[name]
        self.assertEqual(list(case.expected.addresses),
                         [g.address for g in topology.gpus()])
        for pair, expected in case.expected.links.items():
            self.assertEqual(expected, lc.pcie_class(topology, *pair).name)
        found = grace.discover(topology)
        self.assertEqual((), found.findings)
        self.assertEqual(
            case.grace, {a: (g.socket, g.memory_nodes, g.smmu)
                         for a, g in found.gpus.items()})

    def test_corpus_hosts_from_sysfs(self):
        for name in hosts.GRACE_CASES:
            self.check(name, test_corpus.discover(name))

    def test_capture_gives_the_same_answer(self):
        for name in hosts.GRACE_CASES:
            topology = test_corpus.discover(name)
            loaded = capture.from_dict(json.loads(json.dumps(
                capture.to_dict(topology))))
            self.assertEqual(topology, loaded)
            self.check(name, loaded)

    def test_capture_of_format_3_loads_without_grace_facts(self):
        data = capture.to_dict(test_corpus.discover('gh200'))
        data['format_version'] = 3
        for record in data['functions']:
            del record['iommu']
        for node in data['numa_nodes']:
            del node['generic_initiator']
        found = grace.discover(capture.from_dict(data))
        self.assertEqual((), found.gpus['0009:01:00.0'].memory_nodes)
        self.assertIn('no host NUMA node is a generic initiator',
                      found.findings[0])

    def test_memory_bars_as_nvgrace_gpu_sizes_them(self):
        # Hopper: usable memory rounded down to 512 MiB after the 1 GiB
        # carve-out, both rounded up to powers of two.
        self.assertEqual((128 * GiB, GiB),
                         grace.memory_bars(grace.MODELS[0x2342]))
        self.assertEqual((256 * GiB, GiB),
                         grace.memory_bars(grace.MODELS[0x2348]))
        # Blackwell: no carve-out.
        self.assertEqual((256 * GiB,),
                         grace.memory_bars(grace.MODELS[0x2941]))
        self.assertEqual((512 * GiB,),
                         grace.memory_bars(grace.MODELS[0x31c2]))

    def test_uneven_split_of_nodes_is_no_guess(self):
        topology = test_corpus.discover('gb200-tray')
        nodes = tuple(dataclasses.replace(n, generic_initiator=False)
                      if n.id == 17 else n for n in topology.numa_nodes)
        found = grace.discover(dataclasses.replace(topology,
                                                   numa_nodes=nodes))
        self.assertEqual(['socket node 0 has 15 generic-initiator nodes for '
                          '2 GPUs: which belong to which GPU is unknown'],
                         list(found.findings))
        self.assertEqual((), found.gpus['0008:01:00.0'].memory_nodes)
        self.assertEqual(tuple(range(18, 26)),
                         found.gpus['0018:01:00.0'].memory_nodes)

    def test_unknown_model_on_the_variant_driver(self):
        topology = test_corpus.discover('gh200')
        gpu = dataclasses.replace(topology.functions['0009:01:00.0'],
                                  device=0x3000)
        found = grace.discover(dataclasses.replace(
            topology, functions=dict(topology.functions, **{
                gpu.address: gpu})))
        self.assertEqual((), found.gpus[gpu.address].memory_bars)
        self.assertEqual(tuple(range(1, 9)),
                         found.gpus[gpu.address].memory_nodes)
        self.assertEqual(['0009:01:00.0: Grace GPU 10de:3000 of unknown '
                          'device memory size'], list(found.findings))

    def test_no_grace_gpu_on_other_hosts(self):
        self.assertEqual(grace.GraceHost(), grace.discover(
            test_corpus.discover('four-numa-7gpu')))


class TestGraceCommands(test_cli.CLITestCase):

    def test_topology_shows_each_gpus_memory_nodes(self):
        tree = test_corpus.tree('gb200-tray')
        rc, out, err = test_cli.run('topology', '--no-config',
                                    '--sysfs-root', tree)
        self.assertEqual((0, ''), (rc, err))
        self.assertIn(
            'Grace GPU 0009:01:00.0 GB200 on nvgrace_gpu_vfio_pci: socket '
            'node 0, memory nodes 10,11,12,13,14,15,16,17, memory BARs '
            '256 GiB, behind smmu3.0x0000000016400000', out)
        rc, out, err = test_cli.run('topology', '--no-config', '--json',
                                    '--load', self.capture(
                                        test_corpus.discover('gh200')))
        self.assertEqual(0, rc)
        self.assertEqual([{
            'address': '0009:01:00.0', 'model': 'GH200 144GB HBM3e',
            'driver': 'nvgrace_gpu_vfio_pci', 'socket': 0,
            'memory_nodes': list(range(1, 9)),
            'memory_bars': [256 * GiB, GiB],
            'smmu': 'smmu3.0x0000000016000000'}], json.loads(out)['grace'])

    def test_capture_command_keeps_the_grace_facts(self):
        path = os.path.join(self.dir, 'gh200.json')
        rc, _, _ = test_cli.run('capture', '--no-config', '--sysfs-root',
                                test_corpus.tree('gh200'), '--output', path)
        self.assertEqual(0, rc)
        self.assertEqual(grace.discover(test_corpus.discover('gh200')),
                         grace.discover(capture.load(path)))


class TestGraceBindings(base.TestCase):

    def test_variant_driver_is_ready_vfio_pci_is_not(self):
        topology = test_corpus.discover('gh200')
        checks = vfio.check_bindings(topology)
        self.assertEqual(['SUCCESS'], [c.code.name for c in checks])
        gpu = dataclasses.replace(topology.functions['0009:01:00.0'],
                                  driver='vfio-pci')
        checks = vfio.check_bindings(dataclasses.replace(
            topology, functions=dict(topology.functions, **{
                gpu.address: gpu})))
        self.assertEqual(1, len(checks))
        self.assertIn('a Grace GPU bound to vfio-pci', checks[0].message)
        self.assertIn('driverctl set-override 0009:01:00.0 '
                      'nvgrace_gpu_vfio_pci', checks[0].fix)


class TestGraceStack(base.TestCase):
    """A Grace host with libvirt or QEMU too old for generic initiators."""

    def test_check_fails_and_no_numa_affinity_trait(self):
        topology = test_corpus.discover('gb200-tray')
        for libvirt, qemu, ok in (((12, 8, 0), (11, 1, 0), True),
                                  ((11, 3, 0), (10, 0, 0), False),
                                  ((11, 8, 0), (8, 2, 0), False)):
            checks = versions.check_versions(
                versions.HostVersions(libvirt, qemu), topology, False)
            (check,) = [c for c in checks
                        if c.subject == versions.GRACE_TITLE]
            self.assertEqual('SUCCESS' if ok else 'FAILURE',
                             check.code.name)
            self.assertEqual(
                {traits.GPU_NUMA_AFFINITY} if ok else set(),
                traits.numa_affinity(topology, libvirt, qemu))
        self.assertIn('their builds are refused here', check.message)

    def test_no_grace_line_elsewhere(self):
        checks = versions.check_versions(
            versions.HostVersions((11, 3, 0), (10, 0, 0)),
            test_corpus.discover('four-numa-7gpu'), False)
        self.assertNotIn(versions.GRACE_TITLE, [c.subject for c in checks])
