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

"""The pure parsers: config space capabilities, CPU lists, BAR sizes.

The generator's trees have one tidy layout (PCIe capability first, AER
then ACS); real devices chain capabilities in any order and broken or
vanished ones return garbage, so these inputs are made by hand.
"""

import struct

from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import pci_config
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import sysfs_builder as b
from tests.unit import base

PM_CAP_ID = 0x01
MSI_CAP_ID = 0x05
PCIE_CAP_ID = 0x10


def space(size: int = pci_config.EXTENDED_SIZE, cap_list: bool = True,
          pointer: int = 0x40) -> bytearray:
    """Zeroed config space, its status bit saying capabilities follow."""
    data = bytearray(size)
    struct.pack_into('<H', data, 0x06, 0x0010 if cap_list else 0)
    data[0x34] = pointer
    return data


def cap(data: bytearray, offset: int, cap_id: int, next_offset: int,
        port_type: int = 0) -> None:
    """A standard capability; the port type matters only to PCIe's."""
    struct.pack_into('<BBH', data, offset, cap_id, next_offset,
                     0x2 | port_type << 4)


def ext_cap(data: bytearray, offset: int, cap_id: int, next_offset: int,
            *registers: int) -> None:
    """An extended capability (version 1) and its first 16-bit registers."""
    struct.pack_into('<I', data, offset, cap_id | 1 << 16 | next_offset << 20)
    struct.pack_into('<%dH' % len(registers), data, offset + 4, *registers)


def pcie(port_type: int, size: int = pci_config.EXTENDED_SIZE) -> bytearray:
    """Config space with the PCIe capability alone, at 0x40."""
    data = space(size)
    cap(data, 0x40, PCIE_CAP_ID, 0, port_type)
    return data


def downstream_port() -> bytearray:
    return pcie(b.PCIE_DOWNSTREAM)


class TestPortType(base.TestCase):

    def test_port_types(self):
        for raw, expected in ((b.PCIE_ENDPOINT, model.PortType.ENDPOINT),
                              (b.PCIE_ROOT_PORT, model.PortType.ROOT_PORT),
                              (b.PCIE_UPSTREAM, model.PortType.UPSTREAM),
                              (b.PCIE_DOWNSTREAM,
                               model.PortType.DOWNSTREAM),
                              (b.PCIE_RC_ENDPOINT, model.PortType.ENDPOINT),
                              (0x3, None)):
            self.assertIs(expected, pci_config.port_type(pcie(raw)), raw)

    def test_pcie_cap_after_others(self):
        data = space()
        cap(data, 0x40, PM_CAP_ID, 0x50)
        cap(data, 0x50, MSI_CAP_ID, 0x63)  # reserved low bits are masked
        cap(data, 0x60, PCIE_CAP_ID, 0, b.PCIE_UPSTREAM)
        self.assertIs(model.PortType.UPSTREAM, pci_config.port_type(data))

    def test_chain_without_pcie_cap(self):
        data = space()
        cap(data, 0x40, PM_CAP_ID, 0)
        self.assertIsNone(pci_config.port_type(data))

    def test_looped_chain_ends(self):
        data = space()
        cap(data, 0x40, PM_CAP_ID, 0x60)
        cap(data, 0x60, MSI_CAP_ID, 0x40)
        self.assertIsNone(pci_config.port_type(data))
        cap(data, 0x40, PM_CAP_ID, 0x40)
        self.assertIsNone(pci_config.port_type(data))

    def test_pointer_into_the_header_ends_the_chain(self):
        # Read as a capability, the command and status registers at 0x04
        # would say PCIe, port type 1 (legacy endpoint).
        data = space(pointer=0x04)
        struct.pack_into('<BBH', data, 0x04, PCIE_CAP_ID, 0, 0x0010)
        self.assertIsNone(pci_config.port_type(data))
        data[0x34] = 0x40
        cap(data, 0x40, PM_CAP_ID, 0x04)
        self.assertIsNone(pci_config.port_type(data))

    def test_status_without_cap_list(self):
        data = space(cap_list=False)
        cap(data, 0x40, PCIE_CAP_ID, 0, b.PCIE_DOWNSTREAM)
        self.assertIsNone(pci_config.port_type(data))

    def test_standard_space_alone_is_enough(self):
        data = pcie(b.PCIE_ROOT_PORT, pci_config.STANDARD_SIZE)
        self.assertIs(model.PortType.ROOT_PORT, pci_config.port_type(data))
        self.assertIsNone(pci_config.acs(data))


class TestAcs(base.TestCase):

    def test_aer_then_acs(self):
        data = downstream_port()
        ext_cap(data, b.AER_OFFSET, b.AER_EXT_CAP_ID, b.ACS_OFFSET)
        ext_cap(data, b.ACS_OFFSET, b.ACS_EXT_CAP_ID, 0, b.ACS_CAPABILITY,
                b.ACS_REDIRECT)
        facts = pci_config.parse(data)
        self.assertEqual(
            pci_config.ConfigFacts(
                port_type=model.PortType.DOWNSTREAM,
                acs=model.Acs(b.ACS_CAPABILITY, b.ACS_REDIRECT)),
            facts)
        self.assertTrue(facts.acs.request_redirect)

    def test_acs_first_and_off(self):
        data = downstream_port()
        ext_cap(data, 0x100, b.ACS_EXT_CAP_ID, 0, b.ACS_CAPABILITY, 0)
        acs = pci_config.acs(data)
        self.assertEqual(model.Acs(b.ACS_CAPABILITY, 0), acs)
        self.assertFalse(acs.request_redirect)

    def test_no_acs(self):
        data = downstream_port()
        self.assertIsNone(pci_config.acs(data))
        ext_cap(data, b.AER_OFFSET, b.AER_EXT_CAP_ID, 0)
        self.assertIsNone(pci_config.acs(data))

    def test_looped_chain_ends(self):
        data = downstream_port()
        ext_cap(data, 0x100, b.AER_EXT_CAP_ID, 0x200)
        ext_cap(data, 0x200, b.AER_EXT_CAP_ID, 0x100)
        self.assertIsNone(pci_config.acs(data))

    def test_pointer_below_extended_space_ends_the_chain(self):
        # Below 0x100 is standard space: bytes there that look like an
        # ACS header are no extended capability.
        data = downstream_port()
        ext_cap(data, 0x100, b.AER_EXT_CAP_ID, 0x040)
        struct.pack_into('<IHH', data, 0x40, b.ACS_EXT_CAP_ID, 0xffff, 0xffff)
        self.assertIsNone(pci_config.acs(data))

    def test_all_ones_header(self):
        data = downstream_port()
        struct.pack_into('<I', data, 0x100, 0xffffffff)
        self.assertIsNone(pci_config.acs(data))


class TestGarbage(base.TestCase):

    def test_short_data(self):
        data = bytes(downstream_port()[:b.UNPRIVILEGED_CONFIG_SIZE])
        self.assertEqual(pci_config.ConfigFacts(None, None, False),
                         pci_config.parse(data))

    def test_standard_space_only_leaves_acs_unknown(self):
        # A switch port with ACS redirect on, read without extended config
        # space: its ACS is unknown, never "no ACS".
        data = downstream_port()
        ext_cap(data, b.ACS_OFFSET, b.ACS_EXT_CAP_ID, 0, b.ACS_CAPABILITY,
                b.ACS_REDIRECT)
        facts = pci_config.parse(bytes(data[:pci_config.STANDARD_SIZE]))
        self.assertEqual(model.PortType.DOWNSTREAM, facts.port_type)
        self.assertFalse(facts.acs_known)
        self.assertTrue(pci_config.parse(bytes(data)).acs_known)

    def test_vanished_device_reads_all_ones(self):
        # Vendor ID 0xffff: the device did not answer, nothing is known
        # (issue 35 item 4: this read as "no ACS", failing open).
        self.assertIs(pci_config.UNREAD,
                      pci_config.parse(b'\xff' * pci_config.EXTENDED_SIZE))
        self.assertFalse(pci_config.answered(b'\xff' * 64))
        self.assertTrue(pci_config.answered(bytes(downstream_port())))


class TestCpulist(base.TestCase):

    def test_parse_cpulist(self):
        self.assertEqual(frozenset({0, 1, 2, 3, 8, 10, 11}),
                         sysfs.parse_cpulist('0-3,8,10-11\n'))
        for empty in ('', '\n', ' , '):
            self.assertEqual(frozenset(), sysfs.parse_cpulist(empty))

    def test_spaces_around_parts(self):
        self.assertEqual(frozenset({1, 3, 4}),
                         sysfs.parse_cpulist(' 1 , 3-4'))

    def test_last_cpu(self):
        last = sysfs.MAX_CPUS - 1
        self.assertEqual(frozenset({last}),
                         sysfs.parse_cpulist('%d-%d' % (last, last)))

    def test_bad_parts_named(self):
        for bad in ('31-0', '0-%d' % sysfs.MAX_CPUS, '0-99999999999', 'a',
                    '1-', '-1', '1-2-3', '^3', '0x1'):
            exc = self.assertRaises(ValueError, sysfs.parse_cpulist,
                                    '0-3,%s,8' % bad)
            self.assertEqual("'%s' is not a CPU or a range of CPUs (N or "
                             "N-M, N <= M < 8192)" % bad, str(exc))


def resource(*lines: tuple[int, int, int]) -> str:
    return ''.join('0x%016x 0x%016x 0x%016x\n' % line for line in lines)


class TestBars64(base.TestCase):

    def test_only_64_bit_memory_bars(self):
        unused = (0, 0, 0)
        text = resource(
            (0x90000000, 0x90ffffff, b.FLAGS_MEM32),
            (0x20000000000, 0x21fffffffff, b.FLAGS_MEM64_PREF),
            unused,
            (0x94000000, 0x94003fff, b.FLAGS_MEM64),
            unused,
            (0x1000, 0x107f, 0x00040101),  # I/O
            (0x95000000, 0x9507ffff, 0x00046200),  # expansion ROM
            *[unused] * 8,
            # A bridge's 64-bit prefetchable window is no BAR of its own.
            (0x20000000000, 0x21fffffffff, b.FLAGS_WINDOW_PREF64),
            unused)
        self.assertEqual((128 * b.GiB, 16 * b.KiB), sysfs.parse_bars64(text))

    def test_no_bars(self):
        self.assertEqual((), sysfs.parse_bars64(''))
        self.assertEqual((), sysfs.parse_bars64(resource(*[(0, 0, 0)] * 13)))
