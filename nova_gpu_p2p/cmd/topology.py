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

"""``nova-gpu-p2p topology``: the GPUs as the driver sees them."""

import argparse
import dataclasses
import json
import sys

from nova_gpu_p2p.checks import p2p_level
from nova_gpu_p2p.checks import result as check_result
from nova_gpu_p2p.cmd import sources
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.topology import consumer_gpus
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import grace
from nova_gpu_p2p.topology import host_gpus
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p import traits

#: Per GPU pair in --json: the switch downstream ports that send its P2P
#: traffic up, by why.
_ROUTE_KEYS = {
    link_class.AcsRoute.REQUEST_REDIRECT: 'acs_redirect',
    link_class.AcsRoute.EGRESS_CONTROL: 'acs_egress_control',
    link_class.AcsRoute.UNKNOWN: 'acs_unknown',
}


def to_json(result: host_gpus.HostGPUs, level: str, acs_policy: str,
            config_files: list[str] | None = None) -> dict:
    topology = result.topology
    policy = link_class.AcsPolicy(acs_policy)
    gpus = topology.gpus()
    on_grace = grace.discover(topology)
    links = {}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            routes = link_class.routing_ports(topology, a.address, b.address)
            link = {
                'pcie': link_class.pcie_class(topology, a.address,
                                              b.address).name,
                'effective': link_class.effective_class(
                    topology, a.address, b.address, policy).name,
            }
            for route, key in _ROUTE_KEYS.items():
                link[key] = [port for port, why in routes.items()
                             if route in why]
            # A static topology's own answer, which decides the pair.
            link['override'] = topology.p2p_overrides.get(
                frozenset((a.address, b.address)))
            links['%s %s' % (a.address, b.address)] = link
    return {
        'p2p_level': level,
        'acs_policy': acs_policy,
        'config_files': list(config_files or ()),
        'gpus': [dict(_model(result, g.address),
                      address=g.address, numa_node=g.numa_node,
                      root_complex=g.root_complex,
                      clique=result.cliques.ids[g.address],
                      device='0x%04x' % g.device, driver=g.driver,
                      iommu_group=g.iommu_group)
                 for g in gpus],
        'nics': [{'address': f.address, 'numa_node': f.numa_node,
                  'root_complex': f.root_complex}
                 for f in sorted(topology.functions.values(),
                                 key=lambda f: f.address) if f.is_nic],
        'links': links,
        'cliques': [list(g) for g in result.cliques.groups
                    if result.cliques.ids[g[0]] is not None],
        'traits': sorted(traits.p2p_traits(topology, result.cliques)),
        'config_space_read': topology.config_space_read,
        'grace': [dataclasses.asdict(on_grace.gpus[address])
                  for address in sorted(on_grace.gpus)],
        'findings': list(topology.findings + result.cliques.findings
                         + on_grace.findings),
    }


def _size(size: int) -> str:
    return '%d GiB' % (size >> 30) if size >= grace.GiB else (
        '%d MiB' % (size >> 20))


def _grace_lines(report: dict) -> list[str]:
    """Each Grace GPU's socket, memory nodes, memory BARs and SMMU."""
    return ['Grace GPU %s %s on %s: socket node %s, memory nodes %s, '
            'memory BARs %s, behind %s' % (
                gpu['address'], gpu['model'] or '(unknown model)',
                gpu['driver'], _numa(gpu['socket']),
                ','.join(map(str, gpu['memory_nodes'])) or '(unknown)',
                ' + '.join(map(_size, gpu['memory_bars'])) or '(unknown)',
                gpu['smmu'] or 'no IOMMU')
            for gpu in report['grace']]


#: --json's ``consumer`` per GPU kind: null where unknown.
_CONSUMER = {consumer_gpus.Kind.CONSUMER: True,
             consumer_gpus.Kind.PROFESSIONAL: False,
             consumer_gpus.Kind.UNKNOWN: None}


def _model(result: host_gpus.HostGPUs, address: str) -> dict:
    """A GPU's name, kind, the rule that decided it, why it has no clique."""
    found = result.kinds.models.get(address)
    return {'name': found.name if found else None,
            'consumer': _CONSUMER[found.kind] if found else None,
            'kind': found.kind.value if found else None,
            'identity_rule': found.rule if found else None,
            'subsystem': ('%04x:%04x' % found.subsystem
                          if found and found.subsystem else None),
            'brand': result.topology.gpu_brands.get(address),
            'no_clique': result.cliques.barred.get(address)}


def _clique(gpu: dict) -> str:
    """The matrix's clique column: the ID or '-', consumer GPUs marked."""
    text = '-' if gpu['clique'] is None else str(gpu['clique'])
    if gpu['consumer']:
        return text + ' (consumer GPU)'
    if gpu['no_clique']:
        return text + ' (unknown GPU)'
    return text


def _numa(node: int | None) -> str:
    return '-' if node is None else str(node)


def _cell(link: dict) -> tuple[str, str]:
    """A pair's matrix cell, and its legend mark ('' for none).

    A static topology's answer decides the pair: it is shown, not the
    class of a PCI tree it overrides.
    """
    if link['override'] is not None:
        return ('OK' if link['override'] else 'NS'), 'static'
    if link['effective'] == link['pcie']:
        return link['effective'], ''
    # Read ACS settings, else ACS that could not be read.
    read = link['acs_redirect'] or link['acs_egress_control']
    mark = '*' if read else '?'
    return link['effective'] + mark, mark


_LEGEND = {
    '*': '* = made worse by ACS P2P request redirect or egress control',
    '?': '? = made worse by ACS that could not be read, counted as '
         'request redirect on',
    'static': 'OK, NS = P2P capable or not, as the static topology says '
              '(p2p_level does not apply)',
}


def render_matrix(report: dict) -> str:
    """An ``nvidia-smi topo -m`` style table of the GPUs."""
    gpus = report['gpus']
    labels = ['GPU%d' % i for i in range(len(gpus))]
    header = '%-14s %-5s %-12s %s' % ('PCI address', 'NUMA',
                                      'root complex', 'clique')
    lines = ['%-6s' % '' + ''.join('%-7s' % label for label in labels)
             + header]
    marks = set()
    for i, gpu in enumerate(gpus):
        cells = []
        for j, other in enumerate(gpus):
            if i == j:
                cells.append('X')
                continue
            pair = sorted((gpu['address'], other['address']))
            cell, mark = _cell(report['links']['%s %s' % tuple(pair)])
            marks.add(mark)
            cells.append(cell)
        lines.append('%-6s' % labels[i] + ''.join('%-7s' % c for c in cells)
                     + '%-14s %-5s %-12s %s' % (
                         gpu['address'], _numa(gpu['numa_node']),
                         gpu['root_complex'], _clique(gpu)))
    lines.append('')
    legend = 'p2p_level=%s acs_policy=%s (%s)' % (
        report['p2p_level'], report['acs_policy'],
        'from ' + ', '.join(report['config_files'])
        if report['config_files'] else 'defaults: no nova.conf read')
    lines.append('; '.join([legend] + [_LEGEND[mark] for mark in _LEGEND
                                       if mark in marks]))
    lines.extend(_nic_lines(report))
    lines.extend(_grace_lines(report))
    lines.extend('%s %s: %s GPU: %s' % (
        labels[i], gpu['address'], gpu['kind'], gpu['identity_rule'])
        for i, gpu in enumerate(gpus) if gpu['kind'])
    lines.append('traits: %s' % (' '.join(report['traits']) or '(none)'))
    lines.extend('note: %s' % finding for finding in report['findings'])
    return '\n'.join(lines)


def _nic_lines(report: dict) -> list[str]:
    return ['NIC %s numa_node %s root complex %s' % (
        nic['address'], _numa(nic['numa_node']), nic['root_complex'])
        for nic in report['nics']]


def _sentence(text: str) -> str:
    return '%s%s.' % (text[:1].upper(), text[1:])


def render_no_gpu(report: dict, check: check_result.Check) -> str:
    """No matrix to show: say so, and where to look."""
    return '\n'.join([_sentence(check.message), _sentence(check.fix)]
                     + _nic_lines(report)
                     + ['note: %s' % f for f in report['findings']])


def cmd_topology(args: argparse.Namespace) -> int:
    opts = sources.load_conf(args)
    level = args.level or opts.gpu_p2p.p2p_level
    result = discovery.evaluate(sources.read_host(args, opts), opts,
                                link_class.LinkClass[level])
    report = to_json(result, level, opts.gpu_p2p.acs_policy,
                     sources.config_read(opts))
    if args.device_spec:
        lines = device_spec_tags.entries(
            result.cliques.ids,
            {address: function.numa_node for address, function
             in result.topology.functions.items()},
            result.topology.fabric_partitions)
        # Notes go to stderr, so that stdout can be pasted into nova.conf.
        if not lines:
            print('No GPU is in a clique at p2p_level %s: nothing to tag.'
                  % level, file=sys.stderr)
        else:
            print('Put these [pci] device_spec lines before broader entries '
                  '(Nova uses the first that matches) and add the keys those '
                  'carry (resource_class, ...).', file=sys.stderr)
            print('\n'.join(lines))
    elif args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    elif not report['gpus']:
        print(render_no_gpu(report, p2p_level.no_gpu(
            result.topology, sources.sysfs_read(args, opts))))
    else:
        print(render_matrix(report))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    topo = sub.add_parser('topology', help='show GPU links and cliques')
    sources.add_host_source(topo, load_help='read a file written by capture')
    topo.add_argument('--level', choices=sources.LEVELS,
                      help='p2p_level to apply instead of the configured '
                           'one')
    output = topo.add_mutually_exclusive_group()
    output.add_argument('--json', action='store_true',
                        help='print one JSON object')
    output.add_argument('--device-spec', action='store_true',
                        help='print [pci] device_spec lines that tag each '
                             'GPU\'s placement provider with its clique '
                             'and Fabric Manager partitions (for [pci] '
                             'report_in_placement)')
    topo.set_defaults(func=cmd_topology)
