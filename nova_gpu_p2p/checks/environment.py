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

"""What the check ran with: the nova.conf it read, libvirt-python.

``check`` runs with the Python of the environment it is installed in,
which is Nova's (the install guide puts it there): a module missing here
is missing for nova-compute.
"""

from collections.abc import Sequence
import importlib
import sys

from nova_gpu_p2p.checks import result

#: oslo.config's search when no --config-file is given, as nova-manage's.
SEARCHED = ('nova.conf and nova-gpu-p2p.conf in ~/.nova, ~, /etc/nova and '
            '/etc, and their .conf.d directories')


def check_config(read: Sequence[str], searched: bool) -> result.Check:
    """Which nova.conf files (and directories) the options came from.

    :param searched: whether oslo.config searched (no ``--config-file``
        and no ``--no-config``).
    """
    if read:
        return result.success('nova.conf', 'read %s' % ', '.join(read))
    consequence = ('[gpu_p2p] options at their defaults; [pci] and the '
                   'scheduler settings not judged')
    if not searched:
        return result.success('nova.conf', 'none read (--no-config): %s'
                              % consequence)
    return result.warning(
        'nova.conf', 'none found (looked for %s): %s'
        % (SEARCHED, consequence),
        'run this as root where nova.conf is readable only by root, or '
        'give --config-file PATH')


def check_libvirt_python() -> result.Check:
    """Whether this Python has libvirt-python, which nova-compute needs.

    Nova's libvirt driver imports the module ``libvirt`` when it starts;
    without it nova-compute exits.
    """
    try:
        module = importlib.import_module('libvirt')
    except ImportError as exc:
        return result.failure(
            'libvirt-python',
            'the Python module libvirt is missing from %s (%s): Nova\'s '
            'libvirt driver cannot start without it' % (sys.executable, exc),
            'install libvirt-python into the Python environment Nova runs '
            'from (the distribution\'s python3-libvirt, or pip install '
            'libvirt-python in Nova\'s virtualenv) (%s)'
            % result.see(result.Doc.LIBVIRT_PYTHON))
    return result.success('libvirt-python', 'the Python module libvirt: %s'
                          % getattr(module, '__file__', module.__name__))
