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

"""``nova-gpu-p2p``: look at a host the way the driver sees it."""

import argparse
import json
import sys

from oslo_config import cfg

from nova_gpu_p2p import conf
from nova_gpu_p2p import device_spec
from nova_gpu_p2p import flavor_commands
from nova_gpu_p2p import readiness
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p import traits

LEVELS = [name for name, _ in conf.P2P_LEVELS]
#: Per GPU pair in --json: the switch downstream ports that send its P2P
#: traffic up, by why.
_ROUTE_KEYS = {
    link_class.AcsRoute.REQUEST_REDIRECT: 'acs_redirect',
    link_class.AcsRoute.EGRESS_CONTROL: 'acs_egress_control',
    link_class.AcsRoute.UNKNOWN: 'acs_unknown',
}


def _load_conf(args: argparse.Namespace,
               nova_pci: bool = False) -> cfg.ConfigOpts:
    """nova.conf's ``[gpu_p2p]``, and with ``nova_pci`` Nova's ``[pci]``."""
    opts = cfg.ConfigOpts()
    conf.register_opts(opts)
    if nova_pci:
        # Nova's own definitions (device_spec's deprecated names included);
        # imported here so that the other commands skip Nova's options.
        from nova.conf import pci as pci_conf

        pci_conf.register_opts(opts)
    files = [args.config_file] if args.config_file else []
    opts([], project='nova', default_config_files=files)
    if getattr(args, 'sysfs_root', None):
        opts.set_override('sysfs_root', args.sysfs_root, group='gpu_p2p')
        opts.set_override('topology_backend', 'sysfs', group='gpu_p2p')
    conf.validate(opts)
    return opts


def _read_host(args: argparse.Namespace,
               opts: cfg.ConfigOpts) -> model.HostTopology:
    if getattr(args, 'load', None):
        return capture.load(args.load)
    return backends.load(opts.gpu_p2p.topology_backend, opts).discover()


def to_json(result: discovery.HostGPUs, level: str,
            acs_policy: str) -> dict:
    topology = result.topology
    policy = link_class.AcsPolicy(acs_policy)
    gpus = topology.gpus()
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
            links['%s %s' % (a.address, b.address)] = link
    return {
        'p2p_level': level,
        'acs_policy': acs_policy,
        'gpus': [{'address': g.address, 'numa_node': g.numa_node,
                  'root_complex': g.root_complex,
                  'clique': result.cliques.ids[g.address],
                  'device': '0x%04x' % g.device, 'driver': g.driver,
                  'iommu_group': g.iommu_group}
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
        'findings': list(topology.findings + result.cliques.findings),
    }


def render_matrix(report: dict) -> str:
    """An ``nvidia-smi topo -m`` style table of the GPUs."""
    gpus = report['gpus']
    labels = ['GPU%d' % i for i in range(len(gpus))]
    header = '%-14s %-5s %-12s %s' % ('PCI address', 'NUMA',
                                      'root complex', 'clique')
    lines = ['%-6s' % '' + ''.join('%-7s' % label for label in labels)
             + header]
    unknown = False
    for i, gpu in enumerate(gpus):
        cells = []
        for j, other in enumerate(gpus):
            if i == j:
                cells.append('X')
                continue
            pair = sorted((gpu['address'], other['address']))
            link = report['links']['%s %s' % tuple(pair)]
            cell = link['effective']
            if link['effective'] != link['pcie']:
                # Read ACS settings, else ACS that could not be read.
                read = link['acs_redirect'] or link['acs_egress_control']
                cell += '*' if read else '?'
                unknown = unknown or not read
            cells.append(cell)
        lines.append('%-6s' % labels[i] + ''.join('%-7s' % c for c in cells)
                     + '%-14s %-5s %-12s %s' % (
                         gpu['address'],
                         '-' if gpu['numa_node'] is None
                         else gpu['numa_node'],
                         gpu['root_complex'],
                         '-' if gpu['clique'] is None else gpu['clique']))
    lines.append('')
    legend = ('p2p_level=%s acs_policy=%s; * = made worse by ACS P2P '
              'request redirect or egress control' % (report['p2p_level'],
                                                      report['acs_policy']))
    if unknown:
        legend += ('; ? = made worse by ACS that could not be read, counted '
                   'as request redirect on')
    lines.append(legend)
    for nic in report['nics']:
        lines.append('NIC %s numa_node %s root complex %s' % (
            nic['address'], nic['numa_node'], nic['root_complex']))
    lines.append('traits: %s' % (' '.join(report['traits']) or '(none)'))
    for finding in report['findings']:
        lines.append('note: %s' % finding)
    return '\n'.join(lines)


def cmd_topology(args: argparse.Namespace) -> int:
    opts = _load_conf(args)
    level = args.level or opts.gpu_p2p.p2p_level
    result = discovery.evaluate(_read_host(args, opts), opts,
                                link_class.LinkClass[level])
    report = to_json(result, level, opts.gpu_p2p.acs_policy)
    if args.device_spec:
        lines = [device_spec.entry(address, clique)
                 for address, clique in sorted(result.cliques.ids.items())
                 if clique is not None]
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
    else:
        print(render_matrix(report))
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    opts = _load_conf(args)
    topology = _read_host(args, opts)
    capture.save(topology, args.output)
    print('captured %d PCI functions, %d NVIDIA GPUs to %s' % (
        len(topology.functions), len(topology.gpus()), args.output))
    return 0


def cmd_flavor(args: argparse.Namespace) -> int:
    request = flavor_commands.FlavorRequest(
        gpus=args.gpus, alias=args.alias, numa_nodes=args.numa_nodes,
        name=args.name, vcpus=args.vcpus, ram_mb=args.ram,
        disk_gb=args.disk)
    print('\n'.join(flavor_commands.commands(request)), flush=True)
    # After the commands, on stderr: standard output stays a shell script
    # (the devstack plugin runs it), and these lines paste into nova.conf.
    print('\n'.join(flavor_commands.scheduler_settings()), file=sys.stderr)
    return 0


def _version_arg(text: str) -> readiness.Version:
    version = readiness.parse_version(text)
    if version is None or not text.strip()[:1].isdigit():
        raise argparse.ArgumentTypeError('%r is not a version such as '
                                         '11.3.0' % text)
    return version


def _host_versions(args: argparse.Namespace) -> readiness.HostVersions:
    """The versions given on the command line, else libvirtd's own."""
    if args.libvirt_version and args.qemu_version:
        return readiness.HostVersions(args.libvirt_version,
                                      args.qemu_version)
    probed = readiness.probe_versions()
    return readiness.HostVersions(args.libvirt_version or probed.libvirt,
                                  args.qemu_version or probed.qemu,
                                  probed.error)


def _no_privileged_read(path: str, size: int) -> bytes:
    """Binding facts need no config space: never start privsep for them."""
    return b''


def cmd_check(args: argparse.Namespace) -> int:
    """Gather the facts, let :mod:`nova_gpu_p2p.readiness` judge them."""
    opts = _load_conf(args, nova_pci=True)
    # Without a nova.conf, [pci] holds Nova's defaults, not this host's.
    pci = (readiness.PciSettings(opts.pci.report_in_placement,
                                 tuple(opts.pci.device_spec))
           if args.config_file else None)
    group = opts.gpu_p2p
    level = link_class.LinkClass[args.level or group.p2p_level]
    policy = link_class.AcsPolicy(group.acs_policy)
    versions = _host_versions(args)
    sysfs_root = None if args.load else group.sysfs_root
    try:
        topology = _read_host(args, opts)
        bindings = None
        if not args.load and group.topology_backend != 'sysfs':
            # static and nvml know nothing of drivers and IOMMU groups.
            bindings = sysfs.SysfsBackend(
                opts, read_config=_no_privileged_read).discover()
    except backends.TopologyError as exc:
        empty = model.HostTopology(functions={})
        checks = readiness.check_versions(versions, empty, False)
        checks.append(readiness.check_firmware(args.root))
        checks.append(readiness.Check(
            readiness.Status.FAIL, 'GPU topology', str(exc),
            'fix [gpu_p2p] topology_backend and its options, then run '
            '"nova-gpu-p2p topology"'))
    else:
        checks = readiness.host_checks(
            topology, versions, level, policy, dict(group.clique_map),
            sysfs_root=sysfs_root, root=args.root, bindings=bindings,
            pci=pci)
    status = readiness.exit_status(checks)
    if args.json:
        print(json.dumps({'checks': [c.to_dict() for c in checks],
                          'exit_status': status}, indent=2,
                         sort_keys=True))
    else:
        for check in checks:
            print(check.line())
        counts = {s: sum(1 for c in checks if c.status is s)
                  for s in readiness.Status}
        print('%d FAIL, %d WARN, %d OK' % (
            counts[readiness.Status.FAIL], counts[readiness.Status.WARN],
            counts[readiness.Status.OK]))
    return status


def _add_host_source(parser: argparse.ArgumentParser, load_help: str,
                     sections: str = '[gpu_p2p]') -> None:
    """--config-file, and where the host is read: --sysfs-root or --load."""
    parser.add_argument('--config-file',
                        help='nova.conf to read %s from' % sections)
    source = parser.add_mutually_exclusive_group()
    source.add_argument('--sysfs-root', help='read this directory as /sys')
    source.add_argument('--load', metavar='FILE', help=load_help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='nova-gpu-p2p',
        description='GPU P2P topology of this compute host, as the '
                    'gpu_p2p.GPUP2PLibvirtDriver compute driver sees it.')
    sub = parser.add_subparsers(dest='command', required=True)

    topo = sub.add_parser('topology', help='show GPU links and cliques')
    _add_host_source(topo, load_help='read a file written by capture')
    topo.add_argument('--level', choices=LEVELS,
                      help='p2p_level to apply instead of the configured '
                           'one')
    output = topo.add_mutually_exclusive_group()
    output.add_argument('--json', action='store_true',
                        help='print one JSON object')
    output.add_argument('--device-spec', action='store_true',
                        help='print [pci] device_spec lines that tag each '
                             'GPU\'s placement provider with its clique '
                             '(for [pci] report_in_placement)')
    topo.set_defaults(func=cmd_topology)

    cap = sub.add_parser('capture', help='save this host\'s topology for '
                                         'bug reports and offline tests')
    cap.add_argument('--output', required=True, metavar='FILE')
    cap.add_argument('--config-file', help='nova.conf to read [gpu_p2p] '
                                           'from')
    cap.add_argument('--sysfs-root', help='read this directory as /sys')
    cap.set_defaults(func=cmd_capture)

    flavor = sub.add_parser(
        'flavor', help='print the openstack commands for a P2P flavor')
    flavor.add_argument('--gpus', type=int, required=True,
                        help='GPUs per server, all in one P2P clique')
    flavor.add_argument('--alias', required=True,
                        help='the [pci] alias name of the GPUs')
    flavor.add_argument('--numa-nodes', type=int, default=1,
                        help='guest NUMA nodes: as many as the host NUMA '
                             'nodes the GPUs sit on (default 1)')
    flavor.add_argument('--name', help='flavor name (default '
                                       'gpu-p2p.<N>x)')
    flavor.add_argument('--vcpus', type=int,
                        help='dedicated vCPUs (default 8 per GPU)')
    flavor.add_argument('--ram', type=int, metavar='MB',
                        help='RAM in MB (default 64 GiB per GPU)')
    flavor.add_argument('--disk', type=int, default=100, metavar='GB',
                        help='root disk in GB (default 100)')
    flavor.set_defaults(func=cmd_flavor)

    check = sub.add_parser(
        'check', help='is this compute host ready: libvirt, QEMU, '
                      'firmware, IOMMU, vfio-pci, ACS, cliques')
    _add_host_source(check, load_help='judge a file written by capture',
                     sections='[gpu_p2p] and [pci]')
    check.add_argument('--root', default='/',
                       help='read guest firmware and /proc/cmdline under '
                            'this directory (default /)')
    check.add_argument('--level', choices=LEVELS,
                       help='p2p_level to apply instead of the configured '
                            'one')
    check.add_argument('--libvirt-version', type=_version_arg,
                       metavar='X.Y.Z',
                       help='judge this libvirt version instead of asking '
                            'libvirtd')
    check.add_argument('--qemu-version', type=_version_arg,
                       metavar='X.Y.Z',
                       help='judge this QEMU version instead of asking '
                            'libvirtd')
    check.add_argument('--json', action='store_true',
                       help='print one JSON object')
    check.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (backends.TopologyError, conf.InvalidConfig,
            flavor_commands.InvalidFlavorRequest) as exc:
        print('nova-gpu-p2p: %s' % exc, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
