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
import re
import sys
from typing import Callable, Optional, Pattern, Sequence

from nova_gpu_p2p_guest import atomic_file
from nova_gpu_p2p_guest import description
from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import fw_cfg
from nova_gpu_p2p_guest import guest_sysfs
from nova_gpu_p2p_guest import nccl_env
from nova_gpu_p2p_guest import nccl_tree
from nova_gpu_p2p_guest import nccl_xml
from nova_gpu_p2p_guest import p2p_verify
from nova_gpu_p2p_guest import watchdog

DEFAULT_OUTPUT = '/var/run/nvidia-topologyd/virtualTopology.xml'
NO_TOPOLOGY = 'no GPU P2P topology for this instance'
PROG = 'nova-gpu-p2p-guest'
#: ``--mib``'s most: 3 host buffers of it, 2 on each GPU.
MAX_MIB = 65536
#: The longest bound of a CUDA call: a day.
MAX_SECONDS = 86400
_WHOLE = re.compile('[0-9]{1,9}')
_SECONDS = re.compile(r'[0-9]{1,9}(\.[0-9]{1,9})?')


class _Version(argparse.Action):
    """``--version``: the installed distribution's, as pip shows it."""

    def __init__(self, option_strings: Sequence[str], dest: str,
                 **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         default=argparse.SUPPRESS,
                         help='print the version of %s and exit' % PROG)

    def __call__(self, parser, namespace, values, option_string=None):
        # Standard library only (3.8 has importlib.metadata); looked up
        # only when asked, so a boot-time run pays nothing for it.
        import importlib.metadata

        try:
            version = importlib.metadata.version(PROG)
        except importlib.metadata.PackageNotFoundError:
            version = 'unknown (not installed: run from a source tree)'
        print('%s %s' % (PROG, version))
        sys.stdout.flush()
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=(
            'Write the NCCL topology file for this instance\'s GPUs and '
            'NICs from the host topology the cloud passes through QEMU '
            'fw_cfg (%s).' % fw_cfg.ENTRY_NAME))
    parser.add_argument('--version', action=_Version)
    parser.add_argument(
        '--sysfs-root', metavar='DIR', type=_name, default='/sys',
        help='read DIR as /sys (default: /sys; the qemu_fw_cfg module is '
             'loaded when needed only there)')
    parser.add_argument(
        '--fw-cfg', metavar='FILE', type=_name,
        help='read the fw_cfg entry text from FILE instead of sysfs')
    parser.add_argument(
        '--proc-root', metavar='DIR', type=_name, default='/proc',
        help='read DIR as /proc, for the CPU type (default: /proc)')
    parser.add_argument(
        '--output', metavar='FILE', type=_name, default=DEFAULT_OUTPUT,
        help='where to write the NCCL topology, "-" for standard output '
             '(default: %s)' % DEFAULT_OUTPUT)
    parser.add_argument(
        '--env', action='store_true',
        help='print the NCCL environment settings for this topology '
             'instead of writing it')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND')
    verify = commands.add_parser(
        'verify-p2p', help='prove GPU P2P on the data path',
        description=(
            'Write data from every GPU into every peer CUDA says it can '
            'access, by copy engine, by SM stores and by the peer\'s SM '
            'loads, read it back on the peer and compare, every CUDA call '
            'under a time bound. On a failure set NCCL_P2P_DISABLE=1 in '
            'the NCCL config file, say which pairs failed on standard '
            'error and the console, and exit 1. Without a driver or with '
            'fewer than two GPUs: one line, exit 0.'))
    verify.set_defaults(usage_error=verify.error)
    seconds = _bounded(_SECONDS, 0.1, MAX_SECONDS, 'number')
    verify.add_argument(
        '--result', metavar='FILE', type=_name,
        default=p2p_verify.DEFAULT_RESULT,
        help='where to write the result as JSON, "-" for standard output '
             '(default: %s)' % p2p_verify.DEFAULT_RESULT)
    verify.add_argument(
        '--nccl-conf', metavar='FILE', type=_name,
        default=p2p_verify.DEFAULT_NCCL_CONF,
        help='the NCCL config file to turn P2P off in (default: %s)'
             % p2p_verify.DEFAULT_NCCL_CONF)
    verify.add_argument(
        '--console', metavar='FILE', type=_name,
        default=p2p_verify.DEFAULT_CONSOLE,
        help='where failures are also written, if it exists (default: %s)'
             % p2p_verify.DEFAULT_CONSOLE)
    verify.add_argument(
        '--library', metavar='FILE', type=_name,
        default=p2p_verify.DEFAULT_LIBRARY,
        help='the CUDA driver library (default: %s)'
             % p2p_verify.DEFAULT_LIBRARY)
    verify.add_argument(
        '--mib', metavar='N', default=64,
        type=_bounded(_WHOLE, 1, MAX_MIB, 'whole number'),
        help='MiB moved per pair, direction and path, at most %d; each '
             'GPU holds two buffers of it (default: 64)' % MAX_MIB)
    verify.add_argument(
        '--timeout', metavar='SECONDS', type=seconds, default=10.0,
        help='how long a data-path CUDA call may take (default: 10)')
    verify.add_argument(
        '--setup-timeout', metavar='SECONDS', type=seconds, default=120.0,
        help='how long a setup call (driver start, contexts, kernel '
             'compilation, allocation) may take (default: 120)')
    return parser


def _bounded(spelling: Pattern[str], least: float, most: float,
             noun: str) -> Callable[[str], float]:
    """An argparse type: a number spelled in ASCII, ``least`` to ``most``.

    ASCII digits only, as every number the product reads: ``float()``
    and ``int()`` would take ``nan``, ``inf``, ``1e10``, ``1_0`` and
    other scripts' digits.
    """
    def parse(text: str) -> float:
        value = float(text) if spelling.fullmatch(text) else None
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(
                '%s is not a %s from %g to %g' % (
                    errors.quoted(text), noun, least, most))
        return int(value) if spelling is _WHOLE else value
    return parse


def _name(text: str) -> str:
    """An argparse type: a file name, not empty and on one line."""
    if not text or not text.isprintable():
        raise argparse.ArgumentTypeError(
            '%s is not a file name: give a non-empty name without control '
            'characters' % errors.quoted(text))
    return text


def verify_p2p(args: argparse.Namespace) -> int:
    try:
        result = p2p_verify.verify(
            args.library, args.mib << 20,
            watchdog.Bounds(args.setup_timeout, args.timeout))
    except p2p_verify.UsageError as exc:
        args.usage_error('argument %s: %s' % (exc.option, errors.one_line(
            str(exc))))
    return p2p_verify.report(result, args.result, args.nccl_conf,
                             args.console, PROG)


def run(args: argparse.Namespace) -> int:
    if args.command == 'verify-p2p':
        return verify_p2p(args)
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
                           args.sysfs_root, args.proc_root,
                           described.get('cpu'))
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
        print('%s: %s' % (PROG, errors.one_line(str(exc))), file=sys.stderr)
    except KeyboardInterrupt:
        print('%s: interrupted' % PROG, file=sys.stderr)
        return 130
    except OSError as exc:
        print('%s: %s' % (PROG, errors.one_line(str(exc))), file=sys.stderr)
        _drop_stdout()
    except Exception as exc:  # never a traceback in a boot-time unit
        print('%s: unexpected error: %s: %s'
              % (PROG, type(exc).__name__, errors.one_line(str(exc))),
              file=sys.stderr)
    return 2
