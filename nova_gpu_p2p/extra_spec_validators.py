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
"""

from nova.api.validation.extra_specs import base
from nova import exception

from nova_gpu_p2p import extra_specs


_PARSERS = {
    extra_specs.CLIQUE_KEY: extra_specs.parse_clique,
    extra_specs.NUMA_AFFINITY_KEY: extra_specs.parse_numa_affinity,
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
        except extra_specs.InvalidExtraSpec as exc:
            raise exception.ValidationError(f'Validation failed; {exc}')


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


def register() -> list[base.ExtraSpecValidator]:
    """Nova's extension hook: the validators this package adds."""
    return EXTRA_SPEC_VALIDATORS
