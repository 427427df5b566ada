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

"""``nova-gpu-p2p flavor``: the openstack commands for a P2P flavor."""

import argparse
import sys

from nova_gpu_p2p_guest import errors

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p.cmd import sources
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import sysfs


def _flavor_bars(args: argparse.Namespace) -> tuple[int, ...] | None:
    """One GPU's 64-bit BARs: ``--bar-gib``, else this host's largest.

    None where neither says: no GPU here (not a compute host).
    """
    if args.bar_gib is not None:
        return flavor_commands.nvidia_bars(args.bar_gib)
    opts = sources.load_conf(args)
    try:
        topology = sysfs.SysfsBackend(
            opts, read_config=sources.no_privileged_read).discover()
    except exception.TopologyError:
        if args.sysfs_root:
            raise
        return None
    return flavor_commands.largest_bars(topology.gpus())


def cmd_flavor(args: argparse.Namespace) -> int:
    request = flavor_commands.FlavorRequest(
        gpus=args.gpus, alias=args.alias, numa_nodes=args.numa_nodes,
        name=args.name, vcpus=args.vcpus, ram_mb=args.ram,
        disk_gb=args.disk, gpu_bars=_flavor_bars(args),
        whole_board=args.whole_board, nvswitch_alias=args.nvswitch_alias,
        free_trait=args.free_trait)
    print('\n'.join(flavor_commands.commands(request)), flush=True)
    # After the commands, on stderr: standard output stays a shell script
    # (the devstack plugin runs it), and these lines paste into nova.conf.
    settings = flavor_commands.scheduler_settings()
    if request.whole_board:
        settings = flavor_commands.whole_board_settings(request) + settings
    print('\n'.join(settings), file=sys.stderr)
    return 0


def _positive(text: str) -> int:
    value = ascii_decimal.parse(text.strip())
    if value is None or value < 1:
        raise argparse.ArgumentTypeError('%s is not a whole number of 1 or '
                                         'more' % errors.quoted(text))
    return value


def _whole(text: str) -> int:
    """A count as typed: ASCII decimal digits only (ascii_decimal).

    ``int()`` would take other scripts' digits, signs, spaces and ``_``;
    the range is the flavor's rules' to judge, with their messages.
    """
    value = ascii_decimal.parse(text)
    if value is None:
        raise argparse.ArgumentTypeError('%s is not a whole number in ASCII '
                                         'digits' % errors.quoted(text))
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    flavor = sub.add_parser(
        'flavor', help='print the openstack commands for a P2P flavor')
    flavor.add_argument('--gpus', type=_whole, required=True,
                        help='GPUs per server, all in one P2P clique')
    flavor.add_argument('--alias', required=True,
                        help='the [pci] alias name of the GPUs')
    flavor.add_argument('--numa-nodes', type=_whole, default=1,
                        help='guest NUMA nodes: as many as the host NUMA '
                             'nodes the GPUs sit on (default 1)')
    flavor.add_argument('--name', help='flavor name (default '
                                       'gpu-p2p.<N>x)')
    flavor.add_argument('--vcpus', type=_whole,
                        help='dedicated vCPUs (default 8 per GPU, rounded '
                             'up to a multiple of --numa-nodes)')
    flavor.add_argument('--ram', type=_whole, metavar='MB',
                        help='RAM in MB (default 64 GiB per GPU, rounded '
                             'up to whole GiB per NUMA node)')
    flavor.add_argument('--disk', type=_whole, default=100, metavar='GB',
                        help='root disk in GB (default 100)')
    flavor.add_argument('--whole-board', action='store_true',
                        help='a whole HGX board: --gpus %d and its %d '
                             'NVSwitches, for hosts whose Fabric Manager '
                             'runs in full passthrough mode (FABRIC_MODE=0); '
                             'the guest runs Fabric Manager itself'
                             % (flavor_commands.BOARD_GPUS,
                                flavor_commands.BOARD_NVSWITCHES))
    flavor.add_argument('--nvswitch-alias', metavar='NAME',
                        help='with --whole-board: the [pci] alias name of '
                             'the NVSwitches (default %s)'
                             % flavor_commands.DEFAULT_NVSWITCH_ALIAS)
    flavor.add_argument('--free-trait', action='store_true',
                        help='also require CUSTOM_GPU_P2P_FREE_<N>: '
                             'placement then returns only hosts where N GPUs '
                             'of one clique (partition) are free now; add it '
                             'once every GPU compute node runs this release')
    bars = flavor.add_mutually_exclusive_group()
    bars.add_argument('--bar-gib', type=_positive, metavar='N',
                      help='each GPU\'s large BAR (BAR1) in GiB, which '
                           'sizes hw:maxphysaddr_bits (default: the '
                           'largest of this host\'s GPUs)')
    bars.add_argument('--sysfs-root',
                      help='read the GPUs\' BARs in this directory as /sys')
    # The flavor is the cloud's, not this host's: no nova.conf.
    flavor.set_defaults(func=cmd_flavor, no_config=True)
