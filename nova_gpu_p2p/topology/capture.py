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

"""A host topology as a JSON document, and back.

``nova-gpu-p2p capture`` writes what discovery found (config space facts
included, which need root to read) so that ``topology --load`` gives the
same answer on another machine: for bug reports and offline tests.
"""

import dataclasses
import json

from nova_gpu_p2p_guest import atomic_file
from nova_gpu_p2p_guest import input_file

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import capture_schema
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs

#: How version 1 worded an unreadable config space: ACS "treated as off",
#: which is no longer true of what loading it gives.
_V1_UNREADABLE_CONFIG = 'PCI config space beyond 64 bytes could not be read'


def to_dict(topology: model.HostTopology) -> dict:
    functions = []
    for address in sorted(topology.functions):
        record = dataclasses.asdict(topology.functions[address])
        record['port_type'] = record['port_type'].value
        record['bars64'] = list(record['bars64'])
        functions.append(record)
    return {
        'format_version': capture_schema.FORMAT_VERSION,
        'functions': functions,
        'numa_nodes': [{'id': n.id, 'cpus': sorted(n.cpus),
                        'distances': list(n.distances),
                        'generic_initiator': n.generic_initiator}
                       for n in topology.numa_nodes],
        'nvlink_pairs': sorted(sorted(p) for p in topology.nvlink_pairs),
        'config_space_read': topology.config_space_read,
        'p2p_overrides': sorted(
            [sorted(pair), capable]
            for pair, capable in topology.p2p_overrides.items()),
        'findings': list(topology.findings),
        'gpu_brands': dict(sorted(topology.gpu_brands.items())),
    }


def _v1_function(function: model.PCIFunction,
                 config_space_read: bool) -> model.PCIFunction:
    """Version 1 knew unread ACS only host-wide: every bridge's was."""
    if config_space_read or not function.is_bridge:
        return function
    return dataclasses.replace(function, acs_known=False)


def _v1_finding(finding: str) -> str:
    if finding.startswith(_V1_UNREADABLE_CONFIG):
        return sysfs.UNREADABLE_CONFIG
    return finding


def _size_problem(data: dict) -> str | None:
    """The host's size, counted before the schema's per-item work."""
    records = data.get('functions') if isinstance(data, dict) else None
    if not isinstance(records, list):
        return None  # the schema says what is wrong
    gpus = sum(1 for r in records if isinstance(r, dict)
               and r.get('vendor') == model.NVIDIA_VENDOR_ID
               and isinstance(r.get('class_code'), int)
               and r['class_code'] >> 16 == model.DISPLAY_BASE_CLASS)
    pairs = max(len(data[key]) if isinstance(data.get(key), list) else 0
                for key in ('p2p_overrides', 'nvlink_pairs'))
    return model.size_problem(len(records), gpus, pairs)


def from_dict(data: dict) -> model.HostTopology:
    problem = _size_problem(data)
    if problem:
        raise ValueError(problem)
    capture_schema.validate(data)
    version = data['format_version']
    functions = {}
    findings = tuple(data['findings'])
    for record in data['functions']:
        acs = record.pop('acs')
        function = model.PCIFunction(
            **dict(record,
                   port_type=model.PortType(record['port_type']),
                   bars64=tuple(record['bars64']),
                   acs=model.Acs(**acs) if acs else None))
        if version == 1:
            function = _v1_function(function, data['config_space_read'])
        functions[function.address] = function
    if version == 1:
        findings = tuple(_v1_finding(f) for f in findings)
    model.refuse_parent_loops(functions)
    return model.HostTopology(
        functions=functions,
        numa_nodes=tuple(
            model.NumaNode(id=n['id'], cpus=frozenset(n['cpus']),
                           distances=tuple(n['distances']),
                           generic_initiator=n.get('generic_initiator',
                                                   False))
            for n in data['numa_nodes']),
        nvlink_pairs=frozenset(frozenset(p) for p in data['nvlink_pairs']),
        config_space_read=data['config_space_read'],
        p2p_overrides={frozenset(pair): capable
                       for pair, capable in data['p2p_overrides']},
        findings=findings,
        gpu_brands=dict(data.get('gpu_brands', {})))


def save(topology: model.HostTopology, path: str) -> bool:
    """Write a capture whole or not at all: a full disk keeps the old one.

    Returns whether a file holds it (not a pipe or device).
    """
    return atomic_file.write_output(path, json.dumps(
        to_dict(topology), indent=1, sort_keys=True) + '\n')


def load(path: str) -> model.HostTopology:
    """Read a capture; TopologyError names the file and what is wrong."""
    try:
        return from_dict(json.loads(input_file.read_text(path)))
    except (OSError, ValueError, RecursionError) as exc:
        raise exception.TopologyError(
            '%s is not a readable nova-gpu-p2p capture: %s' % (path, exc))
