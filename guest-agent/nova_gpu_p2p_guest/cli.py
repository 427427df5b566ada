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

"""``nova-gpu-p2p-guest``: the command line and the steps in order.

Read the entry, check it, find the devices, then write the file (or print
the ``--env`` lines). Any failure is one line on standard error and exit
status 2, never a traceback: this runs as a boot-time systemd unit.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import Optional, Sequence

from nova_gpu_p2p_guest import atomic_file
from nova_gpu_p2p_guest import description
from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import fw_cfg
from nova_gpu_p2p_guest import guest_sysfs
from nova_gpu_p2p_guest import nccl_env
from nova_gpu_p2p_guest import nccl_tree
from nova_gpu_p2p_guest import nccl_xml

DEFAULT_OUTPUT = '/var/run/nvidia-topologyd/virtualTopology.xml'
NO_TOPOLOGY = 'no GPU P2P topology for this instance'
PROG = 'nova-gpu-p2p-guest'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=(
            'Write the NCCL topology file for this instance\'s GPUs and '
            'NICs from the host topology the cloud passes through QEMU '
            'fw_cfg (%s).' % fw_cfg.ENTRY_NAME))
    parser.add_argument(
        '--sysfs-root', metavar='DIR', default='/sys',
        help='read DIR as /sys (default: /sys; the qemu_fw_cfg module is '
             'loaded when needed only there)')
    parser.add_argument(
        '--fw-cfg', metavar='FILE',
        help='read the fw_cfg entry text from FILE instead of sysfs')
    parser.add_argument(
        '--proc-root', metavar='DIR', default='/proc',
        help='read DIR as /proc, for the CPU type (default: /proc)')
    parser.add_argument(
        '--output', metavar='FILE', default=DEFAULT_OUTPUT,
        help='where to write the NCCL topology, "-" for standard output '
             '(default: %s)' % DEFAULT_OUTPUT)
    parser.add_argument(
        '--env', action='store_true',
        help='print the NCCL environment settings for this topology '
             'instead of writing it')
    return parser


def run(args: argparse.Namespace) -> int:
    data = fw_cfg.read_entry(args.sysfs_root, args.fw_cfg)
    status = sys.stderr if (args.env or args.output == '-') else sys.stdout
    if data is None:
        print(NO_TOPOLOGY, file=status)
        return 0
    described = description.parse_entry(data)
    found = [guest_sysfs.find_device(args.sysfs_root, index, device)
             for index, device in enumerate(described['devices'])]
    if args.env:
        for line in nccl_env.env_lines(described, args.output):
            print(line)
        return 0
    tree = nccl_tree.Tree(described)
    unlike = tree.reconcile()
    text = nccl_xml.render(tree, found, described['switches'],
                           args.sysfs_root, args.proc_root)
    try:
        made_file = atomic_file.write_output(args.output, text)
    except OSError as exc:
        raise errors.Problem('cannot write %s: %s'
                             % (args.output, exc.strerror or exc))
    for i, j, want, got in unlike:
        print('note: NCCL sees %s between %s and %s, the host %s' % (
            got, found[i].address, found[j].address, want), file=sys.stderr)
    gpus = sum(1 for d in described['devices'] if d['role'] == 'gpu')
    nics = sum(1 for d in described['devices'] if d['role'] == 'nic')
    if args.output != '-':
        print('%s the NCCL topology of %s and %s to %s'
              % ('wrote' if made_file else 'sent', _count(gpus, 'GPU'),
                 _count(nics, 'NIC'),
                 args.output if made_file else
                 '%s (a pipe or device: no file written)' % args.output),
              file=status)
    return 0


def _count(number: int, noun: str) -> str:
    return '%d %s%s' % (number, noun, '' if number == 1 else 's')


def _drop_stdout() -> None:
    """Standard output to /dev/null: exit's flush must not fail again.

    The Python documentation's recipe for a closed pipe (SIGPIPE); a full
    disk leaves unwritten output behind just the same.
    """
    try:
        fd = sys.stdout.fileno()
    except io.UnsupportedOperation:  # no file (embedded): nothing to flush
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the steps; whatever goes wrong is one line, never a traceback."""
    try:
        args = build_parser().parse_args(argv)
        status = run(args)
        # A full disk or a closed pipe shows here, not at exit.
        sys.stdout.flush()
        return status
    except errors.Problem as exc:
        print('%s: %s' % (PROG, exc), file=sys.stderr)
    except KeyboardInterrupt:
        print('%s: interrupted' % PROG, file=sys.stderr)
        return 130
    except OSError as exc:
        print('%s: %s' % (PROG, exc), file=sys.stderr)
        _drop_stdout()
    except Exception as exc:  # never a traceback in a boot-time unit
        print('%s: unexpected error: %s: %s'
              % (PROG, type(exc).__name__, exc), file=sys.stderr)
    return 2
