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


"""The libvirt config classes this driver adds, as XML elements."""

from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_gpu_p2p.guest import libvirt_config as lc
from tests.unit import base
from tests.unit import test_nova_guest

QEMU = '{http://libvirt.org/schemas/domain/qemu/1.0}'


class TestGuestAddress(base.TestCase):

    def test_format(self):
        dom = lc.guest_address(bus=5, slot=0).format_dom()
        self.assertEqual('address', dom.tag)
        self.assertEqual({'type': 'pci', 'domain': '0x0000', 'bus': '0x05',
                          'slot': '0x00', 'function': '0x0'},
                         dict(dom.attrib))

    def test_format_hex(self):
        dom = lc.guest_address(bus=0x1a, slot=31, function=7,
                               domain=1).format_dom()
        self.assertEqual('0x0001', dom.get('domain'))
        self.assertEqual('0x1a', dom.get('bus'))
        self.assertEqual('0x1f', dom.get('slot'))
        self.assertEqual('0x7', dom.get('function'))


class TestPCIeExpanderBus(base.TestCase):

    def test_format(self):
        dom = lc.PCIeExpanderBus(index=3, bus_nr=254, node=1).format_dom()
        self.assertEqual('controller', dom.tag)
        self.assertEqual({'type': 'pci', 'index': '3',
                          'model': 'pcie-expander-bus'}, dict(dom.attrib))
        self.assertEqual(['model', 'target'], [c.tag for c in dom])
        self.assertEqual({'name': 'pxb-pcie'}, dict(dom.find('model').attrib))
        target = dom.find('target')
        self.assertEqual({'busNr': '254'}, dict(target.attrib))
        self.assertEqual('1', target.find('node').text)

    def test_node_zero(self):
        dom = lc.PCIeExpanderBus(index=1, bus_nr=251, node=0).format_dom()
        self.assertEqual('0', dom.find('target/node').text)
        self.assertEqual('251', dom.find('target').get('busNr'))

    def test_is_a_nova_controller(self):
        self.assertIsInstance(lc.PCIeExpanderBus(1, 254, 0),
                              vconfig.LibvirtConfigGuestController)


class TestPCIeRootPort(base.TestCase):

    def test_format(self):
        port = lc.PCIeRootPort(4, lc.guest_address(bus=3, slot=1))
        dom = port.format_dom()
        self.assertEqual({'type': 'pci', 'index': '4',
                          'model': 'pcie-root-port'}, dict(dom.attrib))
        address = dom.find('address')
        self.assertEqual('0x03', address.get('bus'))
        self.assertEqual('0x01', address.get('slot'))
        self.assertEqual('pci', address.get('type'))

    def test_is_a_nova_root_port(self):
        self.assertIsInstance(
            lc.PCIeRootPort(4, lc.guest_address(bus=3, slot=0)),
            vconfig.LibvirtConfigGuestPCIeRootPortController)


class TestPCIeRootController(base.TestCase):

    def test_built_without_hole(self):
        nova = vconfig.LibvirtConfigGuestPCIeRootController()
        dom = lc.PCIeRootController.from_nova(nova).format_dom()
        self.assertEqual({'type': 'pci', 'index': '0',
                          'model': 'pcie-root'}, dict(dom.attrib))
        self.assertEqual([], list(dom))

    def test_hole(self):
        nova = vconfig.LibvirtConfigGuestPCIeRootController()
        root = lc.PCIeRootController.from_nova(nova, pcihole64_kib=134217728)
        dom = root.format_dom()
        hole = dom.find('pcihole64')
        self.assertEqual('134217728', hole.text)
        self.assertEqual('KiB', hole.get('unit'))

    def test_index_zero_overrides_none(self):
        nova = vconfig.LibvirtConfigGuestPCIeRootController()
        self.assertIsNone(nova.index)
        self.assertNotIn('index', nova.format_dom().attrib)
        self.assertEqual('0', lc.PCIeRootController.from_nova(
            nova).format_dom().get('index'))

    def test_from_nova_leaves_nova_object_alone(self):
        nova = vconfig.LibvirtConfigGuestPCIeRootController()
        root = lc.PCIeRootController.from_nova(nova, pcihole64_kib=1024)
        self.assertIsNot(nova, root)
        self.assertNotIsInstance(nova, lc.PCIeRootController)
        self.assertNotIn('pcihole64_kib', vars(nova))


def nova_hostdev(domain='0000', bus='03', slot='00', function='0'):
    return test_nova_guest.hostdev(domain, bus, slot, function)


class TestHostdevPCI(base.TestCase):

    def test_from_nova_keeps_nova_attributes(self):
        nova = nova_hostdev()
        nova.managed = 'no'
        built = lc.HostdevPCI.from_nova(nova)
        for name, value in vars(nova).items():
            self.assertEqual(value, getattr(built, name), name)
        self.assertIsInstance(built, vconfig.LibvirtConfigGuestHostdevPCI)

    def test_built_through_the_constructor(self):
        built = lc.HostdevPCI.from_nova(nova_hostdev())
        self.assertIsNone(built.driver_name)
        self.assertIsNone(built.guest_address)

    def test_attribute_set_outside_init_kept(self):
        nova = nova_hostdev()
        nova.rom_bar = 'off'  # as if Nova set a field outside __init__
        self.assertEqual('off', lc.HostdevPCI.from_nova(nova).rom_bar)
        self.assertEqual('off', lc.rebuilt(nova).rom_bar)

    def test_other_class_refused(self):
        self.assertRaises(TypeError, lc.HostdevPCI.from_nova,
                          vconfig.LibvirtConfigGuestHostdevMDEV())
        self.assertRaises(TypeError, lc.HostdevPCI.from_nova,
                          lc.HostdevPCI.from_nova(nova_hostdev()))

    def test_unknown_added_field_refused(self):
        self.assertRaises(TypeError, lc.HostdevPCI.from_nova,
                          nova_hostdev(), guest_adress=None)

    def test_built_keeps_source_address(self):
        dom = lc.HostdevPCI.from_nova(nova_hostdev(bus='81')).format_dom()
        self.assertEqual({'mode': 'subsystem', 'type': 'pci',
                          'managed': 'yes'}, dict(dom.attrib))
        address = dom.find('source/address')
        self.assertEqual({'domain': '0x0000', 'bus': '0x81',
                          'slot': '0x00', 'function': '0x0'},
                         dict(address.attrib))

    def test_unchanged_formats_as_nova(self):
        nova = nova_hostdev()
        self.assertEqual(etree.tostring(nova.format_dom()),
                         etree.tostring(
                             lc.HostdevPCI.from_nova(nova).format_dom()))

    def test_alias_driver_address(self):
        hostdev = lc.HostdevPCI.from_nova(
            nova_hostdev(), guest_address=lc.guest_address(bus=4, slot=0))
        hostdev.alias = 'ua-gpu'
        hostdev.driver_name = 'vfio'
        dom = hostdev.format_dom()
        self.assertEqual(['source', 'driver', 'alias', 'address'],
                         [c.tag for c in dom])
        self.assertEqual('vfio', dom.find('driver').get('name'))
        self.assertEqual('ua-gpu', dom.find('alias').get('name'))
        guest = dom.find('address')
        self.assertEqual('0x04', guest.get('bus'))
        self.assertEqual('pci', guest.get('type'))
        self.assertEqual('0x03', dom.find('source/address').get('bus'))

    def test_address_only(self):
        hostdev = lc.HostdevPCI.from_nova(
            nova_hostdev(), guest_address=lc.guest_address(bus=7, slot=0))
        dom = hostdev.format_dom()
        self.assertEqual(['source', 'address'], [c.tag for c in dom])

    def test_nova_parsed_alias_kept(self):
        nova = nova_hostdev()
        nova.alias = 'hostdev0'
        dom = lc.HostdevPCI.from_nova(nova).format_dom()
        self.assertEqual('hostdev0', dom.find('alias').get('name'))


class TestHostdevInterface(base.TestCase):

    def nova_interface(self):
        interface = vconfig.LibvirtConfigGuestInterface()
        interface.net_type = 'hostdev'
        interface.source_dev = '0000:09:00.1'
        interface.mac_addr = 'fa:16:3e:00:00:01'
        interface.vlan = 42
        return interface

    def test_from_nova_keeps_everything(self):
        nova = self.nova_interface()
        built = lc.HostdevInterface.from_nova(nova)
        dom = built.format_dom()
        self.assertEqual('hostdev', dom.get('type'))
        self.assertEqual('fa:16:3e:00:00:01', dom.find('mac').get('address'))
        self.assertEqual({'type': 'pci', 'domain': '0x0000', 'bus': '0x09',
                          'slot': '0x00', 'function': '0x1'},
                         dict(dom.find('source/address').attrib))
        self.assertEqual('42', dom.find('vlan/tag').get('id'))
        self.assertIsNone(dom.find('address'))

    def test_guest_address(self):
        built = lc.HostdevInterface.from_nova(
            self.nova_interface(),
            guest_address=lc.guest_address(bus=8, slot=0))
        dom = built.format_dom()
        self.assertEqual('0x08', dom.find('address').get('bus'))
        self.assertEqual('address', dom[-1].tag)


class TestNUMACell(base.TestCase):

    def nova_cell(self, cell_id=0):
        cell = vconfig.LibvirtConfigGuestCPUNUMACell()
        cell.id = cell_id
        cell.cpus = {0, 1}
        cell.memory = 1048576
        cell.memAccess = 'shared'
        return cell

    def test_from_nova_without_distances(self):
        nova = self.nova_cell()
        dom = lc.NUMACell.from_nova(nova).format_dom()
        self.assertEqual({'id': '0', 'cpus': '0-1', 'memory': '1048576',
                          'memAccess': 'shared'}, dict(dom.attrib))
        self.assertIsNone(dom.find('distances'))

    def test_distances_sorted(self):
        cell = lc.NUMACell.from_nova(self.nova_cell(1),
                                     distances={2: 32, 0: 21, 1: 10})
        dom = cell.format_dom()
        self.assertEqual('1', dom.get('id'))
        self.assertEqual([('0', '21'), ('1', '10'), ('2', '32')],
                         [(s.get('id'), s.get('value'))
                          for s in dom.find('distances')])
        self.assertEqual(['sibling'] * 3,
                         [s.tag for s in dom.find('distances')])

    def test_empty_distances_omitted(self):
        cell = lc.NUMACell.from_nova(self.nova_cell(), distances={})
        self.assertIsNone(cell.format_dom().find('distances'))


class TestRebuilt(base.TestCase):

    def test_new_object_same_fields(self):
        nova = vconfig.LibvirtConfigGuestCPU()
        nova.mode = 'host-passthrough'
        nova.numa = vconfig.LibvirtConfigGuestCPUNUMA()
        built = lc.rebuilt(nova)
        self.assertIsNot(nova, built)
        self.assertIs(vconfig.LibvirtConfigGuestCPU, type(built))
        self.assertEqual('host-passthrough', built.mode)
        self.assertIs(nova.numa, built.numa)
        self.assertEqual(etree.tostring(nova.format_dom()),
                         etree.tostring(built.format_dom()))


class TestQemu(base.TestCase):

    def test_property(self):
        dom = lc.QemuProperty('x-foo', 'unsigned', '3').format_dom()
        self.assertEqual(QEMU + 'property', dom.tag)
        self.assertEqual({'name': 'x-foo', 'type': 'unsigned', 'value': '3'},
                         dict(dom.attrib))
        self.assertEqual('qemu', dom.prefix)

    def test_clique_override(self):
        dom = lc.clique_override('ua-gpu-0', 7).format_dom()
        self.assertEqual(QEMU + 'device', dom.tag)
        self.assertEqual('ua-gpu-0', dom.get('alias'))
        self.assertEqual([QEMU + 'frontend'], [c.tag for c in dom])
        props = dom.find(QEMU + 'frontend')
        self.assertEqual(1, len(props))
        self.assertEqual(QEMU + 'property', props[0].tag)
        self.assertEqual({'name': 'x-nv-gpudirect-clique',
                          'type': 'unsigned', 'value': '7'},
                         dict(props[0].attrib))

    def test_device_without_properties(self):
        dom = lc.QemuDeviceOverride('ua-x').format_dom()
        self.assertEqual(0, len(dom.find(QEMU + 'frontend')))

    def test_override(self):
        override = lc.QemuOverride()
        override.devices.append(lc.clique_override('ua-a', 0))
        override.devices.append(lc.clique_override('ua-b', 1))
        dom = override.format_dom()
        self.assertEqual(QEMU + 'override', dom.tag)
        self.assertEqual(['ua-a', 'ua-b'], [d.get('alias') for d in dom])
        self.assertEqual(
            ['0', '1'],
            [d.find(QEMU + 'frontend/' + QEMU + 'property').get('value')
             for d in dom])


def nova_guest():
    guest = vconfig.LibvirtConfigGuest()
    guest.virt_type = 'kvm'
    guest.name = 'instance-00000001'
    guest.uuid = 'f6b06bb4-9d6a-4ff5-b7c5-12a3a8a1c7f4'
    guest.memory = 1048576
    guest.vcpus = 2
    guest.os_type = 'hvm'
    guest.os_mach_type = 'q35'
    guest.features.append(vconfig.LibvirtConfigGuestFeatureACPI())
    guest.add_device(nova_hostdev())
    return guest


class TestGuest(base.TestCase):

    def test_from_nova_keeps_everything(self):
        nova = nova_guest()
        guest = lc.Guest.from_nova(nova, qemu_override=lc.QemuOverride())
        for name, value in vars(nova).items():
            self.assertIs(value, getattr(guest, name), name)

    def test_empty_override_omitted(self):
        nova = nova_guest()
        guest = lc.Guest.from_nova(nova, qemu_override=lc.QemuOverride())
        self.assertEqual(etree.tostring(nova.format_dom()),
                         etree.tostring(guest.format_dom()))
        self.assertNotIn(b'qemu', etree.tostring(guest.format_dom()))

    def test_no_override_omitted(self):
        dom = lc.Guest.from_nova(nova_guest()).format_dom()
        self.assertIsNone(dom.find(QEMU + 'override'))

    def test_override_last(self):
        override = lc.QemuOverride()
        override.devices.append(lc.clique_override('ua-gpu', 2))
        dom = lc.Guest.from_nova(nova_guest(),
                                 qemu_override=override).format_dom()
        self.assertEqual(QEMU + 'override', dom[-1].tag)
        self.assertEqual('devices', dom[-2].tag)
        self.assertEqual(
            '2', dom.find('.//' + QEMU + 'property').get('value'))

    def test_namespace_declared_on_serialisation(self):
        override = lc.QemuOverride()
        override.devices.append(lc.clique_override('ua-gpu', 2))
        guest = lc.Guest.from_nova(nova_guest(), qemu_override=override)
        text = guest.to_xml()
        self.assertIn(
            'xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"', text)
        self.assertIn('<qemu:override', text)
        # Reparses as one well-formed document.
        reparsed = etree.fromstring(text)
        self.assertEqual('domain', reparsed.tag)
        self.assertEqual(
            'x-nv-gpudirect-clique',
            reparsed.find('.//' + QEMU + 'property').get('name'))
