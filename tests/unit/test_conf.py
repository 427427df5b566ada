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

import fixtures
from oslo_config import cfg
from oslo_utils import units

from nova_gpu_p2p import conf
from nova_gpu_p2p import conf_types
from nova_gpu_p2p import exception
from nova_gpu_p2p.guest import pcihole64
from nova_gpu_p2p.topology import backends
from tests.unit import base


class ConfTestCase(base.TestCase):
    """Parses a real nova.conf file, as nova-compute does at start-up."""

    def load(self, body: str) -> cfg.ConfigOpts:
        path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        with open(path, 'w') as f:
            f.write('[gpu_p2p]\n' + body + '\n')
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        opts(['--config-file', path], project='nova',
             default_config_files=[])
        self.addCleanup(opts.reset)
        return opts


class TestDefaults(ConfTestCase):

    def test_spec_defaults(self):
        opts = self.load('')
        conf.validate(opts)
        group = opts.gpu_p2p
        self.assertEqual('sysfs', group.topology_backend)
        self.assertEqual('/sys', group.sysfs_root)
        self.assertIsNone(group.static_topology_file)
        self.assertEqual('PXB', group.p2p_level)
        self.assertEqual('route', group.acs_policy)
        self.assertEqual([], group.clique_map)
        self.assertEqual('root_complex', group.expander_bus_grouping)
        self.assertEqual(['gpu', 'nic'], group.align_device_types)
        self.assertTrue(group.guest_numa_distances)
        self.assertEqual('auto', group.pcihole64)
        self.assertTrue(group.report_traits)
        self.assertEqual(10.0, group.clique_fit_weight_multiplier)
        self.assertEqual('127.0.0.1:6666', group.fabric_manager_address)
        self.assertEqual('libnvfm.so.1', group.fabric_manager_library)
        self.assertEqual('/var/lib/nova/gpu_p2p_module_ids.json',
                         group.module_id_file)

    def test_list_opts_has_every_option(self):
        [(group, opts)] = conf.list_opts()
        self.assertEqual('gpu_p2p', group.name)
        self.assertEqual(
            {'topology_backend', 'sysfs_root', 'static_topology_file',
             'p2p_level', 'acs_policy', 'clique_map',
             'expander_bus_grouping', 'align_device_types',
             'guest_numa_distances', 'pcihole64', 'guest_topology',
             'clique_fit_weight_multiplier', 'report_traits',
             'report_free_traits',
             'fabric_manager_address', 'fabric_manager_library',
             'module_id_file', 'allow_consumer_gpu_cliques',
             'trusted_gpu_models', 'grace_numa_cells_per_gpu',
             'pci_ids_file', 'candidates_per_host', 'spare_hosts'},
            {opt.dest for opt in opts})
        for opt in opts:
            self.assertTrue(opt.help, opt.dest)


class TestGoodValues(ConfTestCase):

    def test_levels(self):
        for level in ('NV', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS'):
            self.assertEqual(level,
                             self.load('p2p_level = %s' % level).gpu_p2p
                             .p2p_level)

    def test_clique_map(self):
        opts = self.load('clique_map = 0000:81:00.0:0, 82:00.0:15,'
                         '0000:C1:00.0:3')
        conf.validate(opts)
        self.assertEqual([('0000:81:00.0', 0), ('0000:82:00.0', 15),
                          ('0000:c1:00.0', 3)], opts.gpu_p2p.clique_map)

    def test_pcihole64(self):
        for text, value in (('auto', 'auto'), ('off', 'off'),
                            ('512', 512), ('1', 1)):
            self.assertEqual(
                value, self.load('pcihole64 = %s' % text).gpu_p2p.pcihole64)

    def test_align_device_types(self):
        self.assertEqual(
            ['all'],
            self.load('align_device_types = all').gpu_p2p.align_device_types)
        self.assertEqual(
            ['gpu'],
            self.load('align_device_types = gpu').gpu_p2p.align_device_types)

    def test_fabric_manager_address(self):
        for text in ('10.0.0.5:6666', 'fm.example.org:7000',
                     '[::1]:6666', '/var/run/nvidia-fabricmanager/fm.sock'):
            opts = self.load('fabric_manager_address = %s' % text)
            conf.validate(opts)
            self.assertEqual(text, opts.gpu_p2p.fabric_manager_address)

    def test_trusted_gpu_models(self):
        opts = self.load('trusted_gpu_models = 10de:2BB1, '
                         '10de:2bb5:10de:204e')
        conf.validate(opts)
        self.assertEqual(['10de:2bb1', '10de:2bb5:10de:204e'],
                         [str(m) for m in opts.gpu_p2p.trusted_gpu_models])
        self.assertEqual([], self.load('').gpu_p2p.trusted_gpu_models)

    def test_static_backend_with_file(self):
        backends.validate(self.load('topology_backend = static\n'
                                    'static_topology_file = /etc/topo.yaml'))


class TestBadValues(ConfTestCase):
    """Each bad value stops start-up with a message naming the option."""

    def assertRefused(self, body, option, *fragments):
        opts = self.load(body)
        exc = self.assertRaises(exception.InvalidConfig, conf.validate, opts)
        message = str(exc)
        self.assertIn('[gpu_p2p] %s' % option, message)
        for fragment in fragments:
            self.assertIn(fragment, message)
        self.assertNotIsInstance(exc, ValueError)

    def test_p2p_level(self):
        self.assertRefused('p2p_level = FOO', 'p2p_level', "'FOO'",
                           'NV, PIX, PXB, PHB, NODE, SYS')

    def test_p2p_level_is_case_sensitive(self):
        self.assertRefused('p2p_level = pxb', 'p2p_level', "'pxb'")

    def test_acs_policy(self):
        self.assertRefused('acs_policy = strict', 'acs_policy', 'route',
                           'ignore')

    def test_expander_bus_grouping(self):
        self.assertRefused('expander_bus_grouping = socket',
                           'expander_bus_grouping', 'root_complex', 'numa')

    def test_align_device_types(self):
        self.assertRefused('align_device_types = gpu,fpga',
                           'align_device_types', "'fpga'")

    def test_clique_map_id_out_of_range(self):
        self.assertRefused('clique_map = 0000:81:00.0:16', 'clique_map',
                           'clique ID 16', '0 to 15')

    def test_clique_map_not_bdf_id(self):
        self.assertRefused('clique_map = 0000:81:00.0', 'clique_map',
                           'BDF:ID')

    def test_clique_map_bad_address(self):
        self.assertRefused('clique_map = gpu0:1', 'clique_map', "'gpu0'")

    def test_numbers_are_ascii_decimal(self):
        # Issue 35 item 5: '\u0663'.isdigit() and int() reads it as 3;
        # '\u00b2'.isdigit() and int() raises.
        for digit in ('\u0663', '\u00b2'):
            self.assertRefused('clique_map = 0000:81:00.0:%s' % digit,
                               'clique_map', 'BDF:ID')
            self.assertRefused('pcihole64 = 6%s' % digit, 'pcihole64',
                               'auto, off or a size in GiB')
            self.assertRefused('fabric_manager_address = 127.0.0.1:666%s'
                               % digit, 'fabric_manager_address',
                               'HOST:PORT')

    def test_pcihole64(self):
        self.assertRefused('pcihole64 = big', 'pcihole64', "'big'",
                           'auto, off or a size in GiB')
        self.assertRefused('pcihole64 = 0', 'pcihole64', 'at least 1 GiB')

    def test_trusted_gpu_models(self):
        for text in ('2bb1', '10de:2bb1:10de', '10de:2bb1:10de:204e:0',
                     'nvidia:2bb1', '10de-2bb1', 'GeForce'):
            self.assertRefused('trusted_gpu_models = %s' % text,
                               'trusted_gpu_models', "'%s'" % text,
                               'vendor:device or '
                               'vendor:device:subvendor:subdevice')
        self.assertRefused('trusted_gpu_models = 1002:744c',
                           'trusted_gpu_models', "'1002:744c' is not an "
                           "NVIDIA GPU: only vendor 10de GPUs get cliques")

    def test_booleans(self):
        self.assertRefused('report_traits = maybe', 'report_traits')
        self.assertRefused('guest_numa_distances = 2',
                           'guest_numa_distances')

    def test_fabric_manager_address(self):
        for text in ('127.0.0.1', 'localhost:', ':6666', '127.0.0.1:0',
                     '127.0.0.1:65536', '127.0.0.1:fm',
                     'run/fm.sock'):
            self.assertRefused('fabric_manager_address = %s' % text,
                               'fabric_manager_address', "'%s'" % text,
                               'HOST:PORT', 'absolute Unix socket path')

    def test_static_backend_without_file(self):
        opts = self.load('topology_backend = static')
        exc = self.assertRaises(exception.InvalidConfig, backends.validate,
                                opts)
        self.assertEqual('[gpu_p2p] topology_backend = static needs '
                         '[gpu_p2p] static_topology_file to name the '
                         'topology file', str(exc))

    def test_backends_say_what_they_can_do(self):
        self.assertEqual(
            {'fabricmanager': backends.Capabilities(
                partitions=True, module_ids=True),
             'nvml': backends.Capabilities(),
             'static': backends.Capabilities(required=(
                 ('static_topology_file', 'to name the topology file'),)),
             'sysfs': backends.Capabilities(bindings=True),
             'no-such-backend': backends.Capabilities()},
            {name: backends.capabilities(name) for name in (
                'fabricmanager', 'nvml', 'static', 'sysfs',
                'no-such-backend')})
        self.assertEqual(['fabricmanager'], backends.offering('partitions'))


class TestSampleFormatting(base.TestCase):
    """The generated sample config writes our values back readably."""

    def test_clique_assignment_round_trip(self):
        kind = conf_types.CliqueAssignment()
        value = kind('81:00.0:4')
        self.assertEqual('0000:81:00.0:4', kind._formatter(value))
        self.assertEqual(value, kind(kind._formatter(value)))

    def test_fabric_manager_address_round_trip(self):
        kind = conf_types.FabricManagerAddress()
        for value in ('127.0.0.1:6666', '/run/fm.sock'):
            self.assertEqual(value, kind(kind._formatter(value)))

    def test_pcihole64_round_trip(self):
        kind = conf_types.PCIHole64()
        for value in ('auto', 'off', 64):
            self.assertEqual(value, kind(kind._formatter(value)))


class TestWhatConsumersAccept(ConfTestCase):
    """Issue 35, item 6: refused at start, not at first use."""

    def assertRefused(self, body, option, *fragments):
        opts = self.load(body)
        message = str(self.assertRaises(exception.InvalidConfig,
                                        conf.validate, opts))
        self.assertIn('[gpu_p2p] %s' % option, message)
        self.assertEqual(1, len(message.splitlines()), message)
        for fragment in fragments:
            self.assertIn(fragment, message)

    def test_pcihole64_within_qemu_address_bits(self):
        self.assertRefused('pcihole64 = 99999999999999999999', 'pcihole64',
                           'at most 2097152')
        self.assertRefused('pcihole64 = 2097153', 'pcihole64',
                           'at most 2097152')
        self.assertRefused('pcihole64 = %s' % ('9' * 5000), 'pcihole64')
        self.assertRefused('pcihole64 = \u0666', 'pcihole64')
        self.assertEqual(conf_types.MAX_PCIHOLE64_GIB, self.load(
            'pcihole64 = 2097152').gpu_p2p.pcihole64)

    def test_pcihole64_bound_is_qemus(self):
        self.assertEqual(
            pcihole64.MAX_PHYS_BITS,
            pcihole64.min_phys_bits(
                conf_types.MAX_PCIHOLE64_GIB * units.Gi, 0))

    def test_fabric_manager_address_ascii(self):
        for text in ('127.0.0.1:\u0666\u0666\u0666\u0666',
                     '127.0.0.1:\u00b2', 'h\u00f6st:6666',
                     '127.0.0.1:000000000006666'):
            self.assertRefused('fabric_manager_address = %s' % text,
                               'fabric_manager_address', 'HOST:PORT')

    def test_fabric_manager_socket_fits_sun_path(self):
        self.assertRefused('fabric_manager_address = /%s' % ('s' * 300),
                           'fabric_manager_address', '107 bytes',
                           'it has 301')
        longest = '/' + 's' * (conf_types.MAX_UNIX_SOCKET_BYTES - 1)
        self.assertEqual(longest, self.load(
            'fabric_manager_address = %s' % longest
        ).gpu_p2p.fabric_manager_address)

    def test_empty_paths_refused_at_start(self):
        """Issue 42 item 11: ``pci_ids_file =`` would read no database."""
        for option in ('sysfs_root', 'static_topology_file', 'pci_ids_file',
                       'module_id_file', 'fabric_manager_library'):
            self.assertRefused('%s =' % option, option,
                               'an empty path names no file')

    def test_clique_map_ascii(self):
        self.assertRefused('clique_map = 0000:81:00.0:\u0663',
                           'clique_map', 'BDF:ID')

    def test_numbers_ascii_and_finite(self):
        for value in ('nan', 'inf', '-inf', '\u0661.5'):
            self.assertRefused('clique_fit_weight_multiplier = %s' % value,
                               'clique_fit_weight_multiplier')
        for value in ('\u0663', '99999999'):
            self.assertRefused('candidates_per_host = %s' % value,
                               'candidates_per_host')
        for value in ('\u0663', '-2', '99999'):
            self.assertRefused('spare_hosts = %s' % value, 'spare_hosts')
        self.assertEqual(-1, self.load('spare_hosts = -1').gpu_p2p.spare_hosts)

    def test_paths_are_one_line(self):
        # An indented line after a path continues it: a newline in it.
        for option in ('sysfs_root', 'static_topology_file',
                       'pci_ids_file', 'module_id_file',
                       'fabric_manager_library'):
            self.assertRefused('%s = /etc/nova\n  /topo.yaml' % option,
                               option, "'/etc/nova\\n/topo.yaml'",
                               'one line')

    def test_dollar_references(self):
        self.assertRefused('sysfs_root = $no_such_option', 'sysfs_root',
                           'no_such_option')
        self.assertRefused('static_topology_file = $module_id_file\n'
                           'module_id_file = $static_topology_file',
                           'static_topology_file', 'lead back')
