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
:meth:`_FromNova.from_nova` builds a new one, through the constructor,
with the values of the fields Nova's class declares; the added attributes
are ours. Guest device addresses are Nova's own
``LibvirtConfigGuestDeviceAddressPCI`` (:func:`guest_address`).

Each such class names in ``ADDED_ELEMENTS`` the children it writes that
Nova's ``format_dom`` does not (a hostdev's ``<alias>``, which Nova only
parses, among them): :func:`nova_gpu_p2p.nova_signatures.check` refuses to
start on a Nova that writes one of them itself.
"""

import functools

from lxml import etree
from nova.virt.libvirt import config as vconfig


#: libvirt's namespace for QEMU-specific domain XML.
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
#: This project's namespace for the decision record in ``<metadata>``.
GPU_P2P_NS = 'http://openstack.org/xmlns/libvirt/nova-gpu-p2p/1.0'
CLIQUE_PROPERTY = 'x-nv-gpudirect-clique'


@functools.lru_cache(maxsize=None)
def nova_fields(nova_class: type) -> frozenset[str]:
    """The attributes a Nova config class declares: those its __init__ sets.

    ``format_dom`` writes from these; they are what a copy must carry.
    """
    return frozenset(vars(nova_class()))


def _copy_fields(nova_object, built):
    """``built`` with every attribute value ``nova_object`` has.

    Those Nova set outside ``__init__`` too: Nova's ``format_dom``, which
    ours inherits, may write them. Never refused here: this runs on every
    guest build, existing servers' reboots included, and the start-up
    check (:mod:`..nova_signatures`) is where an incompatible Nova stops.
    """
    for name, value in vars(nova_object).items():
        setattr(built, name, value)
    return built


def rebuilt(nova_object):
    """A new object of Nova's class, with the same field values."""
    return _copy_fields(nova_object, type(nova_object)())


class _FromNova:
    """Ours, built from the object Nova built, which stays untouched."""

    #: Nova's class this one extends.
    NOVA: type
    #: Child elements ours adds and Nova's never writes.
    ADDED_ELEMENTS: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.NOVA = next(base for base in cls.__mro__[1:]
                        if base.__module__ == vconfig.__name__)

    @classmethod
    def from_nova(cls, nova_object, **added):
        """A new ``cls`` with ``nova_object``'s field values and ``added``."""
        if type(nova_object) is not cls.NOVA:
            raise TypeError('%s extends %s, not %s' % (
                cls.__name__, cls.NOVA.__name__, type(nova_object).__name__))
        built = _copy_fields(nova_object, cls())
        for name, value in added.items():
            if name not in vars(built):
                raise TypeError('%s has no field %s' % (cls.__name__, name))
            setattr(built, name, value)
        return built


def guest_address(bus: int, slot: int, function: int = 0, domain: int = 0
                  ) -> vconfig.LibvirtConfigGuestDeviceAddressPCI:
    """Nova's ``<address type='pci'>``, for a device in the guest."""
    address = vconfig.LibvirtConfigGuestDeviceAddressPCI()
    address.domain = '0x%04x' % domain
    address.bus = '0x%02x' % bus
    address.slot = '0x%02x' % slot
    address.function = '0x%x' % function
    return address


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

    def __init__(self, index: int,
                 address: vconfig.LibvirtConfigGuestDeviceAddressPCI
                 ) -> None:
        super().__init__()
        self.index = index
        self.address = address

    def format_dom(self):
        controller = super().format_dom()
        controller.append(self.address.format_dom())
        return controller


class PCIeRootController(_FromNova,
                         vconfig.LibvirtConfigGuestPCIeRootController):
    """Nova's ``pcie-root``, with index 0 and an optional ``<pcihole64>``."""

    ADDED_ELEMENTS = ('pcihole64',)

    def __init__(self) -> None:
        super().__init__()
        self.pcihole64_kib: int | None = None

    def format_dom(self):
        controller = super().format_dom()
        controller.set('index', '0')
        if self.pcihole64_kib is not None:
            hole = self._text_node('pcihole64', str(self.pcihole64_kib))
            hole.set('unit', 'KiB')
            controller.append(hole)
        return controller


class HostdevPCI(_FromNova, vconfig.LibvirtConfigGuestHostdevPCI):
    """Nova's PCI hostdev, plus alias, ``<driver>``, ``<acpi>``, address.

    Nova parses a hostdev's alias (its ``alias`` field) but does not write
    it; the clique override needs a user alias (``ua-``) to name the
    device. ``<acpi nodeset>`` (libvirt 11.8) makes the guest NUMA cells
    it names the device's ACPI Generic Initiator nodes.
    """

    ADDED_ELEMENTS = ('driver', 'alias', 'address', 'acpi')

    def __init__(self) -> None:
        super().__init__()
        self.driver_name: str | None = None
        self.guest_address: (vconfig.LibvirtConfigGuestDeviceAddressPCI
                             | None) = None
        self.acpi_nodeset: str | None = None

    def format_dom(self):
        dev = super().format_dom()
        if self.driver_name is not None:
            etree.SubElement(dev, 'driver', name=self.driver_name)
        if self.acpi_nodeset is not None:
            etree.SubElement(dev, 'acpi', nodeset=self.acpi_nodeset)
        if self.alias is not None:
            etree.SubElement(dev, 'alias', name=self.alias)
        if self.guest_address is not None:
            dev.append(self.guest_address.format_dom())
        return dev


class HostdevInterface(_FromNova, vconfig.LibvirtConfigGuestInterface):
    """Nova's ``<interface type='hostdev'>``, plus a guest address."""

    ADDED_ELEMENTS = ('address',)

    def __init__(self) -> None:
        super().__init__()
        self.guest_address: (vconfig.LibvirtConfigGuestDeviceAddressPCI
                             | None) = None

    def format_dom(self):
        dev = super().format_dom()
        if self.guest_address is not None:
            dev.append(self.guest_address.format_dom())
        return dev


class NUMACell(_FromNova, vconfig.LibvirtConfigGuestCPUNUMACell):
    """Nova's guest NUMA cell, plus ``<distances>`` to every cell."""

    ADDED_ELEMENTS = ('distances',)

    def __init__(self) -> None:
        super().__init__()
        #: Guest cell id -> distance.
        self.distances: dict[int, int] | None = None

    def format_dom(self):
        cell = super().format_dom()
        if self.distances:
            distances = etree.SubElement(cell, 'distances')
            for cell_id, value in sorted(self.distances.items()):
                etree.SubElement(distances, 'sibling', id=str(cell_id),
                                 value=str(value))
        return cell


def initiator_cell(cell_id: int,
                   distances: dict[int, int] | None) -> NUMACell:
    """A guest cell with neither CPUs nor memory: a device's node."""
    cell = NUMACell()
    cell.id = cell_id
    cell.memory = 0
    cell.distances = distances
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


def controller_alias(index: int) -> str:
    """The alias libvirt gives PCI controller ``index``: ``pci.N``.

    A ``pcie-root-port`` takes no user alias of ours: libvirt names each
    PCI controller after its index, and QEMU's device id is that name.
    """
    return 'pci.%d' % index


def root_port_override(index: int, speed: str | None,
                       width: str | None) -> QemuDeviceOverride:
    """``x-speed``/``x-width`` of the ``pcie-root-port`` at ``index``.

    Both are QEMU enum properties, given as strings (``16``, ``2_5``).
    """
    device = QemuDeviceOverride(controller_alias(index))
    for name, value in (('x-speed', speed), ('x-width', width)):
        if value is not None:
            device.properties.append(QemuProperty(name, 'string', value))
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


class Guest(_FromNova, vconfig.LibvirtConfigGuest):
    """Nova's domain, plus fw_cfg entries and ``<qemu:override>``."""

    ADDED_ELEMENTS = ('{%s}override' % QEMU_NS,)

    def __init__(self) -> None:
        super().__init__()
        self.fw_cfg: SysinfoFwCfg | None = None
        self.qemu_override: QemuOverride | None = None

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
