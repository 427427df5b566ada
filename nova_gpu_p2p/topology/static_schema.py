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

"""The static topology file's structure, as a JSON schema, and its reading.

The schema says which keys each mapping has and needs, which values are
lists, mappings or text, and the form of the text; what it cannot say (a
PCI address's syntax, ranges, ids that must exist, duplicates, the P2P
matrix) :mod:`nova_gpu_p2p.topology.static` checks after it.

The YAML is composed, not loaded, and every scalar stays the text the
operator typed: YAML 1.1 would read ``81:00.0`` as a base-60 number and
``0x2330`` as 9008. So the schema sees text where YAML would see numbers,
and checks integers as decimal digits. The node of every value is kept, so
that each error names its line.
"""

import dataclasses

import jsonschema
from nova_gpu_p2p_guest import errors
import yaml

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.topology import host_cliques

#: ACPI SLIT distances, as libvirt accepts them.
LOCAL_DISTANCE = 10
UNREACHABLE_DISTANCE = 255

#: Where a value is: mapping keys and list indices from the top.
Path = tuple[str | int, ...]

#: Nine digits at most: int() of thousands would raise or take seconds.
_DECIMAL = '^[0-9]{1,9}$'
_KINDS = {yaml.SequenceNode: 'list', yaml.MappingNode: 'mapping'}


def _mapping(properties: dict[str, dict], required: str) -> dict:
    return {'type': 'object',
            'description': 'a mapping with the keys %s'
                           % ', '.join(properties),
            'properties': properties,
            'required': [required],
            'additionalProperties': False}


def _text(description: str, pattern: str | None = None) -> dict:
    schema = {'type': 'string', 'description': description}
    if pattern:
        schema['pattern'] = pattern
    return schema


_GPU = _mapping({
    'address': _text('a PCI address, dddd:bb:ss.f or bb:ss.f in hex, such '
                     'as 0000:81:00.0'),
    'numa_node': _text('an integer >= 0', _DECIMAL),
    'root_complex': _text('a name that is not empty, such as pci0000:80',
                          r'\S'),
    'clique': _text('an integer from 0 to %d' % host_cliques.MAX_CLIQUE_ID,
                    _DECIMAL),
    'device': _text('a PCI device ID, up to 4 hex digits such as 0x2330',
                    '^(0[xX])?[0-9a-fA-F]{1,4}$'),
    'module_id': _text('an integer from 1 to %d: the HGX module ID by '
                       'which NVIDIA Fabric Manager names the GPU (Module '
                       'ID in nvidia-smi -q)' % nvfm.FM_MAX_NUM_GPUS,
                       _DECIMAL),
}, required='address')

_NUMA_NODE = _mapping({
    'id': _text('an integer >= 0', _DECIMAL),
    'cpus': _text('a CPU list such as 0-31,64-95'),
    'distances': {
        'type': 'array',
        'description': 'a list of integers, such as [%d, 21]'
                       % LOCAL_DISTANCE,
        'items': _text('an integer from %d to %d' % (
            LOCAL_DISTANCE, UNREACHABLE_DISTANCE), _DECIMAL)},
}, required='id')

#: Draft 2020-12; ``description`` is what errors say is allowed.
SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'nova-gpu-p2p static topology file',
    **_mapping({
        'gpus': {
            'type': 'array',
            'description': 'a list of one or more GPUs, each a mapping with '
                           'an address',
            'minItems': 1,
            'items': _GPU},
        'p2p_matrix': _text(
            'the matrix nvidia-smi topo -p2p r prints, as a literal block: '
            '"p2p_matrix: |" (or "|2") followed by the matrix on indented '
            'lines', r'\S'),
        'numa_nodes': {
            'type': 'array',
            'description': 'a list of NUMA nodes, each a mapping with the '
                           'keys %s' % ', '.join(_NUMA_NODE['properties']),
            'items': _NUMA_NODE},
    }, required='gpus'),
}

_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@dataclasses.dataclass(frozen=True)
class Document:
    """The file as plain data: mappings, lists and text, with their nodes."""

    data: dict
    #: The node of every value, and of every mapping key, by path.
    nodes: dict[Path, yaml.Node]
    key_nodes: dict[Path, yaml.Node]

    def line(self, path: Path) -> int:
        return _line(self.nodes[path])

    def key_line(self, path: Path) -> int:
        return _line(self.key_nodes[path])

    def value(self, path: Path) -> dict | list | str:
        value = self.data
        for part in path:
            value = value[part]
        return value

    def refuse(self, path: Path) -> 'exception.StaticLineError':
        """The value at ``path`` is wrong: say so, and what is allowed."""
        schema = SCHEMA
        for part in path:
            schema = (schema['properties'][part] if isinstance(part, str)
                      else schema['items'])
        return exception.StaticLineError(
            self.line(path), _wrong(path, schema, self.value(path)))


def name(path: Path) -> str:
    """How errors call the value at ``path``: GPU1 numa_node, for one."""
    words: list[str] = []
    for part in path:
        if isinstance(part, str):
            words.append(part)
        elif words == ['gpus']:
            # As nvidia-smi and the p2p_matrix number them.
            words = ['GPU%d' % part]
        else:
            words[-1] = '%s entry %d' % (words[-1], part + 1)
    return ' '.join(words) or 'the top level'


def read(text: str) -> Document:
    """The file's data once its structure is right.

    Raises StaticLineError for YAML syntax, an empty file, a key given
    twice or the first value, in file order, that the schema refuses.
    """
    root = _compose(text)
    if root is None:
        raise exception.StaticLineError(
            1, 'the file is empty; it needs at least a gpus '
            'list')
    nodes: dict[Path, yaml.Node] = {}
    key_nodes: dict[Path, yaml.Node] = {}
    document = Document(_plain(root, (), nodes, key_nodes), nodes, key_nodes)
    problems = [_message(error, document)
                for error in _VALIDATOR.iter_errors(document.data)]
    if problems:
        raise min(problems, key=lambda problem: problem.line)
    return document


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


#: How deep a topology file's collections may nest; it needs four (the
#: top level, gpus, a GPU, a list in it). PyYAML composes recursively, so
#: thousands of levels would end in Python's RecursionError.
MAX_DEPTH = 16


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses YAML aliases and deep nesting.

    A few hundred bytes of aliases to aliases expand to gigabytes (the
    "billion laughs"), inside nova-compute; a topology file needs none.
    """

    depth = 0

    def compose_node(self, parent: yaml.Node | None,
                     index: object) -> yaml.Node:
        event = self.peek_event()
        if self.check_event(yaml.AliasEvent):
            raise exception.StaticLineError(
                event.start_mark.line + 1,
                'YAML alias *%s: aliases are not accepted, write the value '
                'out' % event.anchor)
        if self.depth >= MAX_DEPTH:
            raise exception.StaticLineError(
                event.start_mark.line + 1,
                'lists and mappings nested more than %d deep; a topology '
                'file needs 4' % MAX_DEPTH)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=_NoAliasLoader)
    except yaml.reader.ReaderError as exc:
        raise exception.StaticLineError(text.count('\n', 0, exc.position) + 1,
                                        'YAML syntax error: %s' % exc.reason)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise exception.StaticLineError(
            mark.line + 1 if mark else 1,
            'YAML syntax error: %s' % ', '.join(
                part for part in (exc.context, exc.problem) if part))


def _plain(node: yaml.Node, path: Path, nodes: dict[Path, yaml.Node],
           key_nodes: dict[Path, yaml.Node]) -> dict | list | str:
    """The node as plain data, filling ``nodes`` and ``key_nodes``."""
    nodes[path] = node
    if isinstance(node, yaml.ScalarNode):
        return node.value
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, path + (index,), nodes, key_nodes)
                for index, item in enumerate(node.value)]
    mapping = {}
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            raise exception.StaticLineError(
                _line(key), 'a key in %s must be a name, got a '
                '%s' % (name(path), _KINDS[type(key)]))
        if key.value in mapping:
            raise exception.StaticLineError(
                _line(key), "key %s appears twice in %s "
                "(first on line %d)"
                % (errors.quoted(key.value), name(path),
                   _line(key_nodes[path + (key.value,)])))
        key_nodes[path + (key.value,)] = key
        mapping[key.value] = _plain(value, path + (key.value,), nodes,
                                    key_nodes)
    return mapping


def _shown(value: dict | list | str) -> str:
    if isinstance(value, str):
        return errors.quoted(value)
    return 'a list' if isinstance(value, list) else 'a mapping'


def _message(error: jsonschema.ValidationError,
             document: Document) -> exception.StaticLineError:
    """The error at its line, naming the value and what is allowed."""
    path = tuple(error.absolute_path)
    what = name(path)
    schema = error.schema
    if error.validator == 'additionalProperties':
        line, key = min((document.key_line(path + (key,)), key)
                        for key in error.instance
                        if key not in schema['properties'])
        return exception.StaticLineError(
            line,
            "unknown key %s in %s; allowed keys are %s"
            % (errors.quoted(key), what, ', '.join(schema['properties'])))
    if error.validator == 'required':
        key = next(key for key in schema['required']
                   if key not in error.instance)
        allowed = schema['properties'][key]['description']
        return exception.StaticLineError(
            document.line(path), '%s has no %s; it is required: '
            '%s' % (what, key, allowed))
    if error.validator == 'minItems':
        return exception.StaticLineError(
            document.line(path), '%s is empty; it must be %s'
            % (what, schema['description']))
    return exception.StaticLineError(document.line(path),
                                     _wrong(path, schema, error.instance))


def _wrong(path: Path, schema: dict, value: dict | list | str) -> str:
    return '%s must be %s, got %s' % (name(path), schema['description'],
                                      _shown(value))
