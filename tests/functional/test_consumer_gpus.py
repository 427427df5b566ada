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

"""A GeForce workstation beside a professional one, on real Nova.

Two RTX 4090s behind one PCIe switch are PIX apart, which would make a
clique; two RTX 6000 Ada behind one switch are the same shape. Only the
Ada pair may be promised P2P: the GeForce host reports no P2P trait, its
``auto`` guests get no clique and say why at INFO, and a ``required``
build that reaches it is refused there, naming the reason, and
rescheduled.
"""

from nova_gpu_p2p import traits
from tests.cloud import nova_cloud as base
from tests.fixtures import waits
from tests.functional import test_guest_config as layout
from tests.functional import test_placement_traits as placement_traits

GEFORCE_GPUS = ('0000:03:00.0', '0000:04:00.0')
CONSUMER = (r'0000:03:00\.0, 0000:04:00\.0 get no clique: AD102 \[GeForce '
            r'RTX 4090\] \(10de:2684\) is a consumer GPU \(GeForce or '
            r'TITAN\)')


class ConsumerGPUHostsTest(placement_traits._TraitsTestBase):
    """The scheduler tries the GeForce host first wherever it may."""

    WEIGHTS = {'geforce': 100, 'ada': 10}

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('geforce', 'geforce-switch-pair')
        self.start_gpu_compute('ada', 'ada-switch-pair')

    def test_only_the_professional_pair_reports_p2p(self):
        self.assertEqual({traits.GPU_NUMA_AFFINITY}, self.ours('geforce'))
        self.assertEqual({traits.GPU_NUMA_AFFINITY, traits.GPU_P2P,
                          traits.GPU_P2P_CLIQUE[2]}, self.ours('ada'))

    def test_auto_boots_without_a_clique_and_says_why(self):
        flavor = self.gpu_flavor(2, extra_specs={layout.CLIQUE_KEY: 'auto'})
        server = self.boot(flavor)
        self.assertEqual('geforce', server['OS-EXT-SRV-ATTR:host'])
        xml = self.domain_xml(server)
        self.assertEqual(sorted(GEFORCE_GPUS),
                         sorted(base.hostdevs(xml)))
        self.assertEqual({}, layout.gpu_cliques(xml))
        self.assertEqual({}, layout.clique_ids(xml))
        self.assertRegex(self.stdlog.logger.output,
                         r'INFO \[nova_gpu_p2p\.compute\.driver\] GPU P2P: '
                         r'hw:gpu_p2p_clique=auto: ' + CONSUMER)

    def test_required_with_the_trait_goes_to_the_ada_pair(self):
        flavor = self.gpu_flavor(
            2, vcpus=2,
            extra_specs=placement_traits.operator_flavor_specs(2, 1))
        server = self.boot(flavor)
        self.assertEqual('ada', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({0}, set(layout.gpu_cliques(
            self.domain_xml(server)).values()))

    def test_required_that_reaches_it_is_refused_there_and_rescheduled(
            self):
        # No trait in the flavor: only the compute can say no.
        flavor = self.gpu_flavor(
            2, extra_specs={layout.CLIQUE_KEY: 'required'})
        server = self.boot(flavor)
        self.assertEqual('ada', server['OS-EXT-SRV-ATTR:host'])
        self.assertRegex(
            self.stdlog.logger.output,
            r'Error from last host: geforce \(node geforce\): .*GPU P2P: '
            r'hw:gpu_p2p_clique=required: GPUs 0000:03:00\.0, '
            r'0000:04:00\.0 cannot form one P2P clique on this host: '
            + CONSUMER)


class AllowedConsumerGPUsTest(waits.PatientWaits, base.GPUHostsTestBase):
    """The operator's switch: P2P verified on these cards, cliques back."""

    def setUp(self):
        super().setUp()
        self.flags(allow_consumer_gpu_cliques=True, group='gpu_p2p')
        self.start_gpu_compute('geforce', 'geforce-switch-pair')

    def test_required_boots_with_one_clique(self):
        flavor = self.gpu_flavor(
            2, extra_specs={layout.CLIQUE_KEY: 'required'})
        server = self.boot(flavor)
        self.assertEqual({address: 0 for address in GEFORCE_GPUS},
                         layout.gpu_cliques(self.domain_xml(server)))
