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

"""``nova-gpu-p2p check``: gather the host's facts, let
:mod:`nova_gpu_p2p.checks` judge them, print as nova-status does.
"""

import argparse
import os

from nova_gpu_p2p_guest import errors

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p.checks import environment
from nova_gpu_p2p.checks import fabric
from nova_gpu_p2p.checks import host
from nova_gpu_p2p.checks import move_claims
from nova_gpu_p2p.checks import placement
from nova_gpu_p2p.checks import report
from nova_gpu_p2p.checks import scheduler_settings
from nova_gpu_p2p.checks import versions
from nova_gpu_p2p.cmd import sources
from nova_gpu_p2p import exception
from nova_gpu_p2p import nova_fix
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import host_cpu
from nova_gpu_p2p.topology import link_class
from nova_gpu_p2p.topology import sysfs


def _version_arg(text: str) -> versions.Version:
    version = versions.parse_version(text)
    if version is None or ascii_decimal.parse(text.strip()[:1]) is None:
        raise argparse.ArgumentTypeError('%s is not a version such as '
                                         '11.3.0' % errors.quoted(text))
    return version


def _host_versions(args: argparse.Namespace) -> versions.HostVersions:
    """The versions given on the command line, else libvirtd's own."""
    if args.libvirt_version and args.qemu_version:
        return versions.HostVersions(args.libvirt_version,
                                     args.qemu_version)
    probed = versions.probe_versions()
    return versions.HostVersions(args.libvirt_version or probed.libvirt,
                                 args.qemu_version or probed.qemu,
                                 probed.error)


def cmd_check(args: argparse.Namespace) -> int:
    opts = sources.load_conf(args, nova_pci=True)
    # Without a nova.conf, [pci] holds Nova's defaults, not this host's.
    pci = (placement.PciSettings(opts.pci.report_in_placement,
                                 tuple(opts.pci.device_spec))
           if sources.config_read(opts) else None)
    scheduler = (scheduler_settings.SchedulerSettings(
        tuple(opts.filter_scheduler.enabled_filters),
        opts.gpu_p2p.candidates_per_host,
        opts.scheduler.max_placement_results)
        if sources.config_read(opts) else None)
    group = opts.gpu_p2p
    level = link_class.LinkClass[args.level or group.p2p_level]
    policy = link_class.AcsPolicy(group.acs_policy)
    host_versions = _host_versions(args)
    # Fabric Manager's configuration: this host's, so none for a capture.
    fm_config = args.fabricmanager_config or os.path.join(
        args.root, fabric.CONFIG_FILE.lstrip('/'))
    try:
        topology = sources.read_host(args, opts)
        bindings = None
        if (not args.load and not backends.capabilities(
                group.topology_backend).bindings):
            bindings = sysfs.SysfsBackend(
                opts, read_config=sources.no_privileged_read).discover()
    except exception.TopologyError as exc:
        if args.load:
            raise
        facts = fabric.gather(opts, fm_config, None)
        checks = host.unread_host_checks(
            host_versions, str(exc), args.root, fabric=facts)
    else:
        facts = None if args.load else fabric.gather(
            opts, fm_config, bindings or topology)
        checks = host.host_checks(
            topology, host_versions, level, policy, dict(group.clique_map),
            sysfs_root=sources.sysfs_read(args, opts), root=args.root,
            bindings=bindings, pci=pci, fabric=facts,
            kinds=discovery.gpu_kinds(topology, opts), scheduler=scheduler,
            host_cpu=None if args.load else host_cpu.read(
                os.path.join(args.root, 'proc')))
    # What this run read and ran with, first; a capture is judged for
    # another host, whose Python this is not.
    first = [environment.check_config(
        sources.config_read(opts),
        searched=not (args.no_config or args.config_file))]
    if not args.load:
        first.append(environment.check_libvirt_python())
        first.append(move_claims.check_move_claims(
            nova_fix.carried(), facts is not None and facts.shared))
    checks = first + checks
    if args.json:
        print(report.to_json(checks))
    else:
        report.print_table(checks)
    return report.exit_status(checks)


def add_parser(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser(
        'check', help='is this compute host ready: libvirt, QEMU, '
                      'firmware, IOMMU, vfio-pci, ACS, cliques, Fabric '
                      'Manager')
    sources.add_host_source(check, load_help='judge a file written by '
                                             'capture',
                            sections='[gpu_p2p] and [pci]')
    check.add_argument('--root', default='/',
                       help='read guest firmware and /proc/cmdline under '
                            'this directory (default /)')
    check.add_argument('--fabricmanager-config', metavar='PATH',
                       help='NVIDIA Fabric Manager\'s configuration, read '
                            'on HGX hosts for its FABRIC_MODE (default '
                            '%s under --root)' % fabric.CONFIG_FILE)
    check.add_argument('--level', choices=sources.LEVELS,
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
                       help='print one JSON object, as nova-status upgrade '
                            'check --json does')
    check.set_defaults(func=cmd_check)
