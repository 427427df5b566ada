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

"""Moves whose GPU claim ignores placement: allocate what Nova will claim.

Nova's ``ResourceTracker._move_claim`` (cold migration, resize,
evacuation; Nova 27 to 34 at least) builds the destination's PCI
requests again from the flavor, without the providers placement
allocated, and ``PciDeviceStats.consume_requests`` takes the first free
matching pools in pool order. The server keeps those new request IDs,
which its request spec does not know, so a later unshelve of it claims
the first free GPUs too. The scheduler cannot change that claim; it can
make placement allocate exactly it, or refuse the host. The rule:

1. **Which requests** (:func:`ignores_placement`): an instance being
   resized or cold migrated (task state ``resize_prep``) or evacuated
   (``rebuilding``: a rebuild on its own host never runs our filter), and
   an unshelve (``unshelving``) where one of the instance's flavor PCI
   request IDs is not one of its request spec's (it moved before). A
   build, a reschedule and an unshelve of a server never moved claim
   what placement allocated: unchanged.
2. **The claim** (:func:`claimed`): the GPU providers whose free count
   Nova's own code lowers when it applies the request, without
   placement's providers, to a copy of the host's pools, in the NUMA
   cells Nova's own fit gives (the glue runs Nova's functions).
3. **Keep only that claim** (:func:`judge`): of the host's candidates,
   those whose GPU providers are exactly the claim; where none is, one
   built on it (:mod:`candidate_exchange`). For
   ``hw:gpu_p2p_clique=required`` the claim must be one clique (on a
   Fabric Manager host exactly one partition) and be kept or built, else
   the host is refused for this request: the move goes to another host or
   ends in NoValidHost, and the server stays where it is, running. For
   other modes a claim that cannot be kept or built leaves the host to
   the usual rule, as before.

Pure functions over plain data.
"""

import collections
from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

#: Nova's task states (``nova.compute.task_states``) of the requests
#: whose destination claim ignores placement.
RESIZE_PREP = 'resize_prep'
REBUILDING = 'rebuilding'
UNSHELVING = 'unshelving'


def ignores_placement(task_state: str | None,
                      instance_requests: Collection[str] | None,
                      spec_requests: Collection[str] | None) -> bool:
    """Whether Nova claims this request's PCI devices ignoring placement.

    :param task_state: the instance's task state as the scheduler runs.
    :param instance_requests: the request IDs of the instance's own
        flavor PCI requests (those an unshelve claims); None if unknown.
    :param spec_requests: the request IDs of the request spec's PCI
        requests (those placement's request groups are named after);
        None if unknown.

    An unshelve whose IDs are unknown counts as ignoring placement: a
    placement allocation equal to the claim Nova makes without it is the
    claim it makes with it, so the guess costs fit, never a wrong claim.
    """
    if task_state in (RESIZE_PREP, REBUILDING):
        return True
    if task_state != UNSHELVING:
        return False
    if instance_requests is None or spec_requests is None:
        return True
    return not set(instance_requests) <= set(spec_requests)


def claimed(before: Mapping[str, int], after: Mapping[str, int]
            ) -> list[str]:
    """The providers a claim took, once per device, sorted.

    :param before: free devices per provider before the claim.
    :param after: the same after it; a provider missing there has none
        left (Nova drops an emptied pool).
    """
    return sorted(provider for provider, free in before.items()
                  for _ in range(max(0, free - after.get(provider, 0))))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the filter does with a host for a move (rule 3)."""

    #: The indexes of the candidates to keep: those taking the claim.
    keep: tuple[int, ...] = ()
    #: None kept: keep the candidate built on the claim.
    use_built: bool = False
    #: The host is refused for this request; why.
    refusal: str = ''

    @property
    def as_before(self) -> bool:
        """The host is left to the rule for other requests."""
        return not (self.keep or self.use_built or self.refusal)


def matching(taken: Sequence[Sequence[str]], claim: Sequence[str]
             ) -> tuple[int, ...]:
    """The indexes of the candidates whose GPU providers are the claim.

    :param taken: the GPU providers each candidate takes, once per device.
    """
    wanted = collections.Counter(claim)
    return tuple(index for index, providers in enumerate(taken)
                 if collections.Counter(providers) == wanted)


def judge(claim: Sequence[str] | None, one_group: bool, required: bool,
          keep: Sequence[int], built: bool) -> Verdict:
    """Rule 3 for one host.

    :param claim: what Nova will claim there (:func:`claimed`); None
        where its claim fails there.
    :param one_group: whether the claim is one clique (exactly one
        partition on a Fabric Manager host).
    :param required: the flavor asks for ``hw:gpu_p2p_clique=required``.
    :param keep: the candidates taking the claim (:func:`matching`).
    :param built: a candidate could be built on the claim.
    """
    if claim is None:
        return Verdict(refusal='Nova\'s claim, which ignores placement on '
                       'this move, fails there') if required else Verdict()
    if required and not one_group:
        return Verdict(refusal='the GPUs Nova claims there on this move, '
                       'whatever placement allocates, are not one clique '
                       '(partition): %s' % ', '.join(claim))
    if keep or built:
        return Verdict(keep=tuple(keep), use_built=not keep)
    if required:
        return Verdict(refusal='no allocation candidate takes the GPUs Nova '
                       'claims there on this move, and none can be built '
                       'on them: %s' % ', '.join(claim))
    return Verdict()
