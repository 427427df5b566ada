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

"""The guest agent: descriptions in, NCCL topology files out.

Descriptions come from the driver's own code (plan.decide and
topology_description.describe) on the corpus hosts and on the hand-made
host of test_guest_plan; the guest's sysfs is the tree firmware gives
such a guest (fixtures/guest_sysfs.py). Each pair's class in the file is
read the way NCCL's ncclTopoSetPaths computes it.
"""

import base64
import contextlib
import importlib.metadata
import io
import json
import os
import subprocess
import sys
from unittest import mock
from xml.etree import ElementTree

import fixtures

from lab import nccl_paths
from nova_gpu_p2p.guest import devices
from nova_gpu_p2p.guest import plan
from nova_gpu_p2p.guest import topology_description as td
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p_guest import atomic_file
from nova_gpu_p2p_guest import cli
from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import fw_cfg
from nova_gpu_p2p_guest import guest_sysfs as agent_sysfs
from nova_gpu_p2p_guest import input_file
from nova_gpu_p2p_guest import nccl
from nova_gpu_p2p_guest import nccl_env
from nova_gpu_p2p_guest import nccl_tree
from nova_gpu_p2p_guest import nccl_xml
from tests.fixtures import deadline
from tests.fixtures import guest_sysfs
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_corpus
from tests.unit import test_guest_plan as tgp

#: Where nova_gpu_p2p_guest is imported from (guest-agent/ in a checkout).
AGENT_SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(
    cli.__file__)))
INTEL_CPUINFO = ('processor\t: 0\nvendor_id\t: GenuineIntel\n'
                 'cpu family\t: 6\nmodel\t\t: 143\n'
                 'model name\t: Intel(R) Xeon(R) Platinum 8480+\n\n'
                 'processor\t: 1\nvendor_id\t: GenuineIntel\n')


def plan_description(host, addresses, numa='preferred'):
    """The description the driver gives a guest of ``addresses``."""
    nodes = sorted({n.id for n in host.topology.numa_nodes})
    guest = tgp.facts(host_node_of_cell=tuple(nodes),
                      used_pci_indexes=frozenset({0}), phys_bits=52)
    result = plan.decide(
        tgp.request(clique='auto', numa=numa),
        [devices.describe(a, host.topology) for a in addresses],
        host, guest, plan.Options())
    if result.guest_topology is None:
        return None
    return td.decode(result.guest_topology)


def corpus_description(name, partial=False):
    host = discovery.evaluate(test_corpus.discover(name),
                              test_corpus.make_conf())
    functions = host.topology.functions.values()
    gpus = sorted(f.address for f in functions if f.is_gpu)
    nics = sorted(f.address for f in functions
                  if f.is_nic and f.address.endswith('.0'))
    return plan_description(host, gpus[:2] if partial else gpus + nics)


def hand_made_description():
    return plan_description(tgp.host_gpus(),
                            (tgp.GPU_A, tgp.GPU_B, tgp.GPU_C, tgp.NIC),
                            numa='required')


def nccl_classes(description, addresses, sysfs_root, xml_text):
    """``{(busid, busid): class}`` NCCL gives GPU-GPU and GPU-NIC pairs.

    NCCL's own rules (:mod:`lab.nccl_paths`), on the
    guest's sysfs with the agent's file loaded first.
    """
    roles = [d['role'] for d in description['devices']]
    found = nccl_paths.pair_types(
        [a for a, r in zip(addresses, roles) if r == 'gpu'],
        [a for a, r in zip(addresses, roles) if r == 'nic'],
        sysfs_root=sysfs_root, topo_xml=xml_text)
    return {tuple(sorted(pair)): cls for pair, cls in found.items()}


class AgentBase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.sysfs = os.path.join(self.root, 'sys')
        self.proc = os.path.join(self.root, 'proc')
        os.makedirs(self.proc)
        with open(os.path.join(self.proc, 'cpuinfo'), 'w') as f:
            f.write(INTEL_CPUINFO)
        self.output = os.path.join(self.root, 'run', 'nvidia-topologyd',
                                   'virtualTopology.xml')

    def build(self, description, **kwargs):
        return guest_sysfs.build(self.sysfs, description, **kwargs)

    def run_agent(self, *argv):
        """(exit status, stdout, stderr) of the agent's main()."""
        out, err = io.StringIO(), io.StringIO()
        argv = ['--sysfs-root', self.sysfs, '--proc-root', self.proc,
                '--output', self.output] + list(argv)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(argv)
        return status, out.getvalue(), err.getvalue()

    def assertFailsWith(self, text, *argv):
        status, out, err = self.run_agent(*argv)
        self.assertEqual(2, status, out + err)
        self.assertEqual(1, len(err.splitlines()), err)
        self.assertIn(text, err)
        self.assertNotIn('Traceback', err)
        self.assertFalse(os.path.exists(self.output))
        directory = os.path.dirname(self.output)
        self.assertEqual([], os.listdir(directory)
                         if os.path.isdir(directory) else [])
        return err

    def written(self):
        with open(self.output) as f:
            return f.read()


class TestHandMadeHost(AgentBase):
    """The hand-made host: the exact file, field by field."""

    def test_exact_file(self):
        description = hand_made_description()
        addresses = self.build(description)
        status, out, err = self.run_agent()
        self.assertEqual(0, status, err)
        self.assertEqual('', err)
        self.assertEqual('wrote the NCCL topology of 3 GPUs and 1 NIC to '
                         '%s\n' % self.output, out)
        # Node 0's expander bus 253 (fd): buses fe and ff below it; node
        # 1's 250 (fa): fb and fc.
        self.assertEqual(['0000:fe:00.0', '0000:ff:00.0', '0000:fb:00.0',
                          '0000:fc:00.0'], addresses)
        cpu = ('arch="x86_64" vendor="GenuineIntel" familyid="6" '
               'modelid="143"')
        gpu = ('class="0x030200" vendor="0x10de" device="0x2330" '
               'subsystem_vendor="0x10de" subsystem_device="0x16c1"')
        self.assertEqual(
            '<system version="1" name="nova-gpu-p2p">\n'
            '  <cpu numaid="0" affinity="0f" %s>\n'
            # The host switch reports no link: NCCL's own defaults apply.
            '    <pci busid="ffff:00:00.0" class="0x060400">\n'
            '      <pci busid="0000:fe:00.0" %s/>\n'
            '      <pci busid="0000:ff:00.0" %s/>\n'
            '    </pci>\n'
            '  </cpu>\n'
            '  <cpu numaid="1" affinity="f0" %s>\n'
            '    <pci busid="0000:fb:00.0" %s/>\n'
            '    <pci busid="0000:fc:00.0" class="0x020000" '
            'vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" '
            'subsystem_device="0x0041"/>\n'
            '  </cpu>\n'
            '</system>\n' % (cpu, gpu, gpu, cpu, gpu),
            self.written())

    def test_classes_are_the_hosts(self):
        description = hand_made_description()
        addresses = self.build(description)
        self.assertEqual(0, self.run_agent()[0])
        self.assertEqual(
            {('0000:fe:00.0', '0000:ff:00.0'): 'PIX',
             ('0000:fb:00.0', '0000:fe:00.0'): 'SYS',
             ('0000:fb:00.0', '0000:ff:00.0'): 'SYS',
             ('0000:fc:00.0', '0000:fe:00.0'): 'SYS',
             ('0000:fc:00.0', '0000:ff:00.0'): 'SYS',
             ('0000:fb:00.0', '0000:fc:00.0'): 'PHB'},
            nccl_classes(description, addresses, self.sysfs,
                         self.written()))

    def test_output_to_stdout(self):
        self.build(hand_made_description())
        status, out, err = self.run_agent('--output', '-')
        self.assertEqual(0, status, err)
        self.assertTrue(out.startswith('<system version="1"'))
        self.assertEqual('', err)
        self.assertFalse(os.path.exists(self.output))

    def test_env(self):
        self.build(hand_made_description())
        status, out, err = self.run_agent('--env')
        self.assertEqual(0, status, err)
        # GPU_A-GPU_B (PIX on the host) are PHB in the plain guest, the
        # other GPU pairs SYS; GPU_C and the NIC are PHB on the host: no
        # GPUDirect RDMA to give.
        self.assertEqual(['NCCL_TOPO_FILE=%s' % self.output,
                          '# or, without the topology file: '
                          'NCCL_P2P_LEVEL=PHB'], out.splitlines())
        self.assertFalse(os.path.exists(self.output))

    def test_env_to_stdout_output(self):
        self.build(hand_made_description())
        status, out, _ = self.run_agent('--env', '--output', '-')
        self.assertEqual(0, status)
        self.assertNotIn('NCCL_TOPO_FILE', out)

    def test_fw_cfg_file(self):
        description = hand_made_description()
        self.build(description, fw_cfg=False)
        entry = os.path.join(self.root, 'entry')
        with open(entry, 'w') as f:
            f.write(td.encode(description) + '\n')
        status, _, err = self.run_agent('--fw-cfg', entry)
        self.assertEqual(0, status, err)
        self.assertIn('0000:fe:00.0', self.written())

    def test_fw_cfg_file_missing(self):
        entry = os.path.join(self.root, 'entry')
        self.assertFailsWith('cannot read %s: no such file' % entry,
                             '--fw-cfg', entry)


@hosts.add_host_tests
class TestCorpusHosts(AgentBase):
    """On every corpus host, NCCL's class of each pair is the host's."""

    def check(self, description):
        addresses = self.build(description)
        status, _, err = self.run_agent()
        self.assertEqual(0, status, err)
        self.assertEqual('', err)
        text = self.written()
        classes = nccl_classes(description, addresses, self.sysfs, text)
        roles = [d['role'] for d in description['devices']]
        found = {}
        for i, j, host_class in description['pairs']:
            if host_class == 'NV' or 'gpu' not in (roles[i], roles[j]) or (
                    {roles[i], roles[j]} - {'gpu', 'nic'}):
                continue
            pair = tuple(sorted((addresses[i], addresses[j])))
            found[pair] = (nccl.OF_HOST[host_class], classes[pair])
        self.assertEqual({p: want for p, (want, _) in found.items()},
                         {p: got for p, (_, got) in found.items()})
        self.assertTrue(found)
        self.assertLessEqual(set(found), set(classes))
        # Each device once, with its guest address and the host's link.
        tree = ElementTree.fromstring(text)
        leaves = {e.get('busid'): e for e in tree.iter('pci') if not len(e)}
        self.assertEqual(sorted(addresses), sorted(leaves))
        for address, device in zip(addresses, description['devices']):
            self.assertEqual(device['link_speed'],
                             leaves[address].get('link_speed'))
            self.assertEqual(device['class'], leaves[address].get('class'))
        self.assertEqual(
            sorted({str(d['numa_node']) for d in description['devices']}),
            sorted(c.get('numaid') for c in tree.findall('cpu')))
        for element in tree.iter('pci'):
            if len(element):
                self.assertTrue(element.get('busid').startswith('ffff:'))
        return classes

    def check_host(self, name):
        """The whole host, and a partial-host guest of two GPUs."""
        described = [d for d in (corpus_description(name, partial)
                                 for partial in (False, True))
                     if d is not None]
        self.assertTrue(described or name == 'gpu-on-cpuless-node')
        for number, description in enumerate(described):
            self.sysfs = os.path.join(self.root, 'sys%d' % number)
            self.output = os.path.join(self.root, 'out%d.xml' % number)
            self.check(description)

    def test_two_switch_levels_are_pxb(self):
        classes = self.check(corpus_description('pcie-2level-switch-pxb'))
        self.assertEqual({'PIX', 'PXB', 'PHB'}, set(classes.values()))

    def test_acs_redirect_hangs_the_device_off_the_cpu(self):
        description = corpus_description('acs-redirect-switch')
        self.assertEqual([['s0']] * 4,
                         [d['switches'] for d in description['devices']])
        classes = self.check(description)
        self.assertEqual(['PHB'] * 5 + ['PIX'], sorted(classes.values()))

    def test_sixteen_gpus_eight_nics(self):
        description = corpus_description('large-16gpu-8numa')
        self.assertEqual(24, len(description['devices']))
        classes = self.check(description)
        self.assertIn('PIX', classes.values())


class TestNeverATraceback(AgentBase):
    """Ctrl-C and a full disk end the boot-time unit in one line too."""

    def test_ctrl_c(self):
        with mock.patch.object(cli, 'run', side_effect=KeyboardInterrupt):
            self.assertEqual((130, '', 'nova-gpu-p2p-guest: interrupted\n'),
                             self.run_agent())

    def test_stdout_on_a_full_disk(self):
        # No fw_cfg entry: the agent says so on standard output.
        os.makedirs(self.sysfs)
        with open('/dev/full', 'w') as full:
            result = subprocess.run(
                [sys.executable, '-c', 'import sys; from nova_gpu_p2p_guest'
                 '.cli import main; sys.exit(main())',
                 '--sysfs-root', self.sysfs],
                env=dict(os.environ, PYTHONPATH=AGENT_SOURCE), stdout=full,
                stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual((2, ['nova-gpu-p2p-guest: [Errno 28] No space left '
                              'on device']),
                         (result.returncode, result.stderr.splitlines()))


class HandMadeBase(AgentBase):
    """The hand-made description, its entry and its devices' directories."""

    def setUp(self):
        super().setUp()
        self.description = hand_made_description()

    def build_entry(self, entry):
        self.build(self.description, entry=entry)

    def device_directory(self, index):
        """The guest sysfs directory of described device ``index``."""
        addresses = self.build(self.description)
        device = self.description['devices'][index]
        bus = device['bus_nr']
        return os.path.join(self.sysfs, 'devices', 'pci0000:%02x' % bus,
                            '0000:%02x:%02x.0' % (bus, device['slot']),
                            addresses[index])


class TestRefusals(HandMadeBase):

    def test_no_entry(self):
        self.build(self.description, fw_cfg=False)
        for extra in ((), ('--env',), ('--output', '-')):
            status, out, err = self.run_agent(*extra)
            self.assertEqual(0, status)
            self.assertEqual(cli.NO_TOPOLOGY + '\n', (out + err))
            self.assertFalse(os.path.exists(self.output))

    def test_no_fw_cfg_directory(self):
        status, out, _ = self.run_agent()
        self.assertEqual((0, cli.NO_TOPOLOGY + '\n'), (status, out))

    def test_not_base64(self):
        self.build_entry('{"version": 1}')
        self.assertFailsWith('bad topology description: not base64')

    def test_not_json(self):
        self.build_entry(base64.b64encode(b'version: 1').decode())
        self.assertFailsWith('bad topology description: not JSON')

    def test_unknown_version(self):
        self.description['version'] = 2
        self.build(self.description)
        self.assertFailsWith('the topology description is version 2; this '
                             'agent knows version 1 only')

    def test_bad_fields(self):
        for number, (change, message) in enumerate((
                (lambda d: d['devices'][1].update(slot=40), 'device 1: '
                 '"slot" must be an integer from 0 to 31'),
                (lambda d: d['devices'][0].update(switches=['s9']),
                 'device 0: "switches" must list IDs'),
                (lambda d: d['pairs'].append([0, 9, 'PIX']), 'pair [0, 9, '),
                (lambda d: d['pairs'].append([0, 1, 'CLOSE']), 'pair [0, '),
                (lambda d: d.update(devices=[]), '"devices" must be a list'),
                (lambda d: d['devices'][0].update(vendor='nvidia'),
                 '"vendor" must be a hex string'),
                (lambda d: d['switches']['s0'].update(link_speed='"<x>'),
                 'switch \'s0\': "link_speed"'),
                (lambda d: d['devices'].append(dict(d['devices'][0])),
                 'a second device on expander bus'),
                (lambda d: d.update(cpu={'vendor': 'GenuineIntel<',
                                         'familyid': 6, 'modelid': 143}),
                 'cpu: "vendor" must be a CPUID vendor string'),
                (lambda d: d.update(cpu={'vendor': 'GenuineIntel',
                                         'familyid': 6, 'modelid': '143'}),
                 'cpu: "modelid" must be an integer from 0 to 4095'))):
            description = json.loads(json.dumps(self.description))
            change(description)
            self.sysfs = os.path.join(self.root, 'sys-%d' % number)
            self.build_entry(base64.b64encode(json.dumps(
                description).encode()).decode())
            self.assertFailsWith(message)

    def test_vendor_and_class_mismatch(self):
        for index, name, value, message in (
                (2, 'vendor', '0x1002', 'device 2 (gpu on expander bus 250 '
                 'slot 0): 0000:fb:00.0 has vendor 0x1002, the description '
                 'says 0x10de'),
                (3, 'class', '0x010802', 'device 3 (nic on expander bus 250 '
                 'slot 1): 0000:fc:00.0 has class 0x010802')):
            self.sysfs = os.path.join(self.root, name)
            with open(os.path.join(self.device_directory(index), name),
                      'w') as f:
                f.write(value + '\n')
            self.assertFailsWith(message)

    def test_missing_device(self):
        os.rename(self.device_directory(2), os.path.join(self.root, 'gone'))
        self.assertFailsWith('device 2 (gpu on expander bus 250 slot 0) not '
                             'found: nothing below root port')

    def test_missing_root_port(self):
        self.description['devices'][0]['bus_nr'] = 200
        self.build(self.description)
        os.rename(os.path.join(self.sysfs, 'devices', 'pci0000:c8'),
                  os.path.join(self.root, 'gone'))
        self.assertFailsWith('device 0 (gpu on expander bus 200 slot 0) not '
                             'found: the guest has no root port')

    def test_failed_write_leaves_nothing(self):
        self.build(self.description)
        with mock.patch.object(atomic_file.os, 'replace',
                               side_effect=OSError(28, 'No space left')):
            self.assertFailsWith('cannot write %s: No space left'
                                 % self.output)

    def test_failed_write_keeps_the_old_file(self):
        self.build(self.description)
        os.makedirs(os.path.dirname(self.output))
        with open(self.output, 'w') as f:
            f.write('old')
        with mock.patch.object(atomic_file.os, 'fsync', side_effect=OSError(
                5, 'Input/output error')):
            status, _, err = self.run_agent()
        self.assertEqual(2, status)
        self.assertIn('Input/output error', err)
        self.assertEqual(['virtualTopology.xml'],
                         os.listdir(os.path.dirname(self.output)))
        self.assertEqual('old', self.written())

    def test_unexpected_error_is_one_line(self):
        self.build(self.description)
        with mock.patch.object(nccl_xml, 'render', side_effect=KeyError('x')):
            self.assertFailsWith('unexpected error: KeyError')

    def test_usage_error_exits_2(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            raised = self.assertRaises(SystemExit, cli.main, ['--bogus'])
        self.assertEqual(2, raised.code)


class TestHostileFiles(HandMadeBase):
    """A FIFO or /dev/zero where the agent reads is refused in one line.

    Each once hung the agent at boot (a FIFO nobody writes to) or made it
    read until memory ran out (``/dev/zero``); each run is time-bounded so
    that a regression fails instead of hanging.
    """

    def setUp(self):
        super().setUp()
        self.fifo = os.path.join(self.root, 'fifo')
        os.mkfifo(self.fifo)

    def assertRefused(self, path, why, *argv):
        deadline.run_briefly(self.assertFailsWith, 'nova-gpu-p2p-guest: '
                             'cannot read %s: %s' % (path, why), *argv)

    def replace(self, path, hostile):
        """``path`` becomes a FIFO, or a symbolic link to /dev/zero."""
        os.remove(path)
        if hostile == 'fifo':
            os.mkfifo(path)
        else:
            os.symlink('/dev/zero', path)

    def test_fw_cfg_option(self):
        for path in (self.fifo, '/dev/zero'):
            self.assertRefused(path, 'not a regular file', '--fw-cfg', path)

    def test_fw_cfg_entry(self):
        for hostile in ('fifo', 'zero'):
            self.sysfs = os.path.join(self.root, 'sys-' + hostile)
            self.build(self.description)
            entry = fw_cfg.entry_path(self.sysfs)
            self.replace(entry, hostile)
            self.assertRefused(entry, 'not a regular file')

    def test_fw_cfg_entry_beyond_what_the_driver_writes(self):
        entry = os.path.join(self.root, 'entry')
        with open(entry, 'w') as f:
            f.write('A' * (fw_cfg.MAX_ENTRY_SIZE + 1))
        self.assertRefused(entry, 'more than %d bytes'
                           % fw_cfg.MAX_ENTRY_SIZE, '--fw-cfg', entry)

    def test_device_attribute(self):
        for hostile in ('fifo', 'zero'):
            self.sysfs = os.path.join(self.root, 'sys-' + hostile)
            vendor = os.path.join(self.device_directory(2), 'vendor')
            self.replace(vendor, hostile)
            self.assertRefused(vendor, 'not a regular file')
        self.sysfs = os.path.join(self.root, 'sys-long')
        vendor = os.path.join(self.device_directory(2), 'vendor')
        with open(vendor, 'w') as f:
            f.write('0' * (input_file.MAX_ATTRIBUTE + 1))
        self.assertRefused(vendor, 'more than %d bytes'
                           % input_file.MAX_ATTRIBUTE)

    def test_numa_node_cpumap(self):
        self.build(self.description)
        nodes = os.path.join(self.sysfs, 'devices', 'system', 'node')
        for node in os.listdir(nodes):
            self.replace(os.path.join(nodes, node, 'cpumap'), 'fifo')
        status, _, err = deadline.run_briefly(self.run_agent)
        self.assertEqual(2, status, err)
        self.assertRegex(err, r'\Anova-gpu-p2p-guest: cannot read %s/node'
                         r'\d+/cpumap: not a regular file\n\Z' % nodes)

    def test_cpuinfo(self):
        self.build(self.description)
        cpuinfo = os.path.join(self.proc, 'cpuinfo')
        self.replace(cpuinfo, 'fifo')
        self.assertRefused(cpuinfo, 'not a regular file')


class TestHostCpu(AgentBase):
    """The host's CPU from the description wins over the guest's CPUID."""

    def test_host_cpu_written_whatever_the_guest_runs(self):
        description = hand_made_description()
        description['cpu'] = {'vendor': 'AuthenticAMD', 'familyid': 175,
                              'modelid': 17}
        self.build(description)
        self.assertEqual(0, self.run_agent()[0])
        cpus = ElementTree.fromstring(self.written()).findall('cpu')
        self.assertEqual(
            [('x86_64', 'AuthenticAMD', '175', '17')] * 2,
            [(c.get('arch'), c.get('vendor'), c.get('familyid'),
              c.get('modelid')) for c in cpus])

    def test_guest_cpu_without_the_hosts(self):
        self.build(hand_made_description())
        self.assertEqual(0, self.run_agent()[0])
        cpus = ElementTree.fromstring(self.written()).findall('cpu')
        self.assertEqual({('GenuineIntel', '6', '143')},
                         {(c.get('vendor'), c.get('familyid'),
                           c.get('modelid')) for c in cpus})


class TestTree(base.TestCase):

    def description(self, switches, pairs, nodes=None):
        count = len(switches)
        return {'version': 1, 'switches': {
            s: {'link_speed': None, 'link_width': None}
            for chain in switches for s in chain},
            'devices': [{'bus_nr': 254, 'slot': i, 'role': 'gpu',
                         'numa_node': (nodes or [0] * count)[i],
                         'switches': chain}
                        for i, chain in enumerate(switches)],
            'pairs': pairs}

    def test_cut_below_the_redirecting_level(self):
        """ACS above one of two sub-switches: cut that sub-switch off."""
        tree = nccl_tree.Tree(self.description(
            [['s0', 's1'], ['s0', 's1'], ['s0', 's2'], ['s0', 's2']],
            [[0, 1, 'PIX'], [0, 2, 'PHB'], [0, 3, 'PHB'], [1, 2, 'PHB'],
             [1, 3, 'PHB'], [2, 3, 'PIX']]))
        self.assertEqual([], tree.reconcile())
        self.assertEqual(['PIX', 'PHB', 'PHB', 'PHB', 'PHB', 'PIX'],
                         [tree.nccl_class(i, j) for i, j in (
                             (0, 1), (0, 2), (0, 3), (1, 2), (1, 3),
                             (2, 3))])

    def test_what_cannot_be_shown_is_returned(self):
        tree = nccl_tree.Tree(self.description(
            [[], []], [[0, 1, 'SYS']]))
        self.assertEqual([(0, 1, 'SYS', 'PHB')], tree.reconcile())

    def test_nv_and_node(self):
        tree = nccl_tree.Tree(self.description(
            [[], [], []], [[0, 1, 'NV'], [0, 2, 'NODE'], [1, 2, 'PHB']]))
        self.assertEqual([], tree.reconcile())
        self.assertEqual({(0, 2): 'PHB', (1, 2): 'PHB'}, tree.expected)

    def test_unlike_pairs_noted(self):
        description = hand_made_description()
        description['pairs'] = [[0, 2, 'PHB']] + [
            p for p in description['pairs'] if p[:2] != [0, 2]]
        root = self.useFixture(fixtures.TempDir()).path
        guest_sysfs.build(root, description)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(
                io.StringIO()):
            status = cli.main(['--sysfs-root', root, '--output', '-'])
        self.assertEqual(0, status)
        self.assertEqual('note: NCCL sees SYS between 0000:fe:00.0 and '
                         '0000:fb:00.0, the host PHB\n', err.getvalue())


class TestEnvLevels(base.TestCase):

    def test_no_level_when_the_host_mixes(self):
        description = corpus_description('acs-redirect-switch')
        self.assertIsNone(nccl_env.level_for(description, ('gpu', 'gpu')))
        self.assertIn('# NCCL_P2P_LEVEL: no level alone gives the host\'s '
                      'choices; use the topology file',
                      nccl_env.env_lines(description, '/x'))

    def test_gdr_level(self):
        description = corpus_description('large-16gpu-8numa')
        # Each GPU pair and its NIC share a switch, on one of 8 nodes:
        # PHB would also allow GPU-NIC pairs of one node that the host
        # keeps apart, if there were any; here there are none.
        self.assertEqual('PHB',
                         nccl_env.level_for(description, ('gpu', 'nic')))

    def test_default_needs_no_line(self):
        description = corpus_description('four-numa-7gpu')
        self.assertEqual(['NCCL_TOPO_FILE=/x'],
                         nccl_env.env_lines(description, '/x'))


class TestCpuAndModule(base.TestCase):

    def cpu_type(self, text):
        root = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(root, 'cpuinfo'), 'w') as f:
            f.write(text)
        return agent_sysfs.cpu_type(root)

    def test_cpu_types(self):
        self.assertEqual(
            [('arch', 'x86_64'), ('vendor', 'GenuineIntel'),
             ('familyid', '6'), ('modelid', '143')],
            self.cpu_type(INTEL_CPUINFO))
        # Zen 4 (family 0x19): NCCL's base + (extended << 4), 0xf + 0xa0.
        self.assertEqual(
            [('arch', 'x86_64'), ('vendor', 'AuthenticAMD'),
             ('familyid', '175'), ('modelid', '17')],
            self.cpu_type('vendor_id\t: AuthenticAMD\ncpu family\t: 25\n'
                          'model\t\t: 17\n'))
        self.assertEqual([('arch', 'arm64')], self.cpu_type(
            'processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n'))
        self.assertEqual([('arch', 'ppc64')],
                         self.cpu_type('processor\t: 0\ncpu\t\t: POWER9\n'))
        self.assertEqual([], self.cpu_type(''))

    def test_cpu_type_from_the_head_of_a_long_cpuinfo(self):
        """Hundreds of vCPUs: the first processor, the rest unread."""
        rest = 'processor\t: 1\nflags\t\t: %s\n\n' % ('x' * 1000)
        self.assertEqual(
            [('arch', 'x86_64'), ('vendor', 'GenuineIntel'),
             ('familyid', '6'), ('modelid', '143')],
            self.cpu_type(INTEL_CPUINFO + '\n' + rest * 500))

    def test_module_loaded_only_for_the_real_sys(self):
        calls = []
        with mock.patch.object(fw_cfg.os.path, 'isdir', return_value=False):
            fw_cfg.read_entry('/sys', None, load=calls.append)
            fw_cfg.read_entry('/elsewhere', None, load=calls.append)
        self.assertEqual(['/sys/firmware/qemu_fw_cfg'], calls)

    def test_modprobe_fails(self):
        failed = subprocess.CompletedProcess(
            [], 1, stderr='modprobe: FATAL: Module qemu_fw_cfg not found in '
                          'directory /lib/modules/6.1.0\n')
        with mock.patch.object(fw_cfg.shutil, 'which',
                               return_value='/sbin/modprobe'), \
                mock.patch.object(fw_cfg.subprocess, 'run',
                                  return_value=failed):
            error = self.assertRaises(errors.Problem, fw_cfg.load_module,
                                      '/sys/firmware/qemu_fw_cfg')
        self.assertEqual(
            'cannot read fw_cfg: /sys/firmware/qemu_fw_cfg is absent and '
            '"modprobe qemu_fw_cfg" failed (modprobe: FATAL: Module '
            'qemu_fw_cfg not found in directory /lib/modules/6.1.0); load '
            'the qemu_fw_cfg kernel module (CONFIG_FW_CFG_SYSFS) or give '
            '--fw-cfg FILE', str(error))
        with mock.patch.object(fw_cfg.shutil, 'which', return_value=None):
            error = self.assertRaises(errors.Problem, fw_cfg.load_module, '/x')
        self.assertIn('(modprobe not found)', str(error))

    def test_modprobe_works_without_a_device(self):
        """Not a QEMU guest: the module loads, no directory, no entry."""
        done = subprocess.CompletedProcess([], 0, stderr='')
        with mock.patch.object(fw_cfg.shutil, 'which',
                               return_value='/sbin/modprobe'), \
                mock.patch.object(fw_cfg.subprocess, 'run',
                                  return_value=done) as run, \
                mock.patch.object(fw_cfg.time, 'sleep'):
            self.assertIsNone(fw_cfg.load_module('/nonexistent'))
        self.assertEqual(['/sbin/modprobe', 'qemu_fw_cfg'],
                         run.call_args[0][0])


class TestOutputToAStream(AgentBase):
    """Issue 35 item 2: never "wrote" where no file was written."""

    def test_link_to_a_device_says_no_file_written(self):
        self.build(hand_made_description())
        os.makedirs(os.path.dirname(self.output))
        os.symlink('/dev/null', self.output)
        status, out, err = self.run_agent()
        self.assertEqual(0, status, err)
        self.assertEqual('sent the NCCL topology of 3 GPUs and 1 NIC to %s '
                         '(a pipe or device: no file written)\n'
                         % self.output, out)


class TestVersion(base.TestCase):

    def test_version_is_the_installed_distributions(self):
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            exc = self.assertRaises(SystemExit, cli.main, ['--version'])
        self.assertEqual(0, exc.code)
        self.assertEqual('nova-gpu-p2p-guest %s\n'
                         % importlib.metadata.version('nova-gpu-p2p-guest'),
                         out.getvalue())

    def test_not_installed(self):
        out = io.StringIO()
        with mock.patch('importlib.metadata.version', side_effect=(
                importlib.metadata.PackageNotFoundError('x'))), \
                mock.patch('sys.stdout', out):
            self.assertRaises(SystemExit, cli.main, ['--version'])
        self.assertEqual('nova-gpu-p2p-guest unknown (not installed: run '
                         'from a source tree)\n', out.getvalue())
