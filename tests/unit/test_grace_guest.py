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

"""The guest of a Grace host: its GPUs' memory as guest NUMA cells.

Nova's aarch64 guest config for the GH200 and GB200 corpus hosts
(:mod:`tests.fixtures.grace_guest`), decided and applied by the driver's
functions: each GPU on its own expander bus on its Grace's guest cell,
``grace_numa_cells_per_gpu`` CPU-less, memory-less cells tied to it with
``<acpi nodeset>``, the host's distances, the hole sized for its memory
BARs; and one-line refusals where the stack is too old.
"""

import dataclasses

from lxml import etree

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import grace_cells
from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.guest import metadata
from nova_gpu_p2p.guest import nova_guest
from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p.topology import grace
from tests.fixtures import grace_guest
from tests.fixtures import hosts
from tests.unit import base

GiB = 1 << 30
P2P = libvirt_config.GPU_P2P_NS
GH200 = '0009:01:00.0'
GB200 = ['0008:01:00.0', '0009:01:00.0', '0018:01:00.0', '0019:01:00.0']


def host_distance(name: str, a: int, b: int) -> int:
    nodes = hosts.GRACE_CASES[name].host.numa_nodes
    return nodes[a].distances[b]


class TestGracePlan(base.TestCase):

    def test_gh200_eight_cells_after_novas(self):
        _, plan = grace_guest.plan('gh200', [GH200], (0,))
        self.assertIsNone(plan.refusal)
        self.assertEqual('1-8', plan.grace.nodeset(GH200))
        self.assertEqual(tuple(range(1, 9)), plan.grace.host_nodes)
        (bus,) = plan.buses.buses
        self.assertEqual((0, 'pci0009:00'), (bus.guest_node, bus.host_group))
        # The host's SLIT, Nova's cell on node 0 first.
        self.assertEqual(tuple(tuple(host_distance('gh200', a, b)
                                     for b in range(9)) for a in range(9)),
                         plan.distances)
        # 256 GiB usable memory BAR + 1 GiB carve-out + the small BARs.
        self.assertEqual(512 * GiB, plan.hole64.size)

    def test_gb200_each_gpu_its_bus_on_its_grace(self):
        _, plan = grace_guest.plan('gb200-tray', GB200, (0, 1))
        self.assertIsNone(plan.refusal)
        self.assertEqual(['2-9', '10-17', '18-25', '26-33'],
                         [plan.grace.nodeset(a) for a in GB200])
        self.assertEqual(tuple(range(2, 34)), plan.grace.host_nodes)
        self.assertEqual(
            {a: (node, 'pci%s:00' % a[:4]) for a, node in zip(
                GB200, (0, 0, 1, 1))},
            {port.device: (bus.guest_node, bus.host_group)
             for bus in plan.buses.buses for port in bus.ports})
        self.assertEqual(4, len(plan.buses.buses))
        row = plan.distances[0]
        self.assertEqual((10, 40) + (80,) * 16 + (120,) * 16, row)

    def test_numa_grouping_still_one_bus_per_gpu(self):
        topology = grace_guest.discover('gb200-tray')
        guest = grace_guest.nova_config(GB200[:2], (0,))
        plan = plan_mod.decide(
            extra_specs.parse(grace_guest.AFFINITY),
            nova_guest.instance_devices(guest, topology),
            grace_guest.host_view(topology),
            grace_guest.facts(guest, (0,)),
            plan_mod.Options(grouping=plan_mod.expander_buses.Grouping.NUMA))
        self.assertEqual(2, len(plan.buses.buses))

    def test_cells_per_gpu_option(self):
        topology = grace_guest.discover('gh200')
        guest = grace_guest.nova_config([GH200], (0,))
        plan = plan_mod.decide(
            extra_specs.parse(grace_guest.AFFINITY),
            nova_guest.instance_devices(guest, topology),
            grace_guest.host_view(topology), grace_guest.facts(guest, (0,)),
            plan_mod.Options(grace_cells_per_gpu=2))
        self.assertEqual('1-2', plan.grace.nodeset(GH200))
        self.assertEqual((1, 2), plan.grace.host_nodes)

    def test_fewer_host_nodes_than_cells_repeat_the_last(self):
        gpu = dataclasses.replace(
            grace.discover(grace_guest.discover('gh200')).gpus[GH200],
            memory_nodes=(1, 2))
        layout = grace_cells.layout([gpu], 1, 4)
        self.assertEqual((1, 2, 2, 2), layout.host_nodes)
        self.assertEqual('1-4', layout.nodeset(GH200))

    def test_old_libvirt_or_qemu_refuses_in_one_line(self):
        for versions, preferred in (
                ({'libvirt': (11, 7, 0)}, False),
                ({'qemu': (8, 2, 0)}, False),
                ({'libvirt': (11, 3, 0), 'qemu': (10, 0, 0)}, True)):
            specs = {extra_specs.NUMA_AFFINITY_KEY:
                     'preferred' if preferred else 'required'}
            _, plan = grace_guest.plan('gh200', [GH200], (0,), specs=specs,
                                       **versions)
            self.assertIsNotNone(plan.refusal, versions)
            self.assertTrue(plan.refusal.reschedule)
            self.assertNotIn('\n', plan.refusal.message)
            self.assertIn('Grace GPU 0009:01:00.0 needs libvirt 11.8.0 and '
                          'QEMU 9.0.0 or later', plan.refusal.message)

    def test_existing_server_keeps_running_without_cells(self):
        _, plan = grace_guest.plan('gh200', [GH200], (0,),
                                   libvirt=(11, 3, 0), new_build=False)
        self.assertIsNone(plan.refusal)
        self.assertEqual((), plan.grace.cells)
        self.assertIn('needs libvirt 11.8.0', plan.lost[0])

    def test_unknown_memory_nodes(self):
        topology = grace_guest.discover('gh200')
        nodes = tuple(dataclasses.replace(n, generic_initiator=False)
                      for n in topology.numa_nodes)
        topology = dataclasses.replace(topology, numa_nodes=nodes)
        _, plan = grace_guest.plan('gh200', [GH200], (0,), topology)
        self.assertIn('the host memory nodes of Grace GPU 0009:01:00.0 are '
                      'unknown', plan.refusal.message)
        _, plan = grace_guest.plan(
            'gh200', [GH200], (0,), topology,
            specs={extra_specs.NUMA_AFFINITY_KEY: 'preferred'})
        self.assertIsNone(plan.refusal)
        self.assertEqual((), plan.grace.cells)

    def test_no_affinity_no_cells(self):
        _, plan = grace_guest.plan(
            'gh200', [GH200], (0,),
            specs={extra_specs.CLIQUE_KEY: 'auto'})
        self.assertEqual((), plan.grace.cells)


class TestGraceXML(base.TestCase):

    def test_hostdev_acpi_nodeset_and_empty_cells(self):
        root = etree.fromstring(grace_guest.domain_xml(
            'gb200-tray', GB200[:3], (0, 1)))
        nodesets = {
            hostdev.find('source/address').get('domain'):
            hostdev.find('acpi').get('nodeset')
            for hostdev in root.iterfind('devices/hostdev')}
        self.assertEqual({'0x0008': '2-9', '0x0009': '10-17',
                          '0x0018': '18-25'}, nodesets)
        cells = root.findall('cpu/numa/cell')
        self.assertEqual([str(i) for i in range(26)],
                         [c.get('id') for c in cells])
        for cell in cells[2:]:
            self.assertEqual((None, '0'), (cell.get('cpus'),
                                           cell.get('memory')))
            self.assertEqual(26, len(cell.findall('distances/sibling')))
        # Nova's numatune names Nova's cells only.
        self.assertEqual(['0', '1'], [m.get('cellid') for m in
                                      root.iterfind('numatune/memnode')])
        self.assertEqual('virt', root.find('os/type').get('machine'))
        record = root.find('metadata/{%s}decision' % P2P)
        self.assertEqual(['2-9', '10-17', '18-25'], [
            d.get('initiator_nodes')
            for d in record.iterfind('{%s}device' % P2P)])

    def test_summary_names_the_memory_nodes(self):
        _, plan = grace_guest.plan('gh200', [GH200], (0,))
        self.assertIn('0009:01:00.0 on expander bus 3 (guest node 0), '
                      'memory on guest nodes 1-8', metadata.summary(plan))
