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

"""The two flavor extra specs: their names, allowed values and parser.

This is the one place that knows what a value means; the Nova API
validators (:mod:`nova_gpu_p2p.api.extra_spec_validators`) and the driver both
call it, so the API and the compute host can never disagree.
"""

from collections.abc import Mapping
import dataclasses
import enum

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import host_cliques

CLIQUE_KEY = 'hw:gpu_p2p_clique'
NUMA_AFFINITY_KEY = 'hw:gpu_numa_affinity'


class CliqueMode(str, enum.Enum):
    NONE = 'none'
    AUTO = 'auto'
    REQUIRED = 'required'
    FIXED = 'fixed'


class NumaAffinity(str, enum.Enum):
    NONE = 'none'
    PREFERRED = 'preferred'
    REQUIRED = 'required'


CLIQUE_VALUES = (
    (CliqueMode.NONE.value, CliqueMode.AUTO.value, CliqueMode.REQUIRED.value)
    + tuple(str(i) for i in range(host_cliques.MAX_CLIQUE_ID + 1)))
CLIQUE_ALLOWED = (
    f'{CliqueMode.NONE.value}, {CliqueMode.AUTO.value}, '
    f'{CliqueMode.REQUIRED.value} or a clique ID from 0 to '
    f'{host_cliques.MAX_CLIQUE_ID}')
NUMA_AFFINITY_VALUES = tuple(mode.value for mode in NumaAffinity)
NUMA_AFFINITY_ALLOWED = ', '.join(NUMA_AFFINITY_VALUES[:-1]) + (
    f' or {NUMA_AFFINITY_VALUES[-1]}')


@dataclasses.dataclass(frozen=True)
class CliqueRequest:
    mode: CliqueMode = CliqueMode.NONE
    #: Set only for ``CliqueMode.FIXED``: the operator's asserted ID.
    clique_id: int | None = None


@dataclasses.dataclass(frozen=True)
class GPUP2PRequest:
    """What a flavor asks of this driver."""

    clique: CliqueRequest = CliqueRequest()
    numa_affinity: NumaAffinity = NumaAffinity.NONE

    @property
    def wanted(self) -> bool:
        """Whether the flavor asks for anything beyond Nova's own layout."""
        return (self.clique.mode is not CliqueMode.NONE
                or self.numa_affinity is not NumaAffinity.NONE)


def parse_clique(value: str | None) -> CliqueRequest:
    """Parse ``hw:gpu_p2p_clique``; absent means ``none``."""
    if value is None:
        return CliqueRequest()
    if value not in CLIQUE_VALUES:
        raise exception.InvalidExtraSpec(CLIQUE_KEY, value, CLIQUE_ALLOWED)
    clique_id = ascii_decimal.parse(value)
    if clique_id is not None:
        return CliqueRequest(CliqueMode.FIXED, clique_id)
    return CliqueRequest(CliqueMode(value))


def parse_numa_affinity(value: str | None) -> NumaAffinity:
    """Parse ``hw:gpu_numa_affinity``; absent means ``none``."""
    if value is None:
        return NumaAffinity.NONE
    if value not in NUMA_AFFINITY_VALUES:
        raise exception.InvalidExtraSpec(
            NUMA_AFFINITY_KEY, value, NUMA_AFFINITY_ALLOWED)
    return NumaAffinity(value)


def requires_clique(extra_specs: Mapping[str, str]) -> bool:
    """Whether ``hw:gpu_p2p_clique=required``; an invalid value is not.

    For the scheduler and the partition lifecycle, which have no say on
    an invalid value: the API validator refuses it, and the guest build
    refuses an older flavor's.
    """
    try:
        request = parse_clique(extra_specs.get(CLIQUE_KEY))
    except exception.InvalidExtraSpec:
        return False
    return request.mode is CliqueMode.REQUIRED


def parse(extra_specs: Mapping[str, str]) -> GPUP2PRequest:
    """Parse both keys out of a flavor's extra specs."""
    return GPUP2PRequest(
        clique=parse_clique(extra_specs.get(CLIQUE_KEY)),
        numa_affinity=parse_numa_affinity(
            extra_specs.get(NUMA_AFFINITY_KEY)))
