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

"""The capture file's structure, as a JSON schema.

A capture is loaded on another machine than the one that wrote it, often
from a bug report, and its values flow into the link-class and clique
rules: a class code given as text would fail there as a TypeError far from
the file. So every value's type and range is checked here, and the first
wrong one is named by its place in the file (``functions[3].class_code``)
with what is allowed; what a schema cannot say (repeated addresses,
references to functions the file lacks, one distance per node) is checked
after it.
"""

import jsonschema
from nova_gpu_p2p_guest import errors

from nova_gpu_p2p.topology import model

#: 2 added each function's ``acs_known``, 3 its subsystem IDs and the
#: GPUs' NVML brands, 4 its IOMMU unit and the nodes' generic initiator
#: flag (Grace); older captures still load.
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, FORMAT_VERSION)
#: sysfs' spelling, which capture writes: lower case, 4 to 8 digit domain.
_ADDRESS = '^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\\.[0-7]$'


def _integer(low: int, high: int, what: str) -> dict:
    return {'type': 'integer', 'minimum': low, 'maximum': high,
            'description': 'an integer from %d to %d (%s)' % (low, high,
                                                              what)}


def _nullable(schema: dict) -> dict:
    return dict(schema, type=[schema['type'], 'null'],
                description=schema['description'] + ', or null')


def _list(items: dict, what: str, size: int | None = None) -> dict:
    schema = {'type': 'array', 'items': items,
              'description': 'a list of %s' % what}
    if size is not None:
        schema.update(minItems=size, maxItems=size)
    return schema


def _record(properties: dict[str, dict], optional: tuple[str, ...]) -> dict:
    return {'type': 'object', 'properties': properties,
            'required': [key for key in properties if key not in optional],
            'additionalProperties': False,
            'description': 'a mapping with the keys %s'
                           % ', '.join(properties)}


_ADDRESS_TEXT = {'type': 'string', 'pattern': _ADDRESS,
                 'description': 'a PCI address as sysfs spells it, such as '
                                '0000:81:00.0'}
_TEXT = {'type': 'string', 'description': 'text'}
_FLAG = {'type': 'boolean', 'description': 'true or false'}
_ID16 = _integer(0, 0xffff, 'a 16-bit PCI ID or register')

_FUNCTION = _record({
    'address': _ADDRESS_TEXT,
    'vendor': _ID16,
    'device': _ID16,
    'class_code': _integer(0, 0xffffff, 'the 24-bit PCI class code'),
    'parent': _nullable(_ADDRESS_TEXT),
    'root_complex': dict(_TEXT, minLength=1,
                         description='a host bridge name such as '
                                     'pci0000:80'),
    'numa_node': _nullable(_integer(0, 4095, 'a host NUMA node')),
    'driver': _nullable(_TEXT),
    'iommu_group': _nullable(_integer(0, 2 ** 31 - 1, 'an IOMMU group')),
    'bars64': _list(_integer(0, 2 ** 64, 'a BAR size in bytes'),
                    'BAR sizes'),
    'port_type': {'enum': [t.value for t in model.PortType],
                  'description': 'one of %s' % ', '.join(
                      t.value for t in model.PortType)},
    'acs': {'anyOf': [{'type': 'null'},
                      _record({'capability': _ID16, 'control': _ID16}, ())],
            'description': 'null, or a mapping with the keys capability '
                           'and control'},
    'acs_known': _FLAG,
    'link_speed': _nullable(_TEXT),
    'link_width': _nullable(_integer(0, 32, 'PCIe lanes')),
    'subsystem_vendor': _nullable(_ID16),
    'subsystem_device': _nullable(_ID16),
    'iommu': _nullable(dict(_TEXT, description='an IOMMU unit\'s name, '
                                               'such as smmu3.0x16000000')),
}, optional=('acs_known', 'subsystem_vendor', 'subsystem_device', 'iommu'))

_NUMA_NODE = _record({
    'id': _integer(0, 4095, 'a host NUMA node'),
    'cpus': _list(_integer(0, 2 ** 20, 'a CPU number'), 'CPU numbers'),
    'distances': _list(_integer(0, 255, 'an ACPI SLIT distance'),
                       'distances'),
    'generic_initiator': _FLAG,
}, ('generic_initiator',))

#: Draft 2020-12; ``description`` is what errors say is allowed.
SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'nova-gpu-p2p capture',
    **_record({
        'format_version': {
            'enum': list(READABLE_VERSIONS),
            'description': 'one of %s, the capture formats this release '
                           'reads' % ', '.join(map(str, READABLE_VERSIONS))},
        'functions': _list(_FUNCTION, 'PCI functions'),
        'numa_nodes': _list(_NUMA_NODE, 'NUMA nodes'),
        'nvlink_pairs': _list(_list(_ADDRESS_TEXT, 'two addresses', 2),
                              'address pairs'),
        'config_space_read': _FLAG,
        'p2p_overrides': _list(
            {'type': 'array',
             'prefixItems': [_list(_ADDRESS_TEXT, 'two addresses', 2),
                             _FLAG],
             'minItems': 2, 'maxItems': 2,
             'description': 'a list of an address pair and true or false'},
            'overrides'),
        'findings': _list(_TEXT, 'findings'),
        'gpu_brands': {'type': 'object',
                       'propertyNames': {'pattern': _ADDRESS},
                       'additionalProperties': _TEXT,
                       'description': 'a mapping of GPU addresses to NVML '
                                      'brand names'},
    }, ('gpu_brands',)),
}

_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def validate(data: object) -> None:
    """ValueError naming the first wrong value and what is allowed."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        raise ValueError(_message(error))
    _check_references(data)


def place(path: tuple[str | int, ...]) -> str:
    """``functions[3].class_code``: where a value is, as jq would say."""
    text = ''
    for part in path:
        text += '[%d]' % part if isinstance(part, int) else '.' + part
    return text.lstrip('.') or 'the top level'


def _message(error: jsonschema.ValidationError) -> str:
    where = place(tuple(error.absolute_path))
    schema = error.schema
    if error.validator == 'additionalProperties':
        unknown = sorted(set(error.instance) - set(schema['properties']))
        return '%s has the unknown key %s; allowed keys are %s' % (
            where, errors.quoted(unknown[0]), ', '.join(schema['properties']))
    if error.validator == 'required':
        missing = [key for key in schema['required']
                   if key not in error.instance]
        return '%s lacks %r, which must be %s' % (
            where, missing[0], schema['properties'][missing[0]]
            ['description'])
    return '%s must be %s, got %s' % (
        where, schema.get('description', error.message),
        errors.quoted(error.instance, 40))


def _check_nvlink_pairs(data: dict) -> None:
    """NVLink joins two NVIDIA GPUs: not a GPU to itself, not bridges."""
    gpus = {record['address'] for record in data['functions']
            if record['vendor'] == model.NVIDIA_VENDOR_ID
            and record['class_code'] >> 16 == model.DISPLAY_BASE_CLASS}
    for index, pair in enumerate(data['nvlink_pairs']):
        if pair[0] == pair[1]:
            raise ValueError('nvlink_pairs[%d] pairs %s with itself; NVLink '
                             'joins two GPUs' % (index, pair[0]))
        for address in pair:
            if address not in gpus:
                raise ValueError(
                    'nvlink_pairs[%d] names %s, which is not an NVIDIA GPU '
                    '(vendor 0x10de, display class); NVLink joins two GPUs'
                    % (index, address))


def _check_references(data: dict) -> None:
    """What a schema cannot say: every address known, and only once."""
    listed: set[str] = set()
    for index, record in enumerate(data['functions']):
        if record['address'] in listed:
            raise ValueError('functions[%d] lists %s a second time'
                             % (index, record['address']))
        listed.add(record['address'])
    for index, record in enumerate(data['functions']):
        if record['parent'] is not None and record['parent'] not in listed:
            raise ValueError('%s names parent %s, which it does not list'
                             % (record['address'], record['parent']))
    pairs = [('nvlink_pairs[%d]' % i, pair)
             for i, pair in enumerate(data['nvlink_pairs'])]
    pairs += [('p2p_overrides[%d][0]' % i, override[0])
              for i, override in enumerate(data['p2p_overrides'])]
    pairs += [('gpu_brands', (address,))
              for address in sorted(data.get('gpu_brands', {}))]
    for where, pair in pairs:
        for address in pair:
            if address not in listed:
                raise ValueError('%s names %s, which functions does not '
                                 'list' % (where, address))
    _check_nvlink_pairs(data)
    nodes = data['numa_nodes']
    if len({node['id'] for node in nodes}) != len(nodes):
        raise ValueError('numa_nodes lists a node id twice')
    for index, node in enumerate(nodes):
        if len(node['distances']) != len(nodes):
            raise ValueError(
                'numa_nodes[%d].distances has %d entries; it needs one per '
                'node, %d' % (index, len(node['distances']), len(nodes)))
