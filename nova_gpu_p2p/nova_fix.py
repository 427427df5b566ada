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
