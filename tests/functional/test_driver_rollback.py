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

"""Enabling the driver on a running GPU host, and rolling it back.

As ``doc/source/operator-guide.rst`` tells: ``compute_driver`` changed in
nova.conf and nova-compute restarted, under a running GPU server. Rolled
back to ``libvirt.LibvirtDriver``, the host's provider keeps our traits
until the operator removes them, but ``GPUP2PCliqueFilter`` no longer
passes it for a ``required`` server: the compute node's stats say which
driver runs now (:mod:`nova_gpu_p2p.driver_stat`).
"""

import os
import re

from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p import traits
from tests.cloud import scheduling

OURS = 'gpu_p2p.GPUP2PLibvirtDriver'
STOCK = 'libvirt.LibvirtDriver'
GUIDE = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                     'source', 'operator-guide.rst')


def guide_removes() -> re.Pattern:
    """The traits the operator guide's roll-back pipeline removes.

    Its ``grep -v -x -E '<pattern>'``, read from the guide itself, so the
    test runs the command operators copy.
    """
    with open(GUIDE, encoding='utf-8') as guide:
        found = re.search(r"grep -v -x -E '([^']+)'", guide.read())
    assert found, 'the roll-back pipeline is gone from %s' % GUIDE
    return re.compile(found.group(1))


class RollbackTest(scheduling.CliqueSchedulingBase):
    """'host1', preferred by the host name weigher, and 'host2'.

    Both at ``p2p_level = PHB`` (two cliques of four); 'host2' runs our
    driver throughout, 'host1' starts on Nova's.
    """

    OURS_FIRST = True
    WEIGHTS = {'host1': 100, 'host2': 10}

    def setUp(self):
        super().setUp()
        self.flags(compute_driver=STOCK)
        self.start_host('host1', 'PHB')
        self.flags(compute_driver=OURS)
        self.start_host('host2', 'PHB')

    def switch(self, hostname: str, compute_driver: str) -> None:
        """nova.conf's compute_driver changed, nova-compute restarted."""
        self.flags(compute_driver=compute_driver)
        self.restart_compute_service(hostname)

    def our_traits(self, hostname: str) -> set[str]:
        return traits.OWNED & set(self._get_provider_traits(
            self.compute_rp_uuids[hostname]))

    def assert_lands(self, flavor: str, hostname: str) -> dict:
        server = self.boot_settled(flavor)
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        return server

    def test_enable_then_roll_back(self):
        # As "nova-gpu-p2p flavor" makes it: the clique-size trait too.
        required = self.gpu_flavor(2, vcpus=1, extra_specs={
            extra_specs.CLIQUE_KEY: 'required',
            'trait:%s' % flavor_commands.clique_trait(2): 'required'})
        auto = self.flavor(2, 'auto')
        running = self.assert_lands(self.flavor(2, None), 'host1')
        # Nova's driver: no traits, no stat; required goes elsewhere.
        self.assertEqual(set(), self.our_traits('host1'))
        self.delete(self.assert_lands(required, 'host2'))

        self.switch('host1', OURS)
        self.assertEqual('ACTIVE', self._show_server(running)['status'])
        self.assertIn(traits.GPU_P2P, self.our_traits('host1'))
        self.delete(self.assert_lands(required, 'host1'))

        self.switch('host1', STOCK)
        self.assertEqual('ACTIVE', self._show_server(running)['status'])
        # The traits outlive our driver: only the operator removes them.
        left = self.our_traits('host1')
        self.assertIn(traits.GPU_P2P, left)
        self.delete(self.assert_lands(required, 'host2'))
        # Other flavors still take the host name weigher's choice.
        self.delete(self.assert_lands(auto, 'host1'))

        # The operator guide's clean-up, as osc-placement's "resource
        # provider trait set" does it: every trait its grep keeps.
        rp_uuid = self.compute_rp_uuids['host1']
        removes = guide_removes()
        kept = [trait for trait in self._get_provider_traits(rp_uuid)
                if not removes.fullmatch(trait)]
        self.assertNotEqual([], kept)
        self._set_provider_traits(rp_uuid, kept)
        self._run_periodics()
        self.assertEqual(set(), self.our_traits('host1'))
        self.assertEqual(set(kept),
                         set(self._get_provider_traits(rp_uuid)))
        self.assert_not_rescheduled()
