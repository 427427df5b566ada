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

"""Registers our flavor extra specs with Nova's API.

Since microversion 2.86 Nova rejects any key in the ``hw:`` namespace that no
validator claims, so without this module ``openstack flavor set --property
hw:gpu_p2p_clique=auto`` fails. Loaded by Nova through the
``nova.api.extra_spec_validators`` entry point.

It also fills a gap in Nova 34: its libvirt driver reads
``hw:maxphysaddr_mode`` and ``hw:maxphysaddr_bits``, which large-BAR GPUs
need for their 64-bit PCI hole, but its API has no validators for them, so
at 2.86 and later it refuses both. Ours are registered only while no
validator of Nova's own claims those keys.
"""

from collections.abc import Callable
from collections.abc import Iterable
import importlib.metadata
import re

from nova.api.validation.extra_specs import base
from nova import exception as nova_exception
from nova.objects import fields

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import pcihole64

#: Nova's entry point group, and the package of its own validators in it.
ENTRY_POINT_GROUP = 'nova.api.extra_spec_validators'
NOVA_VALIDATORS_PACKAGE = 'nova.api.validation.extra_specs.'

MAXPHYSADDR_MODE_KEY = 'hw:maxphysaddr_mode'
MAXPHYSADDR_BITS_KEY = 'hw:maxphysaddr_bits'
#: The modes Nova's libvirt driver writes to ``<maxphysaddr mode=...>``.
MAXPHYSADDR_MODES = tuple(fields.MaxPhyAddrMode.ALL)
MAXPHYSADDR_MODE_ALLOWED = ' or '.join(MAXPHYSADDR_MODES)
MIN_PHYS_BITS = pcihole64.MIN_PHYS_BITS
MAX_PHYS_BITS = pcihole64.MAX_PHYS_BITS
MAXPHYSADDR_BITS_ALLOWED = pcihole64.PHYS_BITS_ALLOWED


def parse_maxphysaddr_mode(value: str) -> str:
    """Nova's own check is at boot; the API should refuse it up front."""
    if value not in MAXPHYSADDR_MODES:
        raise exception.InvalidExtraSpec(
            MAXPHYSADDR_MODE_KEY, value, MAXPHYSADDR_MODE_ALLOWED)
    return value


def parse_maxphysaddr_bits(value: str) -> int:
    """Nova takes any integer; QEMU would refuse the guest at start."""
    bits = ascii_decimal.parse(value)
    if bits is None or not MIN_PHYS_BITS <= bits <= MAX_PHYS_BITS:
        raise exception.InvalidExtraSpec(
            MAXPHYSADDR_BITS_KEY, value, MAXPHYSADDR_BITS_ALLOWED)
    return bits


_PARSERS: dict[str, Callable[[str], object]] = {
    extra_specs.CLIQUE_KEY: extra_specs.parse_clique,
    extra_specs.NUMA_AFFINITY_KEY: extra_specs.parse_numa_affinity,
    MAXPHYSADDR_MODE_KEY: parse_maxphysaddr_mode,
    MAXPHYSADDR_BITS_KEY: parse_maxphysaddr_bits,
}


class _ParsedValidator(base.ExtraSpecValidator):
    """Validates with our own parser, so the message names the key.

    Nova's enum check says only "'foo' is not one of: ..."; an operator
    setting several properties at once needs to know which one was wrong.
    """

    def validate(self, name: str, value: str) -> None:
        # Nova calls validate() on the validator registered under ``name``;
        # overriding it, rather than Nova's private per-type helpers, keeps
        # us on the interface its extension point documents.
        try:
            _PARSERS[name](value)
        except exception.InvalidExtraSpec as exc:
            raise nova_exception.ValidationError(f'Validation failed; {exc}')


EXTRA_SPEC_VALIDATORS = [
    _ParsedValidator(
        name=extra_specs.CLIQUE_KEY,
        description=(
            'NVIDIA GPUDirect P2P clique for the instance\'s passthrough '
            'GPUs (nova-gpu-p2p). "none": no clique (default); "auto": GPUs '
            'that the host topology lets talk peer to peer share a clique; '
            '"required": as auto, and all the instance\'s GPUs must form '
            'one clique or the build is rescheduled; 0-15: every GPU gets '
            'this clique ID. Needs an instance NUMA topology.'),
        value={
            'type': str,
            'description': 'none, auto, required or a clique ID 0-15',
            'enum': list(extra_specs.CLIQUE_VALUES),
        },
    ),
    _ParsedValidator(
        name=extra_specs.NUMA_AFFINITY_KEY,
        description=(
            'Place passthrough GPUs (and NICs) on PCIe expander buses bound '
            'to the guest NUMA cell that Nova mapped to their host NUMA node '
            '(nova-gpu-p2p). "none": Nova\'s layout (default); "preferred": '
            'a device without a matching guest cell stays on the root bus; '
            '"required": such a device fails the build on this host. Needs '
            'an instance NUMA topology.'),
        value={
            'type': str,
            'description': 'none, preferred or required',
            'enum': list(extra_specs.NUMA_AFFINITY_VALUES),
        },
    ),
]


#: Nova's own keys that Nova 34's API lacks validators for.
NOVA_GAP_VALIDATORS = [
    _ParsedValidator(
        name=MAXPHYSADDR_MODE_KEY,
        description=(
            'The guest CPU\'s physical address bits (Nova\'s libvirt '
            'driver, <maxphysaddr>): "passthrough" gives the guest the '
            'host\'s, "emulate" the number in hw:maxphysaddr_bits. '
            'Large-BAR GPUs need enough bits for their 64-bit PCI hole. '
            'Validated by nova-gpu-p2p while Nova has no validator for it.'),
        value={
            'type': str,
            'description': MAXPHYSADDR_MODE_ALLOWED,
            'enum': list(MAXPHYSADDR_MODES),
        },
    ),
    _ParsedValidator(
        name=MAXPHYSADDR_BITS_KEY,
        description=(
            'The guest CPU\'s physical address bits with '
            'hw:maxphysaddr_mode=emulate (Nova\'s libvirt driver, '
            '<maxphysaddr bits>); Nova schedules to hosts with at least '
            'as many. Validated by nova-gpu-p2p while Nova has no '
            'validator for it.'),
        value={
            'type': int,
            'description': MAXPHYSADDR_BITS_ALLOWED,
            'min': MIN_PHYS_BITS,
            'max': MAX_PHYS_BITS,
        },
    ),
]


def nova_validators() -> list[base.ExtraSpecValidator]:
    """The validators Nova's own plugins register."""
    found = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.module.startswith(NOVA_VALIDATORS_PACKAGE):
            found.extend(entry.load().register())
    return found


def unclaimed(ours: Iterable[base.ExtraSpecValidator],
              theirs: Iterable[base.ExtraSpecValidator]
              ) -> list[base.ExtraSpecValidator]:
    """Those of ``ours`` whose key no validator of ``theirs`` matches."""
    patterns = [validator.name_regex for validator in theirs]
    return [validator for validator in ours
            if not any(re.fullmatch(pattern, validator.name)
                       for pattern in patterns)]


def register() -> list[base.ExtraSpecValidator]:
    """Nova's extension hook: the validators this package adds.

    Nova loads every plugin, in no defined order, and the last validator
    registered for a name wins: ours for Nova's keys would replace Nova's
    own once it has them, so they are left out then.
    """
    return EXTRA_SPEC_VALIDATORS + unclaimed(NOVA_GAP_VALIDATORS,
                                             nova_validators())
