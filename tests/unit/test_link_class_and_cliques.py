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

from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import model
from tests.unit import base

PT = model.PortType


class Tree:
    """Builds a HostTopology by hand, one bridge or device at a time."""

    def __init__(self):
        self.functions = {}
        self.next_bus = 1

    def add(self, parent, port_type, class_code, rc='pci0000:00', numa=0,
            vendor=0x10de, acs=None, acs_known=True):
        address = '0000:%02x:00.0' % self.next_bus
        self.next_bus += 1
        self.functions[address] = model.PCIFunction(
            address=address, vendor=vendor, device=0x2330,
            class_code=class_code, parent=parent, root_complex=rc,
            numa_node=numa, port_type=port_type, acs=acs,
            acs_known=acs_known)
        return address

    def root_port(self, **kw):
        return self.add(None, PT.ROOT_PORT, 0x060400, **kw)

    def switch(self, parent, ports, redirect=(), **kw):
        usp = self.add(parent, PT.UPSTREAM, 0x060400, **kw)
        return [self.add(usp, PT.DOWNSTREAM, 0x060400,
                         acs=model.Acs(0x5f, 0x1d) if i in redirect else
                         model.Acs(0x5f, 0), **kw)
                for i in range(ports)]

    def gpu(self, parent, vendor=0x10de, class_code=0x030200, **kw):
        return self.add(parent, PT.ENDPOINT, class_code, vendor=vendor, **kw)

    def topology(self, **kw):
        return model.HostTopology(functions=dict(self.functions), **kw)


class TestPCIeClass(base.TestCase):

    def test_same_switch_is_pix(self):
        t = Tree()
        dsp = t.switch(t.root_port(), 2)
        a, b = t.gpu(dsp[0]), t.gpu(dsp[1])
        self.assertIs(lc.LinkClass.PIX, lc.pcie_class(t.topology(), a, b))

    def test_nested_switches_are_pxb(self):
        t = Tree()
        top = t.switch(t.root_port(), 2)
        left, right = t.switch(top[0], 1), t.switch(top[1], 1)
        a, b = t.gpu(left[0]), t.gpu(right[0])
        self.assertIs(lc.LinkClass.PXB, lc.pcie_class(t.topology(), a, b))

    def test_gpu_beside_nested_switch_is_pxb(self):
        t = Tree()
        top = t.switch(t.root_port(), 2)
        inner = t.switch(top[0], 1)
        a, b = t.gpu(inner[0]), t.gpu(top[1])
        self.assertIs(lc.LinkClass.PXB, lc.pcie_class(t.topology(), a, b))

    def test_two_root_ports_are_phb(self):
        t = Tree()
        a, b = t.gpu(t.root_port()), t.gpu(t.root_port())
        self.assertIs(lc.LinkClass.PHB, lc.pcie_class(t.topology(), a, b))

    def test_functions_under_one_root_port_are_pix(self):
        t = Tree()
        rp = t.root_port()
        a, b = t.gpu(rp), t.gpu(rp)
        self.assertIs(lc.LinkClass.PIX, lc.pcie_class(t.topology(), a, b))

    def test_root_complexes_same_node_are_node(self):
        t = Tree()
        a = t.gpu(t.root_port(rc='pci0000:00'), rc='pci0000:00')
        b = t.gpu(t.root_port(rc='pci0000:20'), rc='pci0000:20')
        self.assertIs(lc.LinkClass.NODE, lc.pcie_class(t.topology(), a, b))

    def test_root_complexes_other_node_are_sys(self):
        t = Tree()
        a = t.gpu(t.root_port(rc='pci0000:00'), rc='pci0000:00', numa=0)
        b = t.gpu(t.root_port(rc='pci0000:80', numa=1), rc='pci0000:80',
                  numa=1)
        self.assertIs(lc.LinkClass.SYS, lc.pcie_class(t.topology(), a, b))

    def test_unknown_node_against_known_is_sys(self):
        t = Tree()
        a = t.gpu(t.root_port(rc='pci0000:00'), rc='pci0000:00', numa=0)
        b = t.gpu(t.root_port(rc='pci0000:80'), rc='pci0000:80',
                  numa=None)
        self.assertIs(lc.LinkClass.SYS, lc.pcie_class(t.topology(), a, b))

    def test_order_is_nearest_first(self):
        self.assertEqual(
            ['NV', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS'],
            [c.name for c in sorted(lc.LinkClass, reverse=True)][::-1])
        self.assertLess(lc.LinkClass.PIX, lc.LinkClass.PXB)


class TestACS(base.TestCase):

    def setUp(self):
        super().setUp()
        t = Tree()
        dsp = t.switch(t.root_port(acs=model.Acs(0x5f, 0x1d)), 3,
                       redirect=(0,))
        self.a, self.b, self.c = (t.gpu(p) for p in dsp)
        self.topology = t.topology()

    def test_redirect_makes_pair_phb_under_route(self):
        self.assertIs(lc.LinkClass.PIX,
                      lc.pcie_class(self.topology, self.a, self.b))
        self.assertIs(lc.LinkClass.PHB,
                      lc.effective_class(self.topology, self.a, self.b))
        self.assertFalse(lc.p2p_capable(self.topology, self.a, self.b,
                                        lc.LinkClass.PXB))
        self.assertTrue(lc.p2p_capable(self.topology, self.a, self.b,
                                       lc.LinkClass.PHB))

    def test_ports_without_redirect_unaffected(self):
        self.assertIs(lc.LinkClass.PIX,
                      lc.effective_class(self.topology, self.b, self.c))
        self.assertEqual({}, lc.routing_ports(self.topology, self.b,
                                              self.c))

    def test_root_port_acs_changes_nothing(self):
        # The root port has redirect set too, but it is shared by all.
        self.assertEqual(1, len(lc.routing_ports(self.topology, self.a,
                                                 self.c)))

    def test_ignore_policy(self):
        self.assertIs(lc.LinkClass.PIX,
                      lc.effective_class(self.topology, self.a, self.b,
                                         lc.AcsPolicy.IGNORE))

    def test_redirect_never_improves_a_far_pair(self):
        t = Tree()
        a = t.gpu(t.switch(t.root_port(rc='pci0000:00'), 1, redirect=(0,),
                           rc='pci0000:00')[0], rc='pci0000:00')
        b = t.gpu(t.root_port(rc='pci0000:80', numa=1), rc='pci0000:80',
                  numa=1)
        self.assertIs(lc.LinkClass.SYS,
                      lc.effective_class(t.topology(), a, b))


class TestAcsStates(base.TestCase):
    """One row per ACS state of the first port of a two-port switch."""

    #: (what, its Acs, acs_known, class under route, why it routes).
    CASES = [
        ('read, no ACS capability', None, True, 'PIX', ()),
        ('ACS, all off', model.Acs(0x5f, 0x00), True, 'PIX', ()),
        ('request redirect', model.Acs(0x5f, 0x1d), True, 'PHB',
         (lc.AcsRoute.REQUEST_REDIRECT,)),
        ('egress control', model.Acs(0x7f, 0x20), True, 'PHB',
         (lc.AcsRoute.EGRESS_CONTROL,)),
        ('both', model.Acs(0x7f, 0x3d), True, 'PHB',
         (lc.AcsRoute.REQUEST_REDIRECT, lc.AcsRoute.EGRESS_CONTROL)),
        # A control bit counts only where the capability says the port
        # implements it (else the spec hardwires it to 0).
        ('egress control bit, no capability', model.Acs(0x5f, 0x20), True,
         'PIX', ()),
        ('unknown: config space unreadable', None, False, 'PHB',
         (lc.AcsRoute.UNKNOWN,)),
    ]

    def test_each_state(self):
        for what, acs, known, routed, why in self.CASES:
            t = Tree()
            usp = t.add(t.root_port(), PT.UPSTREAM, 0x060400)
            port = t.add(usp, PT.DOWNSTREAM, 0x060400, acs=acs,
                         acs_known=known)
            a = t.gpu(port)
            b = t.gpu(t.add(usp, PT.DOWNSTREAM, 0x060400,
                            acs=model.Acs(0x5f, 0)))
            topology = t.topology()
            self.assertEqual(
                (routed, 'PIX'),
                tuple(lc.effective_class(topology, a, b, policy).name
                      for policy in (lc.AcsPolicy.ROUTE,
                                     lc.AcsPolicy.IGNORE)), what)
            self.assertEqual({port: why} if why else {},
                             lc.routing_ports(topology, a, b), what)
            clique = None if routed == 'PHB' else 0
            self.assertEqual({a: clique, b: clique}, cliques.assign(
                topology, lc.LinkClass.PXB).ids, what)
            self.assertEqual({a: 0, b: 0}, cliques.assign(
                topology, lc.LinkClass.PXB, lc.AcsPolicy.IGNORE).ids, what)

    def test_unknown_root_port_changes_nothing(self):
        t = Tree()
        rp = t.root_port(acs_known=False)
        a, b = t.gpu(rp), t.gpu(rp)
        self.assertIs(lc.LinkClass.PIX,
                      lc.effective_class(t.topology(), a, b))

    def test_unknown_far_pair_stays_far(self):
        t = Tree()
        a = t.gpu(t.add(t.add(t.root_port(), PT.UPSTREAM, 0x060400),
                        PT.DOWNSTREAM, 0x060400, acs_known=False))
        b = t.gpu(t.root_port(rc='pci0000:80', numa=1), rc='pci0000:80',
                  numa=1)
        self.assertIs(lc.LinkClass.SYS,
                      lc.effective_class(t.topology(), a, b))

    def test_unknown_with_registers_is_refused(self):
        self.assertRaises(ValueError, model.PCIFunction,
                          address='0000:02:00.0', vendor=0x1000, device=1,
                          class_code=0x060400, parent=None,
                          root_complex='pci0000:00',
                          acs=model.Acs(0x5f, 0x1d), acs_known=False)

    def test_bits_linux_clears(self):
        # pci=disable_acs_redir clears Request Redirect, Completion
        # Redirect and Egress Control.
        self.assertEqual(0x2c, model.Acs.REDIRECT_BITS)


class TestOverrides(base.TestCase):

    def test_nvlink_is_nv(self):
        t = Tree()
        a = t.gpu(t.root_port(rc='pci0000:00'), rc='pci0000:00')
        b = t.gpu(t.root_port(rc='pci0000:80', numa=1), rc='pci0000:80',
                  numa=1)
        topology = t.topology(nvlink_pairs=frozenset([frozenset((a, b))]))
        self.assertIs(lc.LinkClass.NV, lc.effective_class(topology, a, b))
        self.assertTrue(lc.p2p_capable(topology, a, b, lc.LinkClass.NV))

    def test_static_answer_wins(self):
        t = Tree()
        dsp = t.switch(t.root_port(), 2)
        a, b = t.gpu(dsp[0]), t.gpu(dsp[1])
        topology = t.topology(p2p_overrides={frozenset((a, b)): False})
        self.assertFalse(lc.p2p_capable(topology, a, b, lc.LinkClass.SYS))


class TestCliques(base.TestCase):

    def two_switches(self):
        t = Tree()
        gpus = []
        for _ in range(2):
            dsp = t.switch(t.root_port(), 2)
            gpus += [t.gpu(dsp[0]), t.gpu(dsp[1])]
        return t.topology(), gpus

    def test_per_switch_at_pxb(self):
        topology, g = self.two_switches()
        result = cliques.assign(topology, lc.LinkClass.PXB)
        self.assertEqual(((g[0], g[1]), (g[2], g[3])), result.groups)
        self.assertEqual({g[0]: 0, g[1]: 0, g[2]: 1, g[3]: 1}, result.ids)
        self.assertEqual(2, result.largest())

    def test_all_at_phb(self):
        topology, g = self.two_switches()
        result = cliques.assign(topology, lc.LinkClass.PHB)
        self.assertEqual((tuple(g),), result.groups)
        self.assertEqual(4, result.largest())

    def test_none_at_nv(self):
        topology, g = self.two_switches()
        result = cliques.assign(topology, lc.LinkClass.NV)
        self.assertEqual({a: None for a in g}, result.ids)
        self.assertEqual(0, result.largest())

    def test_only_nvidia_display_functions(self):
        t = Tree()
        dsp = t.switch(t.root_port(), 4)
        nv = t.gpu(dsp[0])
        t.gpu(dsp[1], vendor=0x1002, class_code=0x030000)   # AMD GPU
        t.gpu(dsp[2], class_code=0x040300)                   # NVIDIA audio
        nv2 = t.gpu(dsp[3], class_code=0x030000)             # NVIDIA VGA
        result = cliques.assign(t.topology(), lc.LinkClass.PXB)
        self.assertEqual({nv: 0, nv2: 0}, result.ids)

    def test_clique_map_wins_and_ids_skip_it(self):
        topology, g = self.two_switches()
        result = cliques.assign(topology, lc.LinkClass.PXB,
                                clique_map={g[2]: 0, g[3]: 0,
                                            '0000:ff:00.0': 3})
        self.assertEqual({g[0]: 1, g[1]: 1, g[2]: 0, g[3]: 0}, result.ids)
        self.assertEqual(((g[0], g[1]), (g[2], g[3])), result.groups)
        self.assertIn('0000:ff:00.0', result.findings[0])

    def test_non_transitive_groups_greedily_in_address_order(self):
        a, b, c = '0000:01:00.0', '0000:02:00.0', '0000:03:00.0'
        capable = {frozenset((a, b)), frozenset((b, c))}
        groups = cliques.group_gpus(
            [c, b, a], lambda x, y: frozenset((x, y)) in capable)
        self.assertEqual([[a, b], [c]], groups)

    def test_deterministic(self):
        topology, _ = self.two_switches()
        first = cliques.assign(topology, lc.LinkClass.PXB)
        shuffled = model.HostTopology(
            functions=dict(reversed(list(topology.functions.items()))))
        self.assertEqual(first, cliques.assign(shuffled, lc.LinkClass.PXB))

    def test_more_than_sixteen_cliques(self):
        t = Tree()
        gpus = []
        for _ in range(17):
            dsp = t.switch(t.root_port(), 2)
            gpus.append((t.gpu(dsp[0]), t.gpu(dsp[1])))
        result = cliques.assign(t.topology(), lc.LinkClass.PXB)
        self.assertEqual(15, result.ids[gpus[15][0]])
        self.assertIsNone(result.ids[gpus[16][0]])
        self.assertIsNone(result.ids[gpus[16][1]])
        self.assertIn(gpus[16][0], result.findings[0])
        self.assertEqual(2, result.largest())
        self.assertEqual(16, len(result.with_id()))
        self.assertNotIn(gpus[16], result.with_id())
        self.assertEqual(sorted(gpus[16]), result.without_id())

    def lone_and_pair(self):
        """Two GPUs behind one switch, one alone on another root complex."""
        t = Tree()
        dsp = t.switch(t.root_port(), 2)
        pair = (t.gpu(dsp[0]), t.gpu(dsp[1]))
        lone = t.gpu(t.root_port(rc='pci0000:80'))
        return t.topology(), pair, lone

    def test_lone_gpu_has_no_id_and_no_clique(self):
        topology, pair, lone = self.lone_and_pair()
        result = cliques.assign(topology, lc.LinkClass.PXB)
        self.assertEqual((pair, (lone,)), result.groups)
        self.assertEqual((pair,), result.with_id())
        self.assertEqual([lone], result.without_id())
        self.assertEqual(2, result.largest())

    def test_lone_gpu_in_clique_map_is_no_clique(self):
        topology, pair, lone = self.lone_and_pair()
        result = cliques.assign(topology, lc.LinkClass.PXB,
                                clique_map={lone: 7})
        self.assertEqual(7, result.ids[lone])
        self.assertEqual((pair,), result.with_id())
        self.assertEqual([], result.without_id())

    def test_no_gpu(self):
        result = cliques.assign(Tree().topology(), lc.LinkClass.SYS)
        self.assertEqual(((), [], 0), (result.with_id(), result.without_id(),
                                       result.largest()))
