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

"""``nova-gpu-p2p check`` over the corpus, and its report.

The expected results per corpus host are written out by hand from the
host descriptions in :mod:`tests.fixtures.hosts`. The report is
oslo.upgradecheck's table and JSON, as ``nova-status upgrade check``
prints them; the exit status is ours (1 on a failure, else 0).
"""

import contextlib
import dataclasses
import io
import json
import os
import sys
import types
from unittest import mock

import fixtures
from oslo_upgradecheck import upgradecheck

from nova_gpu_p2p.checks import report
from nova_gpu_p2p.checks import result
from nova_gpu_p2p.checks import versions
from nova_gpu_p2p.cmd import cli
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.unit import base
from tests.unit import test_checks
from tests.unit import test_cli
from tests.unit import test_corpus

OK, WARN, FAIL = (result.Code.SUCCESS, result.Code.WARNING,
                  result.Code.FAILURE)
WORDS = upgradecheck.UPGRADE_CHECK_MSG_MAP
#: libvirt-python as a compute host has it.
LIBVIRT_PYTHON = types.ModuleType('libvirt')
LIBVIRT_PYTHON.__file__ = '/usr/lib/python3/dist-packages/libvirt.py'


def lines(checks):
    """Each check of a --json report as one "Word subject: details"."""
    return '\n'.join('%s %s: %s' % (WORDS[c['result']], c['check'],
                                    c['details']) for c in checks)


def parse_table(text):
    """oslo.upgradecheck's table: title, (check, result, details) rows."""
    body = text.split('\n')
    rows, row = [], None
    title = None
    for line in body:
        if not line.startswith('|'):
            if row:
                rows.append(row)
            row = None
            continue
        cell = line.strip('|').strip()
        if title is None:
            title = cell
        elif cell.startswith('Check: '):
            row = [cell[len('Check: '):], None, '']
        elif cell.startswith('Result: '):
            row[1] = cell[len('Result: '):]
        elif cell.startswith('Details: '):
            row[2] = cell[len('Details: '):]
        else:
            row[2] += ' ' + cell
    return title, [tuple(r) for r in rows]


#: (status, subject) of every line that is not OK, per host, with libvirt
#: 11.3.0 / QEMU 10.0.2, OVMF present and the tree's IOMMU groups.
EXPECTED = {
    'pcie-8gpu-4switch-2socket': [],
    # Four NVSwitches beside the GPUs; sysfs sees PCIe only, and no
    # Fabric Manager configuration says which mode the board is in.
    'hgx-8gpu-nvswitch-2numa': [(WARN, 'Fabric Manager mode'),
                                (WARN, 'NVSwitch')],
    # The last L40S is on the nvidia driver; every GPU is alone at PXB.
    'four-numa-7gpu': [(FAIL, '0000:c1:00.0'), (WARN, 'p2p_level PXB')],
    # One GPU per root complex: NODE at best.
    'epyc-4gpu-per-root-complex': [(WARN, 'p2p_level PXB')],
    # Redirect on the downstream ports above A (03) and B (04).
    'acs-redirect-switch': [(WARN, '0000:02:00.0'), (WARN, '0000:02:01.0')],
    'mixed-vendors-nic': [],
    # Node unknown for the domain 1 GPU, node 1 has no CPUs, all SYS.
    'gpu-on-cpuless-node': [(WARN, 'NUMA'), (WARN, '0000:41:00.0'),
                            (WARN, 'p2p_level PXB')],
    'large-16gpu-8numa': [],
    'pcie-2level-switch-pxb': [],
    # Two GeForce RTX 4090s: no clique, so no P2P flavor lands here.
    'geforce-switch-pair': [(WARN, 'consumer GPUs'),
                            (WARN, 'p2p_level PXB')],
    'ada-switch-pair': [],
}


class CheckCLIBase(base.TestCase):
    """The command run as root on corpus trees, its report parsed."""

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.TreeReads())
        self.probe = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.checks.versions.probe_versions',
            return_value=versions.HostVersions(None, None,
                                               'no libvirtd'))).mock
        self.modules = self.enterContext(
            mock.patch.dict(sys.modules, {'libvirt': LIBVIRT_PYTHON}))
        # A Nova with the move-claim fix (TestNovaMoveClaimsRow: without).
        self.fixed = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.nova_fix.carried', return_value=True)).mock
        self.root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.root, 'usr/share/OVMF'))
        os.makedirs(os.path.join(self.root, 'usr/share/qemu/firmware'))
        open(os.path.join(self.root, 'usr/share/OVMF/OVMF_CODE_4M.fd'),
             'w').close()
        with open(os.path.join(self.root, 'usr/share/qemu/firmware/'
                               '60-edk2-x86_64.json'), 'w') as f:
            json.dump(test_checks.DESCRIPTOR, f)

    def run_cli(self, *argv, versions=('11.3.0', '10.0.2'), table=False,
                search=False):
        """Exit status and the --json report's checks (or the table).

        With neither ``--config-file`` nor ``search``: ``--no-config``.
        """
        if not search and '--config-file' not in argv:
            argv += ('--no-config',)
        if versions:
            argv += ('--libvirt-version', versions[0],
                     '--qemu-version', versions[1])
        if not table:
            argv += ('--json',)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(['check', '--root', self.root] + list(argv))
        self.assertEqual('', err.getvalue())
        if table:
            return rc, out.getvalue()
        printed = json.loads(out.getvalue())
        self.assertEqual(report.TITLE, printed['name'])
        return rc, printed['checks']

    def not_ok(self, checks):
        return [(result.Code(c['result']), c['check']) for c in checks
                if c['result'] != OK]


class TestNovaMoveClaimsRow(CheckCLIBase):
    """The row says whether this host's Nova carries the fix."""

    def test_fixed_and_unfixed(self):
        tree = test_corpus.tree('hgx-8gpu-nvswitch-2numa')
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertNotIn('Nova move claims', [c for _, c in self.not_ok(out)])
        self.fixed.return_value = False
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertIn((WARN, 'Nova move claims'), self.not_ok(out))
        self.assertEqual(0, rc)


class TestCheckCLI(CheckCLIBase):

    def test_every_corpus_host(self):
        self.assertEqual(set(hosts.HOSTS), set(EXPECTED))
        for name, expected in EXPECTED.items():
            rc, out = self.run_cli('--sysfs-root', test_corpus.tree(name))
            self.assertEqual(expected, self.not_ok(out), name)
            self.assertEqual(1 if (FAIL, '0000:c1:00.0') in expected else 0,
                             rc, name)
            self.assertIn('Success IOMMU: on', lines(out), name)
            self.assertIn('Success guest firmware', lines(out), name)
        self.probe.assert_not_called()

    def test_nvidia_bound_gpu_line(self):
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('four-numa-7gpu'))
        self.assertEqual(1, rc)
        self.assertIn('Failure 0000:c1:00.0: bound to nvidia, not vfio-pci',
                      lines(out))
        self.assertIn('fix: bind it to vfio-pci: driverctl set-override '
                      '0000:c1:00.0 vfio-pci', lines(out))
        self.assertIn('Success vfio-pci: 6 of 7 NVIDIA GPUs', lines(out))

    def test_acs_line_names_ports_and_pairs(self):
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('acs-redirect-switch'))
        self.assertEqual(0, rc)
        self.assertIn('Warning 0000:02:00.0: switch downstream port '
                      '0000:02:00.0 has ACS P2P Request Redirect on',
                      lines(out))
        self.assertIn('p2p_level PXB these pairs share no clique: '
                      '0000:03:00.0-0000:04:00.0', lines(out))
        self.assertIn('Success p2p_level PXB: 1 clique, largest 2 GPUs; 2 '
                      'of 4 GPUs in no clique', lines(out))
        self.assertIn('at PHB: 4', lines(out))

    def test_level_option(self):
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('epyc-4gpu-per-root-complex'),
                               '--level', 'NODE')
        self.assertEqual(0, rc)
        self.assertIn('Success p2p_level NODE: 1 clique, largest 4 GPUs',
                      lines(out))

    def test_old_libvirt_fails_where_cliques_exist(self):
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('pcie-8gpu-4switch-2socket'),
            versions=('7.0.0', '6.1.0'))
        self.assertEqual(1, rc)
        self.assertEqual([(FAIL, 'libvirt: clique IDs'),
                          (WARN, 'libvirt: UEFI guest XML'),
                          (WARN, 'QEMU: NUMA affinity'),
                          (WARN, 'guest PCIe links')], self.not_ok(out))
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('epyc-4gpu-per-root-complex'),
            versions=('8.0.0', '6.2.0'))
        self.assertEqual(0, rc)
        self.assertIn('Warning libvirt: clique IDs: libvirt 8.0.0 is too old '
                      'for <qemu:override>', lines(out))

    def test_bookworm_versions(self):
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            versions=('9.0.0', '7.2.0'))
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'libvirt: UEFI guest XML'),
                          (WARN, 'guest PCIe links')], self.not_ok(out))
        # Bookworm's QEMU 7.2 shows root ports at 16 GT/s at most.
        self.assertIn('Warning guest PCIe links: QEMU 7.2.0 shows guest '
                      'root ports at 16 GT/s at most', lines(out))
        self.assertIn('Warning libvirt: UEFI guest XML: libvirt 9.0.0 '
                      'refuses the UEFI guest XML Nova 34 writes', lines(out))
        self.assertIn('see troubleshooting: UEFI guests refused by libvirt '
                      '9.0',
                      lines(out))

    def test_versions_probed_when_not_given(self):
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            versions=None)
        self.probe.assert_called_once_with()
        self.assertEqual(0, rc)
        self.assertIn('Warning libvirt: version unknown (no libvirtd)',
                      lines(out))
        self.probe.return_value = versions.HostVersions((11, 3, 0), None, 'x')
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            '--qemu-version', '10.0.2', versions=None)
        self.assertIn('Success QEMU: NUMA affinity: QEMU 10.0.2 with libvirt '
                      '11.3.0 binds', lines(out))

    def test_bad_version_is_a_usage_error(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(SystemExit, cli.main, [
                'check', '--libvirt-version', 'new'])
        self.assertEqual(2, exc.code)
        self.assertIn("'new' is not a version", err.getvalue())

    def test_no_firmware(self):
        empty = self.useFixture(fixtures.TempDir()).path
        rc, out = self.run_cli(
            '--sysfs-root', test_corpus.tree('mixed-vendors-nic'),
            '--root', empty)
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'guest firmware')], self.not_ok(out))

    def test_iommu_off(self):
        host = dataclasses.replace(hosts.HOSTS['mixed-vendors-nic'],
                                   iommu=False)
        tree = self.useFixture(sysfs_builder.SysfsTree(host)).root
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertEqual(1, rc)
        self.assertEqual([(FAIL, 'IOMMU')], self.not_ok(out))
        self.assertIn('iommu_groups is empty', lines(out))

    def test_unprivileged_acs_unknown(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            lambda path, size: b''))
        rc, out = self.run_cli('--sysfs-root',
                               test_corpus.tree('acs-redirect-switch'))
        self.assertEqual(0, rc)
        # Unknown is redirect on: no two GPUs behind the switch share a
        # clique at PXB.
        self.assertEqual([(WARN, 'ACS'), (WARN, 'p2p_level PXB')],
                         self.not_ok(out))
        self.assertIn('run as root', lines(out))

    def test_json_and_load(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'host.json')
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(0, cli.main([
                'capture', '--output', path, '--sysfs-root',
                test_corpus.tree('four-numa-7gpu')]))
        rc, out = self.run_cli('--load', path)
        self.assertEqual(1, rc)
        by_subject = {c['check']: c for c in out}
        self.assertEqual(2, by_subject['0000:c1:00.0']['result'])
        self.assertIn('; fix: bind it to vfio-pci: driverctl',
                      by_subject['0000:c1:00.0']['details'])
        self.assertEqual('on: every NVIDIA GPU is in an IOMMU group',
                         by_subject['IOMMU']['details'])

    def test_topology_error(self):
        path = self.nova_conf('[gpu_p2p]\ntopology_backend = nosuch\n')
        rc, out = self.run_cli('--config-file', path)
        self.assertEqual(1, rc)
        self.assertIn('Failure GPU topology: [gpu_p2p] topology_backend = '
                      'nosuch: no such backend', lines(out))
        self.assertIn('Success guest firmware', lines(out))

    def test_unreadable_capture_is_a_usage_error(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(['check', '--load', '/nonexistent.json'])
        self.assertEqual(2, rc)
        self.assertEqual(['nova-gpu-p2p: /nonexistent.json is not a readable '
                          'nova-gpu-p2p capture: [Errno 2] No such file or '
                          "directory: '/nonexistent.json'"],
                         err.getvalue().splitlines())

    def test_nova_conf_found_as_nova_manage_finds_it(self):
        # Without --config-file, the host's nova.conf is read and [pci]
        # judged; --no-config reads none.
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        found = self.nova_conf('')
        self.useFixture(test_cli.NoHostConfig([found]))
        rc, out = self.run_cli('--sysfs-root', tree, search=True)
        self.assertIn('Warning placement: [pci] report_in_placement is off',
                      lines(out))
        self.assertIn('Success nova.conf: read %s' % found, lines(out))
        rc, out = self.run_cli('--sysfs-root', tree, '--no-config')
        self.assertNotIn('placement', lines(out))
        self.assertIn('Success nova.conf: none read (--no-config): '
                      '[gpu_p2p] options at their defaults; [pci] and the '
                      'scheduler settings not judged', lines(out))

    def test_no_nova_conf_found_is_a_warning(self):
        self.useFixture(test_cli.NoHostConfig())
        rc, out = self.run_cli('--sysfs-root', test_corpus.tree(
            'pcie-8gpu-4switch-2socket'), search=True)
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'nova.conf')], self.not_ok(out))
        self.assertIn('Warning nova.conf: none found (looked for nova.conf '
                      'and nova-gpu-p2p.conf in ~/.nova, ~, /etc/nova and '
                      '/etc, and their .conf.d directories)', lines(out))
        self.assertIn('fix: run this as root where nova.conf is readable '
                      'only by root, or give --config-file PATH', lines(out))

    def test_config_file_given_is_named(self):
        path = self.nova_conf('')
        rc, out = self.run_cli('--sysfs-root', test_corpus.tree(
            'pcie-8gpu-4switch-2socket'), '--config-file', path)
        self.assertEqual(OK, out[0]['result'])
        self.assertEqual(('nova.conf', 'read %s' % path),
                         (out[0]['check'], out[0]['details']))

    def test_missing_libvirt_python_fails(self):
        # None in sys.modules: the import fails as for a missing module.
        self.modules['libvirt'] = None
        rc, out = self.run_cli('--sysfs-root', test_corpus.tree(
            'pcie-8gpu-4switch-2socket'))
        self.assertEqual(1, rc)
        self.assertEqual([(FAIL, 'libvirt-python')], self.not_ok(out))
        self.assertIn('Failure libvirt-python: the Python module libvirt is '
                      'missing from %s' % sys.executable, lines(out))
        self.assertIn('fix: install libvirt-python into the Python '
                      'environment Nova runs from (the distribution\'s '
                      'python3-libvirt, or pip install libvirt-python in '
                      'Nova\'s virtualenv) (see troubleshooting: '
                      'libvirt-python missing)', lines(out))

    def test_libvirt_python_found_names_the_module(self):
        rc, out = self.run_cli('--sysfs-root', test_corpus.tree(
            'pcie-8gpu-4switch-2socket'))
        self.assertIn('Success libvirt-python: the Python module libvirt: '
                      '/usr/lib/python3/dist-packages/libvirt.py', lines(out))

    def test_every_row_title_is_unique(self):
        # A nova.conf that gives every GPU in a clique a device_spec row
        # and the scheduler settings a row.
        path = self.nova_conf(
            '[pci]\nreport_in_placement = True\n'
            'device_spec = {"vendor_id": "10de"}\n'
            '[filter_scheduler]\n'
            'enabled_filters = PciPassthroughFilter,GPUP2PCliqueFilter\n')
        device_spec_rows = 0
        for name in hosts.HOSTS:
            for argv in ((), ('--level', 'SYS'),
                         ('--level', 'SYS', '--config-file', path)):
                rc, out = self.run_cli('--sysfs-root', test_corpus.tree(name),
                                       *argv, versions=('9.0.0', '7.2.0'))
                titles = [check['check'] for check in out]
                self.assertEqual(len(titles), len(set(titles)),
                                 (name, argv, titles))
                device_spec_rows += sum(title.startswith('[pci] device_spec')
                                        for title in titles)
        self.assertGreater(device_spec_rows, len(hosts.HOSTS))

    def nova_conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_placement_needs_nova_conf(self):
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        rc, out = self.run_cli('--sysfs-root', tree)
        self.assertNotIn('placement', lines(out))
        self.assertNotIn('device_spec', lines(out))
        rc, out = self.run_cli('--sysfs-root', tree,
                               '--config-file', self.nova_conf(''))
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, 'placement')], self.not_ok(out))
        self.assertIn('Warning placement: [pci] report_in_placement is off',
                      lines(out))

    def test_scheduler_settings_on_a_scheduler_nova_conf(self):
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        ours_last = self.nova_conf(
            '[pci]\nreport_in_placement = True\n[filter_scheduler]\n'
            'enabled_filters = ComputeFilter,PciPassthroughFilter,'
            'NUMATopologyFilter,GPUP2PCliqueFilter\n')
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file',
                               ours_last)
        self.assertEqual(0, rc)
        self.assertIn((WARN, 'scheduler'), self.not_ok(out))
        self.assertIn('Warning scheduler: PciPassthroughFilter and '
                      'NUMATopologyFilter run before GPUP2PCliqueFilter',
                      lines(out))
        ours_first = self.nova_conf(
            '[filter_scheduler]\nenabled_filters = ComputeFilter,'
            'GPUP2PCliqueFilter,PciPassthroughFilter,NUMATopologyFilter\n')
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file',
                               ours_first)
        self.assertIn('Success scheduler: GPUP2PCliqueFilter before Nova\'s '
                      'candidate filters, 2 candidates per host', lines(out))
        # A compute's nova.conf (no filter of ours): no row.
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file',
                               self.nova_conf(''))
        self.assertNotIn('scheduler', [c['check'] for c in out])

    def test_device_spec_lines_from_topology(self):
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        tree = test_corpus.tree('pcie-8gpu-4switch-2socket')
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), \
                contextlib.redirect_stderr(io.StringIO()):
            cli.main(['topology', '--device-spec', '--sysfs-root', tree])
        spec_lines = printed.getvalue().splitlines()
        # What topology --device-spec prints is what check wants.
        path = self.nova_conf('[pci]\nreport_in_placement = True\n%s\n'
                              % '\n'.join(spec_lines))
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file', path)
        self.assertEqual([], self.not_ok(out))
        self.assertIn('Success placement: [pci] report_in_placement on: 8 '
                      'of 8 GPUs in cliques', lines(out))
        # One GPU's tag wrong.
        right = spec_lines[1]
        spec_lines[1] = right.replace('"gpu_p2p_clique": "0"',
                                      '"gpu_p2p_clique": "3"')
        path = self.nova_conf('[pci]\nreport_in_placement = True\n%s\n'
                              % '\n'.join(spec_lines))
        rc, out = self.run_cli('--sysfs-root', tree, '--config-file', path)
        self.assertEqual(0, rc)
        self.assertEqual([(WARN, '[pci] device_spec 0000:04:00.0')],
                         self.not_ok(out))
        # The fix is the very line topology --device-spec printed, order
        # tags included, so following it raises no other warning.
        self.assertIn(
            'Warning [pci] device_spec 0000:04:00.0: GPU 0000:04:00.0 is in '
            'clique 0 but its [pci] device_spec entry has gpu_p2p_clique '
            "'3'; fix: set device_spec = {\"address\": \"0000:04:00.0\", "
            '"traits": "CUSTOM_GPU_P2P_CLIQUE_ID_0", "gpu_p2p_clique": "0", '
            '"gpu_p2p_order_1": "1"}', lines(out))
        warning, = [c['details'] for c in out if c['result'] == WARN]
        self.assertEqual(right.replace(' ', ''),
                         warning.split('fix: set ')[1].replace(' ', ''))

    def test_static_backend_reads_bindings_from_sysfs(self):
        tree = test_corpus.tree('four-numa-7gpu')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[gpu_p2p]\ntopology_backend = nvml\nsysfs_root = %s\n'
                    % tree)
        topology = test_corpus.discover('four-numa-7gpu')
        backend = self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.backends.load')).mock
        backend.return_value.discover.return_value = topology
        reads = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_gpu_p2p.topology.sysfs.read_pci_config',
            lambda *a: reads.append(a)))
        rc, out = self.run_cli('--config-file', path)
        self.assertEqual(1, rc)
        self.assertIn('Failure 0000:c1:00.0: bound to nvidia', lines(out))
        self.assertEqual([], reads)

    def test_table_as_nova_status_prints_it(self):
        tree = test_corpus.tree('four-numa-7gpu')
        rc, table = self.run_cli('--sysfs-root', tree, table=True)
        json_rc, checks = self.run_cli('--sysfs-root', tree)
        self.assertEqual((1, 1), (rc, json_rc))
        lines_ = table.splitlines()
        self.assertRegex(lines_[0], r'^\+-+\+$')
        title, rows = parse_table(table)
        self.assertEqual(report.TITLE, title)
        self.assertEqual([(c['check'], WORDS[c['result']]) for c in checks],
                         [(name, word) for name, word, _ in rows])
        # Details wrapped at 60 characters, the words unchanged.
        for check, (_, _, details) in zip(checks, rows):
            self.assertEqual(''.join(check['details'].split()),
                             ''.join(details.split()))
        self.assertIn('| Check: 0000:c1:00.0', table)
        self.assertIn('| Result: Failure', table)
        self.assertEqual('Failure: 1, Warning: 1, Success: 12', lines_[-1])

    def test_json_is_what_oslo_prints(self):
        """The same object oslo.upgradecheck prints for --json."""
        checks = [result.success('IOMMU', 'on'),
                  result.warning('ACS', 'unknown', 'run as root'),
                  result.failure('0000:c1:00.0', 'bound to nvidia', 'bind')]
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_upgradecheck.upgradecheck.CONF', types.SimpleNamespace(
                command=types.SimpleNamespace(json=True))))
        with contextlib.redirect_stdout(out):
            worst = report.Report(checks).check()
        self.assertEqual(out.getvalue().strip(), report.to_json(checks))
        self.assertEqual({'check': 'ACS', 'result': 1,
                          'details': 'unknown; fix: run as root'},
                         json.loads(report.to_json(checks))['checks'][1])
        # oslo's return code is the worst result; ours is 1 on a failure.
        self.assertEqual((FAIL, 1), (worst, report.exit_status(checks)))

    def test_exit_status(self):
        # A failure: 1, in the table and in --json.
        for table in (True, False):
            rc, _ = self.run_cli('--sysfs-root',
                                 test_corpus.tree('four-numa-7gpu'),
                                 table=table)
            self.assertEqual(1, rc)
        # Warnings only: 0, where nova-status would say 1.
        rc, checks = self.run_cli('--sysfs-root',
                                  test_corpus.tree('acs-redirect-switch'))
        self.assertEqual(0, rc)
        self.assertEqual({OK, WARN}, {c['result'] for c in checks})
        rc, checks = self.run_cli('--sysfs-root',
                                  test_corpus.tree('large-16gpu-8numa'))
        self.assertEqual((0, {OK}), (rc, {c['result'] for c in checks}))
        self.assertEqual(0, report.exit_status([]))
