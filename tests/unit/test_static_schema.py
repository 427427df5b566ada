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

"""The static file's schema and its reading; the errors of whole files are
in test_static_backend."""

import json
import os

import jsonschema

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import static_schema
import tests
from tests.unit import base

#: The listing doc/source/static-topology.rst includes.
LISTING = os.path.join(tests.ROOT, 'doc', 'source',
                       'static-topology-schema.json')


def subschemas(schema: dict, path: tuple = ()):
    yield path, schema
    for key, value in schema.get('properties', {}).items():
        yield from subschemas(value, path + (key,))
    if 'items' in schema:
        yield from subschemas(schema['items'], path + (0,))


class TestSchema(base.TestCase):

    def test_valid_draft_2020_12(self):
        jsonschema.Draft202012Validator.check_schema(static_schema.SCHEMA)

    def test_every_value_says_what_is_allowed(self):
        # Errors quote the description after "must be", mid-sentence.
        for path, schema in subschemas(static_schema.SCHEMA):
            self.assertRegex(schema.get('description', ''), '^[a-z].*[^.]$',
                             static_schema.name(path))

    def test_mappings_list_their_keys(self):
        for path, schema in subschemas(static_schema.SCHEMA):
            if schema['type'] == 'object':
                self.assertFalse(schema['additionalProperties'])
                self.assertEqual(
                    'a mapping with the keys %s'
                    % ', '.join(schema['properties']),
                    schema['description'])

    def test_documented_listing_is_the_schema(self):
        with open(LISTING, encoding='utf-8') as f:
            listing = f.read()
        self.assertEqual(
            json.dumps(static_schema.SCHEMA, indent=2) + '\n', listing,
            '%s is out of date: write json.dumps(static_schema.SCHEMA, '
            'indent=2) and a newline to it' % LISTING)


class TestName(base.TestCase):

    def test_names(self):
        for path, expected in (
                ((), 'the top level'),
                (('gpus',), 'gpus'),
                (('gpus', 0), 'GPU0'),
                (('gpus', 12, 'numa_node'), 'GPU12 numa_node'),
                (('numa_nodes', 0), 'numa_nodes entry 1'),
                (('numa_nodes', 1, 'distances', 2),
                 'numa_nodes entry 2 distances entry 3')):
            self.assertEqual(expected, static_schema.name(path))


class TestRead(base.TestCase):

    def test_text_as_typed_with_lines(self):
        document = static_schema.read(
            '# A host.\n'
            'gpus:\n'
            '  - address: 81:00.0\n'
            '    device: 0x2330\n'
            '    numa_node: 01\n'
            'numa_nodes:\n'
            '  - {id: 1, distances: [10]}\n')
        # YAML 1.1 would load 29160.0, 9008 and 1.
        self.assertEqual(
            {'gpus': [{'address': '81:00.0', 'device': '0x2330',
                       'numa_node': '01'}],
             'numa_nodes': [{'id': '1', 'distances': ['10']}]},
            document.data)
        self.assertEqual(2, document.line(()))
        self.assertEqual(3, document.line(('gpus',)))
        self.assertEqual(5, document.line(('gpus', 0, 'numa_node')))
        self.assertEqual(2, document.key_line(('gpus',)))
        self.assertEqual(6, document.key_line(('numa_nodes',)))
        self.assertEqual(7, document.line(('numa_nodes', 0, 'distances', 0)))
        self.assertEqual('10', document.value(
            ('numa_nodes', 0, 'distances', 0)))

    def test_refuse_quotes_the_schema(self):
        document = static_schema.read('gpus:\n- address: 81:00.0\n'
                                      '  clique: 99\n')
        error = document.refuse(('gpus', 0, 'clique'))
        self.assertEqual(3, error.line)
        self.assertEqual("GPU0 clique must be an integer from 0 to 15, got "
                         "'99'", str(error))

    def test_errors(self):
        for text, line, message in (
                ('', 1, 'the file is empty; it needs at least a gpus list'),
                ('gpus: [\n', 2, 'YAML syntax error: while parsing a flow '
                                 "node, expected the node content, but found "
                                 "'<stream end>'"),
                ('gpus:\n- address: 81:00.0\n  clique: 1\n  clique: 2\n', 4,
                 "key 'clique' appears twice in GPU0 (first on line 3)"),
                ('gpus:\n- address: 81:00.0\n  numa: 0\n  cliq: 0\n', 3,
                 "unknown key 'numa' in GPU0; allowed keys are address, "
                 "numa_node, root_complex, clique, device, module_id"),
                ('gpus:\n- numa_node: 0\n', 2,
                 'GPU0 has no address; it is required: a PCI address, '
                 'dddd:bb:ss.f or bb:ss.f in hex, such as 0000:81:00.0'),
                ('gpus:\n- address: 81:00.0\n  device: [1]\n', 3,
                 'GPU0 device must be a PCI device ID, up to 4 hex digits '
                 'such as 0x2330, got a list')):
            error = self.assertRaises(exception.StaticLineError,
                                      static_schema.read, text)
            self.assertEqual((line, message), (error.line, str(error)), text)
