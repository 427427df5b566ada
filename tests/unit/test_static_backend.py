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

import os
import textwrap

import fixtures
from oslo_config import cfg

from nova_gpu_p2p import conf
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import static
from tests.fixtures import deadline
from tests.unit import base

FILENAME = '/etc/nova/gpu-topology.yaml'
A, B, C, D = ('0000:81:00.0', '0000:82:00.0', '0000:c1:00.0',
              '0000:c2:00.0')


def parse(text: str) -> model.HostTopology:
    return static.parse(textwrap.dedent(text), FILENAME)


def pair(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


FOUR_GPUS = textwrap.dedent('''\
    gpus:
      - address: 0000:81:00.0
      - address: 0000:82:00.0
      - address: 0000:c1:00.0
      - address: 0000:c2:00.0
    ''')


class TestParse(base.TestCase):

    def test_matrix(self):
        topology = parse('''\
            # GPUs of this host.
            gpus:
              - address: 0000:81:00.0
                numa_node: 0
                root_complex: pci0000:80
                device: 0x2330
              - address: 0000:82:00.0
                numa_node: 1
            p2p_matrix: |2
                      GPU0  GPU1
               GPU0   X     OK
               GPU1   OK    X
            ''')
        self.assertEqual(
            {A: model.PCIFunction(
                address=A, vendor=0x10de, device=0x2330,
                class_code=0x030200, parent=None, root_complex='pci0000:80',
                numa_node=0, driver=None),
             B: model.PCIFunction(
                address=B, vendor=0x10de, device=0, class_code=0x030200,
                parent=None, root_complex='static-node1', numa_node=1,
                driver=None)},
            topology.functions)
        self.assertEqual({pair(A, B): True}, topology.p2p_overrides)
        self.assertEqual((), topology.numa_nodes)
        self.assertEqual((), topology.findings)
        self.assertEqual([A, B], [g.address for g in topology.gpus()])
        # The operator's answer wins over the tree, which says SYS.
        self.assertTrue(link_class.p2p_capable(
            topology, A, B, link_class.LinkClass.PIX))

    def test_matrix_four_gpus_two_cliques(self):
        topology = parse(FOUR_GPUS + textwrap.dedent('''\
    p2p_matrix: |
      GPU0 GPU1 GPU2 GPU3
      GPU0 X    OK   NS   NS
      GPU1 OK   X    CNS  NS
      GPU2 NS   CNS  X    OK
      GPU3 NS   NS   OK   X
    '''))
        self.assertEqual(
            {pair(A, B): True, pair(C, D): True, pair(A, C): False,
             pair(A, D): False, pair(B, C): False, pair(B, D): False},
            topology.p2p_overrides)
        result = cliques.assign(topology, link_class.LinkClass.PXB)
        self.assertEqual(((A, B), (C, D)), result.groups)
        self.assertEqual({A: 0, B: 0, C: 1, D: 1}, result.ids)

    def test_matrix_as_nvidia_smi_prints_it(self):
        # Tabs, a trailing tab, lower-case codes and the legend.
        matrix = ''.join('    ' + row + '\n' for row in (
            ' \tGPU0\tGPU1\t',
            ' GPU0\tX\tok\t',
            ' GPU1\tOK\tX\t',
            '',
            'Legend:',
            '',
            '  X    = Self',
            '  OK   = Status Ok'))
        topology = static.parse(
            'gpus:\n- address: 81:00.0\n- address: 82:00.0\n'
            'p2p_matrix: |2\n' + matrix, FILENAME)
        self.assertEqual({pair(A, B): True}, topology.p2p_overrides)

    def test_matrix_wins_over_cliques(self):
        topology = parse('''\
            gpus:
              - address: 0000:82:00.0
                clique: 1
              - address: 0000:81:00.0
                clique: 1
            p2p_matrix: |
              GPU0 GPU1
              GPU0 X NS
              GPU1 NS X
            ''')
        self.assertEqual({pair(A, B): False}, topology.p2p_overrides)
        self.assertEqual(2, len(topology.findings))
        self.assertIn('not in PCI address order', topology.findings[0])
        self.assertIn('clique_map', topology.findings[1])

    def test_cliques(self):
        topology = parse('''\
            gpus:
              - address: 0000:81:00.0
                clique: 3
              - address: 0000:82:00.0
                clique: 3
              - address: 0000:c1:00.0
                clique: 4
              - address: 0000:c2:00.0
            ''')
        self.assertEqual(
            {pair(A, B): True, pair(A, C): False, pair(A, D): False,
             pair(B, C): False, pair(B, D): False, pair(C, D): False},
            topology.p2p_overrides)
        result = cliques.assign(topology, link_class.LinkClass.SYS)
        self.assertEqual(((A, B), (C,), (D,)), result.groups)

    def test_neither_matrix_nor_cliques(self):
        topology = parse('''\
            gpus:
              - address: 0000:81:00.0
                numa_node: 0
              - address: 0000:82:00.0
                numa_node: 0
              - address: 0000:c1:00.0
                numa_node: 1
              - address: 0000:c2:00.0
            ''')
        self.assertEqual({}, topology.p2p_overrides)
        self.assertEqual(
            ['static-node0', 'static-node0', 'static-node1', 'static'],
            [topology.functions[a].root_complex for a in (A, B, C, D)])
        self.assertIsNone(topology.functions[D].numa_node)
        self.assertEqual(link_class.LinkClass.PHB,
                         link_class.effective_class(topology, A, B))
        self.assertEqual(link_class.LinkClass.SYS,
                         link_class.effective_class(topology, A, C))

    def test_short_and_upper_case_addresses(self):
        topology = parse('''\
            gpus:
              - address: 81:00.0
                device: 20B5
              - address: "0000:C1:00.0"
              - {address: c2:00.0, device: 0X2330}
            ''')
        self.assertEqual([A, C, D], sorted(topology.functions))
        self.assertEqual(0x20b5, topology.functions[A].device)
        self.assertEqual(0x2330, topology.functions[D].device)

    def test_numa_nodes(self):
        topology = parse('''\
            gpus:
              - address: 0000:81:00.0
                numa_node: 1
            numa_nodes:
              - id: 1
                cpus: 32-63,96-127
                distances: [21, 10, 31]
              - id: 0
                cpus: "0"
                distances: [10, 21, 31]
              - id: 2
            ''')
        self.assertEqual(
            (model.NumaNode(id=0, cpus=frozenset({0}),
                            distances=(10, 21, 31)),
             model.NumaNode(id=1, cpus=frozenset(range(32, 64))
                            | frozenset(range(96, 128)),
                            distances=(21, 10, 31)),
             model.NumaNode(id=2, cpus=frozenset(), distances=())),
            topology.numa_nodes)


class TestParseErrors(base.TestCase):

    def assertError(self, text: str, line: int, *words: str) -> str:
        exc = self.assertRaises(exception.TopologyError, parse, text)
        message = str(exc)
        self.assertTrue(message.startswith('%s line %d: ' % (FILENAME, line)),
                        message)
        for word in words:
            self.assertIn(word, message)
        return message

    def test_yaml_syntax(self):
        self.assertError('gpus:\n  - address: 81:00.0\n   numa_node: 0\n',
                         3, 'YAML syntax error')
        self.assertError('gpus: [\n', 2, 'YAML syntax error')
        self.assertError('gpus: \x07\n', 1, 'YAML syntax error')

    def test_header_indented_more_than_rows(self):
        # Plain "|" takes its indentation from the first line.
        self.assertError(
            'gpus:\n- address: 81:00.0\np2p_matrix: |\n'
            '        GPU0\n  GPU0  X\n', 5, 'YAML syntax error')

    def test_empty_file(self):
        self.assertError('# nothing\n', 1, 'empty', 'gpus')

    def test_top_level_not_mapping(self):
        self.assertError('- address: 81:00.0\n', 1,
                         'the top level must be a mapping with the keys '
                         'gpus, p2p_matrix, numa_nodes, got a list')

    def test_unknown_top_level_key(self):
        self.assertError(FOUR_GPUS + 'cliques: 1\n', 6, "'cliques'",
                         'allowed keys are gpus, p2p_matrix, numa_nodes')

    def test_unknown_gpu_key(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  numa: 0\n', 3, "'numa'", 'GPU0',
            'allowed keys are address, numa_node, root_complex, clique, '
            'device, module_id')

    def test_duplicate_key(self):
        self.assertError('gpus:\n- address: 81:00.0\n  address: 82:00.0\n',
                         3, "'address'", 'twice', 'line 2')

    def test_missing_gpus(self):
        self.assertError('numa_nodes: []\n', 1, 'the top level has no gpus; '
                         'it is required: a list of one or more GPUs')

    def test_gpus_not_a_list(self):
        self.assertError('gpus: 0000:81:00.0\n', 1,
                         'gpus must be a list of one or more GPUs, each a '
                         "mapping with an address, got '0000:81:00.0'")
        self.assertError('gpus:\n- 81:00.0\n', 2,
                         'GPU0 must be a mapping with the keys address, '
                         "numa_node, root_complex, clique, device, "
                         "module_id, got '81:00.0'")

    def test_empty_gpus(self):
        self.assertError('# GPUs\ngpus: []\n', 2, 'gpus is empty; it must '
                         'be a list of one or more GPUs')

    def test_gpu_without_address(self):
        self.assertError('gpus:\n- address: 81:00.0\n- numa_node: 0\n',
                         3, 'GPU1 has no address; it is required: a PCI '
                         'address')

    def test_bad_address(self):
        self.assertError('gpus:\n- address: 81:00\n', 2,
                         'GPU0 address must be a PCI address, dddd:bb:ss.f '
                         "or bb:ss.f in hex", "got '81:00'")
        self.assertError('gpus:\n- address: [81:00.0]\n', 2,
                         'GPU0 address must be a PCI address', 'got a list')

    def test_duplicate_address(self):
        self.assertError(
            'gpus:\n- address: 0000:81:00.0\n- address: 82:00.0\n'
            '- address: 81:00.0\n', 4, 'duplicate GPU address 0000:81:00.0',
            'line 2')

    def test_quoted_and_empty_values(self):
        # Values are read as typed, quoted or not.
        topology = parse('''\
            gpus:
              - {address: "81:00.0", numa_node: "0", clique: '3',
                 device: "2330", root_complex: "0"}
            numa_nodes:
              - {id: "0", cpus: "0", distances: ["10"]}
            ''')
        function = topology.functions[A]
        self.assertEqual((0, 0x2330, '0'), (function.numa_node,
                                            function.device,
                                            function.root_complex))
        self.assertEqual((10,), topology.numa_nodes[0].distances)
        self.assertError('gpus:\n- address: 81:00.0\n  numa_node:\n', 3,
                         "GPU0 numa_node must be an integer >= 0, got ''")

    def test_first_error_in_the_file(self):
        # Whatever order the schema finds them in.
        self.assertError(
            'gpus:\n- address: 81:00.0\n  clique: x\n  bad: 1\n', 3,
            "GPU0 clique must be an integer from 0 to 15, got 'x'")
        self.assertError(
            'gpus:\n- address: 81:00.0\n  bad: 1\n  clique: x\n', 3,
            "unknown key 'bad' in GPU0")
        self.assertError(
            'numa_nodes: 1\ngpus:\n- numa_node: 0\n', 1,
            "numa_nodes must be a list of NUMA nodes, each a mapping with "
            "the keys id, cpus, distances, got '1'")

    def test_yaml_that_is_not_data(self):
        self.assertError('gpus:\n- &gpu [*gpu]\n', 2,
                         'YAML alias *gpu: aliases are not accepted')

    def test_billion_laughs(self):
        # 400 bytes that once expanded to gigabytes inside nova-compute.
        laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol"]']
        for level in 'bcdefghi':
            previous = laughs[-1][0]
            laughs.append('%s: &%s [%s]' % (level, level, ','.join(
                ['*' + previous] * 9)))
        text = '\n'.join(laughs + ['gpus: *i']) + '\n'
        exc = self.assertRaises(exception.TopologyError,
                                deadline.run_briefly, parse, text)
        self.assertEqual('%s line 2: YAML alias *a: aliases are not '
                         'accepted, write the value out' % FILENAME,
                         str(exc))
        self.assertError('gpus:\n- {[address]: 81:00.0}\n', 2,
                         'a key in GPU0 must be a name, got a list')

    def test_bad_numa_node(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  numa_node: x\n', 3,
            "GPU0 numa_node must be an integer >= 0, got 'x'")
        self.assertError(
            'gpus:\n- address: 81:00.0\n  numa_node: -1\n', 3,
            "numa_node must be an integer >= 0, got '-1'")

    def test_clique_out_of_range(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  clique: 16\n', 3,
            "GPU0 clique must be an integer from 0 to 15, got '16'")

    def test_module_id_out_of_range(self):
        for value in ('0', '17'):
            self.assertError(
                'gpus:\n- address: 81:00.0\n  module_id: %s\n' % value, 3,
                'GPU0 module_id must be an integer from 1 to 16: the HGX '
                'module ID', "got '%s'" % value)

    def test_module_id_not_an_integer(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  module_id: one\n', 3,
            'GPU0 module_id must be an integer', "got 'one'")

    def test_duplicate_module_id(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  module_id: 3\n'
            '- address: 82:00.0\n  module_id: 3\n', 5,
            'duplicate module_id 3, already given on line 3')

    def test_bad_device(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  device: 0x12345\n', 3,
            'GPU0 device', '4 hex digits', "'0x12345'")

    def test_empty_root_complex(self):
        self.assertError(
            'gpus:\n- address: 81:00.0\n  root_complex: " "\n', 3,
            'GPU0 root_complex must be a name that is not empty',
            "got ' '")

    def matrix_error(self, rows: str, line: int, *words: str) -> str:
        return self.assertError(
            FOUR_GPUS + 'p2p_matrix: |\n' + textwrap.indent(
                textwrap.dedent(rows), '  '), line, *words)

    def test_matrix_not_literal_block(self):
        self.assertError(FOUR_GPUS + 'p2p_matrix: GPU0 GPU1\n', 6,
                         'p2p_matrix must be the matrix nvidia-smi topo '
                         '-p2p r prints, as a literal block: "p2p_matrix: |"'
                         ' (or "|2")', "got 'GPU0 GPU1'")
        self.assertError(FOUR_GPUS + 'p2p_matrix: >\n  GPU0 GPU1\n', 6,
                         'as a literal block')

    def test_matrix_empty(self):
        self.assertError(FOUR_GPUS + 'p2p_matrix: |\n\n', 6,
                         'p2p_matrix must be the matrix', "got ''")
        self.matrix_error('Legend:\n', 7,
                          'p2p_matrix: the matrix has no rows before its '
                          'legend')

    def test_matrix_errors_name_the_file_lines(self):
        # The parser's own cases are in test_nvidia_smi.
        self.matrix_error('''\
            GPU0 GPU1 GPU2 GPU3
            GPU0 X  OK OK NS
            GPU1 OK X  OK OK
            GPU2 OK OK X  OK
            GPU3 OK OK OK X
            ''', 11, 'p2p_matrix: not symmetric',
                          'GPU0 to GPU3 is NS on line 8', 'GPU3 to GPU0 is OK')
        self.assertError(
            FOUR_GPUS + 'p2p_matrix: |2\n\n  # not YAML: part of the text\n'
            '      GPU0 GPU1 GPU2 GPU3\n', 8,
            "p2p_matrix: unknown GPU label '#'", 'of 4 GPUs')

    def numa_error(self, numa: str, line: int, *words: str) -> str:
        return self.assertError(
            'gpus:\n- address: 81:00.0\n  numa_node: 1\nnuma_nodes:\n'
            + numa, line, *words)

    def test_numa_nodes_not_a_list(self):
        self.numa_error('  id: 0\n', 5, 'numa_nodes must be a list',
                        'id, cpus, distances', 'got a mapping')

    def test_numa_node_entries(self):
        self.numa_error('- cpus: 0-3\n', 5, 'numa_nodes entry 1 has no id; '
                        'it is required: an integer >= 0')
        self.numa_error('- id: 1\n  cpu: 0\n', 6, "unknown key 'cpu'",
                        'numa_nodes entry 1', 'id, cpus, distances')
        self.numa_error('- id: one\n', 5, 'numa_nodes entry 1 id must be '
                                          "an integer >= 0, got 'one'")
        self.numa_error('- id: 1\n- id: 1\n', 6, 'duplicate NUMA node id 1',
                        'line 5')
        self.numa_error('- id: 1\n  cpus: 0-x\n', 6, 'cpus must be a CPU '
                                                     "list", "'0-x'")

    def test_cpu_lists_linux_never_writes(self):
        # Backwards, it would read as no CPU; beyond any kernel's CPUs, it
        # would take the host's memory to expand.
        for text in ('31-0', '0-99999999999', '8192'):
            self.numa_error('- id: 1\n  cpus: %s\n' % text, 6,
                            'cpus must be a CPU list such as 0-31,64-95',
                            "got '%s'" % text)

    def test_numa_distances(self):
        self.numa_error('- id: 1\n  distances: 10\n', 6,
                        'numa_nodes entry 1 distances must be a list of '
                        "integers, such as [10, 21], got '10'")
        self.numa_error('- id: 0\n  distances: [10, 21]\n- id: 1\n'
                        '  distances: [21, 10, 21]\n', 8,
                        'numa_nodes entry 2 distances has 3 values',
                        'lists 2 nodes', 'in id order (0, 1)')
        self.numa_error('- id: 0\n  distances: [10, 21]\n- id: 1\n'
                        '  distances: [10, 21]\n', 8,
                        'distance from node 1 to node 0 is 10', 'must be 10 '
                        'to the node itself and from 11 to 255 to other '
                        'nodes')
        self.numa_error('- id: 1\n  distances:\n  - 10\n  - 256\n', 8,
                        'numa_nodes entry 1 distances entry 2 must be an '
                        "integer from 10 to 255, got '256'")
        self.numa_error('- id: 1\n  distances: [-1]\n', 6,
                        "must be an integer from 10 to 255, got '-1'")

    def test_gpu_on_unlisted_numa_node(self):
        self.numa_error('- id: 0\n', 3, 'GPU0 numa_node 1 is not one of '
                                        'the numa_nodes ids (0)')


class TestModuleIds(base.TestCase):

    def test_module_ids_of_the_gpus_that_have_one(self):
        text = textwrap.dedent('''\
            gpus:
              - {address: 81:00.0, module_id: 2}
              - {address: 0000:82:00.0, module_id: 16}
              - {address: c1:00.0}
            ''')
        self.assertEqual({A: 2, B: 16}, static.module_ids(text, FILENAME))

    def test_none(self):
        self.assertEqual({}, static.module_ids(FOUR_GPUS, FILENAME))

    def test_errors_name_the_file_and_line(self):
        exc = self.assertRaises(
            exception.TopologyError, static.module_ids,
            'gpus:\n- address: 81:00.0\n  module_id: 0\n', FILENAME)
        self.assertTrue(str(exc).startswith('%s line 3: GPU0 module_id '
                                            % FILENAME), str(exc))

    def test_cliques_ignore_module_ids(self):
        with_ids = parse('''\
            gpus:
              - {address: 81:00.0, clique: 0, module_id: 1}
              - {address: 82:00.0, clique: 0, module_id: 5}
              - {address: c1:00.0, clique: 1, module_id: 2}
            ''')
        without = parse('''\
            gpus:
              - {address: 81:00.0, clique: 0}
              - {address: 82:00.0, clique: 0}
              - {address: c1:00.0, clique: 1}
            ''')
        self.assertEqual(without, with_ids)


class TestStaticBackend(base.TestCase):

    def backend(self, path: str | None) -> static.StaticBackend:
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        opts([], project='nova', default_config_files=[])
        self.addCleanup(opts.reset)
        opts.set_override('static_topology_file', path, group='gpu_p2p')
        return static.StaticBackend(opts)

    def test_discover(self):
        path = self.useFixture(fixtures.TempDir()).join('gpus.yaml')
        with open(path, 'w') as f:
            f.write('gpus:\n  - address: 0000:81:00.0\n    numa_node: 0\n')
        topology = self.backend(path).discover()
        self.assertEqual([A], list(topology.functions))
        self.assertEqual(0, topology.functions[A].numa_node)

    def test_errors_name_the_file(self):
        path = self.useFixture(fixtures.TempDir()).join('gpus.yaml')
        with open(path, 'w') as f:
            f.write('gpus: []\n')
        exc = self.assertRaises(exception.TopologyError,
                                self.backend(path).discover)
        self.assertEqual('%s line 1: gpus is empty; it must be a list of one '
                         'or more GPUs, each a mapping with an address'
                         % path, str(exc))

    def test_missing_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'absent.yaml')
        exc = self.assertRaises(exception.TopologyError,
                                self.backend(path).discover)
        self.assertIn('cannot read %s' % path, str(exc))
        self.assertIn('[gpu_p2p] static_topology_file', str(exc))
        self.assertIn('No such file', str(exc))

    def test_option_unset(self):
        exc = self.assertRaises(exception.TopologyError,
                                self.backend(None).discover)
        self.assertIn('[gpu_p2p] static_topology_file is not set', str(exc))

    def test_read(self):
        path = self.useFixture(fixtures.TempDir()).join('gpus.yaml')
        with open(path, 'w') as f:
            f.write(FOUR_GPUS)
        self.assertEqual(FOUR_GPUS, static.read(path))
        self.assertRaises(exception.TopologyError, static.read, path + '.x')
        self.assertRaises(exception.TopologyError, static.read, None)
