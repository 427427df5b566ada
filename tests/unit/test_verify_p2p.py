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

"""``nova-gpu-p2p-guest verify-p2p`` against the stand-in CUDA driver.

Each test runs the command as systemd would, a process of its own, on
tests/fixtures/cuda/fake_cuda.c loaded through the agent's real ctypes
binding: devices backed by host memory, healthy or with one of the faults
the check exists for (NVIDIA/nccl#2335's private mirror, corruption on
one path, a peer copy that never returns, no peer access, no driver).
"""

import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import termios

import fixtures

from lab import verify_p2p_bench
from nova_gpu_p2p_guest import cuda
from nova_gpu_p2p_guest import nccl_conf
from nova_gpu_p2p_guest import p2p_probe
from nova_gpu_p2p_guest import p2p_verify
from nova_gpu_p2p_guest import watchdog
from tests.fixtures import fake_cuda
from tests.unit import base
from tests.unit import test_guest_agent

TENANT_CONF = 'NCCL_DEBUG=WARN\nNCCL_P2P_DISABLE=0\n'
#: A user's nccl.conf as people write them (issue 42 item 1): a UTF-8
#: byte order mark and comment, a Latin-1 byte, Windows line ends, no
#: final newline, and more than a sysfs attribute's 64 KiB.
USER_BYTES = ('\ufeff# r\u00e9glages de l\u2019\u00e9quipe\n'.encode()
              + b'# caf\xe9 (Latin-1)\r\nNCCL_DEBUG=INFO\r\n'
              + b'#' * (80 * 1024) + b'\nNCCL_SOCKET_IFNAME=eth0')
#: A shared library that loads and is no CUDA driver.
LIBC = ctypes.util.find_library('c')
#: The stand-in's PCI addresses: GPU n at bus 0x18 + 0x10 n.
ADDRESS = '0000:%02x:00.0'


#: Every path of a pair passed.
PASSED = ('passed',) * len(p2p_probe.PATHS)


def gpu(index: int) -> str:
    return 'GPU %d (%s)' % (index, ADDRESS % (0x18 + 0x10 * index))


def ordered_pairs(gpus: int) -> list:
    return [[a, b] for a in range(gpus) for b in range(gpus) if a != b]


class StandInCase(base.TestCase):
    """The command run on the stand-in, and what to check of a run."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.result = os.path.join(self.tmp, 'run', 'p2p-verification.json')
        self.conf = os.path.join(self.tmp, 'nccl.conf')
        self.console = os.path.join(self.tmp, 'console')
        with open(self.conf, 'w') as f:
            f.write(TENANT_CONF)
        open(self.console, 'w').close()

    def verify(self, *options, library=None, timeout=120, env=None,
               **stand_in):
        """(exit status, stdout, stderr, result) of one run."""
        env = dict(os.environ, PYTHONPATH=test_guest_agent.AGENT_SOURCE,
                   **fake_cuda.environment(**stand_in), **(env or {}))
        done = subprocess.run(
            [sys.executable, '-m', 'nova_gpu_p2p_guest', 'verify-p2p',
             '--library', library or fake_cuda.library(),
             '--result', self.result, '--nccl-conf', self.conf,
             '--console', self.console, '--mib', '1'] + list(options),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, env=env, timeout=timeout)
        result = None
        if os.path.exists(self.result):
            with open(self.result) as f:
                result = json.load(f)
        return done.returncode, done.stdout, done.stderr, result

    def read(self, path):
        with open(path) as f:
            return f.read()

    def paths(self, result):
        """{(src, dst): (copy engine, SM stores, SM loads statuses)}."""
        return {(e['src'], e['dst']): tuple(e[path]['status']
                                            for path in p2p_probe.PATHS)
                for e in result['pairs']}

    def assert_untouched(self):
        self.assertEqual(TENANT_CONF, self.read(self.conf))
        self.assertEqual('', self.read(self.console))

    def assert_p2p_disabled(self, stderr, failed):
        """NCCL reads NCCL_P2P_DISABLE=1 first, the tenant's lines kept.

        Each failed pair is named once on stderr and on the console.
        """
        conf = self.read(self.conf)
        self.assertEqual('1', nccl_reads(conf)['NCCL_P2P_DISABLE'])
        self.assertTrue(conf.endswith(TENANT_CONF))
        for text in (stderr, self.read(self.console)):
            lines = [line for line in text.splitlines()
                     if 'GPU P2P FAILED' in line]
            self.assertEqual(len(failed), len(lines), text)
            for pair, line in zip(failed, lines):
                self.assertIn('%s -> %s: ' % (gpu(pair[0]), gpu(pair[1])),
                              line)
            self.assertIn('set NCCL_P2P_DISABLE=1 in %s; the result is in '
                          '%s' % (self.conf, self.result), text)


class VerifyP2PTest(StandInCase):

    def test_healthy_8_gpus_pass_56_pairs_on_every_path(self):
        status, out, err, result = self.verify(gpus=8)
        self.assertEqual((0, ''), (status, err))
        self.assertEqual('passed', result['status'])
        self.assertEqual(
            {tuple(p): PASSED for p in ordered_pairs(8)},
            self.paths(result))
        for entry in result['pairs']:
            for path in p2p_probe.PATHS:
                self.assertEqual(1 << 20, entry[path]['bytes'])
                self.assertGreater(entry[path]['gbps'], 0)
        self.assertEqual([], result['failures'])
        self.assertEqual([ADDRESS % (0x18 + 0x10 * i) for i in range(8)],
                         [g['pci_bus_id'] for g in result['gpus']])
        self.assertIn('GPU P2P verified: 56 ordered pairs of 8 GPUs, copy '
                      'engine, SM stores and SM loads, 1 MiB each', out)
        self.assert_untouched()

    def test_private_mirror_on_one_pair(self):
        status, out, err, result = self.verify(gpus=8, mode='mirror',
                                               pair='3:6')
        self.assertEqual(1, status)
        self.assertEqual('failed', result['status'])
        expected = {tuple(p): PASSED for p in ordered_pairs(8)}
        expected[3, 6] = ('failed',) * 3
        self.assertEqual(expected, self.paths(result))
        # GPU 6's SMs loading from GPU 3 read 3's private copy.
        self.assertEqual(1, len(result['failures']))
        self.assertTrue(result['failures'][0].startswith(
            '%s -> %s: copy engine failed: nothing arrived: the owner reads '
            'back its cleared buffer (the writes went somewhere it never '
            'reads); SM stores failed: nothing arrived: the owner reads '
            'back its cleared buffer (the writes went somewhere it never '
            'reads); SM loads failed: 16 of 16 chunks of 64 KiB differ'
            % (gpu(3), gpu(6))), result['failures'])
        self.assert_p2p_disabled(err, [(3, 6)])
        self.assertIn(gpu(3) + ' -> ' + gpu(6), self.read(self.conf))
        self.assertTrue(result['nccl_p2p_disabled_by_this_check'])

    def test_mirror_on_every_pair(self):
        status, _, err, result = self.verify(gpus=3, mode='mirror')
        self.assertEqual(1, status)
        self.assertEqual({tuple(p): ('failed',) * 3
                          for p in ordered_pairs(3)}, self.paths(result))
        self.assert_p2p_disabled(err, ordered_pairs(3))

    def check_one_path_corrupt(self, mode, bad):
        status, _, err, result = self.verify(gpus=4, mode=mode, pair='1:2')
        self.assertEqual(1, status)
        entry = [e for e in result['pairs'] if (e['src'], e['dst']) == (1, 2)]
        self.assertEqual(
            {path: 'failed' if path == bad else 'passed'
             for path in p2p_probe.PATHS},
            {path: entry[0][path]['status'] for path in p2p_probe.PATHS})
        # One bit flipped a third of the way into the 1 MiB buffer.
        self.assertEqual('1 of 16 chunks of 64 KiB differ, the first at '
                         'byte %d of the buffer' % ((1 << 20) // 3),
                         entry[0][bad]['detail'])
        self.assertEqual(11, sum(1 for e in result['pairs'] if {
            e[path]['status'] for path in p2p_probe.PATHS} == {'passed'}))
        self.assert_p2p_disabled(err, [(1, 2)])
        return result['failures'][0]

    def test_corruption_on_the_copy_engine_only(self):
        failure = self.check_one_path_corrupt('corrupt-ce', 'copy_engine')
        self.assertIn(': copy engine failed: ', failure)
        self.assertNotIn('SM ', failure)

    def test_corruption_on_sm_stores_only(self):
        failure = self.check_one_path_corrupt('corrupt-sm', 'sm_stores')
        self.assertIn(': SM stores failed: ', failure)
        self.assertNotIn('copy engine', failure)
        self.assertNotIn('SM loads', failure)

    def test_corruption_on_sm_loads_only(self):
        """Issue 42 item 12: GPU 2's SMs loading from GPU 1 get wrong data.

        NCCL reads from peers (NCCL_P2P_READ_ENABLE); stores and the copy
        engine are fine.
        """
        failure = self.check_one_path_corrupt('corrupt-ld', 'sm_loads')
        self.assertIn(': SM loads failed: ', failure)
        self.assertNotIn('copy engine', failure)
        self.assertNotIn('SM stores', failure)

    def test_a_peer_copy_that_never_returns(self):
        """Reported within its bound.

        The pairs without either GPU are still checked, by a fresh process.
        """
        status, _, err, result = self.verify(
            '--timeout', '5', gpus=4, mode='hang', pair='2:1', timeout=90)
        self.assertEqual(1, status)
        entries = {(e['src'], e['dst']): e for e in result['pairs']}
        self.assertEqual(
            {'status': 'hung',
             'detail': 'cuMemcpyPeer did not return within 5 s'},
            entries[2, 1]['copy_engine'])
        self.assertEqual('not_checked', entries[2, 1]['sm_stores']['status'])
        paths = self.paths(result)
        # Checked in CUDA's order before the hang, and after it those
        # without GPU 1 or 2.
        for pair in [(0, 1), (0, 2), (0, 3), (1, 0), (1, 2), (1, 3), (2, 0),
                     (3, 0)]:
            self.assertEqual(PASSED, paths[pair], pair)
        for pair in [(2, 3), (3, 1), (3, 2)]:
            self.assertEqual(('not_checked',) * 3, paths[pair])
            self.assertIn('after GPU 2 -> GPU 1 hung',
                          entries[pair]['copy_engine']['detail'])
        self.assert_p2p_disabled(err, [(2, 1), (2, 3), (3, 1), (3, 2)])

    def test_a_driver_that_kills_the_process(self):
        status, _, err, result = self.verify(gpus=2, mode='crash',
                                             pair='1:0')
        self.assertEqual(1, status)
        entries = {(e['src'], e['dst']): e for e in result['pairs']}
        self.assertEqual(PASSED, self.paths(result)[0, 1])
        self.assertEqual(
            {'status': 'failed',
             'detail': 'the probe died in cuMemcpyPeer (exit status -11)'},
            entries[1, 0]['copy_engine'])
        self.assert_p2p_disabled(err, [(1, 0)])

    def test_no_peer_access(self):
        status, out, err, result = self.verify(gpus=4, mode='no-peer')
        self.assertEqual((0, ''), (status, err))
        self.assertEqual('skipped', result['status'])
        self.assertEqual(ordered_pairs(4), result['not_peer_capable'])
        self.assertEqual(
            'nova-gpu-p2p-guest: verify-p2p skipped: CUDA says none of the '
            '4 GPUs can access another: NCCL does not use P2P here, nothing '
            'to verify\n', out)
        self.assert_untouched()

    def test_no_peer_access_on_one_pair(self):
        status, out, err, result = self.verify(gpus=3, mode='no-peer',
                                               pair='2:1')
        self.assertEqual((0, ''), (status, err))
        self.assertEqual('passed', result['status'])
        self.assertEqual([[2, 1]], result['not_peer_capable'])
        self.assertNotIn((2, 1), self.paths(result))
        self.assertIn('; 1 ordered pairs CUDA gives no peer access (NCCL '
                      'does not use P2P there): 2 -> 1', out)
        self.assert_untouched()

    def test_skips(self):
        missing = os.path.join(self.tmp, 'libcuda.so.1')
        for stand_in, said in [
                ({'library': missing},
                 'no NVIDIA driver: %s does not load' % missing),
                ({'mode': 'no-device'},
                 'no GPU: the NVIDIA driver sees none'),
                ({'gpus': 0}, 'no GPU: GPU P2P needs two'),
                ({'gpus': 1}, 'one GPU: GPU P2P needs two')]:
            status, out, err, result = self.verify(**stand_in)
            self.assertEqual(
                (0, 'nova-gpu-p2p-guest: verify-p2p skipped: %s\n' % said,
                 ''), (status, out, err))
            self.assertEqual(('skipped', said),
                             (result['status'], result['reason']))
            self.assert_untouched()

    def test_the_driver_failing_to_start_fails_closed(self):
        # The stand-in refuses more than 16 GPUs in cuInit.
        status, _, err, result = self.verify(gpus=17)
        self.assertEqual(1, status)
        self.assertEqual(['cuInit: CUDA_ERROR_INVALID_VALUE (1)'],
                         result['failures'])
        self.assertEqual('1', nccl_reads(self.read(self.conf))[
            'NCCL_P2P_DISABLE'])

    def test_data_differs_per_pair_and_per_run(self):
        log = os.path.join(self.tmp, 'writes.log')
        self.verify(gpus=4, log=log)
        self.verify(gpus=4, log=log)
        runs = [line.split() for line in self.read(log).splitlines()]
        self.assertEqual(72, len(runs))
        first, second = runs[:36], runs[36:]
        for run in first, second:
            # Every path of a pair moves the same data...
            by_pair = {}
            for path, src, dst, size, digest in run:
                by_pair.setdefault((src, dst), set()).add(digest)
                self.assertEqual(str(1 << 20), size)
            self.assertEqual([1] * 12, [len(d) for d in by_pair.values()])
            # ... and no two pairs the same.
            self.assertEqual(12, len({d for (d,) in by_pair.values()}))
        self.assertFalse({r[4] for r in first} & {r[4] for r in second})

    def test_a_later_pass_removes_only_its_own_lines(self):
        self.verify(gpus=2, mode='corrupt-sm')
        self.assertIn(nccl_conf.SETTING.decode(), self.read(self.conf))
        status, out, _, result = self.verify(gpus=2)
        self.assertEqual((0, 'passed'), (status, result['status']))
        self.assertIn('removed the NCCL_P2P_DISABLE an earlier check set in '
                      '%s' % self.conf, out)
        self.assertEqual(TENANT_CONF, self.read(self.conf))

    def test_nccl_conf_not_writable(self):
        """The failure is still said, and that P2P stays on."""
        os.remove(self.conf)
        os.mkdir(self.conf)
        status, _, err, result = self.verify(gpus=2, mode='mirror')
        self.assertEqual(1, status)
        self.assertEqual(2, err.count('GPU P2P FAILED'))
        self.assertIn('nova-gpu-p2p-guest: NCCL P2P is NOT turned off: '
                      'cannot read %s: ' % self.conf, err)
        self.assertEqual(err, self.read(self.console))
        self.assertFalse(result['nccl_p2p_disabled_by_this_check'])

    def test_a_console_nobody_reads_is_not_waited_on(self):
        os.remove(self.console)
        os.mkfifo(self.console)
        status, _, err, result = self.verify(gpus=2, mode='corrupt-ce',
                                             pair='0:1')
        self.assertEqual((1, 'failed'), (status, result['status']))
        self.assertEqual(1, err.count('GPU P2P FAILED'))

    def test_result_on_standard_output(self):
        self.result = '-'
        status, out, err, _ = self.verify(gpus=2)
        self.assertEqual(0, status)
        self.assertEqual('passed', json.loads(out)['status'])
        self.assertIn('GPU P2P verified: 2 ordered pairs', err)

    def test_bad_options(self):
        for option, value, said in [
                ('--mib', '0', "'0' is not a whole number from 1 to 65536"),
                ('--timeout', 'soon', "'soon' is not a number from 0.1 to "
                                      "86400")]:
            status, out, err, result = self.verify(option, value, gpus=2)
            # argparse's usage, then one line naming the option.
            self.assertEqual(2, status)
            self.assertEqual('nova-gpu-p2p-guest verify-p2p: error: '
                             'argument %s: %s' % (option, said),
                             err.splitlines()[-1])
            self.assertIsNone(result)


class HostileInputTest(StandInCase):
    """Issue 42: a tenant's files, a driver's output, the options."""

    def write_conf(self, data):
        with open(self.conf, 'wb') as f:
            f.write(data)

    def read_bytes(self, path):
        with open(path, 'rb') as f:
            return f.read()

    def test_any_bytes_in_nccl_conf_turn_p2p_off_and_come_back(self):
        """Item 1: the user's bytes are kept exactly, both ways."""
        self.write_conf(USER_BYTES)
        status, _, err, result = self.verify(gpus=2, mode='corrupt-ce',
                                             pair='0:1')
        self.assertEqual(1, status, err)
        self.assertTrue(result['nccl_p2p_disabled_by_this_check'], err)
        data = self.read_bytes(self.conf)
        self.assertTrue(data.startswith(nccl_conf.MARK), data[:200])
        self.assertEqual('1', nccl_reads(data.decode('latin-1'))[
            'NCCL_P2P_DISABLE'])
        self.assertTrue(data.endswith(USER_BYTES))
        status, out, _, _ = self.verify(gpus=2)
        self.assertEqual(0, status)
        self.assertIn('removed the NCCL_P2P_DISABLE', out)
        self.assertEqual(USER_BYTES, self.read_bytes(self.conf))

    def test_nccl_conf_written_through_a_link_only_root_made(self):
        """Item 1: /etc/nccl.conf kept elsewhere by its administrator."""
        real = os.path.join(self.tmp, 'managed', 'nccl.conf')
        os.mkdir(os.path.dirname(real))
        os.rename(self.conf, real)
        os.symlink(os.path.join('managed', 'nccl.conf'), self.conf)
        status, _, err, result = self.verify(gpus=2, mode='corrupt-ce',
                                             pair='0:1')
        self.assertEqual(1, status)
        self.assertTrue(result['nccl_p2p_disabled_by_this_check'], err)
        self.assertTrue(os.path.islink(self.conf))
        self.assertTrue(self.read(real).endswith(TENANT_CONF))
        self.assertEqual('1', nccl_reads(self.read(real))['NCCL_P2P_DISABLE'])

    def test_a_link_another_user_made_is_not_followed(self):
        """Item 10: in a directory others can write, sticky or not."""
        if os.geteuid() != 0:
            self.skipTest('making another user\'s link needs root')
        for mode in (0o1777, 0o777):
            os.chmod(self.tmp, mode)
            victim = os.path.join(self.tmp, 'victim')
            with open(victim, 'w') as f:
                f.write('root only\n')
            os.remove(self.conf)
            os.symlink(victim, self.conf)
            os.lchown(self.conf, 4242, -1)
            status, _, err, result = self.verify(gpus=2, mode='corrupt-ce',
                                                 pair='0:1')
            self.assertEqual(1, status)
            self.assertIn('NCCL P2P is NOT turned off: cannot write %s: '
                          'refusing %s: a symbolic link, not followed: '
                          'owned by uid 4242' % (self.conf, self.conf), err)
            self.assertEqual('root only\n', self.read(victim))

    def test_a_multi_line_death_stays_one_line_everywhere(self):
        """Item 2: a fault handler's stack on stderr, then a pass."""
        status, _, err, result = self.verify(
            gpus=2, mode='crash', pair='1:0',
            env={'PYTHONFAULTHANDLER': '1'})
        self.assertEqual(1, status)
        self.assertIn('\n  File "',
                      result['pairs'][1]['copy_engine']['detail'])
        for text in (err, self.read(self.console)):
            for line in text.splitlines():
                self.assertTrue(line.startswith('nova-gpu-p2p-guest: '),
                                line)
        for line in self.read(self.conf).splitlines():
            self.assertTrue(
                line.startswith(nccl_conf.MARK.decode()) or line in (
                    nccl_conf.SETTING.decode(), 'NCCL_DEBUG=WARN',
                    'NCCL_P2P_DISABLE=0'), line)
        status, out, _, _ = self.verify(gpus=2)
        self.assertEqual(0, status)
        self.assertEqual(TENANT_CONF, self.read(self.conf))

    def test_a_read_back_that_copies_nothing_fails(self):
        """Item 3: GPU 2 -> 1 would pass on GPU 2 -> 0's data."""
        status, _, err, result = self.verify(gpus=3, mode='no-readback',
                                             pair='2:1')
        self.assertEqual(1, status)
        expected = {tuple(p): PASSED for p in ordered_pairs(3)}
        expected[2, 1] = ('failed',) * 3
        self.assertEqual(expected, self.paths(result))
        self.assertEqual(3, result['failures'][0].count(
            'the read-back copied nothing'))

    def test_a_driver_printing_while_a_copy_hangs_is_hung(self):
        """Item 4: output meanwhile does not restart the bound."""
        status, _, _, result = self.verify(
            '--timeout', '1', gpus=2, mode='hang-chatty', pair='1:0',
            timeout=60)
        self.assertEqual(1, status)
        self.assertEqual(
            {'status': 'hung',
             'detail': 'cuMemcpyPeer did not return within 1 s'},
            result['pairs'][1]['copy_engine'])

    def test_megabytes_without_a_newline_are_dropped(self):
        """Item 4: 16 MiB of driver output before the events."""
        status, _, err, result = self.verify(gpus=2, mode='flood')
        self.assertEqual((0, 'passed'), (status, result['status']), err)

    def assert_usage(self, said, option, *options, **stand_in):
        """Exit status 2, argparse's one line last; nothing touched."""
        status, out, err, result = self.verify(*options, **stand_in)
        self.assertEqual(2, status, err)
        self.assertEqual('nova-gpu-p2p-guest verify-p2p: error: argument '
                         '%s: %s' % (option, said), err.splitlines()[-1])
        self.assertTrue(err.splitlines()[0].startswith('usage: '), err)
        self.assertEqual(2, len(err.splitlines()) - err.count('\n  '), err)
        self.assertIsNone(result)
        self.assert_untouched()

    def test_options_refused_as_usage_errors(self):
        """Items 5 and 13: nothing turned off, one line each."""
        for option, value, said in [
                ('--setup-timeout', 'nan', "'nan' is not a number"),
                ('--timeout', 'inf', "'inf' is not a number"),
                ('--setup-timeout', '1e10', "'1e10' is not a number"),
                ('--timeout', '1' * 12, "'%s' is not a number" % ('1' * 12)),
                ('--mib', '\u0663', "'\u0663' is not a whole number"),
                ('--mib', '1_0', "'1_0' is not a whole number"),
                ('--timeout', '\u0665', "'\u0665' is not a number"),
                ('--library', '', "'' is not a file name"),
                ('--library', 'libcuda.so.1\nFAKE', "'libcuda.so.1\\nFAKE' "
                 "is not a file name"),
                ('--console', '', "'' is not a file name")]:
            status, _, err, result = self.verify(option, value, gpus=2)
            self.assertEqual(2, status, err)
            last = err.splitlines()[-1]
            self.assertTrue(last.startswith(
                'nova-gpu-p2p-guest verify-p2p: error: argument %s: %s'
                % (option, said)), last)
            self.assertIsNone(result)
            self.assert_untouched()

    def test_more_mib_than_a_gpu_holds(self):
        """Item 5: the caller's mistake, not a P2P failure."""
        self.assert_usage(
            '64 MiB: the check needs two buffers of that size on each GPU, '
            'and GPU 0 (%s) has 100 MiB' % (ADDRESS % 0x18), '--mib',
            '--mib', '64', gpus=2, memory_mib=100)

    def test_a_library_that_is_no_cuda_driver(self):
        """Item 5: the Python binary, libc: refused, nothing turned off."""
        self.assert_usage(
            '%s has no cuInit: not a CUDA driver library' % LIBC,
            '--library', library=LIBC, gpus=2)


def nccl_reads(text: str) -> dict:
    """What NCCL's setEnvFile makes of a config file.

    A line without "=" is skipped, the first assignment of a name wins.
    """
    found = {}
    for line in text.splitlines():
        if '=' in line:
            name, value = line.split('=', 1)
            found.setdefault(name, value)
    return found


class NcclConfTest(base.TestCase):

    def test_our_setting_wins_and_our_comments_set_nothing(self):
        text = nccl_conf.disabled(TENANT_CONF.encode(),
                                  '2026-11-27T05:40:46Z',
                                  ['GPU 0 -> GPU 1: a=b'])
        self.assertEqual({'NCCL_DEBUG': 'WARN', 'NCCL_P2P_DISABLE': '1'},
                         nccl_reads(text.decode()))
        self.assertTrue(text.endswith(TENANT_CONF.encode()))

    def test_one_block_however_often_it_fails(self):
        once = nccl_conf.disabled(TENANT_CONF.encode(), 'then', ['x'])
        twice = nccl_conf.disabled(once, 'now', ['y'])
        self.assertEqual(1, twice.count(nccl_conf.SETTING + b'\n'))
        self.assertNotIn(b'then', twice)
        self.assertEqual(TENANT_CONF.encode(), nccl_conf.without_ours(twice))

    def test_only_our_lines_are_removed(self):
        text = b'# mine\nNCCL_P2P_DISABLE=1\n'
        self.assertEqual(text, nccl_conf.without_ours(text))
        self.assertEqual(b'', nccl_conf.without_ours(b''))

    def test_any_failure_text_is_one_ascii_line(self):
        """Issue 42 item 2: a stack on stderr stays in the marked block."""
        text = nccl_conf.disabled(
            USER_BYTES, 'now', ['died: Fatal Python error\n\nThread\r  '
                                'File "x", line 1\n\u00e9\u202e'])
        ours = text[:-len(USER_BYTES)].split(b'\n')[:-1]
        self.assertEqual(4, len(ours), ours)
        for line in ours[:-1]:
            self.assertTrue(line.startswith(nccl_conf.MARK), line)
        self.assertEqual(nccl_conf.SETTING, ours[-1])
        b'\n'.join(ours).decode('ascii')
        self.assertEqual(USER_BYTES, nccl_conf.without_ours(text))


class WatchdogLinesTest(base.TestCase):
    """Issue 42 item 4: the child's output, read in bounded pieces."""

    def test_a_line_without_end_is_dropped_as_it_comes(self):
        lines = watchdog.Lines()
        event = b'{"ready": true}'
        found = lines.feed(b'{"call": "cuInit"}\n' + b'x' * 1000)
        for _ in range(256):  # 16 MiB in the pipe's pieces
            found += lines.feed(b'x' * 65536)
            self.assertLessEqual(len(lines.pending), watchdog.MAX_EVENT)
        found += lines.feed(b'x\n' + event + b'\n')
        self.assertEqual([b'{"call": "cuInit"}', event], found)


class ConsoleTest(base.TestCase):
    """The console may be slow, stopped or planted: never waited on."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_a_console_stopped_by_xoff_is_not_waited_on(self):
        """Issue 42 item 4: a serial console that takes nothing.

        In a process of its own, as the agent runs: the tests' eventlet
        would make os.write wait for the terminal itself.
        """
        main, tty = os.openpty()
        self.addCleanup(os.close, main)
        self.addCleanup(os.close, tty)
        termios.tcflow(tty, termios.TCOOFF)
        done = subprocess.run(
            [sys.executable, '-c', 'import sys\n'
             'from nova_gpu_p2p_guest import p2p_verify as v\n'
             'v.CONSOLE_STALL_SECONDS = 0.05\n'
             'print(v._console(sys.argv[1], ["x" * 200] * 1000))',
             os.ttyname(tty)],
            env=dict(os.environ, PYTHONPATH=test_guest_agent.AGENT_SOURCE),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=60)
        self.assertEqual(0, done.returncode, done.stdout)
        self.assertIn('took no output for 0.05 s', done.stdout)

    def test_a_link_another_user_planted_is_not_followed(self):
        """Issue 42 item 10: it would append to a root-owned file."""
        if os.geteuid() != 0:
            self.skipTest('making another user\'s link needs root')
        os.chmod(self.tmp, 0o1777)
        victim = os.path.join(self.tmp, 'shadow')
        with open(victim, 'w') as f:
            f.write('root:x:\n')
        console = os.path.join(self.tmp, 'console')
        os.symlink(victim, console)
        os.lchown(console, 4242, -1)
        self.assertEqual(
            'refusing %s: a symbolic link owned by uid 4242, not by this '
            'user (uid 0) or root, in a sticky directory others can write '
            'to' % console,
            p2p_verify._console(console, ['nova-gpu-p2p-guest: failed']))
        with open(victim) as f:
            self.assertEqual('root:x:\n', f.read())


class RotationTest(base.TestCase):

    def test_every_pair_its_own_offset(self):
        for size in (1 << 20, 3 << 20, 64 << 20):
            offsets = [p2p_probe.rotation(a, b, size)
                       for a, b in ordered_pairs(64)]
            self.assertEqual(len(offsets), len(set(offsets)))
            self.assertEqual({4}, {k % 16 for k in offsets})
            self.assertLess(max(offsets), size)


class BindingTest(base.TestCase):
    """What can be checked of the binding and the kernel without a GPU."""

    def test_symbols_are_the_ones_cuda_h_calls(self):
        """Each bound symbol is declared in cuda.h as its API's symbol.

        cuda.h maps cuMemAlloc to cuMemAlloc_v2, for one.
        """
        header = _cuda_h()
        if header is None:
            self.skipTest('no cuda.h (CUDA toolkit) here')
        with open(header) as f:
            text = f.read()
        maps = dict(re.findall(
            r'#define (cu\w+)\s+(?:__CUDA_API_PTDS\(|__CUDA_API_PTSZ\()?'
            r'(cu\w+)', text))
        for symbol in cuda.PROTOTYPES:
            self.assertIn('CUresult CUDAAPI %s(' % symbol.split('_v2')[0],
                          text)
            api = symbol[:-3] if symbol.endswith('_v2') else symbol
            self.assertEqual(symbol, maps.get(api, api), symbol)

    def test_kernel_assembles(self):
        ptxas = shutil.which('ptxas')
        if ptxas is None:
            self.skipTest('no ptxas (CUDA toolkit) here')
        source = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'kernel.ptx')
        with open(source, 'w') as f:
            f.write(p2p_probe.PTX)
        for arch in ('sm_75', 'sm_90'):
            done = subprocess.run(
                [ptxas, '--gpu-name', arch, '-o', os.devnull, source],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                universal_newlines=True, timeout=120)
            self.assertEqual(0, done.returncode, done.stdout)


def _cuda_h():
    for root in ['/usr/local/cuda/include', '/usr/include'] + sorted(
            os.path.join('/usr/local', d, 'include')
            for d in os.listdir('/usr/local') if d.startswith('cuda-')):
        if os.path.exists(os.path.join(root, 'cuda.h')):
            return os.path.join(root, 'cuda.h')
    return None


class BenchQuickTest(base.TestCase):
    """lab/verify_p2p_bench.py in its quick mode, as CI runs lab/."""

    def test_two_gpus_one_mib_one_round(self):
        result = verify_p2p_bench.run(gpus=2, mib=1, rounds=1)
        self.assertEqual(2, result['pairs'])
        # Two ordered pairs, three paths each.
        self.assertEqual(6 << 20, result['bytes_moved']['gpu_to_gpu'])
        self.assertGreater(result['stand_in_seconds'], 0)
        self.assertEqual(set(verify_p2p_bench.P2P_GBPS),
                         set(result['estimate_seconds']))
