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

"""``nova-gpu-p2p`` as a new user meets it.

Quiet (its own output only, with every warning shown), ``--version``,
the host's nova.conf read as nova-manage reads it, one line and exit
status 2 for each bad input, and a ``topology`` report that says what it
found: no GPU, unknown NUMA nodes, ACS marks, a static file's verdicts.
"""

import argparse
import contextlib
import dataclasses
import importlib.metadata
import io
import json
import os
import subprocess
import sys
import textwrap
import typing
from unittest import mock

import fixtures
from oslo_config import cfg

import nova_gpu_p2p
from nova_gpu_p2p.cmd import cli
from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p.cmd import sources
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p.fabric import partitions
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_atomic_file
from tests.unit import test_corpus

REPO = os.path.dirname(os.path.dirname(os.path.abspath(
    nova_gpu_p2p.__file__)))
#: The console script's body, run from this checkout.
CONSOLE = 'import sys; from nova_gpu_p2p.cmd.cli import main; sys.exit(main())'
ACS_HOST = 'acs-redirect-switch'
#: oslo.config's search, before any test replaces it.
FIND_CONFIG_FILES = cfg.find_config_files
NIC_HOST = 'mixed-vendors-nic'
HGX_HOST = 'hgx-8gpu-nvswitch-2numa'
#: doc/source/static-topology.rst's example, two GPUs per P2P pair: every
#: pair is PHB or SYS by its tree, OK or NS by its matrix.
STATIC = textwrap.dedent('''\
    gpus:
      - {address: 0000:81:00.0, numa_node: 0, root_complex: pci0000:80}
      - {address: 0000:82:00.0, numa_node: 0, root_complex: pci0000:80}
      - {address: 0000:c1:00.0, numa_node: 1, root_complex: pci0000:c0}
    p2p_matrix: |
      GPU0 GPU1 GPU2
      GPU0 X   OK   NS
      GPU1 OK  X    CNS
      GPU2 NS  CNS  X
    ''')


class NoHostConfig(fixtures.Fixture):
    """oslo.config's search for nova.conf finds ``files``, none by default.

    Not this machine's /etc/nova/nova.conf, which a developer's GPU host
    may well have.
    """

    def __init__(self, files: list[str] | None = None) -> None:
        super().__init__()
        self.files = files or []

    def _setUp(self) -> None:
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', return_value=self.files))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_dirs', return_value=[]))


class TreeReads(fixtures.Fixture):
    """The CLI run as root on a generated sysfs tree, with no nova.conf.

    PCI config space is read straight from the tree, as root would,
    instead of through privsep.
    """

    def _setUp(self) -> None:
        self.useFixture(NoHostConfig())
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            sysfs.read_config_direct))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def partitions_by_module(entries: list[dict]) -> dict[int, str]:
    """The HGX host's device_spec entries' partition tags, by module ID."""
    module = {address: m for m, address in hosts.HGX_MODULES.items()}
    return {module[e['address']]: e['gpu_p2p_partitions'] for e in entries}


class CLITestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(NoHostConfig())
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def capture(self, topology: model.HostTopology) -> str:
        path = os.path.join(self.dir, 'host.json')
        capture.save(topology, path)
        return path

    def assertUsageError(self, expected: str, *argv: str) -> str:
        """Exit status 2, one line naming ``expected``, nothing else."""
        rc, out, err = run(*argv)
        self.assertEqual((2, ''), (rc, out), err)
        self.assertEqual(1, len(err.splitlines()), err)
        self.assertTrue(err.startswith('nova-gpu-p2p: '), err)
        self.assertIn(expected, err)
        return err.strip()

    def into_a_closed_pipe(self, *argv: str) -> tuple[int, str]:
        """The CLI's exit status and stderr, its stdout's reader gone."""
        process = subprocess.Popen(
            [sys.executable, '-W', 'default', '-c', CONSOLE, *argv],
            env=dict(os.environ, PYTHONPATH=REPO, HOME=self.dir),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        process.stdout.close()
        stderr = process.stderr.read()
        process.stderr.close()
        return process.wait(timeout=120), stderr


class TestQuiet(CLITestCase):
    """Standard error holds the command's own output and nothing else.

    With ``-W default`` every warning an import raises is shown: eventlet's
    deprecation (through oslo.privsep or futurist) must not come with
    commands that do not read config space through nova-compute's daemon.
    """

    def console(self, *argv: str, **popen) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=REPO, HOME=self.dir)
        env.pop('PYTHONWARNINGS', None)
        return subprocess.run(
            [sys.executable, '-W', 'default', '-c', CONSOLE] + list(argv),
            env=env, cwd=self.dir, capture_output=True, text=True,
            timeout=120, **popen)

    def assertQuiet(self, *argv: str) -> str:
        result = self.console(*argv)
        self.assertEqual((0, ''), (result.returncode, result.stderr), argv)
        return result.stdout

    def test_help_and_version(self):
        for argv in (['--help'], ['topology', '--help'], ['flavor', '--help'],
                     ['capture', '--help'], ['check', '--help']):
            self.assertIn('usage: nova-gpu-p2p', self.assertQuiet(*argv))
        # The version pip shows for the installed distribution.
        self.assertEqual(
            'nova-gpu-p2p %s\n' % importlib.metadata.version('nova-gpu-p2p'),
            self.assertQuiet('--version'))

    def test_outside_novas_environment_is_one_line(self):
        # -S: none of the environment's site-packages, as the system's
        # python3 running a copied console script.
        result = subprocess.run(
            [sys.executable, '-S', '-c', CONSOLE, '--help'],
            env=dict(os.environ, PYTHONPATH=REPO, HOME=self.dir),
            cwd=self.dir, capture_output=True, text=True, timeout=120)
        self.assertEqual((2, ''), (result.returncode, result.stdout))
        self.assertEqual(
            'nova-gpu-p2p: this Python (%s) cannot import nova_gpu_p2p_guest:'
            ' run nova-gpu-p2p from the environment nova-compute runs from, '
            'where it is installed beside Nova (doc/source/install.rst)\n'
            % sys.executable, result.stderr)

    def test_topology_and_capture(self):
        host = self.capture(test_corpus.discover(ACS_HOST))
        self.assertIn('GPU3', self.assertQuiet('topology', '--no-config',
                                               '--load', host))
        tree = test_corpus.tree(ACS_HOST)
        self.assertIn('PHB*', self.assertQuiet('topology', '--no-config',
                                               '--sysfs-root', tree))
        self.assertIn('captured', self.assertQuiet(
            'capture', '--no-config', '--sysfs-root', tree, '--output',
            os.path.join(self.dir, 'again.json')))

    def test_check_reading_device_spec_entries(self):
        """Nova's device_spec matching comes without eventlet's warning."""
        conf = self.write('nova.conf', '[pci]\nreport_in_placement = True\n'
                          'device_spec = {"address": "0000:03:00.0"}\n')
        result = self.console('check', '--config-file', conf,
                              '--sysfs-root', test_corpus.tree(ACS_HOST))
        self.assertEqual('', result.stderr)
        self.assertIn('| Check: placement', result.stdout)
        self.assertIn('by [pci] device_spec', result.stdout)
        result = self.console('check', '--config-file', conf, '--json',
                              '--sysfs-root', test_corpus.tree(ACS_HOST))
        self.assertEqual('', result.stderr)
        self.assertIn('placement', [
            c['check'] for c in json.loads(result.stdout)['checks']])

    def test_flavor_only_its_settings_on_stderr(self):
        result = self.console('flavor', '--gpus', '8', '--alias', 'h100',
                              '--bar-gib', '128')
        self.assertEqual(0, result.returncode)
        self.assertEqual(
            '\n'.join(flavor_commands.scheduler_settings()) + '\n',
            result.stderr)
        self.assertIn('hw:maxphysaddr_bits=42', result.stdout)

    def test_a_closed_pipe_is_no_traceback(self):
        # topology --json | head -1: the reader is gone before the output.
        self.assertEqual((1, ''), self.into_a_closed_pipe(
            'topology', '--no-config', '--json', '--load',
            self.capture(test_corpus.discover('large-16gpu-8numa'))))


class TestNeverATraceback(CLITestCase):
    """Input no check foresaw, a full disk, Ctrl-C: one line, never more."""

    def damaged_capture(self, text: str) -> str:
        return self.write('capture.json', text)

    def test_capture_to_a_device_says_no_file_written(self):
        # Issue 35 item 2: "to PATH" where PATH leads to /dev/null.
        tree = test_corpus.tree('mixed-vendors-nic')
        link = os.path.join(self.dir, 'capture.json')
        os.symlink('/dev/null', link)
        rc, out, err = run('capture', '--no-config', '--sysfs-root', tree,
                           '--output', link)
        self.assertEqual((0, ''), (rc, err))
        self.assertIn('to %s (a pipe or device: no file written)' % link,
                      out)

    def test_deeply_nested_json(self):
        path = self.damaged_capture('[' * 100000 + ']' * 100000)
        self.assertUsageError('%s is not a readable nova-gpu-p2p capture: '
                              'maximum recursion depth' % path,
                              'topology', '--no-config', '--load', path)

    def test_config_file_that_is_not_utf8(self):
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'wb') as f:
            f.write(b'[gpu_p2p]\ntopology_backend = \xff\n')
        self.assertUsageError('cannot read %s: not UTF-8 text' % path,
                              'topology', '--config-file', path)

    def test_integer_of_thousands_of_digits_in_a_static_file(self):
        static = self.write('static.yaml', 'gpus:\n- address: 81:00.0\n'
                            '  numa_node: %s\n' % ('9' * 5000))
        config = self.write('nova.conf', '[gpu_p2p]\ntopology_backend = '
                            'static\nstatic_topology_file = %s\n' % static)
        self.assertUsageError('%s line 3: GPU0 numa_node must be an integer '
                              '>= 0' % static,
                              'topology', '--config-file', config)

    def test_ctrl_c(self):
        with mock.patch.object(cli, 'build_parser',
                               side_effect=KeyboardInterrupt):
            self.assertEqual((130, '', 'nova-gpu-p2p: interrupted\n'),
                             run('topology'))

    def console_to(self, stdout: typing.IO, *argv: str
                   ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, '-c', CONSOLE] + list(argv),
            env=dict(os.environ, PYTHONPATH=REPO, HOME=self.dir),
            stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)

    def test_stdout_on_a_full_disk(self):
        capture_file = self.capture(test_corpus.discover(NIC_HOST))
        for argv in (('--version',),
                     ('topology', '--no-config', '--load', capture_file),
                     ('flavor', '--gpus', '2', '--alias',
                      'a', '--bar-gib', '80')):
            with open('/dev/full', 'w') as full:
                result = self.console_to(full, *argv)
            self.assertEqual(2, result.returncode, argv)
            self.assertEqual(['nova-gpu-p2p: [Errno 28] No space left on '
                              'device'], result.stderr.splitlines(), argv)

    def test_version_into_a_closed_pipe(self):
        self.assertEqual((1, ''), self.into_a_closed_pipe('--version'))


class TestConfig(CLITestCase):
    """nova.conf as nova-manage finds it, --config-file, --no-config."""

    def report(self, *argv: str) -> dict:
        rc, out, err = run('topology', '--sysfs-root',
                           test_corpus.tree(ACS_HOST), '--json', *argv)
        self.assertEqual(0, rc, err)
        return json.loads(out)

    def test_hosts_nova_conf_by_default(self):
        path = self.write('nova.conf', '[gpu_p2p]\np2p_level = SYS\n')
        self.useFixture(NoHostConfig([path]))
        report = self.report()
        self.assertEqual(('SYS', [path]),
                         (report['p2p_level'], report['config_files']))
        self.assertEqual({0}, {gpu['clique'] for gpu in report['gpus']})
        rc, out, err = run('topology', '--sysfs-root',
                           test_corpus.tree(ACS_HOST))
        self.assertIn('p2p_level=SYS acs_policy=route (from %s)' % path, out)

    def test_search_is_oslo_configs_for_nova(self):
        # nova.conf and nova-gpu-p2p.conf in ~/.nova, ~, /etc/nova, /etc.
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg._get_config_dirs', return_value=[self.dir]))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', FIND_CONFIG_FILES))
        nova_conf = self.write('nova.conf', '[gpu_p2p]\np2p_level = SYS\n')
        ours = self.write('nova-gpu-p2p.conf',
                          '[gpu_p2p]\nacs_policy = ignore\n')
        report = self.report()
        self.assertEqual([nova_conf, ours], report['config_files'])
        self.assertEqual(('SYS', 'ignore'),
                         (report['p2p_level'], report['acs_policy']))

    def test_config_file_instead_and_later_ones_win(self):
        self.useFixture(NoHostConfig([self.write('host.conf', 'broken')]))
        first = self.write('a.conf', '[gpu_p2p]\np2p_level = SYS\n'
                                     'acs_policy = ignore\n')
        second = self.write('b.conf', '[gpu_p2p]\np2p_level = PHB\n')
        report = self.report('--config-file', first, '--config-file', second)
        self.assertEqual(('PHB', 'ignore', [first, second]),
                         (report['p2p_level'], report['acs_policy'],
                          report['config_files']))

    def test_no_config(self):
        self.useFixture(NoHostConfig([self.write('host.conf', 'broken')]))
        report = self.report('--no-config')
        self.assertEqual(('PXB', 'route', []),
                         (report['p2p_level'], report['acs_policy'],
                          report['config_files']))
        rc, out, err = run('topology', '--no-config', '--sysfs-root',
                           test_corpus.tree(ACS_HOST))
        self.assertIn('p2p_level=PXB acs_policy=route (defaults: no '
                      'nova.conf read)', out)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(SystemExit, cli.main, [
                'topology', '--no-config', '--config-file', 'x'])
        self.assertEqual(2, exc.code)
        self.assertIn('not allowed with argument', err.getvalue())

    def test_capture_on_a_full_disk_keeps_the_old_one(self):
        old = self.write('host.json', 'the old capture\n')
        with test_atomic_file.full_disk():
            self.assertUsageError(
                '--output %s: No space left on device' % old, 'capture',
                '--no-config', '--sysfs-root', test_corpus.tree(ACS_HOST),
                '--output', old)
        with open(old) as f:
            self.assertEqual('the old capture\n', f.read())
        self.assertEqual(['host.json'], os.listdir(self.dir))

    def test_every_command_that_reads_the_host_takes_them(self):
        for command in (['topology'], ['check'], ['capture', '--output',
                                                  os.path.join(self.dir,
                                                               'c.json')]):
            self.assertUsageError('--config-file %s: no such file'
                                  % os.path.join(self.dir, 'none.conf'),
                                  *command, '--config-file',
                                  os.path.join(self.dir, 'none.conf'))

    def test_missing_or_unreadable_nova_conf(self):
        missing = os.path.join(self.dir, 'missing.conf')
        self.assertEqual(
            'nova-gpu-p2p: --config-file %s: no such file' % missing,
            self.assertUsageError(missing, 'topology', '--config-file',
                                  missing))
        self.assertUsageError('--config-file %s: is a directory' % self.dir,
                              'topology', '--config-file', self.dir)
        self.assertUsageError(
            'is not an INI file: at %s:1' % self.write('bad.conf', 'x\n'),
            'topology', '--config-file', os.path.join(self.dir, 'bad.conf'))
        # The host's own, found by the search, readable only by root.
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.ConfigOpts._parse_config_files',
            side_effect=cfg.ConfigFilesPermissionDeniedError(
                ['/etc/nova/nova.conf'])))
        self.assertEqual(
            'nova-gpu-p2p: cannot read /etc/nova/nova.conf: permission '
            'denied; run as root (sudo), or give --config-file FILE or '
            '--no-config', self.assertUsageError('permission', 'topology'))

    def test_bad_values_name_file_option_value_and_allowed(self):
        for text, expected in (
                ('p2p_level = FOO', "[gpu_p2p] p2p_level = 'FOO': must be one "
                                    'of NV, PIX, PXB, PHB, NODE, SYS'),
                ('acs_policy = off', "[gpu_p2p] acs_policy = 'off': must be "
                                     'one of route, ignore'),
                ('align_device_types = gpu,disk',
                 "[gpu_p2p] align_device_types = 'gpu,disk': each item must "
                 'be one of gpu, nic, all'),
                ('clique_map = 81:00.0',
                 "[gpu_p2p] clique_map = '81:00.0': '81:00.0' is not BDF:ID "
                 "(for example 0000:81:00.0:0)"),
                ('pcihole64 = big',
                 "[gpu_p2p] pcihole64 = 'big': 'big' is not auto, off or a "
                 "size in GiB (a positive integer, at most 2097152)"),
                ('guest_numa_distances = maybe',
                 "[gpu_p2p] guest_numa_distances = 'maybe': ")):
            path = self.write('nova.conf', '[gpu_p2p]\n%s\n' % text)
            message = self.assertUsageError(
                '%s: %s' % (path, expected), 'topology', '--config-file',
                path, '--sysfs-root', test_corpus.tree(ACS_HOST))
            self.assertNotIn('LocationInfo', message)

    def test_static_without_its_file(self):
        self.assertUsageError(
            'topology_backend = static needs [gpu_p2p] static_topology_file',
            'topology', '--config-file',
            self.write('nova.conf', '[gpu_p2p]\ntopology_backend = static\n'))


class TestNovaReferences(CLITestCase):
    """Issue 42 item 9: ``$`` references resolved as nova-compute does."""

    def test_references_to_novas_own_options(self):
        path = self.write('nova.conf', textwrap.dedent('''\
            [DEFAULT]
            my_ip = 192.0.2.10
            state_path = /srv/nova
            [gpu_p2p]
            module_id_file = $state_path/gpu_p2p_module_ids.json
            fabric_manager_address = $my_ip:6666
            p2p_level = SYS
            '''))
        opts = sources.load_conf(argparse.Namespace(config_file=[path]))
        self.assertEqual(('/srv/nova/gpu_p2p_module_ids.json',
                          '192.0.2.10:6666'),
                         (opts.gpu_p2p.module_id_file,
                          opts.gpu_p2p.fabric_manager_address))
        for command in (['topology', '--json'], ['topology', '--device-spec'],
                        ['check', '--json']):
            rc, out, err = run(*command, '--config-file', path,
                               '--sysfs-root', test_corpus.tree(ACS_HOST))
            self.assertNotEqual(2, rc, err)
            self.assertNotIn('$ reference', err)

    def test_novas_own_conf_left_alone(self):
        """Nova's options are copied by group name, not into its groups."""
        from nova import conf as nova_conf

        def registered():
            return {group: set(nova_conf.CONF[group].keys())
                    for group in ('ironic', 'glance', 'keystone')}

        before = registered()
        opts = cfg.ConfigOpts()
        sources.register_nova_options(opts)
        self.assertIn('auth_url', opts.ironic.keys())
        self.assertEqual(before, registered())

    def test_a_reference_to_no_option_is_still_refused(self):
        path = self.write('nova.conf', '[gpu_p2p]\nmodule_id_file = '
                          '$no_such_option/ids.json\n')
        self.assertUsageError('[gpu_p2p] module_id_file: a $ reference that '
                              'cannot be resolved', 'topology',
                              '--config-file', path)


class TestHostileValues(CLITestCase):
    """Issue 42 items 11 and 13: refused at start, one line, exit 2."""

    def test_an_empty_path_option(self):
        for option in ('pci_ids_file', 'sysfs_root', 'static_topology_file',
                       'module_id_file', 'fabric_manager_library'):
            path = self.write('nova.conf', '[gpu_p2p]\n%s =\n' % option)
            self.assertUsageError(
                "[gpu_p2p] %s = '': an empty path names no file" % option,
                'topology', '--config-file', path, '--sysfs-root',
                test_corpus.tree(ACS_HOST))

    def test_numbers_in_arguments_are_ascii_decimal(self):
        for option in ('--gpus', '--numa-nodes', '--vcpus', '--ram',
                       '--disk'):
            for value in ('\u0663', '\u00b2', '+4', ' 4', '1_0', '-1'):
                argv = {'--gpus': '4', option: value}
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    exc = self.assertRaises(SystemExit, cli.main, [
                        'flavor', '--alias', 'a100', *[
                            a for pair in argv.items() for a in pair]])
                self.assertEqual(2, exc.code)
                err = err.getvalue()
                self.assertIn('argument %s: %s is not a whole number in '
                              'ASCII digits' % (option, repr(value)),
                              err.splitlines()[-1])


class TestBadInput(CLITestCase):
    """One line and exit status 2, never a traceback."""

    def test_load_of_what_is_no_capture(self):
        for text in ('[1, 2]', '"host"', 'null', '{"format_version": 2, '
                     '"functions": [1], "findings": []}', '{', ''):
            path = self.write('host.json', text)
            for command in ('topology', 'check'):
                self.assertUsageError(
                    '%s is not a readable nova-gpu-p2p capture: ' % path,
                    command, '--load', path)
        self.assertUsageError(
            'the top level must be a mapping with the keys format_version, '
            'functions, ', 'topology', '--load',
            self.write('host.json', '[]'))

    def test_load_of_a_capture_with_wrong_values(self):
        good = capture.to_dict(test_corpus.discover(ACS_HOST))
        gpu = next(i for i, f in enumerate(good['functions'])
                   if f['class_code'] >> 16 == 3)
        address = good['functions'][gpu]['address']
        for change, expected in (
                (('class_code', '0x030200'),
                 "functions[%d].class_code must be an integer from 0 to "
                 "16777215 (the 24-bit PCI class code), got '0x030200'"
                 % gpu),
                (('port_type', 'switch'),
                 'functions[%d].port_type must be one of ' % gpu),
                (('address', '81:00.0'),
                 "functions[%d].address must be a PCI address as sysfs "
                 "spells it" % gpu),
                (('wattage', 300),
                 "functions[%d] has the unknown key 'wattage'" % gpu)):
            data = json.loads(json.dumps(good))
            data['functions'][gpu].update([change])
            path = self.write('host.json', json.dumps(data))
            err = self.assertUsageError(expected, 'topology', '--load', path)
            self.assertIn(path, err)
        data = json.loads(json.dumps(good))
        data['functions'].append(data['functions'][gpu])
        self.assertUsageError(
            'functions[%d] lists %s a second time'
            % (len(good['functions']), address),
            'topology', '--load', self.write('host.json', json.dumps(data)))
        data = json.loads(json.dumps(good))
        data['nvlink_pairs'] = [[address, '0000:7f:00.0']]
        self.assertUsageError(
            'nvlink_pairs[0] names 0000:7f:00.0, which functions does not '
            'list', 'topology', '--load',
            self.write('host.json', json.dumps(data)))

    def test_capture_to_where_it_cannot_write(self):
        output = os.path.join(self.write('file', ''), 'host.json')
        self.assertUsageError(
            '--output %s: Not a directory' % output,
            'capture', '--sysfs-root', test_corpus.tree(ACS_HOST),
            '--output', output)

    def test_sysfs_root_that_is_none(self):
        self.assertUsageError('cannot list PCI devices in /nonexistent',
                              'topology', '--sysfs-root', '/nonexistent')

    def test_backend_and_static_file_errors(self):
        self.assertUsageError(
            'topology_backend = nosuch: no such backend; installed backends '
            'are fabricmanager, nvml, static, sysfs', 'topology',
            '--config-file',
            self.write('nova.conf', '[gpu_p2p]\ntopology_backend = nosuch\n'))
        conf = self.write('static.conf', '[gpu_p2p]\ntopology_backend = '
                          'static\nstatic_topology_file = %s\n'
                          % os.path.join(self.dir, 'gpus.yaml'))
        self.assertUsageError('cannot read %s' % os.path.join(
            self.dir, 'gpus.yaml'), 'topology', '--config-file', conf)
        self.write('gpus.yaml', '- 81:00.0\n')
        self.assertUsageError('gpus.yaml line 1: the top level must be a '
                              'mapping', 'topology', '--config-file', conf)


class TestTopologyReport(CLITestCase):

    def test_no_nvidia_gpu(self):
        nic = dataclasses.replace(
            test_corpus.discover(NIC_HOST).functions['0000:05:00.0'],
            numa_node=None, parent=None)
        rc, out, err = run('topology', '--load', self.capture(
            model.HostTopology(functions={nic.address: nic})))
        self.assertEqual((0, ''), (rc, err))
        self.assertEqual(
            ['No NVIDIA GPU found in the capture: nothing for P2P flavors '
             'to use.',
             'Capture the GPU host: sudo nova-gpu-p2p capture --output '
             'FILE.',
             'NIC 0000:05:00.0 numa_node - root complex pci0000:00'],
            out.splitlines())

    def test_no_nvidia_gpu_in_sysfs(self):
        os.makedirs(os.path.join(self.dir, 'bus', 'pci', 'devices'))
        rc, out, err = run('topology', '--sysfs-root', self.dir)
        lines = out.splitlines()
        self.assertEqual(
            'No NVIDIA GPU found in %s/bus/pci/devices: nothing for P2P '
            'flavors to use.' % self.dir, lines[0])
        self.assertTrue(lines[1].startswith(
            'Sysfs lists GPUs whatever driver they are bound to (nvidia, '
            'vfio-pci or none)'), lines[1])
        self.assertNotIn('PCI address', out)
        self.assertNotIn('traits', out)

    def test_unknown_numa_node_is_a_dash(self):
        topology = test_corpus.discover(NIC_HOST)
        functions = {a: dataclasses.replace(f, numa_node=None)
                     for a, f in topology.functions.items()}
        rc, out, err = run('topology', '--load', self.capture(
            dataclasses.replace(topology, functions=functions)))
        self.assertNotIn('None', out)
        self.assertIn('NIC 0000:05:00.0 numa_node - root complex pci0000:00',
                      out)
        self.assertEqual(['0000:03:00.0', '-', 'pci0000:00', '0'],
                         out.splitlines()[1].split()[3:])

    def test_acs_legend_only_with_a_star(self):
        rc, out, err = run('topology', '--sysfs-root',
                           test_corpus.tree(NIC_HOST))
        self.assertNotIn('*', out)
        self.assertIn('p2p_level=PXB acs_policy=route (defaults: no '
                      'nova.conf read)\n', out)
        rc, out, err = run('topology', '--sysfs-root',
                           test_corpus.tree(ACS_HOST))
        self.assertIn('PHB*', out)
        self.assertIn('; * = made worse by ACS P2P request redirect or '
                      'egress control\n', out)
        self.assertNotIn('?', out)

    def test_static_files_own_verdict(self):
        path = self.write('gpus.yaml', STATIC)
        conf = self.write('nova.conf', '[gpu_p2p]\ntopology_backend = '
                          'static\nstatic_topology_file = %s\n' % path)
        rc, out, err = run('topology', '--config-file', conf)
        self.assertEqual(0, rc, err)
        lines = out.splitlines()
        self.assertEqual([['X', 'OK', 'NS'], ['OK', 'X', 'NS'],
                          ['NS', 'NS', 'X']],
                         [line.split()[1:4] for line in lines[1:4]])
        self.assertIn('; OK, NS = P2P capable or not, as the static '
                      'topology says (p2p_level does not apply)', lines[5])
        links = json.loads(run('topology', '--config-file', conf,
                               '--json')[1])['links']
        self.assertEqual(
            {'0000:81:00.0 0000:82:00.0': (True, 'PHB'),
             '0000:81:00.0 0000:c1:00.0': (False, 'SYS'),
             '0000:82:00.0 0000:c1:00.0': (False, 'SYS')},
            {pair: (link['override'], link['effective'])
             for pair, link in links.items()})
        # A host read from sysfs has none.
        links = json.loads(run('topology', '--sysfs-root',
                               test_corpus.tree(ACS_HOST),
                               '--json')[1])['links']
        self.assertEqual({None}, {link['override'] for link in links.values()})

    def test_device_spec_with_fabric_manager_partitions(self):
        """Each GPU's entry names its partitions of 2+, by module ID."""
        # Without partitions: no partition trait or tag.
        rc, out, err = run('topology', '--device-spec', '--sysfs-root',
                           test_corpus.tree(HGX_HOST), '--level', 'SYS')
        self.assertEqual(8, len(out.splitlines()), err)
        self.assertNotIn('PARTITION', out.upper())
        found, _ = partitions.to_addresses(fake_fm.H100_PARTITIONS.items(),
                                           hosts.HGX_MODULES)
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.cmd.sources.read_host',
            return_value=dataclasses.replace(
                test_corpus.discover(HGX_HOST), fabric_partitions=found,
                nvlink_pairs=partitions.nvlink_pairs(found))))
        rc, out, err = run('topology', '--device-spec')
        self.assertEqual(0, rc, err)
        entries = [json.loads(line.split(' = ', 1)[1])
                   for line in out.splitlines()]
        self.assertEqual(
            {1: '0:8,1:4,3:2', 2: '0:8,1:4,4:2', 3: '0:8,1:4,3:2',
             4: '0:8,1:4,4:2', 5: '0:8,2:4,5:2', 6: '0:8,2:4,6:2',
             7: '0:8,2:4,5:2', 8: '0:8,2:4,6:2'},
            partitions_by_module(entries))
        self.assertEqual({'0'}, {e['gpu_p2p_clique'] for e in entries})
        # The claim order, by module: each node's pair partitions together.
        module = {address: m for m, address in hosts.HGX_MODULES.items()}
        self.assertEqual(
            {2: 0, 4: 1, 3: 2, 1: 3, 6: 4, 8: 5, 7: 6, 5: 7},
            {module[e['address']]: sum(
                map(device_spec_tags.is_order_tag, e)) for e in entries})
        # The first in address order, 0000:03:00.0, is module 2.
        self.assertEqual(
            'CUSTOM_GPU_P2P_CLIQUE_ID_0,CUSTOM_GPU_P2P_PARTITION_0,'
            'CUSTOM_GPU_P2P_PARTITION_1,CUSTOM_GPU_P2P_PARTITION_4',
            entries[0]['traits'])
