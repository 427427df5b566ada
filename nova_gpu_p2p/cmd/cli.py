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
Each subcommand is a module here. Only what a command uses is imported:
oslo.privsep (with eventlet) only where config space is read through
nova-compute's daemon, Nova's own code only where ``check`` judges
``[pci]``.
"""

import argparse
import io
import os
import sys

# Run by a Python without Nova's environment (the system's python3, a
# virtualenv without Nova), these fail: main says so in one line.
try:
    from nova_gpu_p2p_guest import errors

    from nova_gpu_p2p.cmd import capture
    from nova_gpu_p2p.cmd import check
    from nova_gpu_p2p.cmd import flavor
    from nova_gpu_p2p.cmd import sources
    from nova_gpu_p2p.cmd import topology
    from nova_gpu_p2p import exception
except ModuleNotFoundError as missing:
    _MISSING: ModuleNotFoundError | None = missing
else:
    _MISSING = None


class _Version(argparse.Action):
    """``--version``: the package's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str,
                 **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         default=argparse.SUPPRESS,
                         help='print the version of nova-gpu-p2p and exit')

    def __call__(self, parser, namespace, values, option_string=None):
        import pbr.version

        # The installed distribution's full version, as pip shows it
        # (0.0.1.dev159), not pbr's release part (0.0.1).
        print('%s %s' % (sources.PROG, pbr.version.VersionInfo(
            'nova-gpu-p2p').version_string_with_vcs()))
        # A closed pipe or a full disk shows here, inside main's guard.
        sys.stdout.flush()
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=sources.PROG,
        description='GPU P2P topology of this compute host, as the '
                    'gpu_p2p.GPUP2PLibvirtDriver compute driver sees it.')
    parser.add_argument('--version', action=_Version)
    sub = parser.add_subparsers(dest='command', required=True)
    for command in (topology, capture, flavor, check):
        command.add_parser(sub)
    return parser


def _drop_stdout() -> None:
    """Standard output to /dev/null: exit's flush must not fail again.

    The Python documentation's recipe for a closed pipe (SIGPIPE).
    """
    try:
        fd = sys.stdout.fileno()
    except io.UnsupportedOperation:  # no file (embedded): nothing to flush
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


def outside_environment(missing: ModuleNotFoundError,
                        python: str) -> str:
    """The one line for a Python that lacks what the commands import.

    Its own words: ``sources.PROG`` may be what is missing.
    """
    return ('nova-gpu-p2p: this Python (%s) cannot import %s: run '
            'nova-gpu-p2p from the environment nova-compute runs from, '
            'where it is installed beside Nova (doc/source/install.rst)'
            % (python, missing.name or missing))


def main(argv: list[str] | None = None) -> int:
    """Run a command; whatever goes wrong is one line, never a traceback."""
    if _MISSING is not None:
        print(outside_environment(_MISSING, sys.executable),
              file=sys.stderr)
        return 2
    try:
        args = build_parser().parse_args(argv)
        status = args.func(args)
        # A full disk shows here, not as a traceback at exit.
        sys.stdout.flush()
        return status
    except (exception.UsageError, exception.TopologyError,
            exception.InvalidConfig, exception.InvalidFlavorRequest) as exc:
        print('%s: %s' % (sources.PROG, errors.one_line(str(exc))),
              file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (head, less) is gone; nothing is left to say.
        _drop_stdout()
        return 1
    except KeyboardInterrupt:
        print('%s: interrupted' % sources.PROG, file=sys.stderr)
        return 130
    except OSError as exc:
        # Standard output on a full disk, or any read the command did
        # not expect to fail.
        print('%s: %s' % (sources.PROG, errors.one_line(str(exc))),
              file=sys.stderr)
        _drop_stdout()
        return 2
    except Exception as exc:  # bad input no check foresaw: not a traceback
        print('%s: unexpected error: %s: %s'
              % (sources.PROG, type(exc).__name__,
                 errors.one_line(str(exc))), file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
