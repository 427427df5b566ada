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

"""The layout survives every operation that redefines the domain.

Nova rebuilds the guest config on hard reboot, resize, migration,
unshelve, evacuation and rebuild, from the flavor and the devices it
claimed on the (possibly new) host; and a P2P build that one host cannot
honour is rescheduled to another.
"""

import re
from unittest import mock

from lxml import etree
from nova.tests import fixtures as nova_fixtures

from tests.cloud import nova_cloud as base
from tests.fixtures import waits
from tests.functional import test_guest_config as layout

P2P_SPECS = {layout.CLIQUE_KEY: 'auto', layout.AFFINITY_KEY: 'required'}

#: Everything our layout writes or touches in a domain.
OUR_ELEMENTS = ('./devices/controller[@type="pci"]', './devices/hostdev',
                './devices/interface[@type="hostdev"]', './qemu:override',
                './cpu/numa', './metadata/gpu_p2p:decision')


def our_layout(xml: etree._Element) -> bytes:
    """Our elements of a domain, serialised in document order."""
    return b''.join(etree.tostring(element)
                    for path in OUR_ELEMENTS
                    for element in xml.findall(path, layout.NS))


class _WeighedHostsBase(waits.PatientWaits, layout.LayoutAssertions,
                        base.GPUHostsTestBase):
    """Hosts tried in a known order: the first of :attr:`WEIGHTS` first."""

    WEIGHTS: dict[str, int] = {}

    def _setup_scheduler_service(self):
        # The scheduler loads its weighers when it starts.
        self.useFixture(nova_fixtures.HostNameWeigherFixture(
            weights=self.WEIGHTS))
        return super()._setup_scheduler_service()


class GuestLifecycleTest(_WeighedHostsBase):
    """Two identical 8-GPU hosts; servers boot on host1."""

    WEIGHTS = {'host1': 100, 'host2': 50}

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('host1', layout.EIGHT_GPU_HOST)
        self.start_gpu_compute('host2', layout.EIGHT_GPU_HOST)
        self.p2p_flavor = self.gpu_flavor(8, numa_nodes=2, nics=1,
                                          extra_specs=P2P_SPECS)

    def boot_p2p(self) -> dict:
        server = self.boot(self.p2p_flavor)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        self.booted_layout = our_layout(
            self.assert_eight_gpu_layout(server))
        return server

    def assert_layout_unchanged(self, server: dict) -> None:
        """Byte for byte what the boot got: both hosts are identical."""
        self.assertEqual(self.booted_layout,
                         our_layout(self.domain_xml(server)))

    def assert_eight_gpu_layout(self, server: dict) -> etree._Element:
        xml = self.assert_full_layout(server, gpus=8)
        self.assert_auto_cliques(xml, layout.NODE0_GPUS + layout.NODE1_GPUS)
        self.assertEqual(2, len(layout.expander_buses(xml)))
        self.assert_distances_copied(xml, server['OS-EXT-SRV-ATTR:host'])
        return xml

    def moving_disks(self):
        """Nova's disk copy needs real disk files; the test double has none.

        What we test runs after it, on the destination.
        """
        return mock.patch('nova.virt.libvirt.driver.LibvirtDriver'
                          '.migrate_disk_and_power_off', return_value='{}')

    def forget_xml(self, server: dict) -> None:
        """So that the next check reads a definition made after this."""
        self.defined_xml.pop(server['id'])

    def test_hard_reboot(self):
        server = self.boot_p2p()
        self.forget_xml(server)
        server = self._reboot_server(server, hard=True)
        self.assert_eight_gpu_layout(server)
        self.assert_layout_unchanged(server)

    def test_resize_to_p2p_flavor_then_to_plain_flavor(self):
        server = self.boot_p2p()
        smaller = self.gpu_flavor(4, extra_specs={
            layout.CLIQUE_KEY: 'auto', layout.AFFINITY_KEY: 'preferred'})
        self.forget_xml(server)
        with self.moving_disks():
            server = self._resize_server(server, smaller)
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        xml = self.assert_full_layout(server, gpus=4)
        (node,) = layout.guest_cell_of_host_node(xml)
        gpus = layout.NODE0_GPUS if node == 0 else layout.NODE1_GPUS
        self.assertEqual(set(gpus), set(base.hostdevs(xml)))
        self.assert_auto_cliques(xml, gpus)
        self.assertEqual(1, len(layout.expander_buses(xml)))
        self.assertEqual([], xml.findall('./cpu/numa/cell/distances'))

        plain = self.gpu_flavor(8, numa_nodes=2)
        self.forget_xml(server)
        with self.moving_disks():
            server = self._resize_server(server, plain)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        xml = self.domain_xml(server)
        self.assertEqual(8, len(base.hostdevs(xml)))
        self.assert_no_additions(xml)

    def test_resize_revert_restores_the_layout(self):
        server = self.boot_p2p()
        plain = self.gpu_flavor(8, numa_nodes=2)
        with self.moving_disks():
            server = self._resize_server(server, plain)
        self.assert_no_additions(self.domain_xml(server))
        self.forget_xml(server)
        self.api.post_server_action(server['id'], {'revertResize': None})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        self.assert_eight_gpu_layout(server)
        self.assert_layout_unchanged(server)

    def test_cold_migrate(self):
        server = self.boot_p2p()
        self.forget_xml(server)
        with self.moving_disks():
            server = self._migrate_server(server)
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        self.assert_eight_gpu_layout(server)
        self.assert_layout_unchanged(server)

    def test_shelve_offload_and_unshelve(self):
        server = self.boot_p2p()
        self._shelve_server(server)
        self.forget_xml(server)
        server = self._unshelve_server(server)
        self.assert_eight_gpu_layout(server)
        self.assert_layout_unchanged(server)

    def test_evacuate(self):
        server = self.boot_p2p()
        self.computes['host1'].stop()
        self.api.put_service(self.computes['host1'].service_ref.uuid,
                             {'forced_down': True})
        self.forget_xml(server)
        # Since microversion 2.95 the evacuated server stays stopped; its
        # domain is defined on host2 all the same.
        server = self._evacuate_server(server, expected_host='host2')
        self.assert_eight_gpu_layout(server)
        self.assert_layout_unchanged(server)

    def test_rebuild(self):
        server = self.boot_p2p()
        self.forget_xml(server)
        server = self._rebuild_server(server, self.q35_image_with())
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        self.assert_eight_gpu_layout(server)
        self.assert_layout_unchanged(server)


class RescheduleTest(_WeighedHostsBase):
    """``required`` cliques: a host that cannot honour them hands over.

    On 'epyc-4gpu-per-root-complex' every GPU has a root complex of its
    own (NODE, farther than the default PXB level); on
    'mixed-vendors-nic' two A6000s share a switch (PIX).
    """

    WEIGHTS = {'epyc': 100, 'mixed': 50}
    EPYC_GPUS = r'0000:[0246]1:00\.0'
    REFUSAL = (r'GPU P2P: hw:gpu_p2p_clique=required: GPUs '
               r'(?P<a>{0}), (?P<b>{0}) cannot form one P2P clique on this '
               r'host: (?P=a) and (?P=b) are linked by NODE, farther than '
               r'\[gpu_p2p\] p2p_level = PXB'.format(EPYC_GPUS))

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('epyc', 'epyc-4gpu-per-root-complex')
        self.flavor = self.gpu_flavor(2, extra_specs={
            layout.CLIQUE_KEY: 'required'})

    def test_refused_on_the_first_host_built_on_the_next(self):
        self.start_gpu_compute('mixed', 'mixed-vendors-nic')
        server = self.boot(self.flavor)
        self.assertEqual('mixed', server['OS-EXT-SRV-ATTR:host'])
        log = self.stdlog.logger.output
        # The epyc host refused, naming its GPUs and their link ...
        self.assertRegex(log, r' ERROR \[nova_gpu_p2p\.compute\.driver\] .*'
                         + self.REFUSAL)
        # ... and the conductor rescheduled because of it.
        self.assertRegex(log, r'Error from last host: epyc \(node epyc\): '
                         r'.*' + self.REFUSAL)
        xml = self.domain_xml(server)
        self.assertEqual({'0000:03:00.0': 0, '0000:04:00.0': 0},
                         layout.gpu_cliques(xml))
        self.assert_clique_devices(xml)

    def test_no_host_left(self):
        server = self.boot(self.flavor, expected_state='ERROR')
        self.assertIn('Exceeded maximum number of retries',
                      server['fault']['message'])
        # The API does not say why: the log line operators are told to
        # read does, with what to change.
        self.assertRegex(self.stdlog.logger.output,
                         r'Error from last host: epyc \(node epyc\): .*'
                         + self.REFUSAL
                         + re.escape('; another host may have them in one '
                                     'clique, or use hw:gpu_p2p_clique=auto'
                                     ' to accept several'))
