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

"""The Grace corpus hosts' guests through a real libvirtd.

Nova's aarch64 guest config for the GH200 and GB200 hosts with our
driver's plan applied (:mod:`tests.fixtures.grace_guest`), under TCG
(``virt_type = qemu``: the stacks run on x86_64), through
``virt-xml-validate`` and ``virsh domxml-to-native``: the QEMU command
line must carry one ``acpi-generic-initiator`` per planned cell, naming
the GPU's vfio-pci device and the cell, each GPU on a pxb-pcie of its
Grace's guest node, the empty cells and the hole. Stacks older than
libvirt 11.8 skip in one line: the driver refuses Grace guests there.
"""

import re

from lxml import etree
import testtools
from testtools import content

from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import sysfs
from tests.e2e import test_domxml_to_native
from tests.fixtures import grace_guest
from tests.fixtures import hosts
from tests.fixtures import qemu_argv
from tests.fixtures import stack

#: (corpus host, GPUs, host nodes of Nova's cells).
GUESTS = {
    'gh200': (['0009:01:00.0'], (0,)),
    'gb200-tray': (['0008:01:00.0', '0009:01:00.0', '0018:01:00.0',
                    '0019:01:00.0'], (0, 1)),
    'gb200-tray-one-grace': (['0018:01:00.0', '0019:01:00.0'], (1,)),
}


def _objects(argv: str, kind: str) -> list[dict]:
    return [qemu_argv.parse_device(match) for match in re.findall(
        r"-object '(\{\"qom-type\":\"%s\"[^']*)'" % kind, argv)]


class GraceXMLTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        test_domxml_to_native.need_stack(self)
        if stack.libvirt_version() < min_versions.LIBVIRT_GENERIC_INITIATOR[
                :2]:
            self.skipTest('libvirt %d.%d predates <hostdev><acpi nodeset> '
                          '(11.8): the driver refuses Grace guests there'
                          % stack.libvirt_version())

    def check(self, name: str) -> None:
        gpus, cells = GUESTS[name]
        host = name.replace('-one-grace', '')
        xml = grace_guest.domain_xml(host, gpus, cells, virt_type='qemu')
        self.addDetail('domain', content.text_content(xml))
        translation = stack.translate(xml.encode())
        self.assertIsNone(translation.refused_by, translation.output)
        argv = translation.output
        root = etree.fromstring(xml.encode())
        devices = {d['host']: d for d in qemu_argv.parse_devices(argv)
                   if d.get('driver') == 'vfio-pci'}
        buses = {d['id']: d for d in qemu_argv.parse_devices(argv)
                 if d.get('driver') == 'pxb-pcie'}
        ports = {d['id']: d for d in qemu_argv.parse_devices(argv)
                 if d.get('driver') == 'pcie-root-port'}
        wanted = set()
        for hostdev in root.iterfind('devices/hostdev'):
            source = hostdev.find('source/address')
            address = '%04x:%02x:%02x.%d' % tuple(
                int(source.get(k), 16)
                for k in ('domain', 'bus', 'slot', 'function'))
            device = devices[address]
            nodes = sysfs.parse_cpulist(hostdev.find('acpi').get('nodeset'))
            self.assertEqual(8, len(nodes), address)
            wanted.update((device['id'], node) for node in nodes)
            # On its own pxb-pcie, on its Grace's guest node.
            bus = buses[ports[device['bus']]['bus']]
            grace_node = hosts.GRACE_CASES[host].grace[address][0]
            self.assertEqual(cells.index(grace_node), bus['numa_node'])
        initiators = _objects(argv, 'acpi-generic-initiator')
        self.assertEqual(wanted, {(gi['pci-dev'], gi['node'])
                                  for gi in initiators})
        self.assertEqual(len(wanted), len(initiators))
        self.assertEqual(len(gpus), len(buses))
        for cell in range(len(cells), len(cells) + len(wanted)):
            self.assertIn('-numa node,nodeid=%d ' % cell, argv)
        self.assertIn('-numa dist,src=0,dst=%d,val=' % (len(cells)), argv)
        self.assertRegex(argv, r'-machine virt[^ ]*,highmem-mmio-size=\d+K')

    def test_gh200(self):
        self.check('gh200')

    def test_gb200_tray(self):
        self.check('gb200-tray')

    def test_gb200_tray_one_grace(self):
        self.check('gb200-tray-one-grace')
