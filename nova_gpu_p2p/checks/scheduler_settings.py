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

"""A scheduler's nova.conf: settings that measure slow at cloud size.

Judged only where the nova.conf read enables ``GPUP2PCliqueFilter`` (a
nova-scheduler's); the numbers are ``tox -e bench --
scheduling_at_cloud_size``'s, in doc/source/scheduling-scale.rst.
"""

import dataclasses

from nova_gpu_p2p.checks import result

SUBJECT = 'scheduler'
FILTER = 'GPUP2PCliqueFilter'
#: Nova's filters that cost milliseconds per allocation candidate.
NOVA_CANDIDATE_FILTERS = ('PciPassthroughFilter', 'NUMATopologyFilter')
#: Beyond this many candidates per host, Nova's filters cost more than a
#: second per request on 50 8-GPU hosts (about 10 ms per candidate).
MANY_PER_HOST = 2
#: The largest ``[scheduler] max_placement_results`` recommended: two
#: candidates per compute node of a 500-host cloud. Placement builds and
#: Nova reads up to that many per request; a cap of 10000 took 1.5 to
#: 3.5 s in placement alone, two per host 0.05 to 0.26 s.
MANY_RESULTS = 1000
#: See scheduling-scale: "Fewer candidates for Nova's filters".
DOC = 'see doc/source/scheduling-scale.rst, "Fewer candidates for Nova\'s ' \
      'filters"'


@dataclasses.dataclass(frozen=True)
class SchedulerSettings:
    """The nova.conf options of nova-scheduler judged here."""

    #: ``[filter_scheduler] enabled_filters``, in order.
    enabled_filters: tuple[str, ...]
    #: ``[gpu_p2p] candidates_per_host``.
    candidates_per_host: int
    #: ``[scheduler] max_placement_results``.
    max_placement_results: int = MANY_RESULTS


def check_scheduler(settings: SchedulerSettings) -> list[result.Check]:
    """One row: the filter's place and how many candidates it hands on."""
    filters = list(settings.enabled_filters)
    if FILTER not in filters:
        return []
    ours = filters.index(FILTER)
    before = [name for name in NOVA_CANDIDATE_FILTERS
              if name in filters[:ours]]
    if before:
        return [result.warning(
            SUBJECT, '%s run%s before %s: Nova\'s filters check every '
            'allocation candidate, about 10 ms each (100 s per request for '
            'four GPUs on 50 8-GPU hosts)' % (
                ' and '.join(before), '' if len(before) > 1 else 's',
                FILTER),
            'list %s before %s in [filter_scheduler] enabled_filters; %s'
            % (FILTER, ', '.join(NOVA_CANDIDATE_FILTERS), DOC))]
    keep = settings.candidates_per_host
    if keep == 0 or keep > MANY_PER_HOST:
        return [result.warning(
            SUBJECT, '[gpu_p2p] candidates_per_host = %d: %s of each host\'s '
            'candidates reach Nova\'s filters, about 10 ms each per request'
            % (keep, 'all' if keep == 0 else 'up to %d' % keep),
            'set it to %d (the default: every host with a fitting set kept '
            'at 10 to 100 hosts, about 1 s for 50); %s'
            % (MANY_PER_HOST, DOC))]
    if settings.max_placement_results > MANY_RESULTS:
        return [result.warning(
            SUBJECT, '[scheduler] max_placement_results = %d: placement '
            'builds up to that many allocation candidates per request (1.5 '
            'to 3.5 s at 10000, 0.05 to 0.26 s at two per host)'
            % settings.max_placement_results,
            'set it, and placement.conf\'s [placement] '
            'max_allocation_candidates, to twice the compute nodes (at most '
            '%d); see doc/source/scheduling-scale.rst, "Recommended '
            'settings"' % MANY_RESULTS)]
    return [result.success(
        SUBJECT, '%s before Nova\'s candidate filters, %d candidate%s per '
        'host, at most %d from placement' % (
            FILTER, keep, '' if keep == 1 else 's',
            settings.max_placement_results))]
