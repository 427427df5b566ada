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

"""``nova-gpu-p2p capture``: this host's topology, saved to a file."""

import argparse
import sys

from nova_gpu_p2p.cmd import sources
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import capture


def cmd_capture(args: argparse.Namespace) -> int:
    opts = sources.load_conf(args)
    topology = sources.read_host(args, opts)
    try:
        made_file = capture.save(topology, args.output)
    except OSError as exc:
        raise exception.UsageError('--output %s: %s' % (
            args.output, exc.strerror or exc))
    print('captured %d PCI functions, %d NVIDIA GPUs to %s' % (
        len(topology.functions), len(topology.gpus()),
        args.output if made_file or args.output == '-' else
        '%s (a pipe or device: no file written)' % args.output),
        file=sys.stderr if args.output == '-' else sys.stdout)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    cap = sub.add_parser('capture', help='save this host\'s topology for '
                                         'bug reports and offline tests')
    cap.add_argument('--output', required=True, metavar='FILE',
                     help='"-" for standard output')
    sources.add_config(cap)
    cap.add_argument('--sysfs-root', help='read this directory as /sys')
    cap.set_defaults(func=cmd_capture)
