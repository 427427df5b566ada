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

"""Placement traits, read back from the in-process placement service.

Several compute hosts of different topologies share one cloud, so the
real scheduler has to tell them apart by the traits our driver reports:
that is what an operator's ``trait:CUSTOM_GPU_P2P_CLIQUE_N=required``
flavor relies on. The traits must follow the host on every periodic
update and never touch a trait that is not ours.
"""

import json
import re
import sys
from unittest import mock

import fixtures
from nova import context as nova_context
from nova.virt.libvirt import driver as libvirt_driver
from oslo_utils import versionutils

from lab import demo_cloud
from nova_gpu_p2p.cmd import flavor_commands
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import traits
from tests.cloud import nova_cloud as base
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder
from tests.functional import test_guest_config as layout
from tests.functional import test_guest_lifecycle as lifecycle

#: Two GPUs per PCIe switch, pairs PHB apart, two sockets.
PAIRS_HOST = layout.EIGHT_GPU_HOST
#: Six GPUs behind two levels of switches: five of them PXB or nearer.
PXB_HOST = 'pcie-2level-switch-pxb'
#: Every GPU on a root complex of its own: no clique at all.
LONERS_HOST = 'epyc-4gpu-per-root-complex'
NVLINK = {'topology_backend': 'nvml'}
CLIQUE_2_TO_8 = {traits.GPU_P2P_CLIQUE[size] for size in (2, 4, 8)}
OPERATOR_TRAIT = 'CUSTOM_OPERATOR_RACK_7'
FREE = frozenset(traits.GPU_P2P_FREE.values())


def operator_flavor_specs(gpus: int, numa_nodes: int) -> dict[str, str]:
    """The extra specs ``nova-gpu-p2p flavor`` tells operators to set."""
    return flavor_commands.properties(flavor_commands.FlavorRequest(
        gpus=gpus, alias=base.GPU_ALIAS, numa_nodes=numa_nodes))


class _TraitsTestBase(lifecycle._WeighedHostsBase):
    """Hosts of different topologies, HGX ones with a simulated NVML.

    The scheduler filters by NUMA and PCI devices, as a GPU cloud must,
    so a host without free GPUs is no candidate.
    """

    ADDITIONAL_FILTERS = ['NUMATopologyFilter', 'PciPassthroughFilter']

    def setUp(self):
        super().setUp()
        # The nvml backend imports pynvml at every discovery; only the
        # hosts started with NVLINK options use it.
        patcher = mock.patch.dict(sys.modules,
                                  {'pynvml': demo_cloud.FakeNvml()})
        patcher.start()
        self.addCleanup(patcher.stop)

    def start_hgx(self, hostname: str) -> None:
        """The demo's HGX host: its eight GPUs are one NVLink clique."""
        self.start_gpu_compute(hostname, demo_cloud.CORPUS_HOST,
                               gpu_p2p_options=NVLINK)

    def provider_traits(self, hostname: str) -> dict:
        """Placement's answer for the compute node provider."""
        return self.placement.get(
            '/resource_providers/%s/traits'
            % self._get_provider_uuid_by_host(hostname),
            version='1.6').body

    def traits_of(self, hostname: str) -> set[str]:
        return set(self.provider_traits(hostname)['traits'])

    def ours(self, hostname: str) -> set[str]:
        """Our traits but the free sizes (FreeTraitsTest has those)."""
        return self.traits_of(hostname) & (traits.OWNED - FREE)

    def free(self, hostname: str) -> set[int]:
        """The sizes of CUSTOM_GPU_P2P_FREE_<n> the host carries."""
        found = self.traits_of(hostname)
        return {size for size, name in traits.GPU_P2P_FREE.items()
                if name in found}

    def run_periodics(self) -> None:
        """Every compute's periodic resource update, as its timer would."""
        ctxt = nova_context.get_admin_context()
        for compute in self.computes.values():
            compute.manager.update_available_resource(ctxt)

    def add_operator_trait(self, hostname: str) -> None:
        """``openstack resource provider trait set``, as operators do.

        The provider's traits plus one, at its current generation.
        """
        self.placement.put('/traits/%s' % OPERATOR_TRAIT, None,
                           version='1.6')
        current = self.provider_traits(hostname)
        self.placement.put(
            '/resource_providers/%s/traits'
            % self._get_provider_uuid_by_host(hostname),
            {'traits': current['traits'] + [OPERATOR_TRAIT],
             'resource_provider_generation':
                 current['resource_provider_generation']},
            version='1.6')
        self.assertIn(OPERATOR_TRAIT, self.traits_of(hostname))


class SchedulingByTraitTest(_TraitsTestBase):
    """Three topologies; the weigher prefers those without the trait.

    So a flavor that lands on the lowest-weighed host got there because
    the scheduler asked placement for the trait, not by chance.
    """

    WEIGHTS = {'pairs': 100, 'pxb': 50, 'hgx': 10}

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('pairs', PAIRS_HOST)
        self.start_gpu_compute('pxb', PXB_HOST)
        self.start_hgx('hgx')

    def test_each_host_reports_its_largest_clique(self):
        affinity = {traits.GPU_NUMA_AFFINITY}
        self.assertEqual(
            {traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2]} | affinity,
            self.ours('pairs'))
        self.assertEqual(
            {traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2],
             traits.GPU_P2P_CLIQUE[4]} | affinity,
            self.ours('pxb'))
        self.assertEqual(
            {traits.GPU_P2P, traits.GPU_P2P_NVLINK} | CLIQUE_2_TO_8
            | affinity,
            self.ours('hgx'))
        # Nova's own traits are there beside ours.
        self.assertIn('COMPUTE_NODE', self.traits_of('hgx'))

    def test_clique_8_flavor_lands_on_the_8_clique_host_until_it_is_full(
            self):
        specs = operator_flavor_specs(8, numa_nodes=2)
        self.assertEqual('required',
                         specs['trait:%s' % traits.GPU_P2P_CLIQUE[8]])
        flavor = self.gpu_flavor(8, numa_nodes=2, vcpus=4,
                                 extra_specs=specs)
        server = self.boot(flavor)
        self.assertEqual('hgx', server['OS-EXT-SRV-ATTR:host'])
        # All eight GPUs in one clique, as the trait promised.
        self.assertEqual({0}, set(layout.gpu_cliques(
            self.domain_xml(server)).values()))
        # 'pairs' still has eight free GPUs and the CPUs for them, but not
        # the trait: the next such boot has nowhere to go.
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        # Without the trait the same request fits the preferred host.
        plain = self.gpu_flavor(8, numa_nodes=2, vcpus=4)
        self.assertEqual('pairs',
                         self.boot(plain)['OS-EXT-SRV-ATTR:host'])

    def test_clique_4_flavor_skips_the_host_of_pairs(self):
        flavor = self.gpu_flavor(
            4, vcpus=4, extra_specs=operator_flavor_specs(4, numa_nodes=1))
        server = self.boot(flavor)
        self.assertEqual('pxb', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(set(layout.gpu_cliques(
            self.domain_xml(server)).values())))


class _FreeTraitsBase(_TraitsTestBase):
    """The pairs host and the HGX host; flavors made with --free-trait."""

    #: [gpu_p2p] p2p_level; None: the default (PXB).
    P2P_LEVEL = None

    def setUp(self):
        super().setUp()
        self.flags(report_free_traits=True, group='gpu_p2p')
        if self.P2P_LEVEL:
            self.flags(p2p_level=self.P2P_LEVEL, group='gpu_p2p')
        self.start_gpu_compute('pairs', PAIRS_HOST)
        self.start_hgx('hgx')

    def free_flavor(self, gpus: int, numa_nodes: int = 1,
                    vcpus: int = 4) -> str:
        """``nova-gpu-p2p flavor --free-trait``'s extra specs."""
        specs = flavor_commands.properties(flavor_commands.FlavorRequest(
            gpus=gpus, alias=base.GPU_ALIAS, numa_nodes=numa_nodes,
            free_trait=True))
        self.assertEqual(
            'required', specs['trait:%s' % traits.GPU_P2P_FREE[gpus]])
        return self.gpu_flavor(gpus, numa_nodes=numa_nodes, vcpus=vcpus,
                               extra_specs=specs)


class FreeTraitsTest(_FreeTraitsBase):
    """CUSTOM_GPU_P2P_FREE_<n>: the sizes that fit on a host now.

    And how stale they get: a claim shows at the next update after its
    domain is defined (the periodic one), a delete at once, since Nova
    updates the host after the domain is gone.
    """

    WEIGHTS = {'hgx': 100, 'pairs': 10}

    def test_sizes_follow_the_servers(self):
        # Four pairs; one clique of eight.
        self.assertEqual({2}, self.free('pairs'))
        self.assertEqual(set(range(2, 9)), self.free('hgx'))
        filler = self.boot(self.gpu_flavor(2, vcpus=2))
        self.assertEqual('hgx', filler['OS-EXT-SRV-ATTR:host'])
        # Claimed before its domain was defined: not shown yet.
        self.assertEqual(set(range(2, 9)), self.free('hgx'))
        self.run_periodics()
        self.assertEqual(set(range(2, 7)), self.free('hgx'))
        self.assertEqual({2}, self.free('pairs'))

        # Eight of one clique fit nowhere now: placement has no host with
        # the trait, and without it Nova's filters find none either.
        eight = self.free_flavor(8, numa_nodes=2)
        self.assertIn('No valid host', self.boot(
            eight, expected_state='ERROR')['fault']['message'])
        self.assertIn('No valid host', self.boot(
            self.gpu_flavor(8, numa_nodes=2, vcpus=4, extra_specs=(
                operator_flavor_specs(8, numa_nodes=2))),
            expected_state='ERROR')['fault']['message'])

        # A delete shows at once, no periodic update needed.
        self._delete_server(filler)
        self.assertEqual(set(range(2, 9)), self.free('hgx'))
        server = self.boot(eight)
        self.assertEqual('hgx', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({0}, set(layout.gpu_cliques(
            self.domain_xml(server)).values()))
        self.run_periodics()
        self.assertEqual(set(), self.free('hgx'))

    def test_cold_migration_goes_where_its_size_is_free(self):
        # A move asks placement with the flavor's traits: the free size
        # counts on the destination too.
        server = self.boot(self.free_flavor(2))
        source = server['OS-EXT-SRV-ATTR:host']
        dest = ({'pairs', 'hgx'} - {source}).pop()
        self.run_periodics()
        self.assertIn(2, self.free(dest))
        # Nova's disk copy needs disk files, which the test double lacks.
        with mock.patch('nova.virt.libvirt.driver.LibvirtDriver'
                        '.migrate_disk_and_power_off', return_value='{}'):
            server = self._migrate_server(server)
        self.assertEqual(dest, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(set(layout.gpu_cliques(
            self.domain_xml(server)).values())))
        server = self._confirm_resize(server)
        self.run_periodics()
        # The source has its pair back, the destination one pair less.
        self.assertEqual({'pairs': {2}, 'hgx': set(range(2, 9))}[source],
                         self.free(source))
        self.assertEqual({'pairs': {2}, 'hgx': set(range(2, 7))}[dest],
                         self.free(dest))


class FreeTraitsNoRescheduleTest(_FreeTraitsBase):
    """Free GPUs that are no free clique: placement leaves the host out.

    :class:`StraddlingClaimRescheduleTest`'s cloud, where the same
    ``required`` build without the trait is tried on 'pairs' first and
    rescheduled.
    """

    WEIGHTS = {'pairs': 100, 'hgx': 10}
    P2P_LEVEL = 'PHB'

    def test_lands_where_four_are_free_first_try(self):
        # Two cliques of four, one per socket.
        self.assertEqual({2, 3, 4}, self.free('pairs'))
        # Three dedicated CPUs each: one pair on each socket.
        filler = self.gpu_flavor(2, vcpus=3)
        for _ in range(2):
            self.assertEqual('pairs',
                             self.boot(filler)['OS-EXT-SRV-ATTR:host'])
        self.run_periodics()
        self.assertEqual({2}, self.free('pairs'))
        server = self.boot(self.free_flavor(4, numa_nodes=2, vcpus=2))
        self.assertEqual('hgx', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(set(layout.gpu_cliques(
            self.domain_xml(server)).values())))
        self.assertNotIn('Error from last host', self.stdlog.logger.output)


class StraddlingClaimRescheduleTest(_TraitsTestBase):
    """The trait says a clique of four exists, not that it is free.

    At p2p_level PHB the pairs host has two cliques of four, one per
    socket. With a pair taken on each socket, Nova can only claim the two
    free pairs, one per clique: a ``required`` build must go elsewhere.
    """

    WEIGHTS = {'pairs': 100, 'hgx': 10}
    REFUSAL = (r'GPU P2P: hw:gpu_p2p_clique=required: GPUs .* cannot form '
               r'one P2P clique on this host')

    def setUp(self):
        super().setUp()
        self.flags(p2p_level='PHB', group='gpu_p2p')
        self.start_gpu_compute('pairs', PAIRS_HOST)
        self.start_hgx('hgx')

    def test_rescheduled_to_a_host_that_can_honour_it(self):
        self.assertIn(traits.GPU_P2P_CLIQUE[4], self.ours('pairs'))
        self.assertNotIn(traits.GPU_P2P_CLIQUE[8], self.ours('pairs'))
        # Three dedicated CPUs each: the second cannot fit on socket 0.
        filler = self.gpu_flavor(2, vcpus=3)
        taken = set()
        for _ in range(2):
            server = self.boot(filler)
            self.assertEqual('pairs', server['OS-EXT-SRV-ATTR:host'])
            taken |= set(base.hostdevs(self.domain_xml(server)))
        # One pair on each socket: two free GPUs in each clique.
        self.assertEqual(2, len(taken & set(layout.NODE0_GPUS)))
        self.assertEqual(2, len(taken & set(layout.NODE1_GPUS)))
        # Still advertised, and the scheduler still picks 'pairs' first.
        self.assertIn(traits.GPU_P2P_CLIQUE[4], self.ours('pairs'))

        flavor = self.gpu_flavor(
            4, numa_nodes=2, vcpus=2,
            extra_specs=operator_flavor_specs(4, numa_nodes=2))
        server = self.boot(flavor)
        self.assertEqual('hgx', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(set(layout.gpu_cliques(
            self.domain_xml(server)).values())))
        self.assertRegex(self.stdlog.logger.output,
                         r'Error from last host: pairs \(node pairs\): .*'
                         + self.REFUSAL)


class TraitsFollowTheHostTest(_TraitsTestBase):
    """Each periodic update re-reads the topology and fixes our traits."""

    def setUp(self):
        super().setUp()
        self.start_gpu_compute('pairs', PAIRS_HOST)
        self.start_hgx('hgx')
        self.own_root = self.sysfs_roots['pairs']

    def other_tree(self, corpus_host: str) -> str:
        return self.useFixture(sysfs_builder.SysfsTree(
            hosts.HOSTS[corpus_host])).root

    def test_traits_appear_and_disappear_with_the_topology(self):
        self.assertEqual({traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2],
                          traits.GPU_NUMA_AFFINITY}, self.ours('pairs'))
        # The same compute now sees a bigger clique ...
        self.sysfs_roots['pairs'] = self.other_tree(PXB_HOST)
        self.run_periodics()
        self.assertEqual({traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2],
                          traits.GPU_P2P_CLIQUE[4],
                          traits.GPU_NUMA_AFFINITY}, self.ours('pairs'))
        # ... then none at all ...
        self.sysfs_roots['pairs'] = self.other_tree(LONERS_HOST)
        self.run_periodics()
        self.assertEqual({traits.GPU_NUMA_AFFINITY}, self.ours('pairs'))
        # ... then its own again.
        self.sysfs_roots['pairs'] = self.own_root
        self.run_periodics()
        self.assertEqual({traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2],
                          traits.GPU_NUMA_AFFINITY}, self.ours('pairs'))

    def test_nvlink_traits_follow_nvml(self):
        self.assertTrue(CLIQUE_2_TO_8 <= self.ours('hgx'))
        self.assertIn(traits.GPU_P2P_NVLINK, self.ours('hgx'))
        # Without NVML the PCI tree alone makes pairs of the eight.
        self.gpu_p2p_options.pop('hgx')
        self.run_periodics()
        self.assertEqual({traits.GPU_P2P, traits.GPU_P2P_CLIQUE[2],
                          traits.GPU_NUMA_AFFINITY}, self.ours('hgx'))
        self.gpu_p2p_options['hgx'] = NVLINK
        self.run_periodics()
        self.assertEqual({traits.GPU_P2P, traits.GPU_P2P_NVLINK,
                          traits.GPU_NUMA_AFFINITY} | CLIQUE_2_TO_8,
                         self.ours('hgx'))

    def test_an_operator_trait_survives(self):
        self.add_operator_trait('pairs')
        before = self.traits_of('pairs') - FREE
        self.run_periodics()
        self.assertEqual(before, self.traits_of('pairs') - FREE)
        # And while ours change, twice.
        self.sysfs_roots['pairs'] = self.other_tree(PXB_HOST)
        self.run_periodics()
        self.assertEqual(before | {traits.GPU_P2P_CLIQUE[4]},
                         self.traits_of('pairs') - FREE)
        self.sysfs_roots['pairs'] = self.own_root
        self.run_periodics()
        self.assertEqual(before, self.traits_of('pairs') - FREE)

    def test_report_traits_false_removes_ours_only(self):
        self.add_operator_trait('hgx')
        before = self.traits_of('hgx')
        self.assertTrue(CLIQUE_2_TO_8 <= before)
        self.flags(report_traits=False, group='gpu_p2p')
        self.run_periodics()
        self.assertEqual(before - traits.OWNED, self.traits_of('hgx'))
        self.assertIn(OPERATOR_TRAIT, self.traits_of('hgx'))
        self.assertEqual(set(), self.ours('pairs'))
        self.flags(report_traits=True, group='gpu_p2p')
        self.run_periodics()
        self.assertEqual(before, self.traits_of('hgx'))

    def test_numa_affinity_trait_on_novas_oldest_libvirt(self):
        """What the trait needs came long before Nova's own minimums."""
        self.start_gpu_compute(
            'old', PAIRS_HOST,
            libvirt_version=versionutils.convert_version_to_int(
                libvirt_driver.MIN_LIBVIRT_VERSION),
            qemu_version=versionutils.convert_version_to_int(
                libvirt_driver.MIN_QEMU_VERSION))
        self.assertEqual({traits.GPU_P2P, traits.GPU_NUMA_AFFINITY,
                          traits.GPU_P2P_CLIQUE[2]},
                         self.ours('old'))


class DeviceProviderTraitsTest(_TraitsTestBase):
    """[pci] report_in_placement: a provider per GPU, traits from config.

    Nova sets each device provider's traits from its ``[pci] device_spec``
    entry, the one ``nova-gpu-p2p topology --device-spec`` prints.

    On the PXB host five GPUs are one clique (ID 0) and 0000:0c:00.0 is in
    none; 0000:0a:00.0 and 0000:0b:00.0 have hex letters in their bus.
    """

    HOSTNAME = 'pxb'
    CLIQUE = ('0000:05:00.0', '0000:06:00.0', '0000:09:00.0',
              '0000:0a:00.0', '0000:0b:00.0')
    LONER = '0000:0c:00.0'
    #: GPUs whose device_spec entry leaves out the clique trait.
    untagged: tuple[str, ...] = ()

    def setUp(self):
        super().setUp()
        self.flags(report_in_placement=True, group='pci')
        # Nova reads the host's sysfs for each device_spec address.
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    def _add_pci_aliases(self, topology):
        """Aliases as usual; device_spec by address, as operators write it.

        Clique GPUs get the entry ``device_spec_tags.entry()`` writes.
        """
        super()._add_pci_aliases(topology)
        specs = []
        for address in sorted(topology.functions):
            function = topology.functions[address]
            if function.is_nvidia_gpu and address in self.CLIQUE:
                if address in self.untagged:
                    specs.append({'address': address})
                    continue
                line = device_spec_tags.entry(address, 0)
                key, _, value = line.partition(' = ')
                self.assertEqual('device_spec', key)
                specs.append(json.loads(value))
            elif function.is_nvidia_gpu or function.is_nic:
                specs.append({'address': address})
        self.flags(device_spec=[json.dumps(spec) for spec in specs],
                   group='pci')

    def device_providers(self) -> dict[str, str]:
        """GPU address (lower case) -> its provider's UUID."""
        root = self._get_provider_uuid_by_host(self.HOSTNAME)
        providers = self.placement.get(
            '/resource_providers?in_tree=%s' % root,
            version='1.14').body['resource_providers']
        prefix = self.HOSTNAME + '_'
        return {rp['name'][len(prefix):].lower(): rp['uuid']
                for rp in providers if rp['name'].startswith(prefix)}

    def device_traits(self) -> dict[str, set[str]]:
        return {address: set(self.placement.get(
            '/resource_providers/%s/traits' % uuid,
            version='1.6').body['traits'])
            for address, uuid in self.device_providers().items()}

    def warnings(self, address: str) -> list[str]:
        return re.findall(
            r'WARNING \[nova_gpu_p2p\.compute\.driver\] GPU P2P: GPU %s is in '
            r'clique 0 but its placement provider has no clique trait and '
            r'its \[pci\] device_spec entry has no gpu_p2p_clique tag: '
            r'set device_spec = .*' % re.escape(address),
            self.stdlog.logger.output)

    def start(self) -> None:
        self.start_gpu_compute(self.HOSTNAME, PXB_HOST)
        # The first update creates the device providers after the driver
        # looked; from the next one on the driver sees them.
        for _ in range(3):
            self.run_periodics()

    def test_each_gpu_provider_carries_its_clique_trait(self):
        self.start()
        found = self.device_traits()
        for address in self.CLIQUE:
            self.assertIn(traits.clique_id_trait(0), found[address],
                          address)
        self.assertFalse({t for t in found[self.LONER]
                          if t.startswith(traits.CLIQUE_ID_PREFIX)})
        self.assertNotIn('GPU P2P: GPU', self.stdlog.logger.output)
        # The compute node provider keeps the host-wide traits.
        self.assertIn(traits.GPU_P2P_CLIQUE[4], self.ours(self.HOSTNAME))

    def test_missing_clique_trait_is_warned_once(self):
        self.untagged = ('0000:05:00.0',)
        self.start()
        self.assertNotIn(traits.clique_id_trait(0),
                         self.device_traits()['0000:05:00.0'])
        self.assertEqual(1, len(self.warnings('0000:05:00.0')),
                         self.stdlog.logger.output)

    def test_missing_clique_trait_is_warned_for_a_hex_letter_bus(self):
        """Nova names the provider ``<node>_<ADDRESS>``, in upper case.

        The driver must find 0000:0a:00.0's provider under that name.
        """
        self.untagged = ('0000:0a:00.0',)
        self.start()
        self.assertNotIn(traits.clique_id_trait(0),
                         self.device_traits()['0000:0a:00.0'])
        self.assertEqual(1, len(self.warnings('0000:0a:00.0')),
                         self.stdlog.logger.output)
