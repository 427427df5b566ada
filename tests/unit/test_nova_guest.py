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


"""Between Nova's LibvirtConfigGuest and the plan: read, then apply.

Nova's guest config is built by hand here, as Nova's driver builds it for
a q35 KVM guest with two passthrough GPUs and an SR-IOV VF.
"""

import types

from lxml import etree
from nova import objects
from nova.virt.libvirt import config as vconfig
from oslo_utils import units

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import devices
from nova_gpu_p2p.guest import expander_buses as eb
from nova_gpu_p2p.guest import libvirt_config as lc
from nova_gpu_p2p.guest import metadata
from nova_gpu_p2p.guest import nova_guest
from nova_gpu_p2p.guest import pcihole64
from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p.guest import root_port_links as rpl
from nova_gpu_p2p.topology import model
from tests.unit import base

GiB = 1 << 30
QEMU = '{http://libvirt.org/schemas/domain/qemu/1.0}'
P2P = '{http://openstack.org/xmlns/libvirt/nova-gpu-p2p/1.0}'
GPU_A = '0000:03:00.0'
GPU_B = '0000:81:00.0'
VF = '0000:09:00.1'
DISK = '0000:c4:00.0'


def hostdev(domain, bus, slot, function):
    dev = vconfig.LibvirtConfigGuestHostdevPCI()
    dev.domain = domain
    dev.bus = bus
    dev.slot = slot
    dev.function = function
    return dev


def interface(source_dev=VF, net_type='hostdev'):
    dev = vconfig.LibvirtConfigGuestInterface()
    dev.net_type = net_type
    dev.source_dev = source_dev
    dev.mac_addr = 'fa:16:3e:11:22:33'
    return dev


def numa_cell(cell_id, cpus):
    cell = vconfig.LibvirtConfigGuestCPUNUMACell()
    cell.id = cell_id
    cell.cpus = cpus
    cell.memory = 8 * units.Mi
    return cell


def topology():
    def f(address, class_code, vendor, numa, rc):
        return model.PCIFunction(address=address, vendor=vendor,
                                 device=0x1, class_code=class_code,
                                 parent=None, root_complex=rc,
                                 numa_node=numa)
    functions = [
        f(GPU_A, 0x030200, 0x10de, 0, 'pci0000:00'),
        f(GPU_B, 0x030200, 0x10de, 1, 'pci0000:80'),
        f(VF, 0x020000, 0x15b3, 0, 'pci0000:00'),
        f(DISK, 0x010802, 0x144d, 0, 'pci0000:00'),
    ]
    return model.HostTopology(functions={x.address: x for x in functions})


class NovaGuestBase(base.TestCase):

    def setUp(self):
        super().setUp()
        guest = vconfig.LibvirtConfigGuest()
        guest.virt_type = 'kvm'
        guest.name = 'instance-00000001'
        guest.uuid = 'f6b06bb4-9d6a-4ff5-b7c5-12a3a8a1c7f4'
        guest.memory = 16 * units.Mi  # KiB, as Nova sets it
        guest.vcpus = 4
        guest.os_type = 'hvm'
        guest.os_mach_type = 'pc-q35-8.2'
        guest.features = [vconfig.LibvirtConfigGuestFeatureACPI(),
                          vconfig.LibvirtConfigGuestFeatureAPIC()]
        cpu = vconfig.LibvirtConfigGuestCPU()
        cpu.mode = 'host-model'
        cpu.numa = vconfig.LibvirtConfigGuestCPUNUMA()
        cpu.numa.cells = [numa_cell(0, {0, 1}), numa_cell(1, {2, 3})]
        guest.cpu = cpu
        guest.cputune = vconfig.LibvirtConfigGuestCPUTune()
        guest.numatune = vconfig.LibvirtConfigGuestNUMATune()
        self.nova_meta = vconfig.LibvirtConfigGuestMetaNovaInstance()
        self.nova_meta.package = '34.0.0'
        self.nova_meta.name = 'vm1'
        guest.metadata = [self.nova_meta]
        self.root = vconfig.LibvirtConfigGuestPCIeRootController()
        self.disk = vconfig.LibvirtConfigGuestDisk()
        self.disk.source_type = 'file'
        self.disk.source_path = '/tmp/disk'
        self.disk.target_dev = 'vda'
        self.disk.target_bus = 'virtio'
        self.gpu_a = hostdev('0000', '03', '00', '0')
        self.gpu_b = hostdev('0000', '81', '00', '0')
        self.nvme = hostdev('0000', 'c4', '00', '0')
        self.vf = interface()
        for dev in (self.root, self.disk, self.gpu_a, self.gpu_b, self.vf,
                    self.nvme):
            guest.add_device(dev)
        self.guest = guest
        self.topology = topology()


def instance(*host_nodes, vm_state='building', extra_specs=None):
    cells = [types.SimpleNamespace(id=node) for node in host_nodes]
    return types.SimpleNamespace(
        numa_topology=types.SimpleNamespace(cells=cells) if cells else None,
        vm_state=vm_state,
        flavor=types.SimpleNamespace(extra_specs=extra_specs or {}))


class TestInstanceDevices(NovaGuestBase):

    def test_finds_hostdevs_and_hostdev_interfaces(self):
        found = nova_guest.instance_devices(self.guest, self.topology)
        self.assertEqual([GPU_A, GPU_B, VF, DISK],
                         [d.address for d in found])
        self.assertEqual([devices.DeviceKind.GPU, devices.DeviceKind.GPU,
                          devices.DeviceKind.NIC, devices.DeviceKind.OTHER],
                         [d.kind for d in found])
        self.assertEqual([True, True, False, False],
                         [d.nvidia_gpu for d in found])

    def test_libvirt_style_hex_prefix(self):
        self.guest.devices = [hostdev('0x0000', '0x81', '0x00', '0x0')]
        found = nova_guest.instance_devices(self.guest, self.topology)
        self.assertEqual([GPU_B], [d.address for d in found])
        self.assertTrue(found[0].known)

    def test_upper_case_normalised(self):
        self.guest.devices = [hostdev('0000', 'C1', '1F', '7')]
        found = nova_guest.instance_devices(self.guest, self.topology)
        self.assertEqual(['0000:c1:1f.7'], [d.address for d in found])
        self.assertFalse(found[0].known)

    def test_other_interfaces_ignored(self):
        self.guest.devices = [interface(net_type='bridge',
                                        source_dev='br0')]
        self.assertEqual(
            [], nova_guest.instance_devices(self.guest, self.topology))

    def test_unknown_hostdev_interface_is_nic(self):
        self.guest.devices = [interface(source_dev='0000:0a:00.2')]
        found = nova_guest.instance_devices(self.guest, self.topology)
        self.assertIs(devices.DeviceKind.NIC, found[0].kind)
        self.assertFalse(found[0].known)

    def test_no_devices(self):
        self.guest.devices = []
        self.assertEqual(
            [], nova_guest.instance_devices(self.guest, self.topology))


class TestReadFacts(NovaGuestBase):

    def read(self, inst=None, version=(9, 0, 0), host_bits=46):
        return nova_guest.read_facts(self.guest, inst or instance(0, 1),
                                     version, host_bits)

    def test_basic(self):
        facts = self.read(instance(1, 0))
        self.assertEqual((1, 0), facts.host_node_of_cell)
        self.assertEqual('pc-q35-8.2', facts.machine_type)
        self.assertTrue(facts.acpi)
        self.assertFalse(facts.hypervisor_hidden)
        self.assertEqual((9, 0, 0), facts.libvirt_version)
        self.assertEqual(16 * GiB, facts.memory)

    def test_host_cpu(self):
        self.assertIsNone(self.read().host_cpu)
        cpu = {'vendor': 'GenuineIntel', 'familyid': 6, 'modelid': 143}
        facts = nova_guest.read_facts(self.guest, instance(0, 1), (9, 0, 0),
                                      46, (7, 2, 0), cpu)
        self.assertEqual((cpu, (7, 2, 0)), (facts.host_cpu,
                                            facts.qemu_version))

    def test_no_numa_topology(self):
        self.assertIsNone(self.read(instance()).host_node_of_cell)

    def test_nova_numa_objects(self):
        objects.register_all()
        inst = types.SimpleNamespace(
            numa_topology=objects.InstanceNUMATopology(cells=[
                objects.InstanceNUMACell(id=1, cpuset=set(), pcpuset={0, 1},
                                         memory=1024),
                objects.InstanceNUMACell(id=0, cpuset=set(), pcpuset={2, 3},
                                         memory=1024)]),
            vm_state='building')
        self.assertEqual((1, 0), self.read(inst).host_node_of_cell)

    def test_new_build_only_while_building(self):
        self.assertTrue(self.read().new_build)
        for state in ('active', 'stopped', 'shelved_offloaded', 'error',
                      'resized', 'rescued'):
            self.assertFalse(
                self.read(instance(0, vm_state=state)).new_build, state)

    def test_no_acpi(self):
        self.guest.features = []
        self.assertFalse(self.read().acpi)

    def test_hidden(self):
        self.guest.features.append(
            vconfig.LibvirtConfigGuestFeatureKvmHidden())
        self.assertTrue(self.read().hypervisor_hidden)

    def test_used_pci_indexes(self):
        port = vconfig.LibvirtConfigGuestPCIeRootPortController()
        port.index = 1
        unindexed = vconfig.LibvirtConfigGuestPCIeRootPortController()
        usb = vconfig.LibvirtConfigGuestUSBHostController()
        usb.index = 5
        self.root.index = 0
        for dev in (port, unindexed, usb):
            self.guest.add_device(dev)
        self.assertEqual(frozenset({0, 1}), self.read().used_pci_indexes)

    def test_used_pci_indexes_none(self):
        self.assertEqual(frozenset(), self.read().used_pci_indexes)

    def test_phys_bits_default(self):
        self.assertEqual(40, self.read().phys_bits)

    def test_phys_bits_no_cpu(self):
        self.guest.cpu = None
        self.assertEqual(40, self.read(host_bits=46).phys_bits)

    def test_phys_bits_emulate(self):
        self.guest.cpu.maxphysaddr = vconfig.LibvirtConfigGuestCPUMaxPhysAddr()
        self.guest.cpu.maxphysaddr.mode = 'emulate'
        self.guest.cpu.maxphysaddr.bits = 42
        self.assertEqual(42, self.read(host_bits=46).phys_bits)

    def test_phys_bits_property_named(self):
        # Issue 35 item 1: a refusal names where the tenant set the bits;
        # Nova reads the flavor's key first, then the image's property.
        self.guest.cpu.maxphysaddr = vconfig.LibvirtConfigGuestCPUMaxPhysAddr()
        self.guest.cpu.maxphysaddr.mode = 'emulate'
        self.guest.cpu.maxphysaddr.bits = -1
        self.assertEqual('hw_maxphysaddr_bits (image property)',
                         self.read().phys_bits_property)
        flavor = instance(0, 1, extra_specs={'hw:maxphysaddr_bits': '-1'})
        self.assertEqual('hw:maxphysaddr_bits (flavor extra spec)',
                         self.read(flavor).phys_bits_property)

    def test_phys_bits_passthrough_mode(self):
        self.guest.cpu.maxphysaddr = vconfig.LibvirtConfigGuestCPUMaxPhysAddr()
        self.guest.cpu.maxphysaddr.mode = 'passthrough'
        self.assertEqual(46, self.read(host_bits=46).phys_bits)
        self.assertIsNone(self.read(host_bits=None).phys_bits)

    def test_phys_bits_host_passthrough_cpu(self):
        self.guest.cpu.mode = 'host-passthrough'
        self.assertEqual(52, self.read(host_bits=52).phys_bits)

    def test_phys_bits_host_model_cpu(self):
        self.guest.cpu.mode = 'host-model'
        self.assertEqual(40, self.read(host_bits=52).phys_bits)

    def test_phys_bits_custom_cpu(self):
        self.guest.cpu.mode = 'custom'
        self.guest.cpu.model = 'Skylake-Server'
        self.assertEqual(40, self.read(host_bits=46).phys_bits)


def make_plan(cliques=None, buses=(), hole=None, distances=None, notes=(),
              devs=(), clique='auto', numa='preferred', port_links=None):
    return plan_mod.GuestPlan(
        request=extra_specs.GPUP2PRequest(
            clique=extra_specs.parse_clique(clique),
            numa_affinity=extra_specs.parse_numa_affinity(numa)),
        devices=tuple(devs), cliques=dict(cliques or {}),
        buses=eb.BusLayout(buses=tuple(buses)), hole64=hole,
        distances=distances, notes=tuple(notes),
        port_links=dict(port_links or {}))


BUS_0 = eb.ExpanderBus(index=1, bus_nr=252, guest_node=0, host_numa_node=0,
                       host_group='pci0000:00',
                       ports=(eb.RootPort(index=2, slot=0, device=GPU_A),
                              eb.RootPort(index=3, slot=1, device=VF)))
BUS_1 = eb.ExpanderBus(index=4, bus_nr=250, guest_node=1, host_numa_node=1,
                       host_group='pci0000:80',
                       ports=(eb.RootPort(index=5, slot=0, device=GPU_B),))


class TestApply(NovaGuestBase):

    def devices_of(self, result, cls):
        return [d for d in result.devices if isinstance(d, cls)]

    def test_returns_our_guest(self):
        result = nova_guest.apply(self.guest, make_plan())
        self.assertIsInstance(result, lc.Guest)
        self.assertIsNot(self.guest, result)
        self.assertEqual(self.guest.name, result.name)

    def test_clique_hostdev(self):
        result = nova_guest.apply(self.guest,
                                  make_plan(cliques={GPU_A: 0, GPU_B: 0}))
        gpu = result.devices[2]
        self.assertIsInstance(gpu, lc.HostdevPCI)
        self.assertEqual('ua-gpu-p2p-0000-03-00-0', gpu.alias)
        self.assertEqual('vfio', gpu.driver_name)
        self.assertIsNone(gpu.guest_address)
        dom = gpu.format_dom()
        self.assertEqual('vfio', dom.find('driver').get('name'))
        self.assertEqual('ua-gpu-p2p-0000-03-00-0',
                         dom.find('alias').get('name'))
        self.assertEqual('0x03', dom.find('source/address').get('bus'))
        self.assertIsNone(self.gpu_a.alias)

    def test_hostdevs_in_host_address_order_wherever_nova_put_them(self):
        """Two builds of one guest list Nova's PCI records differently."""
        plan = make_plan(cliques={GPU_A: 0, GPU_B: 0})
        first = nova_guest.apply(self.guest, plan)
        self.assertEqual(
            [self.root, self.disk, '0000:03:00.0', '0000:81:00.0', self.vf,
             '0000:c4:00.0'],
            [nova_guest._host_address(d)[0]
             if isinstance(d, vconfig.LibvirtConfigGuestHostdevPCI) else d
             for d in first.devices])
        self.guest.devices = [self.root, self.nvme, self.disk, self.gpu_b,
                              self.vf, self.gpu_a]
        again = nova_guest.apply(self.guest, plan)
        self.assertEqual(
            [self.root, '0000:03:00.0', self.disk, '0000:81:00.0', self.vf,
             '0000:c4:00.0'],
            [nova_guest._host_address(d)[0]
             if isinstance(d, vconfig.LibvirtConfigGuestHostdevPCI) else d
             for d in again.devices])
        self.assertEqual(
            etree.tostring(first.qemu_override.format_dom()),
            etree.tostring(again.qemu_override.format_dom()))

    def test_alias_has_user_prefix(self):
        self.assertEqual('ua-gpu-p2p-0000-81-00-0',
                         nova_guest.device_alias(GPU_B))

    def test_override_per_clique_gpu(self):
        result = nova_guest.apply(self.guest,
                                  make_plan(cliques={GPU_A: 0, GPU_B: 1}))
        self.assertEqual(
            [('ua-gpu-p2p-0000-03-00-0', '0'),
             ('ua-gpu-p2p-0000-81-00-0', '1')],
            [(d.alias, d.properties[0].value)
             for d in result.qemu_override.devices])
        dom = result.format_dom()
        self.assertEqual(QEMU + 'override', dom[-1].tag)
        props = dom.findall('.//' + QEMU + 'property')
        self.assertEqual(['x-nv-gpudirect-clique'] * 2,
                         [p.get('name') for p in props])

    def test_no_cliques_no_override(self):
        result = nova_guest.apply(self.guest, make_plan())
        dom = result.format_dom()
        self.assertIsNone(dom.find(QEMU + 'override'))

    def test_untouched_devices_are_nova_objects(self):
        result = nova_guest.apply(self.guest,
                                  make_plan(cliques={GPU_A: 0, GPU_B: 0}))
        self.assertIs(self.root, result.devices[0])
        self.assertIs(self.disk, result.devices[1])
        self.assertIs(self.vf, result.devices[4])
        self.assertIs(self.nvme, result.devices[5])

    def test_nothing_planned_keeps_every_device(self):
        result = nova_guest.apply(self.guest, make_plan())
        self.assertEqual([id(d) for d in self.guest.devices],
                         [id(d) for d in result.devices])

    def test_nova_device_list_not_mutated(self):
        before = list(self.guest.devices)
        nova_guest.apply(self.guest, make_plan(cliques={GPU_A: 0},
                                               buses=[BUS_0, BUS_1]))
        self.assertEqual(before, self.guest.devices)
        self.assertEqual([id(d) for d in before],
                         [id(d) for d in self.guest.devices])

    def test_guest_address_on_root_port(self):
        result = nova_guest.apply(self.guest, make_plan(
            cliques={GPU_A: 0}, buses=[BUS_0, BUS_1]))
        gpu_a, gpu_b = result.devices[2], result.devices[3]
        self.assertEqual(('0x02', '0x00'), (gpu_a.guest_address.bus,
                                            gpu_a.guest_address.slot))
        self.assertEqual(('0x05', '0x00'), (gpu_b.guest_address.bus,
                                            gpu_b.guest_address.slot))
        # GPU_B has an address but no clique: no alias; vfio named, as on
        # every hostdev we touch.
        self.assertIsNone(gpu_b.alias)
        self.assertEqual('vfio', gpu_b.driver_name)
        dom = gpu_b.format_dom()
        self.assertEqual('0x05', dom.find('address').get('bus'))
        self.assertEqual('0x00', dom.find('address').get('slot'))
        self.assertEqual('vfio', dom.find('driver').get('name'))

    def test_interface_hostdev_gets_only_an_address(self):
        result = nova_guest.apply(self.guest, make_plan(
            cliques={GPU_A: 0}, buses=[BUS_0]))
        vf = result.devices[4]
        self.assertIsInstance(vf, lc.HostdevInterface)
        self.assertEqual('0x03', vf.guest_address.bus)
        self.assertIsNone(vf.alias)
        self.assertEqual(VF, vf.source_dev)
        dom = vf.format_dom()
        self.assertEqual('0x03', dom.find('address').get('bus'))
        self.assertEqual('0x09', dom.find('source/address').get('bus'))
        self.assertEqual(1, len(result.qemu_override.devices))

    def test_root_ports_at_the_host_link(self):
        result = nova_guest.apply(self.guest, make_plan(
            cliques={GPU_A: 0}, buses=[BUS_0, BUS_1], port_links={
                2: rpl.PortLink('32', '16'), 5: rpl.PortLink('2_5', None)}))
        dom = result.format_dom()
        override = dom.find(QEMU + 'override')
        found = {d.get('alias'): [(p.get('name'), p.get('type'),
                                   p.get('value'))
                                  for p in d.iter(QEMU + 'property')]
                 for d in override.findall(QEMU + 'device')}
        # libvirt names PCI controller N pci.N; port 3 (the VF's) has no
        # known host link and keeps QEMU's defaults.
        self.assertEqual({
            'ua-gpu-p2p-0000-03-00-0': [
                ('x-nv-gpudirect-clique', 'unsigned', '0')],
            'pci.2': [('x-speed', 'string', '32'),
                      ('x-width', 'string', '16')],
            'pci.5': [('x-speed', 'string', '2_5')]}, found)
        ports = [c for c in dom.findall('devices/controller')
                 if c.get('model') == 'pcie-root-port']
        self.assertEqual(['2', '3', '5'], [c.get('index') for c in ports])

    def test_interface_not_placed_untouched(self):
        result = nova_guest.apply(self.guest, make_plan(buses=[BUS_1]))
        self.assertIs(self.vf, result.devices[4])

    def test_unplaced_nvme_untouched(self):
        result = nova_guest.apply(self.guest, make_plan(buses=[BUS_0]))
        self.assertIs(self.nvme, result.devices[5])

    def test_pcie_root_adopted_with_index_and_hole(self):
        hole = pcihole64.Hole64(size=128 * GiB, needed=96 * GiB)
        result = nova_guest.apply(self.guest, make_plan(
            buses=[BUS_0], hole=hole))
        root = result.devices[0]
        self.assertIsInstance(root, lc.PCIeRootController)
        self.assertEqual(134217728, root.pcihole64_kib)
        dom = root.format_dom()
        self.assertEqual('0', dom.get('index'))
        self.assertEqual('pcie-root', dom.get('model'))
        self.assertEqual('134217728', dom.find('pcihole64').text)
        self.assertEqual('KiB', dom.find('pcihole64').get('unit'))
        self.assertNotIsInstance(self.root, lc.PCIeRootController)

    def test_pcie_root_without_hole_size(self):
        hole = pcihole64.Hole64(size=None, needed=32 * GiB)
        result = nova_guest.apply(self.guest, make_plan(
            buses=[BUS_0], hole=hole))
        root = result.devices[0]
        self.assertIsInstance(root, lc.PCIeRootController)
        self.assertIsNone(root.format_dom().find('pcihole64'))

    def test_pcie_root_untouched_without_buses(self):
        result = nova_guest.apply(self.guest, make_plan(cliques={GPU_A: 0}))
        self.assertIs(self.root, result.devices[0])

    def test_pcie_root_added_when_nova_had_none(self):
        self.guest.devices.remove(self.root)
        hole = pcihole64.Hole64(size=64 * GiB, needed=64 * GiB)
        result = nova_guest.apply(self.guest, make_plan(
            buses=[BUS_0], hole=hole))
        roots = self.devices_of(result, lc.PCIeRootController)
        self.assertEqual(1, len(roots))
        self.assertIs(roots[0], result.devices[0])
        dom = roots[0].format_dom()
        self.assertEqual({'type': 'pci', 'index': '0', 'model': 'pcie-root'},
                         dict(dom.attrib))
        self.assertEqual(str(64 * units.Mi), dom.find('pcihole64').text)

    def test_controllers_appended(self):
        result = nova_guest.apply(self.guest, make_plan(
            buses=[BUS_0, BUS_1]))
        added = result.devices[len(self.guest.devices):]
        self.assertEqual(
            [('pcie-expander-bus', 1), ('pcie-root-port', 2),
             ('pcie-root-port', 3), ('pcie-expander-bus', 4),
             ('pcie-root-port', 5)],
            [(c.model, c.index) for c in added])
        doms = [c.format_dom() for c in added]
        self.assertEqual('252', doms[0].find('target').get('busNr'))
        self.assertEqual('0', doms[0].find('target/node').text)
        self.assertEqual('250', doms[3].find('target').get('busNr'))
        self.assertEqual('1', doms[3].find('target/node').text)
        self.assertEqual([('0x01', '0x00'), ('0x01', '0x01'),
                          ('0x04', '0x00')],
                         [(d.find('address').get('bus'),
                           d.find('address').get('slot'))
                          for d in (doms[1], doms[2], doms[4])])

    def test_no_controllers_without_buses(self):
        result = nova_guest.apply(self.guest, make_plan(cliques={GPU_A: 0}))
        self.assertEqual(len(self.guest.devices), len(result.devices))

    def test_numa_distances_added(self):
        nova_cells = list(self.guest.cpu.numa.cells)
        result = nova_guest.apply(self.guest, make_plan(
            distances=((10, 21), (21, 10))))
        cells = result.cpu.numa.cells
        self.assertEqual([lc.NUMACell, lc.NUMACell],
                         [type(c) for c in cells])
        self.assertEqual([{0: 10, 1: 21}, {0: 21, 1: 10}],
                         [c.distances for c in cells])
        self.assertEqual([0, 1], [c.id for c in cells])
        self.assertEqual([{0, 1}, {2, 3}], [c.cpus for c in cells])
        dom = result.format_dom()
        self.assertEqual(
            [[('0', '10'), ('1', '21')], [('0', '21'), ('1', '10')]],
            [[(s.get('id'), s.get('value')) for s in cell.find('distances')]
             for cell in dom.findall('cpu/numa/cell')])
        for cell in nova_cells:
            self.assertNotIsInstance(cell, lc.NUMACell)

    def test_no_distances_cells_untouched(self):
        cells = self.guest.cpu.numa.cells
        result = nova_guest.apply(self.guest, make_plan(cliques={GPU_A: 0}))
        self.assertIs(cells, result.cpu.numa.cells)

    def test_nova_tuning_untouched(self):
        cputune, numatune = self.guest.cputune, self.guest.numatune
        cells = list(self.guest.cpu.numa.cells)
        result = nova_guest.apply(self.guest, make_plan(
            cliques={GPU_A: 0}, buses=[BUS_0, BUS_1],
            distances=((10, 21), (21, 10))))
        self.assertIs(cputune, result.cputune)
        self.assertIs(numatune, result.numatune)
        # Nova's own cpu/numa objects keep Nova's cells; ours add distances.
        self.assertEqual(cells, self.guest.cpu.numa.cells)
        self.assertNotIsInstance(self.guest.cpu.numa.cells[0], lc.NUMACell)
        self.assertIsInstance(result.cpu.numa.cells[0], lc.NUMACell)
        self.assertEqual('host-model', result.cpu.mode)
        self.assertIs(self.guest.features, result.features)

    def test_metadata_appended_after_nova(self):
        result = nova_guest.apply(self.guest, make_plan(cliques={GPU_A: 0}))
        self.assertEqual(2, len(result.metadata))
        self.assertIs(self.nova_meta, result.metadata[0])
        self.assertIsInstance(result.metadata[1], metadata.DecisionRecord)
        self.assertEqual([self.nova_meta], self.guest.metadata)

    def test_whole_domain_xml(self):
        plan = make_plan(
            cliques={GPU_A: 0, GPU_B: 0}, buses=[BUS_0, BUS_1],
            hole=pcihole64.Hole64(size=64 * GiB, needed=64 * GiB),
            distances=((10, 21), (21, 10)))
        dom = etree.fromstring(nova_guest.apply(self.guest, plan).to_xml())
        self.assertEqual(2, len(dom.findall(
            "devices/controller[@model='pcie-expander-bus']")))
        self.assertEqual(3, len(dom.findall(
            "devices/controller[@model='pcie-root-port']")))
        self.assertEqual(2, len(dom.findall('devices/hostdev/alias')))
        self.assertEqual(2, len(dom.findall(
            QEMU + 'override/' + QEMU + 'device')))
        self.assertEqual(
            ['{http://openstack.org/xmlns/libvirt/nova/1.1}instance',
             P2P + 'decision'],
            [m.tag for m in dom.find('metadata')])
        self.assertEqual(QEMU + 'override', dom[-1].tag)


class TestHostdevAddresses(base.TestCase):

    def test_pci_hostdevs_only(self):
        xml = ("<domain><devices>"
               "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
               "<address domain='0x0000' bus='0x8a' slot='0x00' "
               "function='0x1'/></source>"
               "<address type='pci' domain='0x0000' bus='0x05' slot='0x00' "
               "function='0x0'/></hostdev>"
               "<hostdev mode='subsystem' type='usb'><source>"
               "<address bus='1' device='2'/></source></hostdev>"
               "<interface type='hostdev'><source><address type='pci' "
               "domain='0x0000' bus='0x85' slot='0x00' function='0x2'/>"
               "</source></interface>"
               "</devices></domain>")
        # The guest-side address and non-PCI hostdevs are not the host's.
        self.assertEqual(('0000:8a:00.1',),
                         nova_guest.hostdev_addresses(xml))

    def test_no_devices(self):
        self.assertEqual((), nova_guest.hostdev_addresses('<domain/>'))


class TestMetadata(base.TestCase):

    def plan(self, **kwargs):
        devs = (
            devices.GuestDevice(address=GPU_B, kind=devices.DeviceKind.GPU,
                                nvidia_gpu=True, numa_node=1,
                                root_complex='pci0000:80'),
            devices.GuestDevice(address=GPU_A, kind=devices.DeviceKind.GPU,
                                nvidia_gpu=True, numa_node=0,
                                root_complex='pci0000:00'),
            devices.GuestDevice(address=VF, kind=devices.DeviceKind.NIC,
                                numa_node=0, root_complex='pci0000:00'),
            devices.GuestDevice(address=DISK, kind=devices.DeviceKind.OTHER,
                                known=False),
        )
        return make_plan(devs=devs, **kwargs)

    def test_summary_full(self):
        plan = self.plan(
            cliques={GPU_A: 0, GPU_B: 1}, buses=[BUS_0, BUS_1],
            hole=pcihole64.Hole64(size=128 * GiB, needed=96 * GiB),
            notes=('first note', 'second note'))
        self.assertEqual(
            'GPU P2P layout: 0000:03:00.0 clique 0 on expander bus 1 '
            '(guest node 0); 0000:09:00.1 on expander bus 1 (guest node 0); '
            '0000:81:00.0 clique 1 on expander bus 4 (guest node 1); '
            '0000:c4:00.0. Expander buses: index 1 busNr 252 node 0 '
            '(pci0000:00), index 4 busNr 250 node 1 (pci0000:80). '
            'pcihole64 128 GiB. Fallbacks: first note | second note',
            metadata.summary(plan))

    def test_summary_no_devices(self):
        self.assertEqual('GPU P2P layout: no devices',
                         metadata.summary(make_plan()))

    def test_summary_cliques_only(self):
        plan = self.plan(cliques={GPU_A: 3})
        line = metadata.summary(plan)
        self.assertIn('0000:03:00.0 clique 3;', line)
        self.assertNotIn('Expander', line)
        self.assertNotIn('pcihole64', line)
        self.assertNotIn('Fallbacks', line)

    def test_summary_hole_default_omitted(self):
        plan = self.plan(buses=[BUS_0],
                         hole=pcihole64.Hole64(size=None, needed=GiB))
        self.assertNotIn('pcihole64', metadata.summary(plan))

    def test_record_xml(self):
        plan = self.plan(
            cliques={GPU_A: 0}, buses=[BUS_0],
            hole=pcihole64.Hole64(size=64 * GiB, needed=48 * GiB),
            notes=('a note',), clique='required', numa='required')
        dom = metadata.DecisionRecord(plan).format_dom()
        self.assertEqual(P2P + 'decision', dom.tag)
        self.assertEqual('gpu_p2p', dom.prefix)
        self.assertEqual(
            [P2P + 'request'] + [P2P + 'device'] * 4 +
            [P2P + 'expander_bus', P2P + 'pcihole64', P2P + 'note'],
            [c.tag for c in dom])
        self.assertEqual({'clique': 'required', 'numa_affinity': 'required'},
                         dict(dom[0].attrib))
        self.assertEqual(
            {'address': GPU_A, 'kind': 'gpu', 'host_numa_node': '0',
             'root_complex': 'pci0000:00', 'clique': '0',
             'expander_bus': '1', 'root_port': '2', 'guest_node': '0'},
            dict(dom[1].attrib))
        self.assertEqual(
            {'address': VF, 'kind': 'nic', 'host_numa_node': '0',
             'root_complex': 'pci0000:00', 'expander_bus': '1',
             'root_port': '3', 'guest_node': '0'}, dict(dom[2].attrib))
        self.assertEqual(
            {'address': GPU_B, 'kind': 'gpu', 'host_numa_node': '1',
             'root_complex': 'pci0000:80'}, dict(dom[3].attrib))
        self.assertEqual({'address': DISK, 'kind': 'other'},
                         dict(dom[4].attrib))
        self.assertEqual(
            {'index': '1', 'bus_nr': '252', 'guest_node': '0',
             'host_numa_node': '0', 'host_group': 'pci0000:00'},
            dict(dom[5].attrib))
        self.assertEqual({'size_kib': str(64 * units.Mi),
                          'needed_kib': str(48 * units.Mi)},
                         dict(dom[6].attrib))
        self.assertEqual('a note', dom[7].text)

    def test_record_fixed_clique_request(self):
        plan = make_plan(clique='12', numa='none')
        dom = metadata.DecisionRecord(plan).format_dom()
        self.assertEqual({'clique': '12', 'numa_affinity': 'none'},
                         dict(dom[0].attrib))
        self.assertEqual(1, len(dom))

    def test_record_namespace_in_domain(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.virt_type = 'kvm'
        guest.os_type = 'hvm'
        guest.metadata = [metadata.DecisionRecord(make_plan())]
        text = guest.to_xml()
        self.assertIn('xmlns:gpu_p2p="http://openstack.org/xmlns/libvirt/'
                      'nova-gpu-p2p/1.0"', text)
        self.assertIsNotNone(etree.fromstring(text).find(
            'metadata/' + P2P + 'decision/' + P2P + 'request'))
