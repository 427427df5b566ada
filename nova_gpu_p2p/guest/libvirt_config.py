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

"""libvirt config objects for the elements this driver adds.

In the style of ``nova.virt.libvirt.config``: one small class per XML
element, built as objects and serialised by ``format_dom``, never as text.
Where Nova already has a class for the element (a hostdev, a NUMA cell,
the pcie-root controller, the domain itself), ours subclasses it and
:meth:`_Adopting.adopt` takes over the object Nova built, unchanged, so
only the added attributes are ours.
"""

from lxml import etree
from nova.virt.libvirt import config as vconfig

#: libvirt's namespace for QEMU-specific domain XML.
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
#: This project's namespace for the decision record in ``<metadata>``.
GPU_P2P_NS = 'http://openstack.org/xmlns/libvirt/nova-gpu-p2p/1.0'
CLIQUE_PROPERTY = 'x-nv-gpudirect-clique'


class _Adopting:
    """Take over an object Nova built, keeping every attribute it set."""

    @classmethod
    def adopt(cls, nova_object, **added):
        adopted = cls.__new__(cls)
        adopted.__dict__.update(vars(nova_object))
        adopted.__dict__.update(added)
        return adopted


class PCIAddress(vconfig.LibvirtConfigObject):
    """``<address type='pci'>`` of a device in the guest."""

    def __init__(self, bus: int, slot: int, function: int = 0,
                 domain: int = 0) -> None:
        super().__init__(root_name='address')
        self.domain = domain
        self.bus = bus
        self.slot = slot
        self.function = function

    def attributes(self) -> dict[str, str]:
        return {'type': 'pci', 'domain': '0x%04x' % self.domain,
                'bus': '0x%02x' % self.bus, 'slot': '0x%02x' % self.slot,
                'function': '0x%x' % self.function}

    def format_dom(self):
        return etree.Element('address', self.attributes())

    def format_into(self, parent) -> None:
        etree.SubElement(parent, 'address', self.attributes())


class PCIeExpanderBus(vconfig.LibvirtConfigGuestController):
    """``<controller model='pcie-expander-bus'>``: a pxb-pcie bus."""

    def __init__(self, index: int, bus_nr: int, node: int) -> None:
        super().__init__()
        self.type = 'pci'
        self.model = 'pcie-expander-bus'
        self.index = index
        self.bus_nr = bus_nr
        self.node = node

    def format_dom(self):
        controller = super().format_dom()
        etree.SubElement(controller, 'model', name='pxb-pcie')
        target = etree.SubElement(controller, 'target',
                                  busNr=str(self.bus_nr))
        etree.SubElement(target, 'node').text = str(self.node)
        return controller


class PCIeRootPort(vconfig.LibvirtConfigGuestPCIeRootPortController):
    """A ``pcie-root-port`` at a given address, e.g. on an expander bus."""

    def __init__(self, index: int, address: PCIAddress) -> None:
        super().__init__()
        self.index = index
        self.address = address

    def format_dom(self):
        controller = super().format_dom()
        self.address.format_into(controller)
        return controller


class PCIeRootController(_Adopting,
                         vconfig.LibvirtConfigGuestPCIeRootController):
    """Nova's ``pcie-root``, with index 0 and an optional ``<pcihole64>``."""

    pcihole64_kib: int | None = None

    def format_dom(self):
        controller = super().format_dom()
        controller.set('index', '0')
        if self.pcihole64_kib is not None:
            hole = self._text_node('pcihole64', str(self.pcihole64_kib))
            hole.set('unit', 'KiB')
            controller.append(hole)
        return controller


class HostdevPCI(_Adopting, vconfig.LibvirtConfigGuestHostdevPCI):
    """Nova's PCI hostdev, plus alias, ``<driver>`` and guest address.

    Nova parses a hostdev's alias but never writes one; the clique
    override needs a user alias (``ua-``) to name the device.
    """

    driver_name: str | None = None
    guest_address: PCIAddress | None = None

    def format_dom(self):
        dev = super().format_dom()
        if self.driver_name is not None:
            etree.SubElement(dev, 'driver', name=self.driver_name)
        if self.alias is not None:
            etree.SubElement(dev, 'alias', name=self.alias)
        if self.guest_address is not None:
            self.guest_address.format_into(dev)
        return dev


class HostdevInterface(_Adopting, vconfig.LibvirtConfigGuestInterface):
    """Nova's ``<interface type='hostdev'>``, plus a guest address."""

    guest_address: PCIAddress | None = None

    def format_dom(self):
        dev = super().format_dom()
        if self.guest_address is not None:
            self.guest_address.format_into(dev)
        return dev


class NUMACell(_Adopting, vconfig.LibvirtConfigGuestCPUNUMACell):
    """Nova's guest NUMA cell, plus ``<distances>`` to every cell."""

    #: Guest cell id -> distance.
    distances: dict[int, int] | None = None

    def format_dom(self):
        cell = super().format_dom()
        if self.distances:
            distances = etree.SubElement(cell, 'distances')
            for cell_id, value in sorted(self.distances.items()):
                etree.SubElement(distances, 'sibling', id=str(cell_id),
                                 value=str(value))
        return cell


def _qemu(name: str) -> str:
    return '{%s}%s' % (QEMU_NS, name)


class QemuProperty(vconfig.LibvirtConfigObject):
    """``<qemu:property>``: one QEMU device property."""

    def __init__(self, name: str, type_: str, value: str) -> None:
        super().__init__(root_name='property', ns_prefix='qemu',
                         ns_uri=QEMU_NS)
        self.name = name
        self.type = type_
        self.value = value

    def format_into(self, parent) -> None:
        # A child element inherits the namespace declared above it, which
        # is much cheaper than declaring it on every element.
        etree.SubElement(parent, _qemu('property'), name=self.name,
                         type=self.type, value=self.value)

    def format_dom(self):
        prop = super().format_dom()
        prop.attrib.update({'name': self.name, 'type': self.type,
                            'value': self.value})
        return prop


class QemuDeviceOverride(vconfig.LibvirtConfigObject):
    """``<qemu:device alias=...><qemu:frontend>`` properties."""

    def __init__(self, alias: str) -> None:
        super().__init__(root_name='device', ns_prefix='qemu',
                         ns_uri=QEMU_NS)
        self.alias = alias
        self.properties: list[QemuProperty] = []

    def _fill(self, device) -> None:
        device.set('alias', self.alias)
        frontend = etree.SubElement(device, _qemu('frontend'))
        for prop in self.properties:
            prop.format_into(frontend)

    def format_into(self, parent) -> None:
        self._fill(etree.SubElement(parent, _qemu('device')))

    def format_dom(self):
        device = super().format_dom()
        self._fill(device)
        return device


class QemuOverride(vconfig.LibvirtConfigObject):
    """``<qemu:override>`` (libvirt 8.2 and later)."""

    def __init__(self) -> None:
        super().__init__(root_name='override', ns_prefix='qemu',
                         ns_uri=QEMU_NS)
        self.devices: list[QemuDeviceOverride] = []

    def format_dom(self):
        override = super().format_dom()
        for device in self.devices:
            device.format_into(override)
        return override


def clique_override(alias: str, clique_id: int) -> QemuDeviceOverride:
    device = QemuDeviceOverride(alias)
    device.properties.append(
        QemuProperty(CLIQUE_PROPERTY, 'unsigned', str(clique_id)))
    return device


class SysinfoFwCfg(vconfig.LibvirtConfigObject):
    """``<sysinfo type='fwcfg'>``: named QEMU fw_cfg files for the guest.

    libvirt 6.5 and later; Nova's own ``<sysinfo type='smbios'>`` stays.
    """

    def __init__(self, entries: dict[str, str]) -> None:
        super().__init__(root_name='sysinfo')
        self.entries = entries

    def format_dom(self):
        sysinfo = super().format_dom()
        sysinfo.set('type', 'fwcfg')
        for name, value in sorted(self.entries.items()):
            etree.SubElement(sysinfo, 'entry', name=name).text = value
        return sysinfo


class Guest(_Adopting, vconfig.LibvirtConfigGuest):
    """Nova's domain, plus fw_cfg entries and ``<qemu:override>``."""

    fw_cfg: SysinfoFwCfg | None = None
    qemu_override: QemuOverride | None = None

    def format_dom(self):
        root = super().format_dom()
        if self.fw_cfg is not None:
            # Beside Nova's <sysinfo type='smbios'>, where there is one.
            sysinfo = root.findall('sysinfo')
            fw_cfg = self.fw_cfg.format_dom()
            if sysinfo:
                sysinfo[-1].addnext(fw_cfg)
            else:
                root.append(fw_cfg)
        if self.qemu_override is not None and self.qemu_override.devices:
            root.append(self.qemu_override.format_dom())
        return root
