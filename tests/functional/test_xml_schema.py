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

"""Every corpus host x flavor kind: libvirt's RNG schema accepts the XML.

libvirt refuses a domain whose XML its schema rejects, so a bad element
would only show on a real compute host. ``virt-xml-validate`` (Debian's
libvirt-clients) checks the schema; the checks below add what the schema
cannot see: references between elements, and clique IDs only where QEMU
takes them. One test per corpus host, so a failure names the host.

Set ``NOVA_GPU_P2P_REQUIRE_TOOLS=1`` (CI does) to fail instead of skip
where the validator is missing; set ``NOVA_GPU_P2P_XML_DIR`` to keep
every document and refusal for inspection.
"""

import os
import shutil
import subprocess

import fixtures
from lxml import etree
from testtools import content

from nova_gpu_p2p.topology import model
from tests.cloud import corpus_xml
from tests.cloud import nova_cloud as base
from tests.fixtures import hosts
from tests.fixtures import qemu_override
from tests.fixtures import waits

VALIDATOR = 'virt-xml-validate'
MISSING = ('virt-xml-validate or xmllint not found: apt-get install '
           'libvirt-clients libxml2-utils (or run tools/install-ci-deps.sh)')
REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
KEEP_XML = 'NOVA_GPU_P2P_XML_DIR'
NVIDIA = 0x10de
DISPLAY_CLASS = 0x03
#: What Nova's test double cannot show of a corpus host (see
#: corpus_xml); asserted, so that a better double shows up here.
KNOWN_LIMITS = {
    'gpu-on-cpuless-node': (
        '0001:01:00.0: PCI domain other than 0000',
        'NUMA node 1 has no CPUs',
    ),
}


def _address(element: etree._Element | None) -> str | None:
    if element is None:
        return None
    return '%04x:%02x:%02x.%x' % tuple(
        int(element.get(name), 16)
        for name in ('domain', 'bus', 'slot', 'function'))


def xml_problems(outcome: corpus_xml.Outcome,
                 topology: model.HostTopology) -> list[str]:
    """What libvirt's schema cannot check, for one produced document."""
    root = etree.fromstring(outcome.xml)
    problems = []
    controllers = root.findall('./devices/controller[@type="pci"]')
    indexes = [int(c.get('index')) for c in controllers]
    if len(indexes) != len(set(indexes)):
        problems.append('PCI controller indexes repeat: %s'
                        % sorted(indexes))
    models = {int(c.get('index')): c.get('model') for c in controllers}
    hostdevs = root.findall('./devices/hostdev[@type="pci"]')
    sources = {}
    for hostdev in hostdevs:
        source = _address(hostdev.find('./source/address'))
        sources[source] = hostdev
        guest = hostdev.find('./address[@type="pci"]')
        if guest is not None:
            bus = int(guest.get('bus'), 16)
            if models.get(bus) != 'pcie-root-port':
                problems.append(
                    'hostdev %s is on guest bus %d, which is %s, not a '
                    'pcie-root-port' % (source, bus,
                                        models.get(bus, 'no controller')))
    if sorted(sources) != sorted(outcome.pci_devices):
        problems.append('hostdevs %s, Nova claimed %s' % (
            sorted(sources), list(outcome.pci_devices)))
    for controller in controllers:
        if controller.get('model') != 'pcie-root-port':
            continue
        parent = controller.find('./address[@type="pci"]')
        if parent is not None and models.get(
                int(parent.get('bus'), 16)) not in (
                    'pcie-root', 'pcie-expander-bus'):
            problems.append('pcie-root-port %s sits on bus %s, neither '
                            'pcie-root nor an expander bus'
                            % (controller.get('index'), parent.get('bus')))
    cells = {c.get('id') for c in root.findall('./cpu/numa/cell')}
    for node in root.findall(
            './devices/controller[@model="pcie-expander-bus"]/target/node'):
        if node.text not in cells:
            problems.append('expander bus on guest node %s; guest cells %s'
                            % (node.text, sorted(cells)))
    aliases = {h.find('./alias').get('name'): h for h in hostdevs
               if h.find('./alias') is not None}
    cliques = {}
    for alias, value in qemu_override.cliques_by_alias(root).items():
        hostdev = aliases.get(alias)
        if hostdev is None:
            problems.append('qemu:device alias %s names no hostdev' % alias)
            continue
        source = _address(hostdev.find('./source/address'))
        cliques[source] = value
        if not 0 <= value <= 15:
            problems.append('clique %d on %s: QEMU takes 0..15'
                            % (value, source))
        function = topology.functions.get(source)
        if function is None or function.vendor != NVIDIA or (
                function.class_code >> 16 != DISPLAY_CLASS):
            problems.append('clique on %s, not an NVIDIA display GPU '
                            'of this host' % source)
    kind = outcome.kind
    if kind.clique == 'none' and cliques:
        problems.append('clique none, yet cliques %s' % cliques)
    consumer = hosts.EXPECTED[outcome.host].consumer
    if consumer and cliques:
        problems.append('consumer GPUs, yet cliques %s' % cliques)
    if kind.clique.isdigit() and not consumer:
        gpus = [a for a in sources if a in hosts.EXPECTED[
            outcome.host].addresses]
        if {a: cliques.get(a) for a in gpus} != dict.fromkeys(
                gpus, int(kind.clique)):
            problems.append('fixed clique %s, got %s for GPUs %s'
                            % (kind.clique, cliques, gpus))
    placed = [a for a, h in sources.items()
              if h.find('./address[@type="pci"]') is not None]
    if kind.affinity == 'none' and 'pcie-expander-bus' in models.values():
        problems.append('affinity none, yet expander buses')
    if kind.affinity == 'required' and sorted(placed) != sorted(sources):
        problems.append('affinity required, yet %s stay on the root bus'
                        % sorted(set(sources) - set(placed)))
    return problems


def refusal_problems(facts: corpus_xml.HostFacts,
                     outcome: corpus_xml.Outcome) -> list[str]:
    """Refused exactly where hosts.EXPECTED says the host cannot honour."""
    kind = outcome.kind
    if not kind.required:
        if outcome.refused:
            return ['no required part, yet refused: %s; driver: %s'
                    % (outcome.fault, outcome.refusal)]
        return []
    if outcome.refused and outcome.refusal is None:
        return ['build failed before our driver decided: %s'
                % outcome.fault]
    honourable, why = corpus_xml.can_honour(
        facts, kind, outcome.pci_devices, outcome.host_cells)
    if outcome.refused and honourable:
        return ['refused, yet the host can honour it (%s, cells on host '
                'nodes %s): %s' % (', '.join(outcome.pci_devices),
                                   list(outcome.host_cells),
                                   outcome.refusal)]
    if not outcome.refused and not honourable:
        return ['accepted, yet the host cannot honour it: %s' % why]
    return []


@hosts.add_host_tests
class XMLSchemaTest(waits.PatientWaits, corpus_xml.CorpusXMLMixin,
                    base.GPUHostsTestBase):
    """libvirt's schema and our own references, per corpus host."""

    def setUp(self):
        super().setUp()
        self.validator = shutil.which(VALIDATOR)
        # virt-xml-validate is a script around xmllint.
        if self.validator is None or shutil.which('xmllint') is None:
            if os.environ.get(REQUIRE_TOOLS) == '1':
                self.fail('%s (%s=1)' % (MISSING, REQUIRE_TOOLS))
            self.skipTest(MISSING)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def validate(self, outcome: corpus_xml.Outcome) -> str | None:
        """The validator's complaint, or None when it accepts the XML."""
        path = os.path.join(self.tmp, '%s.xml' % outcome.kind.name)
        with open(path, 'w') as f:
            f.write(outcome.xml)
        result = subprocess.run([self.validator, path, 'domain'],
                                capture_output=True, text=True, check=False)
        if result.returncode == 0:
            return None
        return 'virt-xml-validate exit %d:\n%s%s' % (
            result.returncode, result.stdout, result.stderr)

    def keep(self, outcome: corpus_xml.Outcome) -> None:
        folder = os.environ.get(KEEP_XML)
        if not folder:
            return
        folder = os.path.join(folder, outcome.host)
        os.makedirs(folder, exist_ok=True)
        name, text = ('%s.xml' % outcome.kind.name, outcome.xml)
        if outcome.refused:
            name, text = ('%s.refused.txt' % outcome.kind.name,
                          '%s\n%s\n' % (outcome.fault, outcome.refusal))
        with open(os.path.join(folder, name), 'w') as f:
            f.write(text)

    def check_host(self, corpus_host: str) -> None:
        facts, outcomes = self.corpus_outcomes(corpus_host)
        expected_limits = KNOWN_LIMITS.get(corpus_host, ())
        self.assertEqual(len(expected_limits), len(facts.limits),
                         facts.limits)
        for known, limit in zip(expected_limits, facts.limits):
            self.assertIn(known, limit)
        topology = self.topologies[corpus_host]
        failures = []
        summary = []
        for outcome in outcomes:
            self.keep(outcome)
            problems = refusal_problems(facts, outcome)
            if not outcome.refused:
                complaint = self.validate(outcome)
                if complaint:
                    problems.append(complaint)
                problems.extend(xml_problems(outcome, topology))
            summary.append('%-32s %-8s %s' % (
                outcome.kind.name,
                'refused' if outcome.refused else 'xml',
                outcome.refusal or ', '.join(outcome.pci_devices)))
            if problems:
                failures.append('%s (%s):\n  %s\n%s' % (
                    outcome.label, outcome.flavor_specs,
                    '\n  '.join(problems), outcome.xml or ''))
        self.addDetail('kinds', content.text_content(
            '\n'.join(summary + ['limits: %s' % (facts.limits,)])))
        if failures:
            self.fail('\n\n'.join(failures))
