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

"""``nova-gpu-p2p flavor`` and ``topology --device-spec``."""

import contextlib
import dataclasses
import io
import json
import logging
import os
import re
import shlex

import fixtures
from nova.api.openstack.compute.schemas import flavors as flavors_schema
from nova.api.validation.extra_specs import validators as spec_validators
from nova.api.validation import validators
import nova.conf
from nova.conf import pci as pci_conf
from nova.conf import scheduler as scheduler_conf
from nova import exception as nova_exception
from nova import objects
from nova.pci import request as pci_request
from nova.pci import whitelist
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights
from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslo_utils import units

from nova_gpu_p2p.api import extra_spec_validators
from nova_gpu_p2p.cmd import cli
from nova_gpu_p2p.cmd import flavor_commands as fc
from nova_gpu_p2p import exception
from nova_gpu_p2p.guest import pcihole64
from nova_gpu_p2p import scheduler
from nova_gpu_p2p.topology import model
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_cli
from tests.unit import test_corpus

IMAGE_NOTE = (
    "# The image must use the q35 machine type (Nova's x86 default is pc), "
    "and UEFI for large-BAR GPUs:\n"
    "#   openstack image set --property hw_machine_type=q35 "
    "--property hw_firmware_type=uefi IMAGE")
UNSIZED_NOTE = (
    "# No NVIDIA GPU here to size the guest's 64-bit PCI hole by: large-BAR "
    "GPUs (such as 8 x 128 GiB)\n"
    "# need hw:maxphysaddr_mode=emulate and hw:maxphysaddr_bits. Run this on "
    "a GPU compute host, or give --bar-gib.")
#: Eight A100-PCIE with 128 GiB BARs on two NUMA nodes.
LARGE_BAR_HOST = 'pcie-8gpu-4switch-2socket'
#: The request ID of a flavor's PCI alias request.
REQUEST_ID = '6c2b5b8e-2f4d-4d8e-9c1a-0b7f1e3a5d42'


def run_cli(*argv):
    """Exit status, standard output and standard error of the command."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


class TestCliqueTrait(base.TestCase):

    def test_every_size(self):
        expected = {2: 'CUSTOM_GPU_P2P_CLIQUE_2',
                    3: 'CUSTOM_GPU_P2P_CLIQUE_4',
                    4: 'CUSTOM_GPU_P2P_CLIQUE_4',
                    5: 'CUSTOM_GPU_P2P_CLIQUE_8',
                    6: 'CUSTOM_GPU_P2P_CLIQUE_8',
                    7: 'CUSTOM_GPU_P2P_CLIQUE_8',
                    8: 'CUSTOM_GPU_P2P_CLIQUE_8',
                    9: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    10: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    11: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    12: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    13: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    14: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    15: 'CUSTOM_GPU_P2P_CLIQUE_16',
                    16: 'CUSTOM_GPU_P2P_CLIQUE_16'}
        self.assertEqual(expected,
                         {n: fc.clique_trait(n) for n in range(2, 17)})


class TestDefaults(base.TestCase):

    def test_defaults(self):
        request = fc.FlavorRequest(gpus=4, alias='a100')
        self.assertEqual(1, request.numa_nodes)
        self.assertEqual('gpu-p2p.4x', request.flavor_name)
        self.assertEqual(32, request.vcpu_count)
        self.assertEqual(262144, request.ram)
        self.assertEqual(100, request.disk_gb)

    def test_given_values_win(self):
        request = fc.FlavorRequest(gpus=4, alias='a100', name='big',
                                   vcpus=12, ram_mb=1024, disk_gb=20)
        self.assertEqual('big', request.flavor_name)
        self.assertEqual(12, request.vcpu_count)
        self.assertEqual(1024, request.ram)


class TestValidate(base.TestCase):

    def error(self, **kwargs):
        kwargs.setdefault('alias', 'a100')
        return str(self.assertRaises(exception.InvalidFlavorRequest,
                                     fc.validate, fc.FlavorRequest(**kwargs)))

    def test_error_is_a_value_error(self):
        self.assertTrue(issubclass(exception.InvalidFlavorRequest, ValueError))

    def test_one_gpu(self):
        self.assertEqual('--gpus 1: a P2P flavor has 2 to 16 GPUs (a clique '
                         'holds at most 16)', self.error(gpus=1))

    def test_seventeen_gpus(self):
        self.assertEqual('--gpus 17: a P2P flavor has 2 to 16 GPUs (a '
                         'clique holds at most 16)', self.error(gpus=17))

    def test_zero_and_negative_gpus(self):
        self.assertIn('--gpus 0: a P2P flavor has 2 to 16 GPUs',
                      self.error(gpus=0))
        self.assertIn('--gpus -2: a P2P flavor has 2 to 16 GPUs',
                      self.error(gpus=-2))

    def test_bounds_accepted(self):
        fc.validate(fc.FlavorRequest(gpus=2, alias='a100'))
        fc.validate(fc.FlavorRequest(gpus=16, alias='a100'))

    def test_alias_with_colon(self):
        self.assertEqual('--alias \'a100:2\': give the name of a [pci] alias '
                         'from nova.conf, without ":" or ","',
                         self.error(gpus=2, alias='a100:2'))

    def test_alias_with_comma(self):
        self.assertIn("--alias 'a,b': give the name of a [pci] alias",
                      self.error(gpus=2, alias='a,b'))

    def test_empty_alias(self):
        self.assertIn("--alias '': give the name of a [pci] alias",
                      self.error(gpus=2, alias=''))

    def test_zero_numa_nodes(self):
        self.assertEqual('--numa-nodes 0: between 1 and the number of GPUs '
                         '(4)', self.error(gpus=4, numa_nodes=0))

    def test_more_numa_nodes_than_gpus(self):
        self.assertEqual('--numa-nodes 5: between 1 and the number of GPUs '
                         '(4)', self.error(gpus=4, numa_nodes=5))

    def test_as_many_numa_nodes_as_gpus(self):
        fc.validate(fc.FlavorRequest(gpus=4, alias='a100', numa_nodes=4))

    def test_defaults_split_evenly(self):
        # 4 GPUs over 3 nodes: 32 vCPUs and 256 GiB would not split, so
        # the defaults are rounded up, and nothing talks of --vcpus or
        # --ram the user never gave.
        request = fc.FlavorRequest(gpus=4, alias='a100', numa_nodes=3)
        fc.validate(request)
        self.assertEqual(33, request.vcpu_count)
        self.assertEqual(258 * 1024, request.ram)
        request = fc.FlavorRequest(gpus=16, alias='a100', numa_nodes=3)
        fc.validate(request)
        self.assertEqual((129, 1026 * 1024),
                         (request.vcpu_count, request.ram))

    def test_zero_and_negative_sizes(self):
        # Zero is not "use the default": it is refused, naming the flag.
        self.assertEqual('--vcpus 0: must be at least 1',
                         self.error(gpus=2, vcpus=0))
        self.assertEqual('--ram -1: must be at least 1',
                         self.error(gpus=2, ram_mb=-1))
        self.assertEqual('--disk -1: must be at least 0',
                         self.error(gpus=2, disk_gb=-1))

    def test_name_with_newline(self):
        self.assertEqual("--name 'a\\nb': give a name of printable "
                         "characters", self.error(gpus=2, name='a\nb'))

    def test_given_vcpus_uneven(self):
        self.assertEqual(
            '--vcpus 33 does not split evenly over --numa-nodes 2 (Nova '
            'gives each guest NUMA node the same share): give 32 or 34',
            self.error(gpus=4, numa_nodes=2, vcpus=33))

    def test_given_ram_uneven(self):
        self.assertEqual(
            '--ram 1001 does not split evenly over --numa-nodes 2 (Nova '
            'gives each guest NUMA node the same share): give 1000 or 1002',
            self.error(gpus=2, numa_nodes=2, ram_mb=1001))
        # Below one per node, only the next multiple is offered.
        self.assertTrue(self.error(gpus=4, numa_nodes=3, ram_mb=2).endswith(
            ': give 3'))

    def test_even_split_accepted(self):
        fc.validate(fc.FlavorRequest(gpus=6, alias='a100', numa_nodes=3))
        fc.validate(fc.FlavorRequest(gpus=4, alias='a100', numa_nodes=3,
                                     vcpus=24, ram_mb=3072))

    def test_commands_validate(self):
        self.assertRaises(exception.InvalidFlavorRequest, fc.commands,
                          fc.FlavorRequest(gpus=1, alias='a100'))


class TestNovaFlavorAPI(base.TestCase):
    """Issue 35, item 11: what flavor prints, Nova's API takes, and back.

    Judged by Nova's own request schema for POST /flavors.
    """

    NOVA_SCHEMA = validators._SchemaValidator(flavors_schema.create)

    def nova_accepts(self, name='gpu', vcpus=16, ram=1024, disk=100):
        try:
            self.NOVA_SCHEMA.validate({'flavor': {
                'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': disk}})
        except nova_exception.ValidationError:
            return False
        return True

    def ours_accepts(self, name=None, vcpus=16, ram=1024, disk=100,
                     bar_gib=None):
        try:
            fc.validate(fc.FlavorRequest(
                gpus=2, alias='a100', name=name, vcpus=vcpus, ram_mb=ram,
                disk_gb=disk, gpu_bars=(fc.nvidia_bars(bar_gib)
                                        if bar_gib else None)))
        except exception.InvalidFlavorRequest as exc:
            self.assertEqual(1, len(str(exc).splitlines()), exc)
            return False
        return True

    def test_sizes(self):
        for field, value in (('vcpus', 2 ** 31 - 1), ('vcpus', 2 ** 31),
                             ('vcpus', 3000000000), ('ram', 3000000000),
                             ('disk', 3000000000), ('disk', 0),
                             ('vcpus', 0), ('disk', -1), ('ram', 2 ** 31)):
            self.assertEqual(self.nova_accepts(**{field: value}),
                             self.ours_accepts(**{field: value}),
                             (field, value))

    def test_boot_from_volume_has_no_disk(self):
        self.assertTrue(self.ours_accepts(disk=0))

    def test_names(self):
        for name in ('gpu', ' gpu', 'gpu ', 'g p u', '\tgpu', 'gpu\u3000',
                     'x' * 255, 'x' * 256, 'x' * 300, 'a\nb', '\x1b[31m',
                     '\u00e9t\u00e9', '\U0001f600', 'g\u00a0', '\u2028'):
            self.assertEqual(self.nova_accepts(name=name),
                             self.ours_accepts(name=name), repr(name))

    def test_huge_ram_is_blamed(self):
        # The hole goes above the RAM: with 3 PB of it the hole of 8 GPUs
        # ends beyond any guest's address bits, and the RAM is at fault.
        message = str(self.assertRaises(
            exception.InvalidFlavorRequest, fc.validate, fc.FlavorRequest(
                gpus=8, alias='a100', ram_mb=3000000000,
                gpu_bars=fc.nvidia_bars(64))))
        self.assertEqual('--ram 3000000000: must be at most 2147483647, '
                         'Nova\'s limit', message)


class TestProperties(base.TestCase):

    def test_eight_gpus_two_nodes(self):
        self.assertEqual(
            {'pci_passthrough:alias': 'a100:8',
             'group_policy': 'none',
             'hw:gpu_p2p_clique': 'required',
             'hw:gpu_numa_affinity': 'required',
             'trait:CUSTOM_GPU_P2P_CLIQUE_8': 'required',
             'trait:CUSTOM_GPU_NUMA_AFFINITY': 'required',
             'hw:cpu_policy': 'dedicated',
             'hw:numa_nodes': '2'},
            fc.properties(fc.FlavorRequest(gpus=8, alias='a100',
                                           numa_nodes=2)))

    def test_three_gpus(self):
        self.assertEqual(
            {'pci_passthrough:alias': 'h100-sxm:3',
             'group_policy': 'none',
             'hw:gpu_p2p_clique': 'required',
             'hw:gpu_numa_affinity': 'required',
             'trait:CUSTOM_GPU_P2P_CLIQUE_4': 'required',
             'trait:CUSTOM_GPU_NUMA_AFFINITY': 'required',
             'hw:cpu_policy': 'dedicated',
             'hw:numa_nodes': '1'},
            fc.properties(fc.FlavorRequest(gpus=3, alias='h100-sxm')))

    def test_free_trait_of_its_size(self):
        for gpus in (2, 3, 8, 16):
            props = fc.properties(fc.FlavorRequest(gpus=gpus, alias='a',
                                                   free_trait=True))
            self.assertEqual(
                'required', props['trait:CUSTOM_GPU_P2P_FREE_%d' % gpus])
            self.assertEqual(
                props, dict(fc.properties(fc.FlavorRequest(
                    gpus=gpus, alias='a')),
                    **{'trait:CUSTOM_GPU_P2P_FREE_%d' % gpus: 'required'}))
        rc, out, err = run_cli('flavor', '--alias', 'a', '--gpus', '3',
                               '--bar-gib', '80', '--free-trait')
        self.assertEqual(0, rc, err)
        self.assertIn('    --property trait:CUSTOM_GPU_P2P_FREE_3=required',
                      out.splitlines())
        # Created first: placement refuses a query for a trait it does not
        # know, and Nova's scheduler then fails the request with a
        # TypeError instead of NoValidHost.
        self.assertEqual('openstack --os-placement-api-version 1.6 trait '
                         'create CUSTOM_GPU_P2P_FREE_3', out.splitlines()[0])
        # Only asked for: a host that does not report it yet is not lost.
        rc, out, err = run_cli('flavor', '--alias', 'a', '--gpus', '3',
                               '--bar-gib', '80')
        self.assertNotIn('FREE', out)

    def test_values_are_strings(self):
        props = fc.properties(fc.FlavorRequest(gpus=16, alias='a'))
        self.assertEqual({str}, {type(v) for v in props.values()})
        self.assertEqual('required', props['trait:CUSTOM_GPU_P2P_CLIQUE_16'])


class TestGroupPolicy(base.TestCase):
    """``group_policy=none``: Nova's own default for PCI groups, stated."""

    def setUp(self):
        super().setUp()
        conf = self.useFixture(config_fixture.Config(nova.conf.CONF))
        conf.config(pci_in_placement=True, group='filter_scheduler')
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova.scheduler.utils', level=logging.WARNING))
        objects.register_all()

    def placement_query(self, extra_specs: dict[str, str]) -> str:
        """What nova-scheduler asks placement for a two-GPU server."""
        flavor = objects.Flavor(vcpus=16, memory_mb=1024, root_gb=10,
                                ephemeral_gb=0, swap=0,
                                extra_specs=extra_specs)
        alias = objects.InstancePCIRequest(
            count=2, alias_name='a100', request_id=REQUEST_ID,
            spec=[{'vendor_id': '10de', 'product_id': '2330'}])
        # requested_resources: Nova 33 leaves it unset, as the scheduler
        # finds it on a new request.
        spec = objects.RequestSpec(
            flavor=flavor, is_bfv=False, requested_resources=[],
            pci_requests=objects.InstancePCIRequests(requests=[alias]))
        spec.generate_request_groups_from_pci_requests()
        return scheduler_utils.resources_from_request_spec(
            None, spec, None).to_querystring()

    def test_every_flavor_has_it(self):
        for gpus in (2, 3, 16):
            self.assertEqual('none', fc.properties(fc.FlavorRequest(
                gpus=gpus, alias='a100'))[fc.GROUP_POLICY_KEY])

    def test_novas_api_validates_it(self):
        spec_validators.validate(fc.GROUP_POLICY_KEY, 'none')
        # Nova's validator knows the key: it refuses what is not a policy.
        self.assertRaises(nova_exception.ValidationError,
                          spec_validators.validate,
                          fc.GROUP_POLICY_KEY, 'nope')

    def test_novas_scheduler_asks_the_same_without_a_warning(self):
        specs = fc.properties(fc.FlavorRequest(gpus=2, alias='a100'))
        without = {k: v for k, v in specs.items()
                   if k != fc.GROUP_POLICY_KEY}
        # One numbered group per GPU: without a policy Nova warns on every
        # request, then picks 'none' itself.
        query = self.placement_query(without)
        self.assertIn('did not specify any group policy', self.log.output)
        self.assertIn('group_policy=none', query)
        self.assertIn('resources%s-1=CUSTOM_PCI_10DE_2330' % REQUEST_ID,
                      query)
        self.log.reset_output()
        self.assertEqual(query, self.placement_query(specs))
        self.assertEqual('', self.log.output)


class TestCommands(base.TestCase):

    def test_defaults(self):
        self.assertEqual(
            ['openstack flavor create gpu-p2p.8x --vcpus 64 --ram 524288 '
             '--disk 100',
             'openstack flavor set gpu-p2p.8x \\\n'
             '    --property pci_passthrough:alias=a100:8 \\\n'
             '    --property group_policy=none \\\n'
             '    --property hw:gpu_p2p_clique=required \\\n'
             '    --property hw:gpu_numa_affinity=required \\\n'
             '    --property trait:CUSTOM_GPU_P2P_CLIQUE_8=required \\\n'
             '    --property trait:CUSTOM_GPU_NUMA_AFFINITY=required \\\n'
             '    --property hw:cpu_policy=dedicated \\\n'
             '    --property hw:numa_nodes=1',
             IMAGE_NOTE, UNSIZED_NOTE],
            fc.commands(fc.FlavorRequest(gpus=8, alias='a100')))

    def test_everything_given(self):
        lines = fc.commands(fc.FlavorRequest(
            gpus=4, alias='l40s', numa_nodes=2, name='p2p.l40s.4',
            vcpus=48, ram_mb=131072, disk_gb=40))
        self.assertEqual('openstack flavor create p2p.l40s.4 --vcpus 48 '
                         '--ram 131072 --disk 40', lines[0])
        self.assertTrue(lines[1].startswith(
            'openstack flavor set p2p.l40s.4 \\\n'
            '    --property pci_passthrough:alias=l40s:4 \\\n'), lines[1])
        self.assertIn('    --property trait:CUSTOM_GPU_P2P_CLIQUE_4=required',
                      lines[1])
        self.assertTrue(lines[1].endswith('--property hw:numa_nodes=2'),
                        lines[1])
        self.assertEqual([IMAGE_NOTE, UNSIZED_NOTE], lines[2:])

    def test_name_with_space_is_quoted(self):
        lines = fc.commands(fc.FlavorRequest(gpus=2, alias='a100',
                                             name='my gpu flavor'))
        self.assertTrue(lines[0].startswith(
            "openstack flavor create 'my gpu flavor' --vcpus 16"), lines[0])
        self.assertTrue(lines[1].startswith(
            "openstack flavor set 'my gpu flavor' \\\n"), lines[1])

    def test_name_with_quote_and_dollar_survives_the_shell(self):
        name = "it's $HOME; rm -rf /"
        lines = fc.commands(fc.FlavorRequest(gpus=2, alias='a100',
                                             name=name))
        self.assertEqual(['openstack', 'flavor', 'create', name, '--vcpus',
                          '16', '--ram', '131072', '--disk', '100'],
                         shlex.split(lines[0]))
        self.assertEqual(name, shlex.split(lines[1])[3])

    def test_odd_alias_is_quoted(self):
        lines = fc.commands(fc.FlavorRequest(gpus=2, alias='my gpu'))
        self.assertIn("    --property pci_passthrough:alias='my gpu:2' \\\n",
                      lines[1])
        words = shlex.split(lines[1].replace('\\\n', ' '))
        self.assertIn('pci_passthrough:alias=my gpu:2', words)

    def test_set_line_round_trips_through_the_shell(self):
        words = shlex.split(fc.commands(fc.FlavorRequest(
            gpus=8, alias='a100', numa_nodes=2))[1].replace('\\\n', ' '))
        self.assertEqual(
            ['openstack', 'flavor', 'set', 'gpu-p2p.8x',
             '--property', 'pci_passthrough:alias=a100:8',
             '--property', 'group_policy=none',
             '--property', 'hw:gpu_p2p_clique=required',
             '--property', 'hw:gpu_numa_affinity=required',
             '--property', 'trait:CUSTOM_GPU_P2P_CLIQUE_8=required',
             '--property', 'trait:CUSTOM_GPU_NUMA_AFFINITY=required',
             '--property', 'hw:cpu_policy=dedicated',
             '--property', 'hw:numa_nodes=2'],
            words)

    def test_notes_are_shell_comments(self):
        for bars in (None, fc.nvidia_bars(1), fc.nvidia_bars(128)):
            notes = fc.commands(fc.FlavorRequest(gpus=8, alias='a100',
                                                 gpu_bars=bars))[2:]
            for line in '\n'.join(notes).splitlines():
                self.assertTrue(line.startswith('#'), line)


class TestAddressBits(base.TestCase):
    """hw:maxphysaddr_* sized as nova-compute sizes the guest's PCI hole."""

    def request(self, gpus=8, bars=None, **kwargs):
        if bars is None:
            bars = fc.largest_bars(test_corpus.discover(LARGE_BAR_HOST)
                                   .gpus())
        return fc.FlavorRequest(gpus=gpus, alias='a100', gpu_bars=bars,
                                **kwargs)

    def test_bar_gib_stands_for_the_gpus_bars(self):
        # --bar-gib 128 says what sysfs says of an A100 or H100.
        self.assertEqual(fc.nvidia_bars(128), self.request().gpu_bars)

    def test_largest_gpu_of_the_host(self):
        small = model.PCIFunction('0000:01:00.0', model.NVIDIA_VENDOR_ID,
                                  0x2230, 0x030000, None, 'pci0000:00',
                                  bars64=fc.nvidia_bars(1))
        large = dataclasses.replace(small, address='0000:02:00.0',
                                    bars64=fc.nvidia_bars(64))
        self.assertEqual(fc.nvidia_bars(64),
                         fc.largest_bars([small, large, small]))
        self.assertIsNone(fc.largest_bars([]))

    def test_eight_large_bars_need_the_bits_the_driver_asks_for(self):
        request = self.request(numa_nodes=2)
        bits = fc.maxphysaddr_bits(request)
        self.assertEqual(42, bits)
        self.assertEqual('emulate', fc.properties(request)[
            'hw:maxphysaddr_mode'])
        self.assertEqual('42', fc.properties(request)[
            'hw:maxphysaddr_bits'])
        # Exactly what nova-compute's rule asks of such a guest, and
        # enough for it: one bit less and the guest would not start.
        bars = request.gpu_bars * 8
        memory = request.ram * units.Mi
        asked = pcihole64.plan('auto', bars, memory,
                               pcihole64.QEMU_DEFAULT_PHYS_BITS).problem
        self.assertEqual(str(bits), re.search(
            r'hw:maxphysaddr_bits=(\d+)', asked).group(1))
        self.assertIsNone(pcihole64.plan('auto', bars, memory, bits).problem)
        self.assertIsNotNone(
            pcihole64.plan('auto', bars, memory, bits - 1).problem)

    def test_the_guests_ram_counts(self):
        # The hole sits above guest RAM, aligned to its size.
        self.assertEqual(43, fc.maxphysaddr_bits(self.request(
            ram_mb=4 << 20)))
        self.assertEqual(41, fc.maxphysaddr_bits(self.request(gpus=4)))

    def test_small_bars_need_nothing(self):
        request = self.request(gpus=2, bars=fc.nvidia_bars(64))
        self.assertIsNone(fc.maxphysaddr_bits(request))
        self.assertNotIn('hw:maxphysaddr_bits', fc.properties(request))
        self.assertEqual("# 2 GPUs with 64 GiB BARs fit the guest's 40 "
                         "physical address bits: no hw:maxphysaddr_* "
                         "needed.", fc.commands(request)[-1])

    def test_unknown_bars_size_nothing(self):
        request = self.request(bars=None)
        request = dataclasses.replace(request, gpu_bars=None)
        self.assertIsNone(fc.guest_hole(request))
        self.assertNotIn('hw:maxphysaddr_mode', fc.properties(request))
        self.assertEqual(UNSIZED_NOTE, fc.commands(request)[-1])

    def test_sized_flavor_commands(self):
        lines = fc.commands(self.request(numa_nodes=2))
        self.assertTrue(lines[1].endswith(
            '    --property hw:maxphysaddr_mode=emulate \\\n'
            '    --property hw:maxphysaddr_bits=42'), lines[1])
        self.assertIn('8 GPUs with 128 GiB BARs need a 2048 GiB 64-bit PCI '
                      'hole', lines[-1])
        # Our validators let nova-api take them at any microversion.
        self.assertTrue(lines[-1].endswith(
            'nova-api takes these keys with nova-gpu-p2p installed.'))

    def test_novas_api_takes_every_property(self):
        # With our validators loaded, at the latest microversion.
        for key, value in fc.properties(self.request(numa_nodes=2)).items():
            spec_validators.validate(key, value)

    def test_constants_are_novas_and_the_drivers(self):
        self.assertEqual(
            (extra_spec_validators.MAXPHYSADDR_MODE_KEY,
             extra_spec_validators.MAXPHYSADDR_BITS_KEY),
            (fc.MAXPHYSADDR_MODE_KEY, fc.MAXPHYSADDR_BITS_KEY))


class TestSchedulerSettings(base.TestCase):
    """The nova.conf lines work with Nova's own options and loaders."""

    def load(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('\n'.join(fc.scheduler_settings()) + '\n')
        opts = cfg.ConfigOpts()
        pci_conf.register_opts(opts)
        scheduler_conf.register_opts(opts)
        opts([], project='nova', default_config_files=[path])
        return opts

    def test_values(self):
        opts = self.load()
        self.assertTrue(opts.pci.report_in_placement)
        self.assertEqual([], opts.pci.device_spec)
        group = opts.filter_scheduler
        self.assertTrue(group.pci_in_placement)
        self.assertEqual(
            ['nova.scheduler.filters.all_filters',
             'nova_gpu_p2p.scheduler.GPUP2PCliqueFilter'],
            group.available_filters)
        self.assertEqual(
            nova.conf.CONF.filter_scheduler.enabled_filters
            + ['GPUP2PCliqueFilter', 'PciPassthroughFilter',
               'NUMATopologyFilter'],
            group.enabled_filters)
        self.assertEqual(
            nova.conf.CONF.filter_scheduler.weight_classes
            + ['nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher'],
            group.weight_classes)

    def test_novas_loaders_find_every_class(self):
        group = self.load().filter_scheduler
        found = filters.HostFilterHandler().get_matching_classes(
            group.available_filters)
        by_name = {cls.__name__: cls for cls in found}
        for name in group.enabled_filters:
            self.assertIn(name, by_name)
        self.assertIs(scheduler.GPUP2PCliqueFilter,
                      by_name['GPUP2PCliqueFilter'])
        weighers = weights.HostWeightHandler().get_matching_classes(
            group.weight_classes)
        self.assertIn(scheduler.GPUP2PCliqueFitWeigher, weighers)
        # Nova's own weighers stay.
        self.assertGreater(len(weighers), 5)

    def test_names_the_device_spec_step(self):
        text = '\n'.join(fc.scheduler_settings())
        self.assertIn('#   sudo nova-gpu-p2p topology --device-spec '
                      '--config-file /etc/nova/nova.conf', text)


class TestWholeBoard(base.TestCase):
    """``--whole-board``: 8 GPUs and the board's 4 NVSwitches, no clique."""

    def request(self, **kwargs):
        values = dict(gpus=8, alias='h100', numa_nodes=2, whole_board=True)
        values.update(kwargs)
        return fc.FlavorRequest(**values)

    def load(self, request):
        """The printed nova.conf lines, read with Nova's own options."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('\n'.join(fc.whole_board_settings(request)) + '\n')
        opts = cfg.ConfigOpts()
        pci_conf.register_opts(opts)
        opts([], project='nova', default_config_files=[path])
        return opts

    def test_properties(self):
        specs = fc.properties(self.request())
        self.assertEqual('h100:8,nvswitch:4', specs['pci_passthrough:alias'])
        self.assertNotIn('hw:gpu_p2p_clique', specs)
        self.assertFalse([key for key in specs
                          if key.startswith('trait:CUSTOM_GPU_P2P_CLIQUE')])
        self.assertEqual('required', specs['hw:gpu_numa_affinity'])
        self.assertEqual('2', specs['hw:numa_nodes'])
        for key, value in specs.items():
            spec_validators.validate(key, value)

    def test_name_and_note(self):
        lines = fc.commands(self.request(nvswitch_alias='sw'))
        self.assertTrue(lines[0].startswith(
            'openstack flavor create gpu-p2p.8x-board '), lines[0])
        self.assertIn('    --property pci_passthrough:alias=h100:8,sw:4 \\',
                      lines[1].splitlines())
        self.assertIn('runs Fabric Manager (nvidia-fabricmanager) itself',
                      lines[-1])
        self.assertIn('FABRIC_MODE=0', lines[-1])

    def test_novas_alias_and_device_spec(self):
        opts = self.load(self.request(nvswitch_alias='sw'))
        (alias,) = [json.loads(a) for a in opts.pci.alias]
        self.assertEqual({'name': 'sw', 'vendor_id': '10de',
                          'product_id': '22a3', 'device_type': 'type-PCI'},
                         alias)
        fixture = self.useFixture(config_fixture.Config(nova.conf.CONF))
        fixture.config(alias=opts.pci.alias + [json.dumps(
            {'name': 'h100', 'vendor_id': '10de', 'product_id': '2330',
             'device_type': 'type-PCI'})], group='pci')
        objects.register_all()
        flavor = objects.Flavor(extra_specs=fc.properties(self.request(
            nvswitch_alias='sw')))
        requests = pci_request.get_pci_requests_from_flavor(flavor)
        self.assertEqual(
            [('h100', 8, '2330'), ('sw', 4, '22a3')],
            sorted((r.alias_name, r.count, r.spec[0]['product_id'])
                   for r in requests.requests))
        switch = {'vendor_id': '10de', 'product_id': '22a3',
                  'address': '0000:0d:00.0', 'parent_addr': None}
        self.assertIsNotNone(whitelist.Whitelist(
            opts.pci.device_spec).device_assignable(switch))

    def test_cli(self):
        rc, out, err = run_cli(
            'flavor', '--gpus', '8', '--alias', 'h100',
            '--whole-board', '--bar-gib', '128')
        self.assertEqual(0, rc, err)
        self.assertIn('    --property pci_passthrough:alias=h100:8,'
                      'nvswitch:4 \\', out.splitlines())
        self.assertEqual('\n'.join(fc.whole_board_settings(self.request())
                                   + fc.scheduler_settings()) + '\n', err)

    def test_bad_combinations(self):
        for argv, message in (
                (('--gpus', '4', '--whole-board'),
                 '--whole-board --gpus 4: a whole HGX board is 8 GPUs and '
                 'its 4 NVSwitches; give --gpus 8'),
                (('--gpus', '8', '--nvswitch-alias', 'sw'),
                 "--nvswitch-alias 'sw': only with --whole-board"),
                (('--gpus', '8', '--whole-board', '--nvswitch-alias', 'a:1'),
                 "--nvswitch-alias 'a:1': give the name of a [pci] alias "
                 'from nova.conf, without ":" or ","'),
                (('--gpus', '8', '--whole-board', '--nvswitch-alias',
                  'h100'),
                 "--nvswitch-alias 'h100': the GPUs' alias; the NVSwitches "
                 'need one of their own'),
                (('--gpus', '8', '--whole-board', '--free-trait'),
                 '--free-trait: not with --whole-board (a whole board is no '
                 'clique or partition of the host; its servers need every '
                 'GPU and NVSwitch free, which placement counts itself)')):
            rc, out, err = run_cli(
                'flavor', '--alias', 'h100', '--bar-gib', '80', *argv)
            self.assertEqual((2, '', 'nova-gpu-p2p: %s\n' % message),
                             (rc, out, err), argv)

    def test_bars_beyond_qemus_address_bits(self):
        # 99999999999 GiB on 2 GPUs would print hw:maxphysaddr_bits=70,
        # which the API's validator (32 to 52) refuses.
        rc, out, err = run_cli('flavor', '--alias', 'h100', '--gpus', '2',
                               '--bar-gib', '99999999999')
        self.assertEqual(
            (2, '', 'nova-gpu-p2p: GPUs with a 99999999999 GiB BAR '
             '(--bar-gib, else this host\'s largest) need 70 guest address '
             'bits; QEMU allows 32 to 52 (hw:maxphysaddr_bits)\n'),
            (rc, out, err))
        # 64 TiB BARs still fit.
        rc, out, _ = run_cli('flavor', '--alias', 'h100', '--gpus', '2',
                             '--bar-gib', '65536')
        self.assertEqual(0, rc)
        self.assertIn('hw:maxphysaddr_bits=', out)


class TestFlavorCLI(base.TestCase):

    def setUp(self):
        super().setUp()
        # A /sys without NVIDIA GPUs, as on a controller.
        self.no_gpu = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.no_gpu, 'bus', 'pci', 'devices'))

    run_cli = staticmethod(run_cli)

    def test_prints_commands(self):
        rc, out, err = self.run_cli('flavor', '--gpus', '8', '--alias',
                                    'a100', '--sysfs-root', self.no_gpu)
        self.assertEqual(0, rc)
        # The nova.conf settings after the commands, on stderr: stdout
        # stays a shell script.
        self.assertEqual('\n'.join(fc.scheduler_settings()) + '\n', err)
        lines = out.splitlines()
        self.assertEqual('openstack flavor create gpu-p2p.8x --vcpus 64 '
                         '--ram 524288 --disk 100', lines[0])
        self.assertEqual('openstack flavor set gpu-p2p.8x \\', lines[1])
        self.assertIn('    --property trait:CUSTOM_GPU_P2P_CLIQUE_8='
                      'required \\', lines)
        self.assertIn('    --property hw:numa_nodes=1', lines)
        self.assertTrue(out.endswith(UNSIZED_NOTE + '\n'), out)

    def test_sized_from_this_hosts_gpus(self):
        rc, out, err = self.run_cli(
            'flavor', '--gpus', '8', '--alias', 'a100', '--numa-nodes', '2',
            '--sysfs-root', test_corpus.tree(LARGE_BAR_HOST))
        self.assertEqual(0, rc, err)
        self.assertIn('    --property hw:maxphysaddr_mode=emulate \\\n'
                      '    --property hw:maxphysaddr_bits=42\n', out)
        self.assertEqual(out, self.run_cli(
            'flavor', '--gpus', '8', '--alias', 'a100', '--numa-nodes', '2',
            '--bar-gib', '128')[1])

    def test_reads_the_hosts_sys_by_default(self):
        self.useFixture(fixtures.MockPatch(
            'nova_gpu_p2p.topology.sysfs.SysfsBackend.discover',
            return_value=test_corpus.discover(LARGE_BAR_HOST)))
        rc, out, err = self.run_cli('flavor', '--gpus', '4', '--alias', 'a')
        self.assertEqual(0, rc, err)
        self.assertIn('hw:maxphysaddr_bits=41', out)

    def test_bar_gib_and_sysfs_root_errors(self):
        for argv in (('--bar-gib', '0'), ('--bar-gib', 'x'),
                     # Issue 35 item 5: not ASCII decimal, not a number.
                     ('--bar-gib', '6\u0664'), ('--bar-gib', '\u00b2'),
                     ('--bar-gib', '64', '--sysfs-root', self.no_gpu)):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                exc = self.assertRaises(
                    SystemExit, cli.main,
                    ['flavor', '--gpus', '2', '--alias', 'a'] + list(argv))
            self.assertEqual(2, exc.code, argv)
        rc, out, err = self.run_cli('flavor', '--gpus', '2', '--alias', 'a',
                                    '--sysfs-root', '/nonexistent')
        self.assertEqual((2, ''), (rc, out))
        self.assertEqual(1, len(err.splitlines()), err)
        self.assertIn('cannot list PCI devices in /nonexistent', err)

    def test_all_options(self):
        rc, out, err = self.run_cli(
            'flavor', '--gpus', '4', '--alias', 'l40s', '--numa-nodes', '2',
            '--name', 'p2p 4', '--vcpus', '48', '--ram', '131072',
            '--disk', '40')
        self.assertEqual(0, rc)
        self.assertIn('[filter_scheduler]\npci_in_placement = True\n', err)
        self.assertEqual("openstack flavor create 'p2p 4' --vcpus 48 --ram "
                         "131072 --disk 40", out.splitlines()[0])
        self.assertIn('    --property pci_passthrough:alias=l40s:4 \\',
                      out.splitlines())
        self.assertIn('    --property hw:numa_nodes=2', out.splitlines())

    def test_bad_request(self):
        rc, out, err = self.run_cli('flavor', '--gpus', '1', '--alias',
                                    'a100')
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        self.assertEqual('nova-gpu-p2p: --gpus 1: a P2P flavor has 2 to 16 '
                         'GPUs (a clique holds at most 16)\n', err)

    def test_bad_numa_nodes(self):
        rc, out, err = self.run_cli('flavor', '--gpus', '2', '--alias',
                                    'a100', '--numa-nodes', '3')
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        self.assertIn('--numa-nodes 3: between 1 and the number of GPUs (2)',
                      err)

    def test_bad_alias(self):
        rc, out, err = self.run_cli('flavor', '--gpus', '2', '--alias',
                                    'a100:2')
        self.assertEqual(2, rc)
        self.assertIn("--alias 'a100:2'", err)

    def test_gpus_and_alias_required(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(SystemExit, cli.main,
                                    ['flavor', '--alias', 'a100'])
        self.assertEqual(2, exc.code)
        self.assertIn('--gpus', err.getvalue())
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(SystemExit, cli.main,
                                    ['flavor', '--gpus', '2'])
        self.assertEqual(2, exc.code)
        self.assertIn('--alias', err.getvalue())

    def test_gpus_not_a_number(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(SystemExit, cli.main,
                                    ['flavor', '--gpus', 'eight',
                                     '--alias', 'a100'])
        self.assertEqual(2, exc.code)


def _spec(address, clique_id, rank=0):
    """The line, with ``rank`` order tags (the GPU's place in claim order)."""
    return ('device_spec = {"address": "%s", "traits": '
            '"CUSTOM_GPU_P2P_CLIQUE_ID_%d", "gpu_p2p_clique": "%d"%s}'
            % (address, clique_id, clique_id, ''.join(
                ', "gpu_p2p_order_%d": "%d"' % (n, rank)
                for n in range(1, rank + 1))))


class TestDeviceSpecCLI(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.TreeReads())

    def run_cli(self, *argv):
        rc, out, err = test_cli.run(*argv)
        self.assertEqual(0, rc, err)
        return out

    def test_one_line_per_gpu_with_a_clique(self):
        # At PXB each pair behind one switch is a clique, in address order.
        out = self.run_cli('topology', '--device-spec', '--sysfs-root',
                           test_corpus.tree('pcie-8gpu-4switch-2socket'))
        # The claim order is the address order here: each socket's
        # cliques are.
        self.assertEqual(
            [_spec('0000:03:00.0', 0, 0), _spec('0000:04:00.0', 0, 1),
             _spec('0000:07:00.0', 1, 2), _spec('0000:08:00.0', 1, 3),
             _spec('0000:83:00.0', 2, 4), _spec('0000:84:00.0', 2, 5),
             _spec('0000:87:00.0', 3, 6), _spec('0000:88:00.0', 3, 7)],
            out.splitlines())

    def test_lines_are_json_after_the_key(self):
        out = self.run_cli('topology', '--device-spec', '--sysfs-root',
                           test_corpus.tree('pcie-8gpu-4switch-2socket'))
        for line in out.splitlines():
            key, value = line.split(' = ', 1)
            self.assertEqual('device_spec', key)
            self.assertEqual(['address', 'gpu_p2p_clique', 'traits'],
                             sorted(k for k in json.loads(value)
                                    if not k.startswith('gpu_p2p_order_')))

    def test_level_applies(self):
        out = self.run_cli('topology', '--device-spec', '--level', 'SYS',
                           '--sysfs-root',
                           test_corpus.tree('pcie-8gpu-4switch-2socket'))
        self.assertEqual(
            [_spec(a, 0, rank) for rank, a in enumerate((
                '0000:03:00.0', '0000:04:00.0', '0000:07:00.0',
                '0000:08:00.0', '0000:83:00.0', '0000:84:00.0',
                '0000:87:00.0', '0000:88:00.0'))],
            out.splitlines())

    def test_gpus_without_clique_get_no_line(self):
        # acs-redirect-switch: the first two GPUs sit behind redirecting
        # ports and are alone; the other two share clique 0.
        expected = hosts.EXPECTED['acs-redirect-switch']
        a, b, c, d = expected.addresses
        out = self.run_cli('topology', '--device-spec', '--sysfs-root',
                           test_corpus.tree('acs-redirect-switch'))
        self.assertEqual([_spec(c, 0), _spec(d, 0, 1)], out.splitlines())
        self.assertNotIn(a, out)
        self.assertNotIn(b, out)

    def test_host_without_cliques_prints_no_device_spec(self):
        out = self.run_cli('topology', '--device-spec', '--level', 'NV',
                           '--sysfs-root',
                           test_corpus.tree('pcie-8gpu-4switch-2socket'))
        # Nothing to paste: stdout stays empty, the reason goes to stderr.
        self.assertEqual('', out)

    def test_not_with_json(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            exc = self.assertRaises(
                SystemExit, cli.main,
                ['topology', '--device-spec', '--json', '--sysfs-root',
                 test_corpus.tree('pcie-8gpu-4switch-2socket')])
        self.assertEqual(2, exc.code)
        self.assertIn('not allowed with argument', err.getvalue())
