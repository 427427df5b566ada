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

"""``nova-gpu-p2p``: look at a host the way the driver sees it.

It reads the host's nova.conf as nova-manage does, and answers a bad input
with one line on standard error and exit status 2, never a traceback.
Only what a command uses is imported: oslo.privsep (with eventlet) only
where config space is read through nova-compute's daemon, Nova's own code
only where ``check`` judges ``[pci]``.
"""

import argparse
import json
import os
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

PROG = 'nova-gpu-p2p'
LEVELS = [name for name, _ in conf.P2P_LEVELS]
#: Per GPU pair in --json: the switch downstream ports that send its P2P
#: traffic up, by why.
_ROUTE_KEYS = {
    link_class.AcsRoute.REQUEST_REDIRECT: 'acs_redirect',
    link_class.AcsRoute.EGRESS_CONTROL: 'acs_egress_control',
    link_class.AcsRoute.UNKNOWN: 'acs_unknown',
}


class UsageError(Exception):
    """A bad command line, nova.conf or file: one line, exit status 2."""


def _config_sources(args: argparse.Namespace
                    ) -> tuple[list[str] | None, list[str] | None]:
    """oslo.config's config files and directories for the command line.

    None for both (no option): oslo.config's own search for project nova,
    as nova-manage's: ``nova.conf`` and ``nova-gpu-p2p.conf`` in
    ``~/.nova``, ``~``, ``/etc/nova`` and ``/etc``, and their ``.conf.d``
    directories.
    """
    if getattr(args, 'no_config', False):
        return [], []
    if getattr(args, 'config_file', None):
        for path in args.config_file:
            if not os.path.isfile(path):
                raise UsageError('--config-file %s: %s' % (
                    path, 'is a directory' if os.path.isdir(path)
                    else 'no such file'))
        return args.config_file, []
    return None, None


def _parse_config(opts: cfg.ConfigOpts, files: list[str] | None,
                  dirs: list[str] | None) -> None:
    try:
        opts([], project='nova', prog=PROG, default_config_files=files,
             default_config_dirs=dirs)
    except cfg.ConfigFilesPermissionDeniedError as exc:
        raise UsageError(
            'cannot read %s: permission denied; run as root (sudo), or '
            'give --config-file FILE or --no-config'
            % ', '.join(exc.config_files))
    except cfg.ConfigFileParseError as exc:
        raise UsageError('%s is not an INI file: %s'
                         % (exc.config_file, exc.msg))
    except (cfg.Error, OSError) as exc:
        raise UsageError('cannot read the configuration: %s' % exc)


def _bad_value(opt: cfg.Opt, files: list[str] | None,
               dirs: list[str] | None) -> str:
    """Where a ``[gpu_p2p]`` value is set, the value, what is allowed.

    oslo.config's own message shows its LocationInfo internals; the value
    is read again as the plain text it is in the file.
    """
    raw = cfg.ConfigOpts()
    raw.register_opt(cfg.StrOpt(opt.dest), group=conf.GROUP.name)
    _parse_config(raw, files, dirs)
    value = raw[conf.GROUP.name][opt.dest]
    where = raw.get_location(opt.dest, conf.GROUP.name).detail
    item_type = getattr(opt.type, 'item_type', opt.type)
    choices = getattr(item_type, 'choices', None)
    reason = 'not valid'
    if choices:
        reason = '%s be one of %s' % (
            'must' if item_type is opt.type else 'each item must',
            ', '.join(choices))
    else:
        try:
            opt.type(value)
        except ValueError as exc:
            reason = str(exc)
    return '%s: [%s] %s = %r: %s' % (where, conf.GROUP.name, opt.dest,
                                     value, reason)


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
    files, dirs = _config_sources(args)
    _parse_config(opts, files, dirs)
    group = opts[conf.GROUP.name]
    for opt in conf.OPTS:
        try:
            getattr(group, opt.dest)
        except ValueError:
            raise UsageError(_bad_value(opt, files, dirs))
    if getattr(args, 'sysfs_root', None):
        opts.set_override('sysfs_root', args.sysfs_root, group='gpu_p2p')
        opts.set_override('topology_backend', 'sysfs', group='gpu_p2p')
    conf.validate(opts)
    return opts


def _config_read(opts: cfg.ConfigOpts) -> list[str]:
    """The nova.conf files and directories the options came from."""
    return list(opts.config_file) + list(opts.config_dir or ())


def _read_host(args: argparse.Namespace,
               opts: cfg.ConfigOpts) -> model.HostTopology:
    if getattr(args, 'load', None):
        return capture.load(args.load)
    return backends.load(opts.gpu_p2p.topology_backend, opts).discover()


def to_json(result: discovery.HostGPUs, level: str, acs_policy: str,
            config_files: list[str] | None = None) -> dict:
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
            # A static topology's own answer, which decides the pair.
            link['override'] = topology.p2p_overrides.get(
                frozenset((a.address, b.address)))
            links['%s %s' % (a.address, b.address)] = link
    return {
        'p2p_level': level,
        'acs_policy': acs_policy,
        'config_files': list(config_files or ()),
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
                         gpu['root_complex'],
                         '-' if gpu['clique'] is None else gpu['clique']))
    lines.append('')
    legend = 'p2p_level=%s acs_policy=%s (%s)' % (
        report['p2p_level'], report['acs_policy'],
        'from ' + ', '.join(report['config_files'])
        if report['config_files'] else 'defaults: no nova.conf read')
    lines.append('; '.join([legend] + [_LEGEND[mark] for mark in _LEGEND
                                       if mark in marks]))
    lines.extend(_nic_lines(report))
    lines.append('traits: %s' % (' '.join(report['traits']) or '(none)'))
    lines.extend('note: %s' % finding for finding in report['findings'])
    return '\n'.join(lines)


def _nic_lines(report: dict) -> list[str]:
    return ['NIC %s numa_node %s root complex %s' % (
        nic['address'], _numa(nic['numa_node']), nic['root_complex'])
        for nic in report['nics']]


def _sentence(text: str) -> str:
    return '%s%s.' % (text[:1].upper(), text[1:])


def render_no_gpu(report: dict, check: readiness.Check) -> str:
    """No matrix to show: say so, and where to look."""
    return '\n'.join([_sentence(check.message), _sentence(check.fix)]
                     + _nic_lines(report)
                     + ['note: %s' % f for f in report['findings']])


def cmd_topology(args: argparse.Namespace) -> int:
    opts = _load_conf(args)
    level = args.level or opts.gpu_p2p.p2p_level
    result = discovery.evaluate(_read_host(args, opts), opts,
                                link_class.LinkClass[level])
    report = to_json(result, level, opts.gpu_p2p.acs_policy,
                     _config_read(opts))
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
    elif not report['gpus']:
        print(render_no_gpu(report, readiness.no_gpu(
            result.topology, _sysfs_read(args, opts))))
    else:
        print(render_matrix(report))
    return 0


def _sysfs_read(args: argparse.Namespace,
                opts: cfg.ConfigOpts) -> str | None:
    """The sysfs tree the GPUs were looked for in; None: a capture.

    Every backend but ``static`` finds the GPUs in sysfs, and a static
    file always lists some.
    """
    return None if getattr(args, 'load', None) else opts.gpu_p2p.sysfs_root


def cmd_capture(args: argparse.Namespace) -> int:
    opts = _load_conf(args)
    topology = _read_host(args, opts)
    try:
        capture.save(topology, args.output)
    except OSError as exc:
        raise UsageError('--output %s: %s' % (args.output,
                                              exc.strerror or exc))
    print('captured %d PCI functions, %d NVIDIA GPUs to %s' % (
        len(topology.functions), len(topology.gpus()), args.output))
    return 0


def _flavor_bars(args: argparse.Namespace) -> tuple[int, ...] | None:
    """One GPU's 64-bit BARs: ``--bar-gib``, else this host's largest.

    None where neither says: no GPU here (not a compute host).
    """
    if args.bar_gib is not None:
        return flavor_commands.nvidia_bars(args.bar_gib)
    opts = _load_conf(args)
    try:
        topology = sysfs.SysfsBackend(
            opts, read_config=_no_privileged_read).discover()
    except backends.TopologyError:
        if args.sysfs_root:
            raise
        return None
    return flavor_commands.largest_bars(topology.gpus())


def cmd_flavor(args: argparse.Namespace) -> int:
    request = flavor_commands.FlavorRequest(
        gpus=args.gpus, alias=args.alias, numa_nodes=args.numa_nodes,
        name=args.name, vcpus=args.vcpus, ram_mb=args.ram,
        disk_gb=args.disk, gpu_bars=_flavor_bars(args))
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
    """Bindings and BARs need no config space: never start privsep."""
    return b''


def cmd_check(args: argparse.Namespace) -> int:
    """Gather the facts, let :mod:`nova_gpu_p2p.readiness` judge them."""
    opts = _load_conf(args, nova_pci=True)
    # Without a nova.conf, [pci] holds Nova's defaults, not this host's.
    pci = (readiness.PciSettings(opts.pci.report_in_placement,
                                 tuple(opts.pci.device_spec))
           if _config_read(opts) else None)
    group = opts.gpu_p2p
    level = link_class.LinkClass[args.level or group.p2p_level]
    policy = link_class.AcsPolicy(group.acs_policy)
    versions = _host_versions(args)
    sysfs_root = _sysfs_read(args, opts)
    try:
        topology = _read_host(args, opts)
        bindings = None
        if not args.load and group.topology_backend != 'sysfs':
            # static and nvml know nothing of drivers and IOMMU groups.
            bindings = sysfs.SysfsBackend(
                opts, read_config=_no_privileged_read).discover()
    except backends.TopologyError as exc:
        if args.load:
            raise
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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError('%r is not a whole number of 1 or '
                                         'more' % text)
    return value


class _Version(argparse.Action):
    """``--version``: the package's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str,
                 **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         default=argparse.SUPPRESS,
                         help='print the version of nova-gpu-p2p and exit')

    def __call__(self, parser, namespace, values, option_string=None):
        import pbr.version

        print('%s %s' % (PROG, pbr.version.VersionInfo(
            'nova-gpu-p2p').version_string()))
        parser.exit()


def _add_config(parser: argparse.ArgumentParser,
                sections: str = '[gpu_p2p]') -> None:
    """Which nova.conf: oslo.config's search, --config-file, or none."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument('--config-file', action='append', metavar='FILE',
                       help='nova.conf to read %s from, instead of the '
                            'one found as nova-manage finds it '
                            '(/etc/nova/nova.conf ...); repeat it for '
                            'more files, later ones win' % sections)
    which.add_argument('--no-config', action='store_true',
                       help='read no nova.conf: the defaults apply')


def _add_host_source(parser: argparse.ArgumentParser, load_help: str,
                     sections: str = '[gpu_p2p]') -> None:
    """nova.conf, and where the host is read: --sysfs-root or --load."""
    _add_config(parser, sections)
    source = parser.add_mutually_exclusive_group()
    source.add_argument('--sysfs-root', help='read this directory as /sys')
    source.add_argument('--load', metavar='FILE', help=load_help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='GPU P2P topology of this compute host, as the '
                    'gpu_p2p.GPUP2PLibvirtDriver compute driver sees it.')
    parser.add_argument('--version', action=_Version)
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
    _add_config(cap)
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
                        help='dedicated vCPUs (default 8 per GPU, rounded '
                             'up to a multiple of --numa-nodes)')
    flavor.add_argument('--ram', type=int, metavar='MB',
                        help='RAM in MB (default 64 GiB per GPU, rounded '
                             'up to whole GiB per NUMA node)')
    flavor.add_argument('--disk', type=int, default=100, metavar='GB',
                        help='root disk in GB (default 100)')
    bars = flavor.add_mutually_exclusive_group()
    bars.add_argument('--bar-gib', type=_positive, metavar='N',
                      help='each GPU\'s large BAR (BAR1) in GiB, which '
                           'sizes hw:maxphysaddr_bits (default: the '
                           'largest of this host\'s GPUs)')
    bars.add_argument('--sysfs-root',
                      help='read the GPUs\' BARs in this directory as /sys')
    # The flavor is the cloud's, not this host's: no nova.conf.
    flavor.set_defaults(func=cmd_flavor, no_config=True)

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
    except (UsageError, backends.TopologyError, conf.InvalidConfig,
            flavor_commands.InvalidFlavorRequest) as exc:
        print('%s: %s' % (PROG, exc), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (head, less) is gone; nothing is left to say, not even
        # at exit when Python flushes standard output.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == '__main__':
    sys.exit(main())
