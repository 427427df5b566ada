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

"""PCI addresses as operators type them and as sysfs spells them.

The one place that reads ``dddd:bb:ss.f``: from an operator, from NVML,
from the four fields of libvirt's XML and Nova's config objects.

Not ``nova.pci.utils.parse_address``: that accepts only the full
``dddd:bb:ss.f`` form as Nova's PCI records hold it, keeps the case it is
given and raises Nova's PciDeviceWrongAddressFormat, whereas an operator
pastes ``lspci``'s ``bb:ss.f`` into ``[gpu_p2p]`` options and static
topology files, NVML writes an 8-digit domain, and every comparison
needs one spelling; and the topology backends and the CLI import no
Nova. Guest device addresses are Nova's own config objects
(:func:`nova_gpu_p2p.guest.libvirt_config.guest_address`); the guest
agent keeps its own check (it runs in guests, standard library only).
"""

import re

from nova_gpu_p2p_guest import errors

_ADDRESS = re.compile(
    r'^(?:(?P<domain>[0-9a-fA-F]{1,4}):)?(?P<bus>[0-9a-fA-F]{1,2}):'
    r'(?P<slot>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])$')
#: The one spelling: sysfs' device names.
_SYSFS = re.compile(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]')


def normalize(text: str) -> str:
    """Return ``text`` as ``dddd:bb:ss.f`` in lower case, sysfs' spelling.

    Accepts ``bb:ss.f`` (domain 0) as ``lspci`` prints it, so that an
    operator can paste either form; raises ValueError naming the text and
    the expected form otherwise.
    """
    match = _ADDRESS.match(text.strip())
    if match is None or int(match.group('slot'), 16) > 0x1f:
        raise ValueError(
            f"{errors.quoted(text)} is not a PCI address; expected "
            f"dddd:bb:ss.f or bb:ss.f in hex, e.g. 0000:81:00.0")
    return '%04x:%02x:%02x.%s' % (
        int(match.group('domain') or '0', 16),
        int(match.group('bus'), 16),
        int(match.group('slot'), 16),
        match.group('function'))


def is_sysfs(text: object) -> bool:
    """Whether ``text`` is an address as sysfs spells it: ``dddd:bb:ss.f``.

    Exactly that, lower case: for names read from sysfs and addresses
    handed to privileged code, where nothing is normalised.
    """
    return isinstance(text, str) and bool(_SYSFS.fullmatch(text))


def from_fields(domain: str, bus: str, slot: str, function: str) -> str:
    """The address of four hex fields, as sysfs spells it.

    As libvirt's XML (``0x81``) and Nova's PCI records (``81``) hold them:
    both read as hex, as in Nova's own ``LibvirtConfigGuestHostdevPCI``
    comparison.
    """
    return '%04x:%02x:%02x.%x' % tuple(
        int(field, 16) for field in (domain, bus, slot, function))


def from_nvml(bus_id: str) -> str:
    """An NVML bus ID, its domain in 8 hex digits, as sysfs spells it.

    Raises ValueError as :func:`normalize` does.
    """
    domain, _, rest = bus_id.partition(':')
    return normalize('%04x:%s' % (int(domain, 16), rest))
