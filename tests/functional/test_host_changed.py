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

"""The host changes under a running ``required`` server: it stays up.

A kernel or firmware update turns on ACS P2P Request Redirect on every
switch downstream port of a host (as Linux does with the IOMMU on), so the
GPU pairs behind one switch are PHB instead of PIX and can no longer share
a clique. A new build is still refused there; every operation on the
existing server brings it back without the clique, with one WARNING, the
loss in the decision record and a failed instance action event the tenant
can read.
"""

import dataclasses
import json

from nova import conf as nova_conf
from nova.tests.functional.api import client

from nova_gpu_p2p.compute import action_events
from tests.cloud import nova_cloud as base
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.fixtures import waits
from tests.functional import test_guest_config as layout
from tests.functional import test_guest_lifecycle as lifecycle

SWITCH_PAIR = ('0000:03:00.0', '0000:04:00.0')
LOST = 'keeps running without what its flavor requires'


def with_acs_redirect(host: sysfs_builder.Host) -> sysfs_builder.Host:
    """``host`` with ACS Request Redirect on every switch downstream port."""

    def child(node):
        if isinstance(node, sysfs_builder.Switch):
            return dataclasses.replace(node, ports=tuple(
                dataclasses.replace(
                    port, child=child(port.child),
                    acs_control=sysfs_builder.ACS_REDIRECT)
                for port in node.ports))
        return node

    return dataclasses.replace(host, root_complexes=tuple(
        dataclasses.replace(rc, root_ports=tuple(
            dataclasses.replace(port, child=child(port.child))
            for port in rc.root_ports))
        for rc in host.root_complexes))


class HostChangedTest(lifecycle._WeighedHostsBase):
    """A 2-GPU ``required`` server on host1; then ACS appears."""

    WEIGHTS = {'host1': 100, 'host2': 50}

    def setUp(self):
        super().setUp()
        for hostname in ('host1', 'host2'):
            self.start_gpu_compute(hostname, layout.EIGHT_GPU_HOST)
        self.flavor = self.gpu_flavor(2, vcpus=2, extra_specs={
            layout.CLIQUE_KEY: 'required', layout.AFFINITY_KEY: 'required'})
        self.server = self.boot(self.flavor)
        waits.finished_events(self.api, self.server)
        self.assertEqual('host1', self.server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({a: 0 for a in SWITCH_PAIR},
                         layout.gpu_cliques(self.domain_xml(self.server)))

    def change_host(self, hostname: str) -> None:
        """Turn ACS on in ``hostname``'s tree; its next discovery sees it."""
        tree = self.useFixture(sysfs_builder.SysfsTree(with_acs_redirect(
            hosts.HOSTS[layout.EIGHT_GPU_HOST])))
        self.sysfs_roots[hostname] = tree.root
        if hostname in self.computes:
            self._run_periodics()

    def assert_degraded(self, server: dict, host: str = 'host1',
                        state: str = 'ACTIVE',
                        gpus: tuple[str, str] = SWITCH_PAIR) -> None:
        """Back in ``state``, without cliques, and the loss visible."""
        events = [event for event in waits.finished_events(self.api, server)
                  if event['event'] == action_events.LOST]
        self.assertEqual(state, server['status'])
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        xml = self.domain_xml(server)
        # The pair is PHB now: no clique; the NUMA layout still holds.
        self.assertEqual({}, layout.gpu_cliques(xml))
        self.assertEqual({}, layout.clique_ids(xml))
        self.assertEqual(1, len(layout.expander_buses(xml)))
        lost = layout.decision(xml).findall('gpu_p2p:lost', layout.NS)
        self.assertEqual(1, len(lost))
        self.assertIn('linked by PHB', lost[0].text)
        warnings = [line for line in self.stdlog.logger.output.splitlines()
                    if LOST in line]
        self.assertEqual(1, len(warnings), '\n'.join(warnings))
        self.assertIn(' WARNING [nova_gpu_p2p.compute.driver] ', warnings[0])
        self.assertIn(', '.join(gpus), warnings[0])
        # The tenant's view: a failed event with the reason.
        self.assertEqual(1, len(events), events)
        self.assertEqual('Error', events[0]['result'])
        self.assertIn('GPU P2P layout degraded: hw:gpu_p2p_clique=required',
                      events[0]['details'])
        self.assertIn('linked by PHB', events[0]['details'])

    def test_new_build_still_refused(self):
        self.change_host('host1')
        self.change_host('host2')
        server = self.boot(self.flavor, expected_state='ERROR')
        self.assertIn('Exceeded maximum number of retries',
                      server['fault']['message'])
        self.assertNotIn(LOST, self.stdlog.logger.output)

    def test_hard_reboot(self):
        self.change_host('host1')
        server = self._reboot_server(self.server, hard=True)
        self.assert_degraded(server)

    def test_compute_restart_with_resume(self):
        self.flags(resume_guests_state_on_host_boot=True)
        self.change_host('host1')
        topology = self.topologies['host1']
        # The host rebooted: libvirt has no domain until Nova resumes it.
        self.restart_compute_service(
            'host1', host_info=base.host_info(topology),
            pci_info=base.pci_info(topology),
            libvirt_version=base.LIBVIRT_VERSION,
            qemu_version=base.QEMU_VERSION, keep_hypervisor_state=False)
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertIn(self.server['id'],
                      self.computes['host1'].driver.list_instance_uuids())
        self.assert_degraded(server)

    def test_resize_to_the_same_host(self):
        self.flags(allow_resize_to_same_host=True)
        self.change_host('host1')
        # Both claims are held until the resize is confirmed: the new
        # one lands on the other socket's switch pair.
        bigger = self.gpu_flavor(2, vcpus=4, extra_specs={
            layout.CLIQUE_KEY: 'required', layout.AFFINITY_KEY: 'required'})
        with self.moving_disks():
            server = self._resize_server(self.server, bigger)
        self.assertEqual('VERIFY_RESIZE', server['status'])
        self.assert_degraded(server, state='VERIFY_RESIZE',
                             gpus=('0000:83:00.0', '0000:84:00.0'))

    def test_cold_migration(self):
        self.change_host('host2')
        with self.moving_disks():
            server = self._migrate_server(self.server)
        self.assert_degraded(server, host='host2', state='VERIFY_RESIZE')

    def test_evacuation(self):
        self.change_host('host2')
        self.computes['host1'].stop()
        self.api.put_service(self.computes['host1'].service_ref.uuid,
                             {'forced_down': True})
        server = self._evacuate_server(self.server, expected_host='host2')
        self.assert_degraded(server, host='host2', state='SHUTOFF')

    def test_unshelve(self):
        self._shelve_server(self.server)
        self.change_host('host1')
        server = self._unshelve_server(self.server)
        self.assert_degraded(server)

    def test_rebuild(self):
        self.change_host('host1')
        server = self._rebuild_server(self.server, self.q35_image_with())
        self.assert_degraded(server)

    moving_disks = lifecycle.GuestLifecycleTest.moving_disks


class LiveMigrationTest(waits.PatientWaits, layout.LayoutAssertions,
                        base.GPUHostsTestBase):
    """A live-migratable GPU under our layout: refused in the pre-checks."""

    def _add_pci_aliases(self, topology):
        super()._add_pci_aliases(topology)
        # Nova live-migrates PCI devices only where both the device_spec
        # and the alias say live_migratable.
        pci = nova_conf.CONF.pci
        self.flags(group='pci', **{
            option: [json.dumps(dict(json.loads(entry),
                                     live_migratable='yes'))
                     for entry in getattr(pci, option)]
            for option in ('device_spec', 'alias')})

    def setUp(self):
        super().setUp()
        # Nova's minimum for live-migratable PCI devices (vfio variants).
        for hostname in ('host1', 'host2'):
            self.start_gpu_compute(hostname, layout.EIGHT_GPU_HOST,
                                   qemu_version=8002002)

    def test_refused_with_the_reason(self):
        flavor = self.gpu_flavor(2, extra_specs={
            layout.CLIQUE_KEY: 'auto', layout.AFFINITY_KEY: 'preferred'})
        server = self.boot(flavor)
        waits.finished_events(self.api, server)
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'os-migrateLive': {'host': None,
                                              'block_migration': 'auto'}})
        # As in Nova's own tests: live migration is a cast, which the
        # functional fixtures turn into a call, so the conductor's
        # NoValidHost (every destination refused) reaches the API.
        self.assertIn('NoValidHost', str(exc))
        self._wait_for_migration_status(server, ['error'])
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(source, server['OS-EXT-SRV-ATTR:host'])
        self.assertRegex(
            self.stdlog.logger.output,
            r'WARNING \[nova_gpu_p2p\.compute\.driver\] .*GPU P2P: '
            r'live migration of a server with PCI devices')
        events = [event for event in waits.finished_events(self.api, server)
                  if event['event'] == action_events.LIVE_MIGRATION]
        self.assertEqual(1, len(events), events)
        self.assertIn('GPU P2P: live migration of a server with PCI '
                      'devices', events[0]['details'])
        # The domain stayed on the source; nothing reached the target.
        self.assertEqual(
            [server['id']],
            self.computes[source].driver.list_instance_uuids())
        self.assertEqual(
            [], self.computes[target].driver.list_instance_uuids())
