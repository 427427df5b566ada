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

"""The per-instance clique rule of nova_gpu_p2p.guest.instance_cliques.

Host groupings are written by hand as topology.cliques.Cliques values;
the expected IDs and messages follow the module docstring.
"""

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p.guest import instance_cliques as cliques
from nova_gpu_p2p.topology import host_cliques as host_cliques
from tests.unit import base

A = '0000:03:00.0'
B = '0000:04:00.0'
C = '0000:81:00.0'
D = '0000:82:00.0'
E = '0000:c1:00.0'
F = '0000:c2:00.0'

NONE = extra_specs.CliqueRequest()
AUTO = extra_specs.CliqueRequest(extra_specs.CliqueMode.AUTO)
REQUIRED = extra_specs.CliqueRequest(extra_specs.CliqueMode.REQUIRED)


def fixed(clique_id):
    return extra_specs.CliqueRequest(extra_specs.CliqueMode.FIXED, clique_id)


def host(*groups, ids=None):
    """Host grouping; host IDs default to 5, 6, ... for groups of 2+."""
    if ids is None:
        ids = {}
        next_id = 5
        for group in groups:
            for address in group:
                ids[address] = next_id if len(group) > 1 else None
            if len(group) > 1:
                next_id += 1
    return host_cliques.Cliques(groups=tuple(tuple(g) for g in groups),
                                ids=ids)


def sys_link(a, b):
    return 'SYS'


class LinkRecorder:
    """A link namer remembering what it was asked."""

    def __init__(self, name='NODE'):
        self.name = name
        self.calls = []

    def __call__(self, a, b):
        self.calls.append((a, b))
        return self.name


# A host with two P2P pairs: (A, B) on one switch, (C, D) on another.
TWO_PAIRS = host((A, B), (C, D))


class TestNone(base.TestCase):

    def test_none_gives_no_ids(self):
        result = cliques.plan(NONE, [A, B], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertEqual((), result.warnings)
        self.assertIsNone(result.refusal)

    def test_none_even_when_gpus_are_apart(self):
        result = cliques.plan(NONE, [A, C], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.warnings)

    def test_none_for_unknown_gpus(self):
        result = cliques.plan(NONE, [E], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual(cliques.CliquePlan(), result)


class TestEmpty(base.TestCase):

    def test_auto_without_gpus(self):
        self.assertEqual(cliques.CliquePlan(),
                         cliques.plan(AUTO, [], TWO_PAIRS, sys_link, 'PXB'))

    def test_required_without_gpus(self):
        result = cliques.plan(REQUIRED, [], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertIsNone(result.refusal)

    def test_fixed_without_gpus(self):
        result = cliques.plan(fixed(3), [], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertEqual((), result.warnings)

    def test_auto_on_host_without_gpus(self):
        result = cliques.plan(AUTO, [A, B], host(), sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertEqual(1, len(result.warnings))
        self.assertIn('does not list 0000:03:00.0, 0000:04:00.0',
                      result.warnings[0])


class TestAuto(base.TestCase):

    def test_pair_in_one_group_gets_zero(self):
        result = cliques.plan(AUTO, [A, B], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 0, B: 0}, result.ids)
        self.assertEqual((), result.warnings)
        self.assertIsNone(result.refusal)

    def test_second_host_group_renumbered_from_zero(self):
        # Host gave (C, D) ID 6; the instance only has C and D.
        result = cliques.plan(AUTO, [C, D], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({C: 0, D: 0}, result.ids)

    def test_renumbered_when_host_ids_are_5_and_9(self):
        topology = host((A, B), (C, D), ids={A: 5, B: 5, C: 9, D: 9})
        result = cliques.plan(AUTO, [A, B, C, D], topology, sys_link,
                              'PXB')
        self.assertEqual({A: 0, B: 0, C: 1, D: 1}, result.ids)

    def test_renumbered_when_host_ids_are_none(self):
        # Groups beyond the host's 16th have no host ID at all.
        topology = host((A, B), (C, D), ids={A: None, B: None, C: None,
                                             D: None})
        result = cliques.plan(AUTO, [C, D, A, B], topology, sys_link,
                              'PXB')
        self.assertEqual({A: 0, B: 0, C: 1, D: 1}, result.ids)

    def test_beyond_sixteen_host_groups(self):
        groups = [('0000:%02x:00.0' % (2 * i + 1),
                   '0000:%02x:00.0' % (2 * i + 2)) for i in range(20)]
        ids = {}
        for i, group in enumerate(groups):
            for address in group:
                ids[address] = i if i < 16 else None
        topology = host(*groups, ids=ids)
        # The 18th and 20th host groups: 0000:23/24 and 0000:27/28.
        gpus = ['0000:27:00.0', '0000:23:00.0', '0000:24:00.0',
                '0000:28:00.0']
        result = cliques.plan(AUTO, gpus, topology, sys_link, 'PXB')
        self.assertEqual({'0000:23:00.0': 0, '0000:24:00.0': 0,
                          '0000:27:00.0': 1, '0000:28:00.0': 1},
                         result.ids)
        self.assertEqual((), result.warnings)

    def test_numbered_in_order_of_first_address_not_input(self):
        result = cliques.plan(AUTO, [D, C, B, A], TWO_PAIRS, sys_link,
                              'PXB')
        self.assertEqual(0, result.ids[A])
        self.assertEqual(1, result.ids[C])

    def test_order_of_host_group_first_address(self):
        # Host groups (01, 08, 09) and (02, 03), as the greedy host rule
        # makes them where 01 reaches 08 and 09 only: the instance's
        # 08/09 belong to the group whose first address (01) comes first.
        g1 = ('0000:01:00.0', '0000:08:00.0', '0000:09:00.0')
        g2 = ('0000:02:00.0', '0000:03:00.0')
        topology = host(g1, g2)
        gpus = ['0000:02:00.0', '0000:03:00.0', '0000:08:00.0',
                '0000:09:00.0']
        result = cliques.plan(AUTO, gpus, topology, sys_link, 'PXB')
        self.assertEqual({'0000:08:00.0': 0, '0000:09:00.0': 0,
                          '0000:02:00.0': 1, '0000:03:00.0': 1},
                         result.ids)

    def test_lone_gpu_gets_no_id(self):
        result = cliques.plan(AUTO, [A, B, C], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 0, B: 0}, result.ids)
        self.assertNotIn(C, result.ids)

    def test_lone_gpu_does_not_use_an_id(self):
        result = cliques.plan(AUTO, [A, C, D], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({C: 0, D: 0}, result.ids)

    def test_lone_gpus_only(self):
        result = cliques.plan(AUTO, [A, C], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)

    def test_several_cliques_are_no_problem(self):
        result = cliques.plan(AUTO, [A, B, C, D], TWO_PAIRS, sys_link,
                              'PXB')
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.warnings)

    def test_single_gpu(self):
        result = cliques.plan(AUTO, [A], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertEqual((), result.warnings)
        self.assertIsNone(result.refusal)

    def test_host_lone_gpu(self):
        topology = host((A, B), (E,))
        result = cliques.plan(AUTO, [A, E], topology, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertEqual((), result.warnings)

    def test_unknown_gpu_warns_and_gets_no_id(self):
        result = cliques.plan(AUTO, [A, B, E], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 0, B: 0}, result.ids)
        self.assertIsNone(result.refusal)
        self.assertEqual(1, len(result.warnings))
        warning = result.warnings[0]
        self.assertIn('the host GPU topology does not list 0000:c1:00.0',
                      warning)
        self.assertIn('0000:03:00.0, 0000:04:00.0, 0000:c1:00.0', warning)

    def test_only_unknown_gpus(self):
        result = cliques.plan(AUTO, [F, E], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({}, result.ids)
        self.assertIn('does not list 0000:c1:00.0, 0000:c2:00.0',
                      result.warnings[0])

    def test_subset_of_host_group(self):
        topology = host((A, B, C, D))
        result = cliques.plan(AUTO, [B, D], topology, sys_link, 'PXB')
        self.assertEqual({B: 0, D: 0}, result.ids)


class TestRequired(base.TestCase):

    def test_one_group_accepted(self):
        result = cliques.plan(REQUIRED, [B, A], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 0, B: 0}, result.ids)
        self.assertIsNone(result.refusal)
        self.assertEqual((), result.warnings)

    def test_one_group_with_host_id_none(self):
        topology = host((C, D), ids={C: None, D: None})
        result = cliques.plan(REQUIRED, [C, D], topology, sys_link, 'PXB')
        self.assertEqual({C: 0, D: 0}, result.ids)
        self.assertIsNone(result.refusal)

    def test_apart_refused_naming_gpus_link_and_level(self):
        result = cliques.plan(REQUIRED, [C, A], TWO_PAIRS, sys_link, 'PXB')
        self.assertIsNotNone(result.refusal)
        self.assertIn('GPUs 0000:03:00.0, 0000:81:00.0 cannot form one P2P '
                      'clique on this host', result.refusal)
        self.assertIn('0000:03:00.0 and 0000:81:00.0 are linked by SYS',
                      result.refusal)
        self.assertIn('[gpu_p2p] p2p_level = PXB', result.refusal)

    def test_refusal_names_level_given(self):
        result = cliques.plan(REQUIRED, [A, C], TWO_PAIRS, sys_link, 'PIX')
        self.assertIn('p2p_level = PIX', result.refusal)
        self.assertNotIn('PXB', result.refusal)

    def test_link_asked_about_first_gpu_of_two_groups(self):
        link = LinkRecorder('NODE')
        result = cliques.plan(REQUIRED, [D, B, C, A], TWO_PAIRS, link,
                              'PHB')
        self.assertEqual([(A, C)], link.calls)
        self.assertIn('linked by NODE', result.refusal)

    def test_apart_keeps_partial_ids(self):
        result = cliques.plan(REQUIRED, [A, B, C], TWO_PAIRS, sys_link,
                              'PXB')
        self.assertEqual({A: 0, B: 0}, result.ids)
        self.assertIsNotNone(result.refusal)

    def test_two_pairs_refused(self):
        result = cliques.plan(REQUIRED, [A, B, C, D], TWO_PAIRS, sys_link,
                              'PXB')
        self.assertEqual({A: 0, B: 0, C: 1, D: 1}, result.ids)
        self.assertIn('0000:03:00.0, 0000:04:00.0, 0000:81:00.0, '
                      '0000:82:00.0', result.refusal)

    def test_unknown_gpu_refused(self):
        result = cliques.plan(REQUIRED, [A, B, E], TWO_PAIRS, sys_link,
                              'PXB')
        self.assertIn('the host GPU topology does not list 0000:c1:00.0',
                      result.refusal)
        self.assertIn('0000:c1:00.0', result.refusal)

    def test_unknown_gpu_alone_refused(self):
        link = LinkRecorder()
        result = cliques.plan(REQUIRED, [E], TWO_PAIRS, link, 'PXB')
        self.assertIn('does not list 0000:c1:00.0', result.refusal)
        self.assertEqual([], link.calls)

    def test_single_known_gpu_accepted(self):
        result = cliques.plan(REQUIRED, [A], TWO_PAIRS, sys_link, 'PXB')
        self.assertIsNone(result.refusal)
        self.assertEqual({}, result.ids)

    def test_refusal_has_no_warnings(self):
        result = cliques.plan(REQUIRED, [A, C], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual((), result.warnings)


class TestFixed(base.TestCase):

    def test_agreeing_topology_no_warning(self):
        result = cliques.plan(fixed(7), [A, B], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 7, B: 7}, result.ids)
        self.assertEqual((), result.warnings)
        self.assertIsNone(result.refusal)

    def test_single_gpu_gets_the_id(self):
        # The operator's assertion wins: even a lone GPU gets it.
        result = cliques.plan(fixed(0), [C], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({C: 0}, result.ids)
        self.assertEqual((), result.warnings)

    def test_disagreeing_topology_warns(self):
        result = cliques.plan(fixed(15), [C, A], TWO_PAIRS, sys_link,
                              'PXB')
        self.assertEqual({A: 15, C: 15}, result.ids)
        self.assertIsNone(result.refusal)
        self.assertEqual(1, len(result.warnings))
        warning = result.warnings[0]
        self.assertIn('hw:gpu_p2p_clique=15', warning)
        self.assertIn('0000:03:00.0, 0000:81:00.0', warning)
        self.assertIn('host topology disagrees', warning)
        self.assertIn('linked by SYS', warning)
        self.assertIn('p2p_level = PXB', warning)

    def test_unknown_gpu_warns(self):
        result = cliques.plan(fixed(2), [A, E], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 2, E: 2}, result.ids)
        self.assertIn('does not list 0000:c1:00.0', result.warnings[0])

    def test_fixed_id_zero_is_not_none(self):
        result = cliques.plan(fixed(0), [A, B], TWO_PAIRS, sys_link, 'PXB')
        self.assertEqual({A: 0, B: 0}, result.ids)

    def test_host_lone_gpus_disagree(self):
        topology = host((A,), (B,))
        result = cliques.plan(fixed(4), [A, B], topology, sys_link, 'PXB')
        self.assertEqual({A: 4, B: 4}, result.ids)
        self.assertEqual(1, len(result.warnings))
