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

"""Between Nova's guest config objects and the pure decision.

Reads what the decision needs from the ``LibvirtConfigGuest`` Nova built
and the instance (never recomputing what Nova decided), and applies a
:class:`~nova_gpu_p2p.guest.plan.GuestPlan` back onto the same objects.
"""

from nova.compute import vm_states
from nova.virt.libvirt import config as vconfig

from nova_gpu_p2p.guest import devices as devices_mod
from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p.guest import metadata
from nova_gpu_p2p.guest import pcihole64
from nova_gpu_p2p.guest import plan as plan_mod
from nova_gpu_p2p.guest import topology_description
from nova_gpu_p2p import pci_address
from nova_gpu_p2p.topology import model


def _hostdev_address(hostdev: vconfig.LibvirtConfigGuestHostdevPCI) -> str:
    """A hostdev's source address as sysfs spells it.

    Nova writes the fields as its PCI records hold them (``81``) and parses
    libvirt's (``0x81``): both read as hex, as in Nova's own ``__eq__``.
    """
    return pci_address.from_fields(hostdev.domain, hostdev.bus,
                                   hostdev.slot, hostdev.function)


def hostdev_addresses(xml: str) -> tuple[str, ...]:
    """The host PCI addresses of a domain XML's PCI hostdevs.

    Read through Nova's config objects, as Nova reads a guest's devices;
    an interface of type hostdev is not one.
    """
    config = vconfig.LibvirtConfigGuest()
    config.parse_str(xml)
    return tuple(_hostdev_address(device) for device in config.devices
                 if isinstance(device, vconfig.LibvirtConfigGuestHostdevPCI))


def _host_address(device) -> tuple[str, bool] | None:
    """(host address, attached as an interface) of a passthrough device."""
    if isinstance(device, vconfig.LibvirtConfigGuestHostdevPCI):
        return _hostdev_address(device), False
    if (isinstance(device, vconfig.LibvirtConfigGuestInterface)
            and device.net_type == 'hostdev'):
        return pci_address.normalize(device.source_dev), True
    return None


def instance_devices(guest: vconfig.LibvirtConfigGuest,
                     topology: model.HostTopology
                     ) -> list[devices_mod.GuestDevice]:
    """The passthrough devices in Nova's config, described by the host."""
    found = []
    for device in guest.devices:
        host = _host_address(device)
        if host is not None:
            found.append(devices_mod.describe(host[0], topology,
                                              network=host[1]))
    return found


#: Nova reads the flavor's key first, then the image's property.
_FLAVOR_BITS = 'hw:maxphysaddr_bits'


def _phys_bits_property(guest: vconfig.LibvirtConfigGuest, instance) -> str:
    """Which of the flavor or the image gave the guest its bits."""
    if (guest.cpu is not None and guest.cpu.maxphysaddr is not None
            and instance.flavor.extra_specs.get(_FLAVOR_BITS)):
        return '%s (flavor extra spec)' % _FLAVOR_BITS
    return plan_mod.GuestFacts.phys_bits_property


def _phys_bits(guest: vconfig.LibvirtConfigGuest,
               host_phys_bits: int | None) -> tuple[int | None, bool]:
    """The guest's physical address bits, and whether they are the host's."""
    cpu = guest.cpu
    if cpu is not None and cpu.maxphysaddr is not None:
        if cpu.maxphysaddr.mode == 'emulate':
            return cpu.maxphysaddr.bits, False
        return host_phys_bits, True
    if cpu is not None and cpu.mode == 'host-passthrough':
        return host_phys_bits, True
    return pcihole64.QEMU_DEFAULT_PHYS_BITS, False


def is_new_build(instance) -> bool:
    """Whether Nova is building this instance for the first time.

    Only then can a refusal send it to another host or fail the build;
    every other path (reboot, resize, migration, evacuation, unshelve,
    rebuild, rescue) concerns a server that exists.
    """
    return instance.vm_state == vm_states.BUILDING


def read_facts(guest: vconfig.LibvirtConfigGuest, instance,
               libvirt_version: tuple[int, int, int],
               host_phys_bits: int | None,
               qemu_version: tuple[int, int, int] = (
                   plan_mod.GuestFacts.qemu_version),
               host_cpu: dict | None = None) -> plan_mod.GuestFacts:
    """What Nova decided for this guest, as the decision's plain facts."""
    numa = instance.numa_topology
    phys_bits, from_host = _phys_bits(guest, host_phys_bits)
    return plan_mod.GuestFacts(
        host_node_of_cell=(tuple(cell.id for cell in numa.cells)
                           if numa is not None else None),
        machine_type=guest.os_mach_type,
        acpi=any(isinstance(f, vconfig.LibvirtConfigGuestFeatureACPI)
                 for f in guest.features),
        hypervisor_hidden=any(
            isinstance(f, vconfig.LibvirtConfigGuestFeatureKvmHidden)
            for f in guest.features),
        libvirt_version=libvirt_version, qemu_version=qemu_version,
        used_pci_indexes=frozenset(
            d.index for d in guest.devices
            if isinstance(d, vconfig.LibvirtConfigGuestController)
            and d.type == 'pci' and d.index is not None),
        memory=guest.memory * 1024,
        phys_bits=phys_bits, phys_bits_from_host=from_host,
        phys_bits_property=_phys_bits_property(guest, instance),
        new_build=is_new_build(instance), host_cpu=host_cpu)


def device_alias(address: str) -> str:
    """A libvirt user alias (``ua-`` prefix) naming a host device."""
    return 'ua-gpu-p2p-' + address.replace(':', '-').replace('.', '-')


def _device(device, plan: plan_mod.GuestPlan,
            override: libvirt_config.QemuOverride):
    """Nova's device config, adopted and extended where the plan says."""
    host = _host_address(device)
    if host is None:
        if (isinstance(device, vconfig.LibvirtConfigGuestPCIeRootController)
                and plan.buses.buses):
            return libvirt_config.PCIeRootController.from_nova(device)
        return device
    address, interface = host
    placed = plan.buses.port_of(address)
    guest_address = (libvirt_config.guest_address(bus=placed[1].index, slot=0)
                     if placed else None)
    if interface:
        if guest_address is None:
            return device
        return libvirt_config.HostdevInterface.from_nova(
            device, guest_address=guest_address)
    if address not in plan.cliques and guest_address is None:
        return device
    # vfio is libvirt's only PCI passthrough backend today; naming it lets
    # libvirt build the command line where /dev/vfio is not visible (its
    # default otherwise fails with "invalid PCI passthrough type").
    hostdev = libvirt_config.HostdevPCI.from_nova(
        device, guest_address=guest_address, driver_name='vfio',
        acpi_nodeset=plan.grace.nodeset(address))
    if address in plan.cliques:
        hostdev.alias = device_alias(address)
        override.devices.append(libvirt_config.clique_override(
            hostdev.alias, plan.cliques[address]))
    return hostdev


def _controllers(plan: plan_mod.GuestPlan,
                 override: libvirt_config.QemuOverride) -> list:
    controllers = []
    for bus in plan.buses.buses:
        controllers.append(libvirt_config.PCIeExpanderBus(
            bus.index, bus.bus_nr, bus.guest_node))
        controllers.extend(
            libvirt_config.PCIeRootPort(
                port.index,
                libvirt_config.guest_address(bus=bus.index, slot=port.slot))
            for port in bus.ports)
        for port in bus.ports:
            link = plan.port_links.get(port.index)
            if link is not None:
                override.devices.append(libvirt_config.root_port_override(
                    port.index, link.speed, link.width))
    return controllers


def _in_address_order(devices: list) -> list:
    """PCI hostdevs sorted by host address, in the places they held.

    Nova lists them in the order of its PCI device records, which differs
    between two builds of the same guest (a hard reboot, a rebuild); the
    layout, ``<qemu:override>`` included, must come out the same.
    """
    places = [i for i, d in enumerate(devices)
              if isinstance(d, vconfig.LibvirtConfigGuestHostdevPCI)]
    result = list(devices)
    ordered = sorted((devices[i] for i in places),
                     key=lambda d: _host_address(d)[0])
    for place, device in zip(places, ordered):
        result[place] = device
    return result


def _numa_cells(cpu: vconfig.LibvirtConfigGuestCPU,
                plan: plan_mod.GuestPlan) -> vconfig.LibvirtConfigGuestCPU:
    """Nova's cells with distances, then the Grace GPUs' cells.

    New cpu and numa containers: Nova's own objects stay unchanged.
    """
    def distances(position: int) -> dict[int, int] | None:
        if plan.distances is None:
            return None
        return dict(enumerate(plan.distances[position]))

    result = libvirt_config.rebuilt(cpu)
    result.numa = libvirt_config.rebuilt(cpu.numa)
    result.numa.cells = [
        libvirt_config.NUMACell.from_nova(cell, distances=distances(position))
        for position, cell in enumerate(cpu.numa.cells)]
    for position, cell in enumerate(plan.grace.cells, len(cpu.numa.cells)):
        result.numa.cells.append(libvirt_config.initiator_cell(
            cell.cell, distances(position)))
    return result


def apply(guest: vconfig.LibvirtConfigGuest,
          plan: plan_mod.GuestPlan) -> libvirt_config.Guest:
    """Nova's config with the plan added; Nova's own choices untouched.

    Only the order of Nova's PCI hostdevs changes, to host address order.
    """
    result = libvirt_config.Guest.from_nova(
        guest, qemu_override=libvirt_config.QemuOverride())
    result.devices = [_device(d, plan, result.qemu_override)
                      for d in _in_address_order(guest.devices)]
    if plan.buses.buses:
        root = next((d for d in result.devices
                     if isinstance(d, libvirt_config.PCIeRootController)),
                    None)
        if root is None:
            root = libvirt_config.PCIeRootController()
            result.devices.insert(0, root)
        if plan.hole64 is not None and plan.hole64.size:
            root.pcihole64_kib = plan.hole64.size // 1024
        result.devices.extend(_controllers(plan, result.qemu_override))
    if plan.distances is not None or plan.grace.cells:
        result.cpu = _numa_cells(guest.cpu, plan)
    if plan.guest_topology is not None:
        result.fw_cfg = libvirt_config.SysinfoFwCfg(
            {topology_description.ENTRY_NAME: plan.guest_topology})
    result.metadata = list(guest.metadata) + [metadata.DecisionRecord(plan)]
    return result
