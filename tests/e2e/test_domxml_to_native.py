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

"""Every corpus host x flavor kind through a real libvirtd.

The domain XML is the one Nova's in-process cloud defined with our
driver (written by :mod:`tests.e2e.generate_xml`, which
runs the functional ``test_xml_schema`` with ``NOVA_GPU_P2P_XML_DIR``);
it does not depend on the libvirt here, so it is made once and checked
against each installed stack (``tools/e2e/setup-stack.sh``).

Per document: ``virt-xml-validate`` with this stack's schema, then
``virsh domxml-to-native qemu-argv`` by the running libvirtd, whose
``-device`` list :mod:`qemu_argv` compares with the XML and with the
corpus host's own topology. libvirtd gets a copy with only the
adaptations this stack needs (:func:`qemu_argv.adaptations`):
``<numatune>`` nodesets mapped to node 0 (this machine may have one NUMA
node) and, where the daemon's host shows no VFIO, ``<driver
name='vfio'/>`` on hostdevs Nova left without one. Each test lists them
in its ``adaptations`` detail. :class:`HostdevRulesTest` checks the
stack's rules (:mod:`libvirt_rules`) against its libvirtd.

The stack is this machine's or the chroot ``setup-stack.sh sid`` made
(:mod:`stack`). Without its libvirtd (or without the XML) the tests skip
with one line; with ``NOVA_GPU_P2P_REQUIRE_TOOLS=1`` (CI) they fail.
"""

import dataclasses
import functools
import logging
import os
import shutil
import tempfile

from lxml import etree
from oslo_config import cfg
import testtools
from testtools import content

from lab import decision_quality
from nova_gpu_p2p import conf as gpu_p2p_conf
from nova_gpu_p2p.guest import topology_description
from nova_gpu_p2p.topology import sysfs
from tests.cloud import corpus_xml
from tests.fixtures import hosts
from tests.fixtures import libvirt_rules
from tests.fixtures import qemu_argv
from tests.fixtures import stack
from tests.fixtures import sysfs_builder

LOG = logging.getLogger(__name__)
#: The smallest q35 domain with one PCI hostdev as Nova writes it (no
#: ``<driver>``; ``%s``: where one goes).
HOSTDEV_DOMAIN = b"""<domain type='qemu'>
  <name>nova-gpu-p2p-e2e-hostdev-rules</name>
  <memory>131072</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x81' slot='0x00'
                       function='0x0'/></source>%s
    </hostdev>
  </devices>
</domain>"""


def corpus_locality(name: str) -> tuple[dict[str, int | None],
                                        dict[str, str]]:
    """Host NUMA node and root complex of every function of a corpus host.

    Read from the corpus description (each root complex's node, each
    function's place in the tree), not from our discovery code.
    """
    host = hosts.HOSTS[name]
    node_of = {rc.name: rc.numa_node for rc in host.root_complexes}
    complex_of = {address: path.split('/')[1] for address, path in
                  sysfs_builder.addresses(host).items()}
    return ({a: node_of[rc] for a, rc in complex_of.items()}, complex_of)


def fw_cfg_problems(xml: bytes, argv: str) -> list[str]:
    """The guest topology entry reaches QEMU whole, as ``-fw_cfg``."""
    entries = etree.fromstring(xml).findall(
        './sysinfo[@type="fwcfg"]/entry[@name="%s"]'
        % topology_description.ENTRY_NAME)
    wanted = ['-fw_cfg name=%s,string=%s' % (
        topology_description.ENTRY_NAME, entry.text) for entry in entries]
    return ['QEMU gets no %r' % w[:80] for w in wanted if w not in argv]


@functools.lru_cache(maxsize=None)
def _truth(name: str) -> decision_quality.HostTruth:
    """The corpus host's classes: the oracle's, and its NICs' from a scan."""
    tree = tempfile.mkdtemp(dir=sysfs_builder.scratch_dir())
    try:
        sysfs_builder.build(hosts.HOSTS[name], tree)
        conf = cfg.ConfigOpts()
        gpu_p2p_conf.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('sysfs_root', tree, group='gpu_p2p')
        topology = sysfs.SysfsBackend(
            conf, read_config=sysfs.read_config_direct).discover()
    finally:
        shutil.rmtree(tree)
    return decision_quality.topology_truth(hosts.EXPECTED[name], topology)


def nccl_share(name: str, xml: bytes) -> decision_quality.Share | None:
    """NCCL in this guest, with the guest agent, sees the host's classes.

    The guest's sysfs is the tree this XML gives it (as firmware numbers
    the buses below each expander), the agent reads the XML's fw_cfg
    entry, and NCCL's rules (:mod:`lab.nccl_paths`) must
    give every GPU-GPU and GPU-NIC pair of placed devices its host class.
    A device ``preferred`` left on the root bus (its host node has no
    guest cell) is not described, and no topology file can put two
    devices of one guest node on two host nodes: its pairs are not
    counted.
    """
    element = etree.fromstring(xml)
    if decision_quality.fw_cfg_description(element) is None:
        return None
    placed = {d.address for d in decision_quality.parse(element).devices
              if d.expander_bus is not None}
    truth = _truth(name)
    truth = dataclasses.replace(truth, nccl_links={
        pair: cls for pair, cls in truth.nccl_links.items()
        if pair <= placed})
    return decision_quality.nccl_with_agent(
        element, truth, decision_quality.run_guest_agent)


def need_stack(test: testtools.TestCase) -> None:
    """Skip (fail in CI) in one line where the stack is not there."""
    missing = stack.missing()
    if missing:
        if os.environ.get(stack.REQUIRE_TOOLS) == '1':
            test.fail('%s (%s=1)' % (missing, stack.REQUIRE_TOOLS))
        test.skipTest(missing)
    test.addDetail('libvirt', content.text_content(stack.version()))


@hosts.add_host_tests
class DomXMLToNativeTest(testtools.TestCase):
    """Real libvirt's schema and QEMU command line, per corpus host."""

    def setUp(self):
        super().setUp()
        need_stack(self)
        folder = os.environ.get(stack.XML_DIR)
        if not (folder and os.path.isdir(folder)):
            missing = ('no saved domain XML in $%s (%s): run tox -e e2e, '
                       'which writes it' % (stack.XML_DIR, folder))
            if os.environ.get(stack.REQUIRE_TOOLS) == '1':
                self.fail('%s (%s=1)' % (missing, stack.REQUIRE_TOOLS))
            self.skipTest(missing)
        self.folder = folder
        #: Flavor kind -> pairs NCCL sees as on the host, with the agent.
        self.nccl: dict[str, decision_quality.Share | None] = {}
        note = ('libvirtd gets a copy of each document with only these '
                'changes:\n' + '\n'.join(
                    qemu_argv.adaptations(stack.vfio_driver_rules())))
        LOG.info(note)
        self.addDetail('adaptations', content.text_content(note))

    def check_document(self, name: str, kind: corpus_xml.FlavorKind,
                       path: str) -> list[str]:
        """Schema, libvirtd's translation and the checks, for one XML."""
        with open(path, 'rb') as f:
            xml = f.read()
        translation = stack.translate(xml)
        if translation.refused_by is not None:
            return ['%s exit %d: %s' % (translation.refused_by,
                                        translation.returncode,
                                        translation.output.strip())]
        out = translation.output
        expected = qemu_argv.expectations(xml)
        problems = list(expected.problems)
        problems.extend(fw_cfg_problems(xml, out))
        share = nccl_share(name, xml)
        self.nccl[kind.name] = share
        if share is not None and share.hits != share.total:
            problems.append('NCCL with the guest agent sees %s of the '
                            'GPU-GPU and GPU-NIC pairs of placed devices as '
                            'on the host' % share)
        problems.extend(qemu_argv.argv_problems(
            expected, qemu_argv.parse_devices(out)))
        host_node, root_complex = corpus_locality(name)
        problems.extend(qemu_argv.topology_problems(
            expected, host_node, root_complex, kind.affinity))
        oracle = hosts.EXPECTED[name]
        problems.extend(qemu_argv.clique_problems(
            expected, kind.clique, oracle.addresses, oracle.link,
            oracle.consumer))
        return problems

    def check_host(self, name: str) -> None:
        facts = corpus_xml.host_facts(name)
        folder = os.path.join(self.folder, name)
        failures, summary = [], []
        for kind in corpus_xml.KINDS:
            if facts.not_applicable(kind) is not None:
                continue
            path = os.path.join(folder, '%s.xml' % kind.name)
            refused = os.path.join(folder, '%s.refused.txt' % kind.name)
            if os.path.exists(refused) and not os.path.exists(path):
                summary.append('%-32s refused by the driver' % kind.name)
                continue
            if not os.path.exists(path):
                failures.append('%s: neither %s nor %s' % (
                    kind.name, path, refused))
                continue
            problems = self.check_document(name, kind, path)
            summary.append('%-32s %s%s' % (
                kind.name, 'FAIL' if problems else 'ok',
                '' if self.nccl.get(kind.name) is None else
                ' (NCCL with the agent: %s)' % self.nccl[kind.name]))
            if problems:
                failures.append('%s/%s (%s):\n  %s' % (
                    name, kind.name, path, '\n  '.join(problems)))
        self.addDetail('kinds', content.text_content('\n'.join(summary)))
        if failures:
            self.fail('\n\n'.join(failures))


class HostdevRulesTest(testtools.TestCase):
    """The stack's libvirtd says what :mod:`libvirt_rules` records for it.

    One PCI hostdev, unadapted, with and without ``<driver
    name='vfio'/>``, against the daemon's host as it shows VFIO or not.
    """

    def setUp(self):
        super().setUp()
        need_stack(self)
        self.rules = libvirt_rules.for_libvirt(stack.libvirt_version())
        self.vfio = stack.shows_vfio()
        self.addDetail('rules', content.text_content(
            '%s; the daemon\'s host shows VFIO: %s'
            % (self.rules, self.vfio)))

    def translate(self, driver: bool) -> stack.Translation:
        translation = stack.translate(
            HOSTDEV_DOMAIN % (b"\n      <driver name='vfio'/>" if driver
                              else b''), adapt=False)
        self.assertNotEqual('virt-xml-validate', translation.refused_by,
                            translation.output)
        return translation

    def assert_translated(self, translation: stack.Translation) -> None:
        self.assertIsNone(translation.refused_by, translation.output)
        self.assertIn('"host":"0000:81:00.0"', translation.output)

    def assert_refused(self, translation: stack.Translation,
                       message: str) -> None:
        self.assertEqual('virsh domxml-to-native', translation.refused_by,
                         translation.output)
        self.assertIn(message, translation.output)

    def test_without_driver(self):
        translation = self.translate(driver=False)
        if self.vfio:
            self.assert_translated(translation)
        else:
            self.assert_refused(translation, self.rules.no_driver_refusal)

    def test_with_vfio_driver(self):
        translation = self.translate(driver=True)
        if self.vfio or not self.rules.needs_vfio_host():
            self.assert_translated(translation)
        else:
            self.assert_refused(translation, self.rules.no_vfio_refusal)
