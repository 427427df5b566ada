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

"""A large-BAR flavor can be made at the latest microversion, and boots.

Eight A100s with 128 GiB BARs need a 2 TiB 64-bit PCI hole, beyond the 40
physical address bits QEMU gives a guest whose CPU is not the host's: the
driver refuses the build and names ``hw:maxphysaddr_mode`` and
``hw:maxphysaddr_bits``. Nova 34's API has no validators for those, so
without ours it refuses them from microversion 2.86 on.
"""

import re

import fixtures
from nova.objects import fields
from nova.tests.fixtures import libvirt_data
from nova.tests.functional.api import client

from nova_gpu_p2p.api import extra_spec_validators
from tests.cloud import nova_cloud as base
from tests.fixtures import waits

#: Eight A100-PCIE (128 GiB BAR1 each) on two NUMA nodes.
CORPUS_HOST = 'pcie-8gpu-4switch-2socket'
HOST_PHYS_BITS = 46
X86_64 = fields.Architecture.X86_64
BITS_ASKED = re.compile(
    r'hw:maxphysaddr_mode=emulate, hw:maxphysaddr_bits=(\d+)')


class LargeBarFlavorTest(waits.PatientWaits, base.GPUHostsTestBase):

    def setUp(self):
        super().setUp()
        # A cloud that live-migrates between CPU generations: the guest
        # CPU is not the host's, so it gets QEMU's default 40 bits.
        self.flags(cpu_mode='host-model', group='libvirt')
        # Real hosts report their CPU's address bits, which Nova's
        # ComputeCapabilitiesFilter compares with hw:maxphysaddr_bits;
        # Nova's libvirt test double reports none.
        templates = dict(libvirt_data.CAPABILITIES_HOST_TEMPLATES)
        templates[X86_64] = templates[X86_64].replace(
            '</cpu>', "  <maxphysaddr mode='emulate' bits='%d'/>\n"
            '    </cpu>' % HOST_PHYS_BITS, 1)
        self.useFixture(fixtures.MockPatchObject(
            libvirt_data, 'CAPABILITIES_HOST_TEMPLATES', templates))
        self.start_gpu_compute('host1', CORPUS_HOST)
        self.flavor_id = self.gpu_flavor(8, numa_nodes=2, extra_specs={
            'hw:gpu_p2p_clique': 'auto',
            'hw:gpu_numa_affinity': 'required'})

    def set_specs(self, specs: dict[str, str]) -> None:
        self.admin_api.post_extra_spec(self.flavor_id,
                                       {'extra_specs': specs})

    def test_flavor_with_the_bits_the_driver_asks_for_boots(self):
        self.assertEqual('latest', self.admin_api.microversion)
        # Without them the build fails, saying what to set.
        failed = self.boot(self.flavor_id, expected_state='ERROR')
        asked = BITS_ASKED.search(failed['fault']['message'])
        self.assertIsNotNone(asked, failed['fault']['message'])
        bits = asked.group(1)
        self.assertEqual('42', bits)
        self._delete_server(failed)

        # Out of range, the API names the key and QEMU's range.
        exc = self.assertRaises(
            client.OpenStackApiException, self.set_specs,
            {'hw:maxphysaddr_mode': 'emulate', 'hw:maxphysaddr_bits': '64'})
        self.assertEqual(400, exc.response.status_code)
        self.assertIn('hw:maxphysaddr_bits', exc.response.text)
        self.assertIn(extra_spec_validators.MAXPHYSADDR_BITS_ALLOWED,
                      exc.response.text)

        self.set_specs({'hw:maxphysaddr_mode': 'emulate',
                        'hw:maxphysaddr_bits': bits})
        server = self.boot(self.flavor_id)
        self.assertEqual('ACTIVE', server['status'])
        xml = self.domain_xml(server)
        (maxphysaddr,) = xml.findall('./cpu/maxphysaddr')
        self.assertEqual({'mode': 'emulate', 'bits': bits},
                         dict(maxphysaddr.attrib))
        self.assertEqual(str(2 << 30), xml.findtext(
            './devices/controller[@model="pcie-root"]/pcihole64'))

    def test_more_bits_than_the_host_has_find_no_host(self):
        # Nova schedules hw:maxphysaddr_bits to hosts with at least as
        # many: the validator's range is QEMU's, not this host's.
        self.set_specs({'hw:maxphysaddr_mode': 'emulate',
                        'hw:maxphysaddr_bits': str(HOST_PHYS_BITS + 1)})
        server = self.boot(self.flavor_id, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])

    def test_image_bits_out_of_range_refused_naming_the_property(self):
        # Issue 35 item 1: the tenant's image sets the bits. Nova's API
        # and ImagePropertiesFilter take -1; the driver raised ValueError
        # (negative shift count) in _get_guest_config on every host.
        # Nova 34's ImagePropertiesFilter raises on any image bits (it
        # reads cpu_info, a JSON string, as a dict) and so rejects every
        # host; a cloud without that filter, or a fixed Nova, reaches us.
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.filters.image_props_filter.'
            'ImagePropertiesFilter.host_passes', return_value=True))
        image = self.q35_image_with(hw_maxphysaddr_mode='emulate',
                                    hw_maxphysaddr_bits='-1')
        server = self.boot(self.flavor_id, image=image,
                           expected_state='ERROR')
        self.assertIn('hw_maxphysaddr_bits (image property) is -1; '
                      'allowed: integers from 32 to 52',
                      server['fault']['message'])
