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

"""Whether the running Nova carries the project's move-claim fix.

The series in ``patches/nova`` makes ``ResourceTracker._move_claim``
claim the PCI devices placement allocated on a cold migration, resize
and evacuation (and keeps the instance's request IDs, so a server
evacuated at microversion 2.95 or later starts). Its signature: the
resource tracker's ``_get_pci_requests_for_move`` and a ``pci_requests``
parameter of ``_move_claim``. Where Nova carries it, the scheduler
filter's move workaround (:mod:`nova_gpu_p2p.scheduler.move_claims`) is
off: placement's choice, one clique or partition, is what is claimed.
Apply the series to every Nova node (API, conductor, scheduler and
computes) at once: the scheduler decides from its own Nova.

On a Nova without the series the driver still gives a domain only the
devices on its own compute node (:func:`on_its_node`, what the series'
second patch does in ``Instance.get_pci_devices``), so that a server
evacuated at 2.95 or later starts while its failed source still holds
its old devices.
"""

import functools
import importlib
import inspect
import warnings

#: What ``nova-gpu-p2p check`` and the docs call the fix.
NAME = 'Nova move-claim fix (patches/nova)'


def carried_by(resource_tracker_class) -> bool:
    """Whether this ``ResourceTracker`` class has the fix's signature."""
    if not callable(getattr(resource_tracker_class,
                            '_get_pci_requests_for_move', None)):
        return False
    try:
        parameters = inspect.signature(
            resource_tracker_class._move_claim).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return 'pci_requests' in parameters


@functools.lru_cache(maxsize=None)
def carried() -> bool:
    """Whether the Nova this process imports carries the fix.

    Nova 33's objects warn of their own deprecations when imported (as
    ``check`` first does here): Nova's concern, not the operator's.
    """
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', category=DeprecationWarning,
                                    module=r'nova\.')
            module = importlib.import_module('nova.compute.resource_tracker')
    except ImportError:
        return False
    return carried_by(getattr(module, 'ResourceTracker', None))


def on_its_node(instance):
    """The instance, or a copy whose PCI devices are those on its node.

    An evacuated server's ``pci_devices`` also hold the devices its failed
    source compute claimed, until that compute comes back; an unfixed
    Nova's ``Instance.get_pci_devices`` then looks their old request IDs
    up among the server's new requests, and the start fails with
    KeyError. Where the instance has no device on its node (a resize
    revert's, an instance without ``compute_id``) it is returned as it
    is, as the fixed Nova does. A copy, so nothing of this is saved.
    """
    if (not instance.obj_attr_is_set('compute_id')
            or instance.compute_id is None or not instance.pci_devices):
        return instance
    devices = instance.pci_devices.objects
    here = [device for device in devices
            if device.obj_attr_is_set('compute_node_id')
            and device.compute_node_id == instance.compute_id]
    if not here or len(here) == len(devices):
        return instance
    copy = instance.obj_clone()
    copy.pci_devices = type(instance.pci_devices)(objects=here)
    return copy
