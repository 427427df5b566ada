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

"""Where a ``nova-gpu-p2p`` command reads nova.conf and the host.

nova.conf is found as nova-manage finds it; a bad input is a
:class:`UsageError`, one line and exit status 2, never a traceback.
"""

import argparse
import os

from nova_gpu_p2p_guest import errors
from oslo_config import cfg

from nova_gpu_p2p import conf
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import model

PROG = 'nova-gpu-p2p'
LEVELS = [name for name, _ in conf.P2P_LEVELS]


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
                raise exception.UsageError('--config-file %s: %s' % (
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
        raise exception.UsageError(
            'cannot read %s: permission denied; run as root (sudo), or '
            'give --config-file FILE or --no-config'
            % ', '.join(exc.config_files))
    except cfg.ConfigFileParseError as exc:
        raise exception.UsageError('%s is not an INI file: %s'
                                   % (exc.config_file, exc.msg))
    except UnicodeDecodeError as exc:
        # oslo.config does not say which file: all that were read.
        raise exception.UsageError('cannot read %s: not UTF-8 text (%s)' % (
            ', '.join((files or []) + (dirs or [])), exc))
    except (cfg.Error, OSError) as exc:
        raise exception.UsageError('cannot read the configuration: %s' % exc)


def _bad_value(opt: cfg.Opt, error: ValueError, files: list[str] | None,
               dirs: list[str] | None) -> str:
    """Where a ``[gpu_p2p]`` value is set, the value, what is allowed.

    oslo.config's own message shows its LocationInfo internals; the value
    is read again as the plain text it is in the file.
    """
    raw = cfg.ConfigOpts()
    raw.register_opt(cfg.StrOpt(opt.dest), group=conf.GROUP.name)
    _parse_config(raw, files, dirs)
    try:
        value = raw[conf.GROUP.name][opt.dest]
        where = raw.get_location(opt.dest, conf.GROUP.name).detail
    except (cfg.Error, RecursionError):
        # A $ reference to another option, which the lone option cannot
        # follow: the reason for the value it resolved to, after
        # oslo.config's "Value for option ... from LocationInfo(...)".
        return '%s: [%s] %s: %s' % (
            ', '.join(files or dirs or ()), conf.GROUP.name, opt.dest,
            str(error).rpartition(' is not valid: ')[2])
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
    return '%s: [%s] %s = %s: %s' % (where, conf.GROUP.name, opt.dest,
                                     errors.quoted(value), reason)


def _unresolved(opts: cfg.ConfigOpts, files: list[str] | None,
                dirs: list[str] | None) -> bool:
    """Whether a ``[gpu_p2p]`` value holds a ``$`` reference not resolved.

    A value that resolves and is not allowed is a :class:`UsageError`.
    """
    group = opts[conf.GROUP.name]
    for opt in conf.OPTS:
        try:
            getattr(group, opt.dest)
        except ValueError as exc:
            raise exception.UsageError(_bad_value(opt, exc, files, dirs))
        except (cfg.Error, RecursionError):
            return True
    return False


def register_nova_options(opts: cfg.ConfigOpts) -> None:
    """Every option of Nova's own (nova.conf.opts), as nova-compute has.

    Imported only when needed: the other commands skip Nova's modules. An
    option Nova lists twice (keystoneauth's, in several groups) once.
    Groups by name: oslo.config copies an OptGroup object shallowly, so
    registering into Nova's own would add these options to nova.conf.CONF.
    """
    from nova.conf import opts as nova_opts

    for group, options in nova_opts.list_opts():
        name = getattr(group, 'name', group)
        for opt in options:
            try:
                opts.register_opt(opt, group=None if name == 'DEFAULT'
                                  else name)
            except cfg.DuplicateOptError:
                pass


def load_conf(args: argparse.Namespace,
              nova_pci: bool = False) -> cfg.ConfigOpts:
    """nova.conf's ``[gpu_p2p]``; with ``nova_pci`` Nova's ``[pci]`` too.

    And Nova's scheduler options, which check judges on scheduler hosts.
    """
    opts = cfg.ConfigOpts()
    conf.register_opts(opts)
    if nova_pci:
        # Nova's own definitions (device_spec's deprecated names included);
        # imported here so that the other commands skip Nova's options.
        from nova.conf import pci as pci_conf
        from nova.conf import scheduler as scheduler_conf

        pci_conf.register_opts(opts)
        scheduler_conf.register_opts(opts)
    files, dirs = _config_sources(args)
    _parse_config(opts, files, dirs)
    if _unresolved(opts, files, dirs):
        # nova-compute resolves $state_path, $my_ip ... with all of
        # Nova's options registered: so must a judge of its nova.conf.
        register_nova_options(opts)
        if _unresolved(opts, files, dirs):
            conf.validate(opts)  # names the option and the $ reference
    if getattr(args, 'sysfs_root', None):
        opts.set_override('sysfs_root', args.sysfs_root, group='gpu_p2p')
        opts.set_override('topology_backend', backends.TREE_ONLY,
                          group='gpu_p2p')
    conf.validate(opts)
    backends.validate(opts)
    return opts


def config_read(opts: cfg.ConfigOpts) -> list[str]:
    """The nova.conf files and directories the options came from."""
    return list(opts.config_file) + list(opts.config_dir or ())


def read_host(args: argparse.Namespace,
              opts: cfg.ConfigOpts) -> model.HostTopology:
    if getattr(args, 'load', None):
        return capture.load(args.load)
    return backends.load(opts.gpu_p2p.topology_backend, opts).discover()


def sysfs_read(args: argparse.Namespace,
               opts: cfg.ConfigOpts) -> str | None:
    """The sysfs tree the GPUs were looked for in; None: a capture.

    Every backend but ``static`` finds the GPUs in sysfs, and a static
    file always lists some.
    """
    return None if getattr(args, 'load', None) else opts.gpu_p2p.sysfs_root


def no_privileged_read(path: str, size: int) -> bytes:
    """Bindings and BARs need no config space: never start privsep."""
    return b''


def add_config(parser: argparse.ArgumentParser,
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


def add_host_source(parser: argparse.ArgumentParser, load_help: str,
                    sections: str = '[gpu_p2p]') -> None:
    """nova.conf, and where the host is read: --sysfs-root or --load."""
    add_config(parser, sections)
    source = parser.add_mutually_exclusive_group()
    source.add_argument('--sysfs-root', help='read this directory as /sys')
    source.add_argument('--load', metavar='FILE', help=load_help)
