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

"""Every Nova detail this driver relies on, checked when it starts.

Nova's driver methods, config classes and helpers change between
releases, and most of what we use is not a public API: overriding a hook
whose signature moved, reading a field that was renamed or adding an
element Nova now writes itself would break a tenant's boot, or silently
stop our code from running. So :func:`check` refuses to start unless each
detail below is as expected, and names every one that is not.
"""

import importlib
import inspect

from nova_gpu_p2p import exception

#: LibvirtDriver method we override -> parameter names it must take, in
#: order (after self).
HOOKS = {
    'get_available_resource': ('nodename',),
    '_get_guest_config': ('instance', 'network_info', 'image_meta',
                          'disk_info', 'rescue', 'block_device_info',
                          'context'),
    'check_can_live_migrate_source': ('context', 'instance',
                                      'dest_check_data',
                                      'block_device_info'),
    'update_provider_tree': ('provider_tree', 'nodename', 'allocations'),
    # Fabric Manager partitions follow the domains.
    'init_host': ('host',),
    '_create_guest': ('context', 'xml', 'instance', 'power_on', 'pause',
                      'post_xml_callback'),
    '_destroy': ('instance',),
    # Only the devices on the instance's node (nova_fix.on_its_node).
    '_guest_add_pci_devices': ('guest', 'instance'),
}

#: Nova callable we call, as ``module:qualified name`` -> the leading
#: parameters it must take (after self), which we pass by position or name.
CALLABLES = {
    'nova.virt.libvirt.host:Host.get_connection': (),
    'nova.virt.libvirt.host:Host.get_capabilities': (),
    'nova.virt.libvirt.host:Host.list_guests': ('only_running',),
    'nova.virt.libvirt.guest:Guest.get_xml_desc': (),
    'nova.virt.libvirt.config:LibvirtConfigObject.parse_str': ('xmlstr',),
    # A property: present is all we can check.
    'nova.virt.libvirt.guest:Guest.uuid': None,
    'nova.compute.provider_tree:ProviderTree.exists': ('name_or_uuid',),
    'nova.compute.provider_tree:ProviderTree.data': ('name_or_uuid',),
    'nova.compute.provider_tree:ProviderTree.add_traits': ('name_or_uuid',),
    'nova.compute.provider_tree:ProviderTree.remove_traits': (
        'name_or_uuid',),
    'nova.objects.instance_action:InstanceActionEvent.event_start': (
        'context', 'instance_uuid', 'event_name', 'want_result', 'host'),
    # Decorated: (*args, **kwargs) outside; present is all we can check.
    'nova.objects.instance_action:'
    'InstanceActionEvent.event_finish_with_failure': None,
    'nova.compute.pci_placement_translator:get_traits': ('traits_str',),
    'nova.compute.pci_placement_translator:'
    'PlacementView._get_rp_name_for_address': ('addr',),
    'nova.pci.whitelist:Whitelist': ('whitelist_spec',),
    'nova.pci.devspec:PciDeviceSpec.match': ('dev_dict',),
    'nova.pci.devspec:PciDeviceSpec.get_tags': (),
    'nova.exception:MigrationPreCheckError': None,
}

#: libvirt config class (``nova.virt.libvirt.config``) -> fields we read
#: or set, which its ``__init__`` must declare.
CONFIG_FIELDS = {
    'LibvirtConfigGuest': ('cpu', 'devices', 'features', 'memory',
                           'metadata', 'os_mach_type'),
    'LibvirtConfigGuestCPU': ('maxphysaddr', 'mode', 'numa'),
    'LibvirtConfigGuestCPUNUMA': ('cells',),
    'LibvirtConfigGuestCPUNUMACell': ('id',),
    'LibvirtConfigCPUMaxPhysAddr': ('bits', 'mode'),
    'LibvirtConfigCaps': ('host',),
    'LibvirtConfigCapsHost': ('cpu',),
    'LibvirtConfigCPU': ('maxphysaddr',),
    'LibvirtConfigGuestHostdevPCI': ('alias', 'bus', 'domain', 'function',
                                     'slot'),
    'LibvirtConfigGuestInterface': ('net_type', 'source_dev'),
    'LibvirtConfigGuestController': ('index', 'model', 'type'),
    'LibvirtConfigGuestPCIeRootController': ('index', 'model', 'type'),
    'LibvirtConfigGuestPCIeRootPortController': ('index', 'model', 'type'),
    'LibvirtConfigGuestDeviceAddressPCI': ('bus', 'domain', 'function',
                                           'slot'),
    'LibvirtConfigGuestFeatureACPI': (),
    'LibvirtConfigGuestFeatureKvmHidden': (),
}

#: Nova object -> fields of it we read.
OBJECT_FIELDS = {
    'Instance': ('flavor', 'numa_topology', 'pci_devices', 'uuid',
                 'vm_state'),
    'InstanceNUMACell': ('id',),
    'Flavor': ('extra_specs',),
}

#: nova.conf options we read, as (group, name).
OPTIONS = (('pci', 'device_spec'), ('pci', 'report_in_placement'),
           ('DEFAULT', 'host'))


def _resolve(path: str):
    module, _, name = path.partition(':')
    found = importlib.import_module(module)
    for part in name.split('.'):
        found = getattr(found, part)
    return found


def _takes(func, expected: tuple[str, ...]) -> str | None:
    """Why ``func`` does not take ``expected`` first; None when it does."""
    params = tuple(inspect.signature(func).parameters)
    if params[:1] in (('self',), ('cls',)):
        params = params[1:]
    if params[:len(expected)] == expected:
        return None
    return 'takes (%s), expected (%s)' % (', '.join(params),
                                          ', '.join(expected))


def _hook_problems(cls: type) -> list[str]:
    problems = []
    for name, expected in HOOKS.items():
        method = getattr(cls, name, None)
        why = ('is missing' if method is None
               else _takes(method, expected))
        if why is not None:
            problems.append('%s.%s %s' % (cls.__name__, name, why))
    return problems


def _callable_problems() -> list[str]:
    problems = []
    for path, expected in CALLABLES.items():
        name = path.replace(':', '.')
        try:
            found = _resolve(path)
        except (ImportError, AttributeError):
            problems.append('%s is missing' % name)
            continue
        why = None if expected is None else _takes(found, expected)
        if why is not None:
            problems.append('%s %s' % (name, why))
    return problems


def _config_problems() -> list[str]:
    from nova.virt.libvirt import config as vconfig

    from nova_gpu_p2p.guest import libvirt_config
    problems = []
    for class_name, fields in CONFIG_FIELDS.items():
        nova_class = getattr(vconfig, class_name, None)
        if nova_class is None:
            problems.append('%s is missing' % class_name)
            continue
        try:
            declared = libvirt_config.nova_fields(nova_class)
        except Exception as exc:  # whatever a changed __init__ raises
            problems.append('%s() fails: %r' % (class_name, exc))
            continue
        missing = set(fields) - declared
        if missing:
            problems.append('%s has no %s' % (
                class_name, ', '.join(sorted(missing))))
    if not problems:
        problems.extend(_written_by_nova(libvirt_config))
    return problems


def _written_by_nova(libvirt_config) -> list[str]:
    """The elements ours add that Nova's classes now write themselves."""
    problems = []
    for ours, sample in _samples(libvirt_config).items():
        try:
            dom = sample.format_dom()
        except Exception as exc:  # whatever a changed format_dom raises
            problems.append('%s.format_dom() fails: %r' % (
                ours.NOVA.__name__, exc))
            continue
        written = [tag for tag in ours.ADDED_ELEMENTS
                   if dom.find(tag) is not None]
        if written:
            problems.append('%s writes <%s> itself, which nova-gpu-p2p '
                            'adds' % (ours.NOVA.__name__,
                                      '>, <'.join(written)))
    return problems


def _samples(libvirt_config) -> dict:
    """A Nova object per class we extend, with every field we read set."""
    from nova.virt.libvirt import config as vconfig
    hostdev = vconfig.LibvirtConfigGuestHostdevPCI()
    hostdev.domain, hostdev.bus, hostdev.slot, hostdev.function = (
        '0000', '81', '00', '0')
    hostdev.alias = 'ua-sample'
    interface = vconfig.LibvirtConfigGuestInterface()
    interface.net_type = 'hostdev'
    interface.source_dev = '0000:81:00.1'
    interface.mac_addr = 'fa:16:3e:00:00:01'
    interface.device_addr = libvirt_config.guest_address(bus=1, slot=0)
    cell = vconfig.LibvirtConfigGuestCPUNUMACell()
    cell.id, cell.cpus, cell.memory = 0, {0}, 1048576
    guest = vconfig.LibvirtConfigGuest()
    guest.virt_type, guest.name, guest.os_type = 'kvm', 'sample', 'hvm'
    guest.uuid = '00000000-0000-0000-0000-000000000000'
    guest.memory, guest.vcpus = 1048576, 1
    guest.add_device(hostdev)
    return {libvirt_config.HostdevPCI: hostdev,
            libvirt_config.HostdevInterface: interface,
            libvirt_config.NUMACell: cell,
            libvirt_config.PCIeRootController:
                vconfig.LibvirtConfigGuestPCIeRootController(),
            libvirt_config.Guest: guest}


def _object_problems() -> list[str]:
    from nova import objects
    objects.register_all()
    problems = []
    for name, fields in OBJECT_FIELDS.items():
        nova_object = getattr(objects, name, None)
        if nova_object is None:
            problems.append('objects.%s is missing' % name)
            continue
        missing = set(fields) - set(nova_object.fields)
        if missing:
            problems.append('objects.%s has no %s' % (
                name, ', '.join(sorted(missing))))
    return problems


def _option_problems() -> list[str]:
    from nova import conf as nova_conf
    conf = nova_conf.CONF
    problems = []
    for group, name in OPTIONS:
        options = conf if group == 'DEFAULT' else getattr(conf, group, {})
        if name not in options:
            problems.append('nova.conf has no [%s] %s' % (group, name))
    return problems


def _naming_problems() -> list[str]:
    from nova.compute import pci_placement_translator

    from nova_gpu_p2p import device_spec_tags
    address = '0000:af:00.0'  # hex letters: the case matters
    view = pci_placement_translator.PlacementView('node', [])
    nova = view._get_rp_name_for_address(address)
    ours = device_spec_tags.provider_name('node', address)
    if nova != ours:
        return ['Nova names a PCI device provider %s, not %s' % (nova, ours)]
    return []


def check(cls: type | None = None) -> None:
    """Raise IncompatibleNova unless this Nova has what we rely on.

    ``cls`` is the driver class whose hooks are checked (LibvirtDriver by
    default); every other detail is checked in the Nova installed.
    """
    if cls is None:
        # Imported here: nova-scheduler raises IncompatibleNova too and
        # has no business loading the libvirt driver.
        from nova.virt.libvirt import driver as libvirt_driver
        cls = libvirt_driver.LibvirtDriver
    callables = _callable_problems()
    problems = (_hook_problems(cls) + callables + _config_problems()
                + _object_problems() + _option_problems()
                # Only where Nova's naming method is there to ask.
                + ([] if callables else _naming_problems()))
    if problems:
        raise exception.IncompatibleNova(
            'nova-gpu-p2p does not support this Nova release: %s. Install '
            'a nova-gpu-p2p release made for it.' % '; '.join(problems))
