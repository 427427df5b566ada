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

"""A whole HGX board in one server (Fabric Manager's FABRIC_MODE=0).

The flavor is what ``nova-gpu-p2p flavor --whole-board`` prints, the
NVSwitches offered by the ``[pci]`` lines it prints; Nova claims the 8
GPUs and 4 NVSwitches of the corpus HGX host, and the domain XML puts each
switch on the expander bus of its host root complex, with the GPUs there.
"""

import fixtures

from nova_gpu_p2p.cmd import flavor_commands
from tests.cloud import nova_cloud as base
from tests.fixtures import waits
from tests.functional import test_guest_config as layout

HGX = 'hgx-8gpu-nvswitch-2numa'
NODE0_GPUS = ('0000:03:00.0', '0000:04:00.0', '0000:08:00.0',
              '0000:09:00.0')
NODE1_GPUS = ('0000:83:00.0', '0000:84:00.0', '0000:88:00.0',
              '0000:89:00.0')
SWITCHES = ('0000:0d:00.0', '0000:0e:00.0', '0000:0f:00.0', '0000:10:00.0')


def _with_switches(pci_info):
    """The cloud's node devices, and the host's NVSwitches among them."""

    def info(topology):
        found = pci_info(topology)
        for function in sorted(topology.functions.values(),
                               key=lambda f: f.address):
            if function.is_nvswitch:
                _, bus, rest = function.address.split(':')
                slot, fn = rest.split('.')
                found.add_device(
                    'PCI', int(bus, 16), int(slot, 16), int(fn),
                    iommu_group=function.iommu_group or 0,
                    numa_node=function.numa_node,
                    vend_id='%04x' % function.vendor,
                    prod_id='%04x' % function.device,
                    driver_name='vfio-pci')
        return found
    return info


class WholeBoardTest(waits.PatientWaits, layout.LayoutAssertions,
                     base.GPUHostsTestBase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'tests.cloud.nova_cloud.pci_info', _with_switches(base.pci_info)))
        self.request = flavor_commands.FlavorRequest(
            gpus=8, alias=base.GPU_ALIAS, numa_nodes=2, whole_board=True)
        self.start_gpu_compute('host1', HGX)

    def _add_pci_aliases(self, topology):
        """The cloud's aliases, and the lines --whole-board prints."""
        super()._add_pci_aliases(topology)
        settings = flavor_commands.whole_board_settings(self.request)
        lines = dict(line.split(' = ', 1) for line in settings
                     if ' = ' in line)
        pci = base.nova_conf.CONF.pci
        self.flags(alias=pci.alias + [lines['alias']],
                   device_spec=pci.device_spec + [lines['device_spec']],
                   group='pci')

    def test_switches_with_their_gpus(self):
        specs = flavor_commands.properties(self.request)
        flavor = self._create_flavor(vcpu=4, memory_mb=2048,
                                     extra_spec=specs)
        server = self.boot(flavor)
        xml = self.domain_xml(server)
        devs = base.hostdevs(xml)
        self.assertEqual(set(NODE0_GPUS + NODE1_GPUS + SWITCHES), set(devs))
        index = self.assert_devices_on_their_cells(xml, 'host1', devs)
        self.assert_controllers_sane(xml)
        # Root complex pci0000:00: four GPUs and the four switches on one
        # expander; pci0000:80's four GPUs on the other.
        self.assertEqual({index[a] for a in NODE0_GPUS + SWITCHES},
                         {index[NODE0_GPUS[0]]})
        self.assertEqual(1, len({index[a] for a in NODE1_GPUS}))
        self.assertEqual(2, len(layout.expander_buses(xml)))
        # No clique: the guest's Fabric Manager gives the GPUs NVLink.
        self.assertEqual({}, layout.clique_ids(xml))
        # The guest agent counts the switches as no GPU.
        record = layout.decision(xml)
        self.assertEqual(
            {a: 'other' for a in SWITCHES},
            {d.get('address'): d.get('kind')
             for d in record.findall('./gpu_p2p:device', layout.NS)
             if d.get('address') in SWITCHES})
