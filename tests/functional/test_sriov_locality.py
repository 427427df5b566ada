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

"""SR-IOV Neutron ports beside the GPUs, through Nova's own services.

Nova attaches a port with ``vnic_type`` ``direct`` (a VF) or
``direct-physical`` (a PF) as ``<interface type='hostdev'>``, not as a
``<hostdev>``. GPUDirect RDMA wants that NIC on the same guest PCIe
expander bus as the GPUs of its host root complex, as
``align_device_types`` (default ``gpu,nic``) promises; these tests read
the domain XML Nova defined to check it.
"""

import json

import fixtures
from lxml import etree
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base

from nova_gpu_p2p.topology import model
from tests.cloud import nova_cloud as base
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder as b
from tests.fixtures import waits
from tests.functional import test_guest_config as guest_config

#: ConnectX-7: the PF, and the VFs mlx5_core creates on it.
CX7_PF = 0x1021
CX7_VF = 0x101e
VFS = 4
#: Nova's functional Neutron fixture puts SR-IOV ports on this network.
PHYSNET = 'physnet4'


def _sriov_nic() -> b.Endpoint:
    """A ConnectX-7 PF at .0 with its VFs at .1 to .4, as with ARI off.

    The builder writes VFs as further functions of the slot: the topology
    needs their place in the tree, not the ``physfn`` links. Nova's fake
    libvirt numbers VFs the same way (PF at function 0).
    """
    pf = b.Function(b.MELLANOX, CX7_PF, b.CLASS_ETHERNET, 'mlx5_core',
                    bars=(b.Bar(0, 32 * b.MiB, mem64=True,
                                prefetchable=True),),
                    link=(5, 16))
    vf = b.Function(b.MELLANOX, CX7_VF, b.CLASS_ETHERNET, 'mlx5_core',
                    bars=(b.Bar(0, b.MiB, mem64=True, prefetchable=True),),
                    link=(5, 16))
    return b.Endpoint((pf,) + (vf,) * VFS)


_h100 = b.nvidia_gpu('H100-PCIE')
#: A GPUDirect RDMA host: socket 0 has two root complexes, one with a
#: switch holding two GPUs and the SR-IOV NIC, one with two GPUs only;
#: socket 1 has two GPUs and no NIC.
SRIOV_HOST_NAME = 'sriov-6gpu-3rc-2socket'
SRIOV_HOST = b.Host(b.numa_nodes('0-31', '32-63'), (
    b.root_complex(0x00, 0, b.switch(_h100, _h100, _sriov_nic())),
    b.root_complex(0x40, 0, b.switch(_h100, _h100)),
    b.root_complex(0x80, 1, b.switch(_h100, _h100))))
#: GPUs beside the NIC (one switch, root complex pci0000:00).
NIC_GPUS = ('0000:03:00.0', '0000:04:00.0')
#: GPUs on the NIC's NUMA node, under another root complex.
OTHER_RC_GPUS = ('0000:43:00.0', '0000:44:00.0')
PF = '0000:05:00.0'
VF_ADDRESSES = tuple('0000:05:00.%d' % fn for fn in range(1, VFS + 1))
#: The in-process cloud's own node devices, before the tests patch them.
_plain_pci_info = base.pci_info


def sriov_pci_info(topology: model.HostTopology
                   ) -> fakelibvirt.HostPCIDevicesInfo:
    """Nova's fake node devices: GPUs as base.pci_info, the NIC as PF+VFs.

    Nova only treats a port's VF as such when libvirt reports it with its
    ``phys_function`` capability (and the PF with ``virt_functions``).
    """
    info = _plain_pci_info(topology)
    for function in topology.functions.values():
        if function.vendor != b.MELLANOX:
            continue
        _, bus, rest = function.address.split(':')
        slot, fn = (int(part, 16) for part in rest.split('.'))
        bus = int(bus, 16)
        name = 'pci_0000_%02x_%02x_%d' % (bus, slot, fn)
        del info.devices[name]
        kwargs = dict(iommu_group=function.iommu_group or 0,
                      numa_node=function.numa_node, vf_ratio=VFS,
                      vend_id='%04x' % function.vendor,
                      prod_id='%04x' % function.device,
                      driver_name=function.driver)
        if function.device == CX7_VF:
            info.add_device('VF', bus, slot, fn, parent=(bus, slot, 0),
                            **kwargs)
        else:
            info.add_device('PF', bus, slot, fn, **kwargs)
    return info


def _address(element: etree._Element) -> str:
    """``dddd:bb:ss.f`` of a libvirt ``<address type='pci'>``."""
    return '%04x:%02x:%02x.%x' % tuple(
        int(element.get(name), 0)
        for name in ('domain', 'bus', 'slot', 'function'))


def hostdev_interfaces(xml: etree._Element) -> dict[str, etree._Element]:
    """``<interface type='hostdev'>`` elements by host PCI address."""
    return {_address(dev.find('./source/address')): dev
            for dev in xml.findall('./devices/interface[@type="hostdev"]')}


class SRIOVLocalityTest(waits.PatientWaits, guest_config.LayoutAssertions,
                        base.GPUHostsTestBase):
    """A P2P flavor with GPUs plus a Neutron SR-IOV port, on one host."""

    def setUp(self):
        super().setUp()
        # Ports with vnic_type direct / direct-physical on physnet4.
        self.neutron = self.useFixture(
            libvirt_base.LibvirtNeutronFixture(self))
        self.useFixture(fixtures.MockPatchObject(
            hosts, 'HOSTS', dict(hosts.HOSTS, **{SRIOV_HOST_NAME:
                                                 SRIOV_HOST})))
        self.useFixture(fixtures.MockPatchObject(
            base, 'pci_info', sriov_pci_info))

    def _add_pci_aliases(self, topology: model.HostTopology) -> None:
        """The GPU alias as usual; PF and VFs for Neutron, on physnet4.

        Neutron ports take devices by ``physical_network``, not by alias;
        a flavor alias for the NIC would compete for the same VFs.
        """
        super()._add_pci_aliases(topology)
        gpus = sorted({(f.vendor, f.device)
                       for f in topology.functions.values()
                       if f.is_nvidia_gpu})
        specs = [{'vendor_id': '%04x' % vendor, 'product_id': '%04x' % dev}
                 for vendor, dev in gpus]
        nics = [dict(spec, physical_network=PHYSNET) for spec in (
            {'vendor_id': '%04x' % b.MELLANOX,
             'product_id': '%04x' % CX7_PF},
            {'vendor_id': '%04x' % b.MELLANOX,
             'product_id': '%04x' % CX7_VF})]
        self.flags(
            device_spec=[json.dumps(spec) for spec in specs + nics],
            alias=[json.dumps(dict(spec, name=base.GPU_ALIAS,
                                   device_type='type-PCI'))
                   for spec in specs],
            group='pci')

    def boot_with_port(self, flavor: str, port: dict) -> dict:
        """Boot with the fixture's port, created in Neutron first."""
        self.neutron.create_port({'port': port})
        return self._create_server(
            flavor_id=flavor, image_uuid=self.q35_image,
            networks=[{'port': port['id']}])

    def sriov_layout(self, flavor: str, port: dict, element: str,
                     nic_addresses) -> tuple[etree._Element, etree._Element]:
        """Boot; the XML and the port's device, an ``element`` in it.

        The GPUs come from the flavor as ``<hostdev>``; the port's device
        is the only other passthrough device and one of ``nic_addresses``.
        """
        self.start_gpu_compute('host1', SRIOV_HOST_NAME)
        server = self.boot_with_port(flavor, port)
        xml = self.domain_xml(server)
        devices = dict(base.hostdevs(xml), **hostdev_interfaces(xml))
        nics = set(devices) - set(NIC_GPUS + OTHER_RC_GPUS)
        self.assertEqual(set(NIC_GPUS + OTHER_RC_GPUS), set(devices) - nics)
        self.assertEqual(1, len(nics), etree.tostring(xml).decode())
        nic = devices[nics.pop()]
        self.assertEqual(element, nic.tag)
        self.assertIn(_address(nic.find('./source/address')), nic_addresses)
        return xml, nic

    def nic_expander(self, xml: etree._Element,
                     nic: etree._Element) -> etree._Element:
        """The pxb-pcie above the NIC's root port, hop by hop."""
        controllers = guest_config.pci_controllers(xml)
        guest = nic.find('./address[@type="pci"]')
        self.assertIsNotNone(guest, 'the NIC has no guest address:\n'
                             + etree.tostring(nic).decode())
        self.assertEqual(0, int(guest.get('slot'), 0))
        port = controllers.get(int(guest.get('bus'), 0))
        self.assertIsNotNone(port)
        self.assertEqual('pcie-root-port', port.get('model'))
        pxb = controllers.get(int(port.find('./address').get('bus'), 0))
        self.assertIsNotNone(pxb)
        self.assertEqual('pcie-expander-bus', pxb.get('model'))
        return pxb

    def assert_beside_its_gpus(self, xml: etree._Element,
                               nic: etree._Element) -> None:
        """On the expander of pci0000:00's GPUs, not of pci0000:40's."""
        pxb = self.nic_expander(xml, nic)
        index = self.assert_devices_on_their_cells(
            xml, 'host1', NIC_GPUS + OTHER_RC_GPUS)
        # One expander per root complex, both on the one guest cell.
        self.assertEqual(2, len(guest_config.expander_buses(xml)))
        self.assertEqual({int(pxb.get('index'))},
                         {index[a] for a in NIC_GPUS})
        self.assertNotIn(int(pxb.get('index')),
                         {index[a] for a in OTHER_RC_GPUS})
        self.assertEqual({0: 0}, guest_config.guest_cell_of_host_node(xml))
        self.assertEqual('0', pxb.find('./target/node').text)
        self.assert_controllers_sane(xml)
        self.assert_pinning_follows_gpus(xml, 'host1')

    def assert_no_clique(self, xml: etree._Element,
                         nic: etree._Element) -> None:
        """Cliques on the GPU pairs only: QEMU refuses them on a NIC."""
        self.assertIsNone(nic.find('./alias'))
        self.assertEqual({NIC_GPUS[0]: 0, NIC_GPUS[1]: 0,
                          OTHER_RC_GPUS[0]: 1, OTHER_RC_GPUS[1]: 1},
                         guest_config.gpu_cliques(xml))
        self.assertEqual(4, len(guest_config.clique_ids(xml)))
        self.assert_clique_devices(xml)

    def decision_row(self, xml: etree._Element,
                     address: str) -> dict[str, str]:
        rows = {row.get('address'): dict(row.attrib) for row in
                guest_config.decision(xml).findall(
                    './gpu_p2p:device', guest_config.NS)}
        self.assertIn(address, rows)
        return rows[address]

    def p2p_flavor(self) -> str:
        """All four GPUs of socket 0, one guest cell: Nova must use node 0.

        The NIC is on node 0 only, so Nova's PCI NUMA affinity (legacy)
        puts the VF and the GPUs with the one cell there.
        """
        return self.gpu_flavor(4, numa_nodes=1, extra_specs={
            guest_config.CLIQUE_KEY: 'auto',
            guest_config.AFFINITY_KEY: 'required'})

    def test_vf_port_shares_the_expander_of_its_gpus(self):
        """vnic_type direct: the VF goes where its root complex's GPUs go."""
        port = self.neutron.network_4_port_1
        xml, interface = self.sriov_layout(self.p2p_flavor(), port,
                                           'interface', VF_ADDRESSES)
        self.assertEqual(port['mac_address'],
                         interface.find('./mac').get('address'))
        self.assert_beside_its_gpus(xml, interface)
        self.assert_no_clique(xml, interface)
        vf = _address(interface.find('./source/address'))
        row = self.decision_row(xml, vf)
        self.assertEqual(('nic', 'pci0000:00', '0'),
                         (row['kind'], row['root_complex'],
                          row['guest_node']))
        self.assertNotIn('clique', row)

    def test_pf_port_shares_the_expander_of_its_gpus(self):
        """vnic_type direct-physical: the same for the whole PF.

        Nova attaches a PF port as a plain ``<hostdev>``, not as an
        interface; it is still the port's NIC, and goes with its GPUs.
        """
        xml, hostdev = self.sriov_layout(
            self.p2p_flavor(), self.neutron.network_4_port_pf, 'hostdev',
            (PF,))
        self.assert_beside_its_gpus(xml, hostdev)
        self.assert_no_clique(xml, hostdev)
        self.assertEqual('nic', self.decision_row(xml, PF)['kind'])

    def test_gpu_only_alignment_leaves_the_vf_to_nova(self):
        """align_device_types=gpu: the interface keeps Nova's placement."""
        self.flags(align_device_types=['gpu'], group='gpu_p2p')
        xml, interface = self.sriov_layout(
            self.p2p_flavor(), self.neutron.network_4_port_1, 'interface',
            VF_ADDRESSES)
        # Nova gives a new interface no guest address: libvirt picks one
        # on the root bus, as without our driver.
        self.assertIsNone(interface.find('./address'))
        self.assertIsNone(interface.find('./alias'))
        index = self.assert_devices_on_their_cells(
            xml, 'host1', NIC_GPUS + OTHER_RC_GPUS)
        self.assertEqual(2, len(set(index.values())))
        # One root port per GPU, none for the interface.
        ports = [c for c in guest_config.pci_controllers(xml).values()
                 if c.get('model') == 'pcie-root-port'
                 and c.find('./address') is not None
                 and int(c.find('./address').get('bus'), 0) in index.values()]
        self.assertEqual(4, len(ports))
        self.assert_controllers_sane(xml)
        self.assert_no_clique(xml, interface)
        vf = _address(interface.find('./source/address'))
        self.assertNotIn('expander_bus', self.decision_row(xml, vf))
