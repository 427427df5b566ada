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

"""The Nova methods this driver overrides, checked when it starts.

Nova's driver methods change between releases; overriding one whose
signature moved would silently stop our code from running (or break
Nova's). So the driver refuses to start unless each hook is as expected.
"""

import inspect

#: method name -> parameter names it must take, in order (after self).
HOOKS = {
    'get_available_resource': ('nodename',),
    '_get_guest_config': ('instance', 'network_info', 'image_meta',
                          'disk_info', 'rescue', 'block_device_info',
                          'context'),
    'check_can_live_migrate_source': ('context', 'instance',
                                      'dest_check_data',
                                      'block_device_info'),
    'update_provider_tree': ('provider_tree', 'nodename', 'allocations'),
}


class IncompatibleNova(Exception):
    """This Nova's LibvirtDriver lacks a hook we rely on."""


def check(cls: type | None = None) -> None:
    """Raise IncompatibleNova unless ``cls`` (LibvirtDriver) has our hooks."""
    if cls is None:
        # Imported here: nova-scheduler raises IncompatibleNova too and
        # has no business loading the libvirt driver.
        from nova.virt.libvirt import driver as libvirt_driver
        cls = libvirt_driver.LibvirtDriver
    problems = []
    for name, expected in HOOKS.items():
        method = getattr(cls, name, None)
        if method is None:
            problems.append('%s.%s is missing' % (cls.__name__, name))
            continue
        params = tuple(inspect.signature(method).parameters)[1:]
        if params[:len(expected)] != expected:
            problems.append('%s.%s takes (%s), expected (%s)' % (
                cls.__name__, name, ', '.join(params), ', '.join(expected)))
    if problems:
        raise IncompatibleNova(
            'nova-gpu-p2p does not support this Nova release: %s. Install '
            'a nova-gpu-p2p release made for it.' % '; '.join(problems))
