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

"""The expander bus rule of nova_gpu_p2p.guest.expander_buses.

Expected bus numbers and controller indexes are worked out by hand from
the module docstring.
"""

from nova_gpu_p2p import exception
from nova_gpu_p2p.guest import devices
from nova_gpu_p2p.guest import expander_buses as eb
from tests.unit import base

GPU = devices.DeviceKind.GPU
NIC = devices.DeviceKind.NIC
RC = eb.Grouping.ROOT_COMPLEX
NUMA = eb.Grouping.NUMA


def dev(address, numa=0, rc='pci0000:00', kind=GPU, known=True):
    return devices.GuestDevice(address=address, kind=kind,
                               nvidia_gpu=kind is GPU, numa_node=numa,
                               root_complex=rc, known=known)


def summary(layout):
    """(index, busNr, guest node, host group, [(port index, slot, dev)])."""
    return [(b.index, b.bus_nr, b.guest_node, b.host_group,
             [(p.index, p.slot, p.device) for p in b.ports])
            for b in layout.buses]


class TestBusNumbers(base.TestCase):

    def test_one_port_gets_254(self):
        layout = eb.layout([dev('0000:03:00.0')], {0: 0}, RC, ())
        self.assertEqual(254, layout.buses[0].bus_nr)

    def test_four_ports_get_251(self):
        devs = [dev('0000:%02x:00.0' % bus) for bus in range(3, 7)]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(1, len(layout.buses))
        self.assertEqual(251, layout.buses[0].bus_nr)
        self.assertEqual(4, len(layout.buses[0].ports))

    def test_second_ends_below_first(self):
        # First: 1 port, owns 254-255. Second: 2 ports, owns 251-253.
        devs = [dev('0000:03:00.0', numa=0, rc='pci0000:00'),
                dev('0000:81:00.0', numa=1, rc='pci0000:80'),
                dev('0000:82:00.0', numa=1, rc='pci0000:80')]
        layout = eb.layout(devs, {0: 0, 1: 1}, RC, ())
        self.assertEqual([254, 251], [b.bus_nr for b in layout.buses])

    def test_three_expanders(self):
        # 2 ports: 253-255; 1 port: 251-252; 3 ports: 247-250.
        devs = [dev('0000:01:00.0', numa=0, rc='pci0000:00'),
                dev('0000:02:00.0', numa=0, rc='pci0000:00'),
                dev('0000:41:00.0', numa=1, rc='pci0000:40'),
                dev('0000:81:00.0', numa=2, rc='pci0000:80'),
                dev('0000:82:00.0', numa=2, rc='pci0000:80'),
                dev('0000:83:00.0', numa=2, rc='pci0000:80')]
        layout = eb.layout(devs, {0: 0, 1: 1, 2: 2}, RC, ())
        self.assertEqual([253, 251, 247], [b.bus_nr for b in layout.buses])

    def test_thirty_two_on_one_bus(self):
        devs = [dev('0000:%02x:00.0' % bus) for bus in range(1, 33)]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(223, layout.buses[0].bus_nr)
        self.assertEqual(list(range(32)),
                         [p.slot for p in layout.buses[0].ports])

    def test_thirty_three_on_one_bus_is_error(self):
        devs = [dev('0000:%02x:00.0' % bus) for bus in range(1, 34)]
        exc = self.assertRaises(exception.GuestLayoutError, eb.layout, devs,
                                {0: 0}, RC, ())
        self.assertIn('33 devices under pci0000:00', str(exc))
        self.assertIn('32 slots', str(exc))

    def test_thirty_three_per_numa_node_is_error(self):
        devs = [dev('0000:%02x:00.0' % bus, rc='pci0000:%02x' % bus)
                for bus in range(1, 34)]
        # Separate buses by root complex: fine.
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(33, len(layout.buses))
        # One bus per NUMA node: too many.
        exc = self.assertRaises(exception.GuestLayoutError, eb.layout, devs,
                                {0: 0}, NUMA, ())
        self.assertIn('33 devices under node 0', str(exc))

    def test_running_out_of_bus_numbers(self):
        # Four full buses: 223, 190, 157, 124; the fourth's root ports
        # take controller indexes 100-132, up to its own bus number.
        devs = [dev('%04x:%02x:00.0' % (node, bus), numa=node,
                    rc='pci%04x:00' % node)
                for node in range(4) for bus in range(32)]
        exc = self.assertRaises(exception.GuestLayoutError, eb.layout, devs,
                                {0: 0, 1: 1, 2: 2, 3: 3}, RC, ())
        self.assertIn('not enough PCI bus numbers for 4 expander buses',
                      str(exc))

    def test_three_full_buses_fit(self):
        devs = [dev('%04x:%02x:00.0' % (node, bus), numa=node,
                    rc='pci%04x:00' % node)
                for node in range(3) for bus in range(32)]
        layout = eb.layout(devs, {0: 0, 1: 1, 2: 2}, RC, ())
        self.assertEqual([223, 190, 157], [b.bus_nr for b in layout.buses])


class TestIndexes(base.TestCase):

    def test_lowest_free_skipping_zero(self):
        layout = eb.layout([dev('0000:03:00.0')], {0: 0}, RC, ())
        self.assertEqual(1, layout.buses[0].index)
        self.assertEqual(2, layout.buses[0].ports[0].index)

    def test_zero_skipped_even_when_listed(self):
        layout = eb.layout([dev('0000:03:00.0')], {0: 0}, RC, [0])
        self.assertEqual([(1, 254, 0, 'pci0000:00',
                           [(2, 0, '0000:03:00.0')])], summary(layout))

    def test_skips_used(self):
        devs = [dev('0000:03:00.0'), dev('0000:04:00.0')]
        layout = eb.layout(devs, {0: 0}, RC, [1, 2])
        self.assertEqual(3, layout.buses[0].index)
        self.assertEqual([4, 5], [p.index for p in layout.buses[0].ports])

    def test_fills_gaps_in_used(self):
        devs = [dev('0000:03:00.0'), dev('0000:04:00.0')]
        layout = eb.layout(devs, {0: 0}, RC, {0, 1, 3, 5})
        self.assertEqual(2, layout.buses[0].index)
        self.assertEqual([4, 6], [p.index for p in layout.buses[0].ports])

    def test_expander_before_its_ports_across_buses(self):
        devs = [dev('0000:03:00.0', numa=0, rc='pci0000:00'),
                dev('0000:04:00.0', numa=0, rc='pci0000:00'),
                dev('0000:81:00.0', numa=1, rc='pci0000:80')]
        layout = eb.layout(devs, {0: 0, 1: 1}, RC, frozenset({1}))
        self.assertEqual(
            [(2, 253, 0, 'pci0000:00', [(3, 0, '0000:03:00.0'),
                                        (4, 1, '0000:04:00.0')]),
             (5, 251, 1, 'pci0000:80', [(6, 0, '0000:81:00.0')])],
            summary(layout))

    def test_used_indexes_iterable_consumed_once(self):
        layout = eb.layout([dev('0000:03:00.0')], {0: 0}, RC,
                           iter([1, 2]))
        self.assertEqual(3, layout.buses[0].index)


class TestGrouping(base.TestCase):

    def setUp(self):
        super().setUp()
        # Node 0 has two root complexes; node 1 one.
        self.devs = [
            dev('0000:03:00.0', numa=0, rc='pci0000:00'),
            dev('0000:41:00.0', numa=0, rc='pci0000:40'),
            dev('0000:42:00.0', numa=0, rc='pci0000:40', kind=NIC),
            dev('0000:81:00.0', numa=1, rc='pci0000:80'),
        ]

    def test_by_root_complex(self):
        layout = eb.layout(self.devs, {0: 0, 1: 1}, RC, ())
        self.assertEqual(['pci0000:00', 'pci0000:40', 'pci0000:80'],
                         [b.host_group for b in layout.buses])
        self.assertEqual([0, 0, 1], [b.guest_node for b in layout.buses])
        self.assertEqual([0, 0, 1],
                         [b.host_numa_node for b in layout.buses])
        self.assertEqual([['0000:03:00.0'],
                          ['0000:41:00.0', '0000:42:00.0'],
                          ['0000:81:00.0']],
                         [[p.device for p in b.ports]
                          for b in layout.buses])

    def test_by_numa(self):
        layout = eb.layout(self.devs, {0: 0, 1: 1}, NUMA, ())
        self.assertEqual(['node 0', 'node 1'],
                         [b.host_group for b in layout.buses])
        self.assertEqual([['0000:03:00.0', '0000:41:00.0', '0000:42:00.0'],
                          ['0000:81:00.0']],
                         [[p.device for p in b.ports]
                          for b in layout.buses])
        # 3 ports: 252-255; 1 port: 250-251.
        self.assertEqual([252, 250], [b.bus_nr for b in layout.buses])
        self.assertEqual([1, 5], [b.index for b in layout.buses])

    def test_unknown_root_complex_grouped_by_node(self):
        devs = [dev('0000:03:00.0', numa=1, rc=None),
                dev('0000:04:00.0', numa=1, rc=None)]
        layout = eb.layout(devs, {1: 0}, RC, ())
        self.assertEqual(1, len(layout.buses))
        self.assertEqual('node 1', layout.buses[0].host_group)

    def test_slots_per_expander_restart_at_zero(self):
        layout = eb.layout(self.devs, {0: 0, 1: 1}, RC, ())
        self.assertEqual([[0], [0, 1], [0]],
                         [[p.slot for p in b.ports] for b in layout.buses])

    def test_devices_sorted_by_address(self):
        devs = [dev('0000:06:00.0'), dev('0000:04:00.0'),
                dev('0000:05:00.0')]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(
            [(2, 0, '0000:04:00.0'), (3, 1, '0000:05:00.0'),
             (4, 2, '0000:06:00.0')],
            [(p.index, p.slot, p.device) for p in layout.buses[0].ports])

    def test_ordered_by_guest_cell_first(self):
        # Host node 1 is guest cell 0: its bus comes first though its
        # addresses are higher.
        devs = [dev('0000:03:00.0', numa=0, rc='pci0000:00'),
                dev('0000:81:00.0', numa=1, rc='pci0000:80')]
        layout = eb.layout(devs, {1: 0, 0: 1}, RC, ())
        self.assertEqual(
            [(1, 254, 0, 'pci0000:80', [(2, 0, '0000:81:00.0')]),
             (3, 252, 1, 'pci0000:00', [(4, 0, '0000:03:00.0')])],
            summary(layout))
        self.assertEqual([1, 0],
                         [b.host_numa_node for b in layout.buses])

    def test_same_cell_ordered_by_first_address(self):
        devs = [dev('0000:c1:00.0', numa=0, rc='pci0000:c0'),
                dev('0000:41:00.0', numa=0, rc='pci0000:40'),
                dev('0000:42:00.0', numa=0, rc='pci0000:40')]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(['pci0000:40', 'pci0000:c0'],
                         [b.host_group for b in layout.buses])
        self.assertEqual([253, 251], [b.bus_nr for b in layout.buses])

    def test_empty(self):
        layout = eb.layout([], {0: 0}, RC, ())
        self.assertEqual((), layout.buses)
        self.assertEqual({}, layout.unplaced)


class TestUnplaced(base.TestCase):

    def test_unknown_device(self):
        devs = [dev('0000:03:00.0', known=False), dev('0000:04:00.0')]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(
            {'0000:03:00.0':
             'the host GPU topology does not list 0000:03:00.0'},
            layout.unplaced)
        self.assertEqual(['0000:04:00.0'],
                         [p.device for p in layout.buses[0].ports])

    def test_numa_none(self):
        devs = [dev('0000:03:00.0', numa=None)]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual((), layout.buses)
        self.assertEqual(
            {'0000:03:00.0':
             'the host reports no NUMA node for 0000:03:00.0'},
            layout.unplaced)

    def test_numa_none_grouping_numa(self):
        devs = [dev('0000:03:00.0', numa=None, rc=None)]
        layout = eb.layout(devs, {0: 0}, NUMA, ())
        self.assertIn('0000:03:00.0', layout.unplaced)

    def test_node_without_guest_cell(self):
        devs = [dev('0000:c1:00.0', numa=2, rc='pci0000:c0')]
        layout = eb.layout(devs, {1: 0, 0: 1}, RC, ())
        self.assertEqual(
            {'0000:c1:00.0':
             '0000:c1:00.0 is on host NUMA node 2, where this instance '
             'has no guest NUMA cell (cells are on host nodes 0, 1)'},
            layout.unplaced)

    def test_unplaced_take_no_index(self):
        devs = [dev('0000:03:00.0', numa=5), dev('0000:81:00.0', numa=1,
                                                 rc='pci0000:80')]
        layout = eb.layout(devs, {1: 0}, RC, ())
        self.assertEqual([(1, 254, 0, 'pci0000:80',
                           [(2, 0, '0000:81:00.0')])], summary(layout))
        self.assertEqual(['0000:03:00.0'], list(layout.unplaced))

    def test_all_reasons_together(self):
        devs = [dev('0000:01:00.0', known=False),
                dev('0000:02:00.0', numa=None),
                dev('0000:03:00.0', numa=3)]
        layout = eb.layout(devs, {0: 0}, RC, ())
        self.assertEqual(['0000:01:00.0', '0000:02:00.0', '0000:03:00.0'],
                         sorted(layout.unplaced))
        self.assertEqual((), layout.buses)


class TestPortOf(base.TestCase):

    def test_found(self):
        devs = [dev('0000:03:00.0', numa=0, rc='pci0000:00'),
                dev('0000:81:00.0', numa=1, rc='pci0000:80'),
                dev('0000:82:00.0', numa=1, rc='pci0000:80')]
        layout = eb.layout(devs, {0: 0, 1: 1}, RC, ())
        bus, port = layout.port_of('0000:82:00.0')
        self.assertEqual(3, bus.index)
        self.assertEqual(5, port.index)
        self.assertEqual(1, port.slot)
        self.assertEqual('0000:82:00.0', port.device)

    def test_not_found(self):
        layout = eb.layout([dev('0000:03:00.0')], {0: 0}, RC, ())
        self.assertIsNone(layout.port_of('0000:04:00.0'))

    def test_unplaced_not_found(self):
        layout = eb.layout([dev('0000:03:00.0', numa=None)], {0: 0}, RC,
                           ())
        self.assertIsNone(layout.port_of('0000:03:00.0'))

    def test_empty_layout(self):
        self.assertIsNone(eb.BusLayout().port_of('0000:03:00.0'))
