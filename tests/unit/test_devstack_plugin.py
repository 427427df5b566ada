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

"""devstack/plugin.sh, phase by phase, against a stand-in of devstack.

Each run is one ``bash`` that sources the stand-in helpers
(tests/fixtures/devstack/functions: they record every call, and the INI
helpers edit the file as devstack's do), then devstack/settings, then
plugin.sh once per phase, as stack.sh, unstack.sh and clean.sh do, with
local.conf's ``[[post-config|...]]`` sections merged where stack.sh merges
them. The nova.conf written is read back with oslo.config's parser and
checked with the driver's own option types and Nova's own PCI alias schema.

With ``NOVA_GPU_P2P_DEVSTACK_DIR`` set to a checkout of openstack/devstack,
the same tests run on devstack's own function library instead of the
stand-in's (only what installs or starts something is stood in for):
doc/source/devstack.rst says at which devstack commit they passed.

The compute host's GPUs are a corpus host's sysfs tree
(:data:`HOST_TREE`), never those of the machine running the tests.

The shellcheck test skips in one line where shellcheck is missing; with
``NOVA_GPU_P2P_REQUIRE_TOOLS=1`` (CI) it fails instead.
"""

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import fixtures
import jsonschema
import nova.conf
from nova.pci import request as pci_request
from nova.pci import whitelist
from oslo_config import cfg

from nova_gpu_p2p.checks import scheduler_settings
from nova_gpu_p2p.cmd import flavor_commands as fc
from nova_gpu_p2p import conf
from nova_gpu_p2p import device_spec_tags
import tests
from tests.unit import base
from tests.unit import test_corpus

REPO = tests.ROOT
PLUGIN = os.path.join(REPO, 'devstack', 'plugin.sh')
SETTINGS = os.path.join(REPO, 'devstack', 'settings')
STANDIN = os.path.join(REPO, 'tests', 'fixtures', 'devstack')
DOC = os.path.join(REPO, 'doc', 'source', 'devstack.rst')
REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
MISSING_SHELLCHECK = ('shellcheck not found: apt-get install shellcheck '
                      '(or run tools/install-ci-deps.sh)')

DRIVER = 'gpu_p2p.GPUP2PLibvirtDriver'
LIBVIRT_DRIVER = 'libvirt.LibvirtDriver'
P2P_FILTERS = list(fc.P2P_FILTERS)
NOVA_AVAILABLE_FILTERS = fc.NOVA_ALL_FILTERS
WEIGHERS = [fc.NOVA_ALL_WEIGHERS + ',' + fc.CLIQUE_WEIGHER]
#: The host the plugin's nova-gpu-p2p topology reads: at PXB, a clique of
#: two GPUs behind each of its four switches.
HOST_TREE = 'pcie-8gpu-4switch-2socket'
CLIQUES = {'0000:03:00.0': 0, '0000:04:00.0': 0, '0000:07:00.0': 1,
           '0000:08:00.0': 1, '0000:83:00.0': 2, '0000:84:00.0': 2,
           '0000:87:00.0': 3, '0000:88:00.0': 3}
#: The device_spec values of those GPUs, in file order; the first two
#: switches on NUMA node 0, the others on node 1.
NUMA = {a: int(a >= '0000:80') for a in CLIQUES}
CLIQUE_SPECS = [line.split(' = ', 1)[1]
                for line in device_spec_tags.entries(CLIQUES, NUMA)]
# devstack's lib/nova NOVA_FILTERS, which create_nova_conf writes.
DEVSTACK_FILTERS = ('ComputeFilter,ComputeCapabilitiesFilter,'
                    'ImagePropertiesFilter,ServerGroupAntiAffinityFilter,'
                    'ServerGroupAffinityFilter,SameHostFilter,'
                    'DifferentHostFilter')
# Part of what create_nova_conf and hypervisor-libvirt write before the
# post-config phase.
SEED = """[DEFAULT]
debug = True
compute_driver = libvirt.LibvirtDriver

[filter_scheduler]
enabled_filters = %s

[libvirt]
cpu_mode = none
virt_type = kvm
""" % DEVSTACK_FILTERS
#: nova_cell1.conf as devstack's lib/nova leaves it, in short.
CELL_SEED = ('[database]\nconnection = sqlite://\n\n'
             '[conductor]\nworkers = 2\n')
#: placement.conf as devstack's lib/placement leaves it, in short.
PLACEMENT_SEED = '[placement_database]\nconnection = sqlite://\n'
ALL_SERVICES = 'key,g-api,n-api,n-cond,n-sch,n-cpu,placement-api'
#: stack.sh's plugin phases in order, and nova-compute's start between
#: post-config and extra (start_nova_compute copies nova.conf to
#: nova-cpu.conf).
STACK = ['stack pre-install', 'stack install', 'stack post-config',
         'merge-post-config', 'start-nova', 'stack extra',
         'stack test-config']
#: A checkout of openstack/devstack whose functions the tests run on.
DEVSTACK_DIR = os.environ.get('NOVA_GPU_P2P_DEVSTACK_DIR', '')
CLEAN = ['unstack', 'clean']


def installs(host):
    """The plugin's pip installs: the agent's distribution, the driver."""
    checkout = os.path.join(host.dest, 'nova-gpu-p2p')
    return [['pip_install', '--no-deps', os.path.join(checkout,
                                                      'guest-agent')],
            ['pip_install', '--no-deps', checkout]]


#: A static topology of one GPU, for OPTION_VALUES.
STATIC_TOPOLOGY = os.path.join(STANDIN, 'static-topology.yaml')
#: Valid values for every [gpu_p2p] option, none of them the default.
OPTION_VALUES = {
    'topology_backend': 'static',
    'sysfs_root': '/srv/sys',
    'static_topology_file': STATIC_TOPOLOGY,
    'p2p_level': 'PHB',
    'acs_policy': 'ignore',
    'clique_map': '0000:81:00.0:0,0000:82:00.0:0',
    'expander_bus_grouping': 'numa',
    'align_device_types': 'gpu',
    'guest_numa_distances': 'False',
    'pcihole64': '512',
    'guest_topology': 'False',
    'clique_fit_weight_multiplier': '2.5',
    'report_traits': 'False',
    'report_free_traits': 'True',
    'fabric_manager_address': '10.0.0.5:6666',
    'fabric_manager_library': '/opt/nvidia/libnvfm.so.1',
    'module_id_file': '/srv/module_ids.json',
    'allow_consumer_gpu_cliques': 'True',
    'trusted_gpu_models': '10de:2bb1,10de:2bb5:10de:204e',
    'pci_ids_file': '/usr/share/hwdata/pci.ids',
    'candidates_per_host': '5',
    'spare_hosts': '3',
    'grace_numa_cells_per_gpu': '4',
}
PCI = {'GPU_P2P_ALIAS': 'h100', 'GPU_P2P_PRODUCT_ID': '2330'}
NIC_SPEC = '{"vendor_id": "15b3", "product_id": "101e"}'
#: A NIC's device_spec in local.conf, as an operator would add it.
LOCAL_CONF_PCI = """[[local|localrc]]
enable_plugin nova-gpu-p2p https://opendev.org/openstack/nova-gpu-p2p

[[post-config|$NOVA_CONF]]
[pci]
device_spec = %s
""" % NIC_SPEC.replace('"', '\\"')
BROAD_SPEC = '{"vendor_id":"10de","product_id":"2330"}'


def seed_with(*lines):
    """SEED with these option lines added to its [filter_scheduler]."""
    return SEED.replace('[filter_scheduler]\n', '[filter_scheduler]\n'
                        + ''.join(line + '\n' for line in lines))


def parse_ini(path):
    """{section: {option: [values]}}, multi valued options kept.

    Sections without options are left out: they mean nothing to
    oslo.config, and devstack's inidelete leaves the section line.
    """
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    return {name: options for name, options in sections.items() if options}


def load_gpu_p2p(path):
    """The [gpu_p2p] group as the driver reads it; validates every value."""
    opts = cfg.ConfigOpts()
    conf.register_opts(opts)
    opts([], project='nova', default_config_files=[path])
    conf.validate(opts)
    return opts.gpu_p2p


class Devstack(fixtures.Fixture):
    """A devstack host: DEST, /etc/nova, the stand-in, the call log."""

    def __init__(self, services=ALL_SERVICES, seed=SEED, local_conf='',
                 **settings):
        super().__init__()
        self.services = services
        self.seed = seed
        self.local_conf = local_conf
        self.settings = settings

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.dest = os.path.join(self.root, 'opt', 'stack')
        etc = os.path.join(self.root, 'etc', 'nova')
        os.makedirs(os.path.join(self.dest, 'async'))
        os.makedirs(etc)
        self.nova_conf = os.path.join(etc, 'nova.conf')
        self.cpu_conf = os.path.join(etc, 'nova-cpu.conf')
        self.placement_conf = os.path.join(self.root, 'placement.conf')
        # devstack's superconductor layout (its default): cell 1's
        # conductor reads only nova_cell1.conf, made on n-cond hosts.
        self.cell_conf = os.path.join(etc, 'nova_cell1.conf')
        if 'n-cond' in self.services.split(','):
            with open(self.cell_conf, 'w') as f:
                f.write(CELL_SEED)
        with open(self.placement_conf, 'w') as f:
            f.write(PLACEMENT_SEED)
        self.log = os.path.join(self.root, 'calls.log')
        with open(self.nova_conf, 'w') as f:
            f.write(self.seed)
        self.etc = etc
        self.top_dir = os.path.join(self.dest, 'devstack')
        os.makedirs(self.top_dir)
        if self.local_conf:
            with open(os.path.join(self.top_dir, 'local.conf'), 'w') as f:
                f.write(self.local_conf)
        # devstack's git checkout of Nova, which setup_develop installed.
        self.nova_dir = os.path.join(self.dest, 'nova')
        os.makedirs(os.path.join(self.nova_dir, 'nova', 'virt'))
        for package in ('nova', os.path.join('nova', 'virt')):
            open(os.path.join(self.nova_dir, package, '__init__.py'),
                 'w').close()

    def run(self, phases, check=True, prologue='', **settings):
        script = '\n'.join([
            # stack.sh's own: errexit (and nounset with NOUNSET=1); the
            # stand-in is run stricter.
            'set -o errexit' if DEVSTACK_DIR else
            'set -o errexit -o nounset -o pipefail',
            'source "$STANDIN/functions"',
            prologue,
            'source "$SETTINGS"',
            'for phase in "$@"; do',
            '    if [[ "$phase" == merge-post-config ]]; then',
            '        merge_config_group "$TOP_DIR/local.conf" post-config',
            '    elif [[ "$phase" == start-nova ]]; then',
            '        cp "$NOVA_CONF" "$NOVA_CPU_CONF"',
            '        merge_config_file "$TOP_DIR/local.conf" post-config '
            '\'$NOVA_CPU_CONF\'',
            '    else',
            '        source "$PLUGIN" $phase',
            '    fi',
            'done',
        ])
        env = {
            'PATH': os.path.join(STANDIN, 'bin') + os.pathsep
            + os.environ.get('PATH', '/usr/bin:/bin'),
            'HOME': self.root,
            'LC_ALL': 'C.UTF-8',
            'PYTHONPATH': REPO,
            'STANDIN': STANDIN,
            'SETTINGS': SETTINGS,
            'PLUGIN': PLUGIN,
            'DEVSTACK_STANDIN_LOG': self.log,
            'DEVSTACK_STANDIN_PYTHON': sys.executable,
            'ENABLED_SERVICES': self.services,
            'VIRT_DRIVER': 'libvirt',
            'DEST': self.dest,
            'NOVA_CONF': self.nova_conf,
            'NOVA_CONF_DIR': self.etc,
            'NOVA_CPU_CONF': self.cpu_conf,
            'NOVA_DIR': self.nova_dir,
            'TOP_DIR': self.top_dir,
            'PYTHON': os.path.join(STANDIN, 'bin', 'nova-python'),
            'DEVSTACK_REAL_DIR': DEVSTACK_DIR,
            'PLACEMENT_CONF': self.placement_conf,
            'NOVA_BIN_DIR': os.path.join(STANDIN, 'bin'),
        }
        env.update(self.settings)
        env.update(settings)
        if not ({'GPU_P2P_SYSFS_ROOT', 'GPU_P2P_TOPOLOGY_BACKEND'}
                & set(env)):
            # The plugin runs nova-gpu-p2p topology on compute hosts: let
            # it read a corpus host, not this machine.
            env['STANDIN_SYSFS_ROOT'] = test_corpus.tree(HOST_TREE)
        result = subprocess.run(
            ['bash', '-c', script, 'devstack'] + list(phases), env=env,
            cwd=self.root, capture_output=True, text=True, timeout=120)
        if check and result.returncode:
            raise AssertionError('%s failed (%d):\n%s%s' % (
                phases, result.returncode, result.stdout, result.stderr))
        return result

    def plugin_calls(self):
        """The names of the calls the plugin made (not stack.sh's merges)."""
        return [c[0] for c in self.calls()
                if c[0] not in ('merge_config_group', 'merge_config_file')]

    def calls(self, name=None):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            calls = [shlex.split(line) for line in f]
        return [c for c in calls if name is None or c[0] == name]

    def ini(self, path=None):
        return parse_ini(path or self.nova_conf)

    def parse(self, text):
        """An INI text parsed as ini() parses the files."""
        path = os.path.join(self.root, 'parsed.conf')
        with open(path, 'w') as f:
            f.write(text)
        return parse_ini(path)


class TestStack(base.TestCase):

    def stack(self, services=ALL_SERVICES, seed=SEED, **settings):
        host = self.useFixture(Devstack(services, seed, **settings))
        host.run(STACK)
        return host

    def assertFlavor(self, host, request):
        """The openstack calls are what nova-gpu-p2p flavor prints."""
        calls = host.calls('openstack')
        self.assertEqual(
            ['openstack', 'flavor', 'show', request.flavor_name], calls[0])
        printed = [shlex.split(line.replace('\\\n', ' '))
                   for line in fc.commands(request)
                   if not line.startswith('#')]
        self.assertEqual(printed, calls[1:])
        create, set_ = calls[1:]
        self.assertEqual(
            ['flavor', 'create', request.flavor_name,
             '--vcpus', str(request.vcpu_count), '--ram', str(request.ram),
             '--disk', str(request.disk_gb)], create[1:])
        self.assertEqual(['flavor', 'set', request.flavor_name],
                         set_[1:4])
        args = set_[4:]
        self.assertEqual(['--property'] * (len(args) // 2), args[::2])
        self.assertEqual(fc.properties(request),
                         dict(a.split('=', 1) for a in args[1::2]))

    def test_everything_on_one_host(self):
        settings = {'GPU_P2P_%s' % k.upper(): v
                    for k, v in OPTION_VALUES.items()}
        host = self.stack(
            GPU_P2P_ALIAS='h100', GPU_P2P_PRODUCT_ID='2330',
            GPU_P2P_CPU_DEDICATED_SET='4-63',
            GPU_P2P_FLAVOR_GPUS='8', GPU_P2P_FLAVOR_NUMA_NODES='2',
            **settings)
        for path in (host.nova_conf, host.cpu_conf):
            ini = host.ini(path)
            self.assertEqual([DRIVER], ini['DEFAULT']['compute_driver'])
            self.assertEqual({k: [v] for k, v in OPTION_VALUES.items()},
                             ini['gpu_p2p'])
            self.assertEqual(['4-63'], ini['compute']['cpu_dedicated_set'])
            self.assertEqual(
                [DEVSTACK_FILTERS + ',' + ','.join(P2P_FILTERS)],
                ini['filter_scheduler']['enabled_filters'])
            self.assertEqual(
                [fc.CLIQUE_FILTER, NOVA_AVAILABLE_FILTERS],
                ini['filter_scheduler']['available_filters'])
            self.assertEqual(WEIGHERS,
                             ini['filter_scheduler']['weight_classes'])
            self.assertEqual(['True'],
                             ini['filter_scheduler']['pci_in_placement'])
            self.assertEqual(['True'], ini['pci']['report_in_placement'])
            [alias] = ini['pci']['alias']
            alias = json.loads(alias)
            jsonschema.validate(alias, pci_request._ALIAS_SCHEMA)
            self.assertEqual({'name': 'h100', 'vendor_id': '10de',
                              'product_id': '2330',
                              'device_type': 'type-PCI'}, alias)
            # The static topology's one GPU, asserted in clique 0 by
            # clique_map, then the whole model.
            self.assertEqual(
                [device_spec_tags.entry('0000:81:00.0', 0).split(' = ', 1)[1],
                 BROAD_SPEC], ini['pci']['device_spec'])
            specs = whitelist.Whitelist(ini['pci']['device_spec'][1:])
            gpu = {'vendor_id': '10de', 'product_id': '2330',
                   'address': '0000:81:00.0', 'parent_addr': None,
                   'dev_type': 'type-PCI'}
            self.assertIsNotNone(specs.device_assignable(gpu))
            self.assertIsNone(specs.device_assignable(
                dict(gpu, product_id='22a3')))
            # What Nova does not know stays as devstack wrote it.
            self.assertEqual(['none'], ini['libvirt']['cpu_mode'])
        self.assertEqual(installs(host), host.calls('pip_install'))
        self.assertEqual([], host.calls('setup_develop'))
        self.assertFlavor(host, fc.FlavorRequest(gpus=8, alias='h100',
                                                 numa_nodes=2))
        self.assertEqual([], host.calls('warn'))

    def test_every_option_setting_is_a_valid_option(self):
        settings = {'GPU_P2P_%s' % k.upper(): v
                    for k, v in OPTION_VALUES.items()}
        host = self.stack(**settings)
        written = host.ini()['gpu_p2p']
        self.assertEqual(sorted(opt.name for opt in conf.OPTS),
                         sorted(written))
        group = load_gpu_p2p(host.nova_conf)
        for opt in conf.OPTS:
            self.assertEqual(opt.type(OPTION_VALUES[opt.name]),
                             group[opt.dest], opt.name)
            self.assertNotEqual(opt.default, group[opt.dest], opt.name)

    def test_defaults_select_the_driver_and_scheduling(self):
        host = self.stack()
        ini = host.ini()
        self.assertEqual([DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertNotIn('gpu_p2p', ini)
        self.assertEqual({'report_in_placement': ['True']}, ini['pci'])
        self.assertNotIn('compute', ini)
        self.assertEqual(
            {'enabled_filters': [DEVSTACK_FILTERS + ','
                                 + ','.join(P2P_FILTERS)],
             'available_filters': [fc.CLIQUE_FILTER, NOVA_AVAILABLE_FILTERS],
             'weight_classes': WEIGHERS,
             'pci_in_placement': ['True']},
            ini['filter_scheduler'])
        self.assertEqual([], host.calls('openstack'))
        # The [gpu_p2p] values checked as nova-compute will read them.
        self.assertEqual(
            [['sudo', os.path.join(STANDIN, 'bin', 'nova-gpu-p2p'),
              'topology', '--device-spec', '--config-file', host.nova_conf]],
            host.calls('sudo'))
        group = load_gpu_p2p(host.nova_conf)
        for opt in conf.OPTS:
            self.assertEqual(opt.default, group[opt.dest], opt.name)
        # No restart: everything is written before stack.sh starts Nova.
        written = {c[1] for c in host.calls() if c[0].startswith('ini')
                   and c[0] not in ('iniget', 'ini_has_option',
                                    'iniget_multiline')}
        self.assertEqual({host.nova_conf, host.cell_conf,
                          host.placement_conf}, written)
        # Placement's cap as scheduling-scale.rst recommends it.
        self.assertEqual({'max_placement_results': ['20']},
                         ini['scheduler'])
        self.assertEqual(
            {'max_allocation_candidates': ['20'],
             'allocation_candidates_generation_strategy': ['breadth-first']},
            host.ini(host.placement_conf)['placement'])
        self.assertEqual(
            {'optimize_for_wide_provider_trees': ['True']},
            host.ini(host.placement_conf)['workarounds'])

    def test_filters_off(self):
        host = self.stack(GPU_P2P_SCHEDULER_FILTERS='False')
        self.assertEqual({'enabled_filters': [DEVSTACK_FILTERS],
                          'pci_in_placement': ['True']},
                         host.ini()['filter_scheduler'])
        # Without the filter a small cap would lose fitting hosts.
        self.assertNotIn('scheduler', host.ini())
        self.assertNotIn('placement', host.ini(host.placement_conf))

    def test_placement_cap(self):
        host = self.stack(GPU_P2P_PLACEMENT_CAP='200')
        self.assertEqual(['200'],
                         host.ini()['scheduler']['max_placement_results'])
        self.assertEqual(['200'], host.ini(host.placement_conf)[
            'placement']['max_allocation_candidates'])
        host = self.stack(GPU_P2P_PLACEMENT_CAP='0')
        self.assertNotIn('scheduler', host.ini())
        self.assertNotIn('placement', host.ini(host.placement_conf))

    def test_pci_in_placement_off(self):
        host = self.stack(GPU_P2P_PCI_IN_PLACEMENT='False', **PCI)
        ini = host.ini()
        self.assertNotIn('report_in_placement', ini['pci'])
        self.assertNotIn('pci_in_placement', ini['filter_scheduler'])
        # The clique tags stay: they cost nothing without placement.
        self.assertEqual(CLIQUE_SPECS + [BROAD_SPEC],
                         ini['pci']['device_spec'])

    def test_scheduler_settings_are_what_the_flavor_command_prints(self):
        host = self.stack()
        printed = host.parse('\n'.join(fc.scheduler_settings()))
        written = host.ini()
        for section, options in printed.items():
            for option, values in options.items():
                if option != 'enabled_filters':
                    self.assertEqual(sorted(values),
                                     sorted(written[section][option]),
                                     option)
        [enabled] = written['filter_scheduler']['enabled_filters']
        self.assertEqual(P2P_FILTERS, enabled.split(',')[-3:])

    def test_no_filter_list_starts_from_novas_default(self):
        seed = SEED.replace('enabled_filters = %s' % DEVSTACK_FILTERS, '')
        host = self.stack(seed=seed)
        nova_default = nova.conf.CONF.filter_scheduler.enabled_filters
        self.assertEqual(
            [','.join(nova_default + P2P_FILTERS)],
            host.ini()['filter_scheduler']['enabled_filters'])

    def test_filters_already_there_are_not_repeated(self):
        filters = ('GPUP2PCliqueFilter,NUMATopologyFilter,ComputeFilter,'
                   'PciPassthroughFilter')
        weighers = '%s,%s' % (fc.CLIQUE_WEIGHER, fc.NOVA_ALL_WEIGHERS)
        seed = seed_with('weight_classes = ' + weighers,
                         'available_filters = ' + fc.CLIQUE_FILTER).replace(
            DEVSTACK_FILTERS, filters)
        host = self.stack(seed=seed)
        self.assertEqual(
            {'enabled_filters': [filters],
             'weight_classes': [weighers],
             # Nova's own are not added where available_filters is set.
             'available_filters': [fc.CLIQUE_FILTER],
             'pci_in_placement': ['True']},
            host.ini()['filter_scheduler'])

    def test_others_weighers_and_filters_are_kept(self):
        seed = seed_with('weight_classes = my.Weigher',
                         'available_filters = my.Filter')
        host = self.stack(seed=seed)
        group = host.ini()['filter_scheduler']
        self.assertEqual(['my.Weigher,' + fc.CLIQUE_WEIGHER],
                         group['weight_classes'])
        self.assertEqual([fc.CLIQUE_FILTER, 'my.Filter'],
                         group['available_filters'])

    def test_compute_host(self):
        host = self.stack(services='n-cpu,placement-client',
                          GPU_P2P_FLAVOR_GPUS='2', **PCI)
        ini = host.ini()
        self.assertEqual([DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertEqual(1, len(ini['pci']['alias']))
        self.assertEqual(['True'], ini['pci']['report_in_placement'])
        self.assertEqual({'enabled_filters': [DEVSTACK_FILTERS]},
                         ini['filter_scheduler'])
        self.assertEqual([], host.calls('openstack'))

    def test_gpu_device_spec_lines_first(self):
        """Each GPU's line, as topology --device-spec prints it, then ours.

        Nova uses the first entry that matches a GPU: the GPU's own line,
        with its clique trait and tag.
        """
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        host = self.stack(services='n-cpu,placement-client', **PCI)
        specs = host.ini()['pci']['device_spec']
        self.assertEqual(CLIQUE_SPECS + [BROAD_SPEC], specs)
        self.assertEqual(
            [['sudo', os.path.join(STANDIN, 'bin', 'nova-gpu-p2p'),
              'topology', '--device-spec', '--config-file', host.nova_conf]],
            host.calls('sudo'))
        tags = device_spec_tags.configured_tags(
            specs, [(a, 0x10de, 0x2330) for a in CLIQUES])
        self.assertEqual([], device_spec_tags.problems(CLIQUES, {}, tags))
        for address, clique in CLIQUES.items():
            self.assertEqual('CUSTOM_GPU_P2P_CLIQUE_ID_%d' % clique,
                             tags[address]['traits'])

    def test_restack_replaces_the_gpu_lines(self):
        """A topology that changed between stacks leaves no stale line."""
        host = self.useFixture(Devstack(services='n-cpu', **PCI))
        host.run(STACK)
        # Every GPU in one clique at SYS.
        host.run(['stack post-config'], GPU_P2P_P2P_LEVEL='SYS')
        self.assertEqual(
            [line.split(' = ', 1)[1] for line in device_spec_tags.entries(
                dict.fromkeys(CLIQUES, 0), NUMA)] + [BROAD_SPEC],
            host.ini()['pci']['device_spec'])

    def test_controller(self):
        host = self.stack(services='key,n-api,n-cond,n-sch',
                          GPU_P2P_FLAVOR_GPUS='2', **PCI)
        ini = host.ini()
        self.assertEqual([LIBVIRT_DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertNotIn('gpu_p2p', ini)
        self.assertEqual({'alias'}, set(ini['pci']))
        self.assertIn('GPUP2PCliqueFilter',
                      ini['filter_scheduler']['enabled_filters'][0])
        self.assertEqual(['True'],
                         ini['filter_scheduler']['pci_in_placement'])
        self.assertEqual([], host.calls('sudo'))
        self.assertFlavor(host, fc.FlavorRequest(gpus=2, alias='h100'))
        self.assertEqual(installs(host), host.calls('pip_install'))

    def test_without_nova_nothing_happens(self):
        host = self.stack(services='key,g-api,placement-client', **PCI)
        self.assertEqual(SEED, open(host.nova_conf).read())
        self.assertEqual(['define_plugin'], host.plugin_calls())

    def test_flavor_settings(self):
        host = self.stack(GPU_P2P_FLAVOR_GPUS='4', GPU_P2P_FLAVOR_NAME='p2p4',
                          GPU_P2P_FLAVOR_VCPUS='16', GPU_P2P_FLAVOR_RAM='8192',
                          GPU_P2P_FLAVOR_DISK='20', **PCI)
        self.assertFlavor(host, fc.FlavorRequest(
            gpus=4, alias='h100', name='p2p4', vcpus=16, ram_mb=8192,
            disk_gb=20))

    def test_existing_flavor_is_left_alone(self):
        host = self.stack(GPU_P2P_FLAVOR_GPUS='2',
                          STANDIN_FLAVORS='gpu-p2p.2x', **PCI)
        self.assertEqual([['openstack', 'flavor', 'show', 'gpu-p2p.2x']],
                         host.calls('openstack'))

    def test_other_aliases_are_kept_and_restack_adds_nothing(self):
        other = '{"name": "t4", "vendor_id": "10de", "product_id": "1eb8"}'
        seed = SEED + '\n[pci]\nalias = %s\n' % other
        host = self.useFixture(Devstack(seed=seed, **PCI))
        host.run(STACK)
        host.run(['stack post-config'])
        pci = host.ini()['pci']
        self.assertEqual(2, len(pci['alias']))
        self.assertIn(other, pci['alias'])
        self.assertEqual(CLIQUE_SPECS + [BROAD_SPEC], pci['device_spec'])
        self.assertEqual(['True'], pci['report_in_placement'])
        group = host.ini()['filter_scheduler']
        self.assertEqual([DEVSTACK_FILTERS + ',' + ','.join(P2P_FILTERS)],
                         group['enabled_filters'])
        self.assertEqual(2, len(group['available_filters']))
        self.assertEqual(WEIGHERS, group['weight_classes'])

    def test_nvml_reading_backends_install_its_extra(self):
        setup = configparser.ConfigParser()
        setup.read(os.path.join(REPO, 'setup.cfg'))
        extra = setup['options.extras_require']['nvml'].split('#')[0]
        # fabricmanager reads the GPUs' module IDs through NVML.
        for backend in ('nvml', 'fabricmanager'):
            # No NVML here for post-config's topology: install only.
            host = self.useFixture(Devstack(GPU_P2P_TOPOLOGY_BACKEND=backend))
            host.run(['stack pre-install', 'stack install'])
            self.assertEqual(
                installs(host) + [['pip_install', extra.strip()]],
                host.calls('pip_install'), backend)

    def test_waits_for_configure_neutron_nova(self):
        host = self.useFixture(Devstack())
        job = os.path.join(host.dest, 'async', 'configure_neutron_nova.ini')
        with open(job, 'w') as f:
            f.write('[job]\npid = 4242\n')
        # The job ends while the plugin sleeps the third time.
        prologue = '\n'.join([
            'function sleep {',
            '    _standin_record sleep "$@"',
            '    if (( $(grep -c ^sleep "$DEVSTACK_STANDIN_LOG") == 3 ))',
            '    then',
            '        echo "end_time = 1" >>%s' % shlex.quote(job),
            '    fi',
            '}'])
        host.run(['stack post-config'], prologue=prologue)
        calls = host.calls()
        first_write = [c[0] for c in calls].index('iniset')
        pid = ['iniget', job, 'job', 'pid']
        end = ['iniget', job, 'job', 'end_time']
        sleep = ['sleep', '0.5']
        self.assertEqual([pid, end, sleep, end, sleep, end, sleep, end],
                         calls[:first_write][-8:])

    def test_synchronous_configure_neutron_nova_is_not_waited_for(self):
        host = self.useFixture(Devstack())
        job = os.path.join(host.dest, 'async', 'configure_neutron_nova.ini')
        with open(job, 'w') as f:
            f.write('[job]\npid = self\n')
        host.run(['stack post-config'],
                 prologue='function sleep { die $LINENO slept; }')
        self.assertEqual([DRIVER], host.ini()['DEFAULT']['compute_driver'])


class TestMoreStack(base.TestCase):
    """What devstack's real functions showed up (issue 34)."""

    def test_our_filter_before_novas_listed_earlier(self):
        """After another plugin added Nova's two, ours goes before them."""
        other = DEVSTACK_FILTERS + ',PciPassthroughFilter,NUMATopologyFilter'
        host = self.useFixture(Devstack(seed=SEED.replace(DEVSTACK_FILTERS,
                                                          other)))
        host.run(STACK)
        [enabled] = host.ini()['filter_scheduler']['enabled_filters']
        self.assertEqual(DEVSTACK_FILTERS + ',' + ','.join(P2P_FILTERS),
                         enabled)
        # nova-gpu-p2p check's verdict on it.
        [row] = scheduler_settings.check_scheduler(
            scheduler_settings.SchedulerSettings(
                enabled_filters=tuple(enabled.split(',')),
                candidates_per_host=2))
        self.assertEqual(('SUCCESS', None), (row.code.name, row.fix))
        # Only Nova's second one listed: ours still before it.
        host = self.useFixture(Devstack(seed=SEED.replace(
            DEVSTACK_FILTERS, 'NUMATopologyFilter,ComputeFilter')))
        host.run(STACK)
        self.assertEqual(
            ['GPUP2PCliqueFilter,NUMATopologyFilter,ComputeFilter,'
             'PciPassthroughFilter'],
            host.ini()['filter_scheduler']['enabled_filters'])

    def test_other_pci_lines_beside_ours(self):
        """GPU_P2P_PCI_DEVICE_SPECS and _ALIASES: kept, written as given."""
        nic_alias = '{"name": "cx7", "vendor_id": "15b3", "product_id": "*"}'
        host = self.useFixture(Devstack(
            GPU_P2P_PCI_DEVICE_SPECS='\n' + NIC_SPEC + '\n',
            GPU_P2P_PCI_ALIASES=nic_alias, **PCI))
        host.run(STACK)
        host.run(['stack post-config'])
        for path in (host.nova_conf, host.cpu_conf):
            pci = host.ini(path)['pci']
            self.assertEqual(CLIQUE_SPECS + [NIC_SPEC, BROAD_SPEC],
                             pci['device_spec'])
            self.assertEqual(nic_alias, pci['alias'][0])
            self.assertEqual(2, len(pci['alias']))
        host.run(CLEAN)
        self.assertEqual(SEED, open(host.nova_conf).read())

    def test_pci_values_with_backslashes_written_as_given(self):
        """Issue 42 item 8: not through sed, which drops backslashes."""
        spec = ('{"vendor_id": "15b3", "product_id": "101e", '
                '"physical_network": "phys\\\\net\\\\t"}')
        alias = ('{"name": "cx7\\\\q", "vendor_id": "15b3", '
                 '"product_id": "101e"}')
        host = self.useFixture(Devstack(GPU_P2P_PCI_DEVICE_SPECS=spec,
                                        GPU_P2P_PCI_ALIASES=alias, **PCI))
        host.run(STACK)
        for path in (host.nova_conf, host.cpu_conf):
            with open(path) as f:
                lines = f.read().splitlines()
            self.assertIn('device_spec = ' + spec, lines)
            self.assertIn('alias = ' + alias, lines)
        host.run(CLEAN)
        self.assertEqual(SEED, open(host.nova_conf).read())

    def test_local_conf_pci_without_an_alias_is_merged(self):
        """No GPU_P2P_ALIAS: no [pci] lines of ours, local.conf's stay."""
        host = self.useFixture(Devstack(local_conf=LOCAL_CONF_PCI))
        host.run(STACK)
        self.assertEqual({'device_spec': [NIC_SPEC.replace('"', '')],
                          'report_in_placement': ['True']},
                         host.ini(host.cpu_conf)['pci'])

    def test_clean_leaves_nova_conf_as_it_was(self):
        """Byte for byte: no section stack made is left empty."""
        settings = {'GPU_P2P_%s' % k.upper(): v
                    for k, v in OPTION_VALUES.items()}
        host = self.useFixture(Devstack(GPU_P2P_CPU_DEDICATED_SET='4-63',
                                        **PCI, **settings))
        host.run(STACK)
        host.run(CLEAN)
        for path in (host.nova_conf, host.cpu_conf):
            self.assertEqual(SEED, open(path).read())
        self.assertEqual(PLACEMENT_SEED, open(host.placement_conf).read())
        self.assertEqual(CELL_SEED, open(host.cell_conf).read())

    def test_shim_moves_into_novas_checkout(self):
        """devstack's editable Nova: no site-packages/nova/ of ours.

        tools/check_devstack_install.py does this with a real editable
        Nova and a real pip; here the stand-in Python names a shim that
        pip put in a site-packages.
        """
        host = self.useFixture(Devstack())
        site = os.path.join(host.root, 'site-packages')
        shim = os.path.join(site, 'nova', 'virt', 'gpu_p2p.py')
        os.makedirs(os.path.join(site, 'nova', 'virt', '__pycache__'))
        for path in (shim, os.path.join(site, 'nova', 'virt', '__pycache__',
                                        'gpu_p2p.cpython-311.pyc')):
            open(path, 'w').close()
        host.run(STACK, STANDIN_PYTHON_PRINTS=shim)
        self.assertEqual([], os.listdir(site))
        link = os.path.join(host.nova_dir, 'nova', 'virt', 'gpu_p2p.py')
        self.assertEqual(os.path.join(host.dest, 'nova-gpu-p2p', 'nova',
                                      'virt', 'gpu_p2p.py'),
                         os.readlink(link))
        [_, check] = host.calls('python')
        self.assertEqual(['python', '-c',
                          'import nova.cmd.compute, nova.virt.gpu_p2p'],
                         check)
        self.assertLess(
            host.calls().index(host.calls('pip_install')[-1]),
            host.calls().index(check))
        host.run(CLEAN)
        self.assertFalse(os.path.lexists(link))
        self.assertTrue(os.path.exists(os.path.join(
            host.nova_dir, 'nova', 'virt', '__init__.py')))

    def test_nova_from_a_wheel_keeps_the_shim(self):
        """Nova's own site-packages/nova/: the shim stays where pip put it."""
        host = self.useFixture(Devstack())
        shutil.rmtree(os.path.join(host.nova_dir, 'nova'))
        virt = os.path.join(host.root, 'site-packages', 'nova', 'virt')
        os.makedirs(virt)
        for name in ('__init__.py', 'gpu_p2p.py'):
            open(os.path.join(virt, name), 'w').close()
        host.run(STACK, STANDIN_PYTHON_PRINTS=os.path.join(virt,
                                                           'gpu_p2p.py'))
        self.assertEqual(['__init__.py', 'gpu_p2p.py'],
                         sorted(os.listdir(virt)))

    def test_nova_that_cannot_import_stops_stack(self):
        host = self.useFixture(Devstack())
        result = host.run(STACK, check=False, STANDIN_PYTHON_FAILS='1')
        self.assertEqual(1, result.returncode)
        self.assertIn("Nova's Python", result.stderr)
        self.assertIn('cannot import nova.cmd.compute and '
                      'nova.virt.gpu_p2p', result.stderr)
        self.assertEqual(['Installing nova-gpu-p2p'],
                         [c[1] for c in host.calls('echo_summary')])


class TestLayouts(base.TestCase):
    """Each host of a multi-node devstack gets what its services read."""

    SCHEDULER_OPTIONS = {'candidates_per_host': '5', 'spare_hosts': '3',
                         'clique_fit_weight_multiplier': '2.5'}

    def settings(self):
        return {'GPU_P2P_%s' % k.upper(): v for k, v in OPTION_VALUES.items()}

    def test_controller_gets_the_scheduler_options(self):
        host = self.useFixture(Devstack('key,n-api,n-cond,n-sch',
                                        **self.settings()))
        host.run(STACK)
        self.assertEqual({k: [v] for k, v in self.SCHEDULER_OPTIONS.items()},
                         host.ini()['gpu_p2p'])
        # nova-compute's topology check is for compute hosts.
        self.assertEqual([], host.calls('sudo'))

    def test_subnode_gets_the_compute_options_only(self):
        host = self.useFixture(Devstack('n-cpu,placement-client',
                                        **self.settings()))
        host.run(STACK)
        self.assertEqual(
            {k: [v] for k, v in OPTION_VALUES.items()
             if k not in self.SCHEDULER_OPTIONS},
            host.ini()['gpu_p2p'])
        self.assertNotIn('scheduler', host.ini())
        self.assertEqual({'enabled_filters': [DEVSTACK_FILTERS]},
                         host.ini()['filter_scheduler'])

    def test_conductor_host(self):
        """nova.conf (superconductor) and nova_cell1.conf (cell conductor)."""
        host = self.useFixture(Devstack('n-cond'))
        host.run(STACK)
        self.assertEqual(['True'], host.ini()['filter_scheduler'][
            'pci_in_placement'])
        self.assertEqual(host.parse(CELL_SEED + '\n[filter_scheduler]\n'
                                    'pci_in_placement = True\n'),
                         host.ini(host.cell_conf))
        self.assertEqual([LIBVIRT_DRIVER],
                         host.ini()['DEFAULT']['compute_driver'])
        self.assertEqual([], host.calls('pip_install'))
        host.run(CLEAN)
        self.assertEqual(CELL_SEED, open(host.cell_conf).read())
        self.assertEqual(SEED, open(host.nova_conf).read())

    def test_super_and_cell_conductors_by_name(self):
        host = self.useFixture(Devstack('n-super-cond,n-cond-cell1'))
        with open(host.cell_conf, 'w') as f:
            f.write(CELL_SEED)
        host.run(STACK)
        for path in (host.nova_conf, host.cell_conf):
            self.assertEqual(['True'], host.ini(path)['filter_scheduler'][
                'pci_in_placement'])

    def test_single_conductor_reads_nova_conf(self):
        host = self.useFixture(Devstack('n-cond',
                                        CELLSV2_SETUP='singleconductor'))
        host.run(STACK)
        self.assertEqual(['True'], host.ini()['filter_scheduler'][
            'pci_in_placement'])
        self.assertEqual(host.parse(CELL_SEED), host.ini(host.cell_conf))

    def test_placement_host(self):
        host = self.useFixture(Devstack('placement-api'))
        host.run(STACK)
        self.assertEqual(SEED, open(host.nova_conf).read())
        placement = host.ini(host.placement_conf)
        self.assertEqual(
            {'max_allocation_candidates': ['20'],
             'allocation_candidates_generation_strategy': ['breadth-first']},
            placement['placement'])
        self.assertEqual({'optimize_for_wide_provider_trees': ['True']},
                         placement['workarounds'])
        self.assertEqual([], host.calls('pip_install'))
        host.run(CLEAN)
        self.assertEqual(PLACEMENT_SEED, open(host.placement_conf).read())
        self.assertEqual(SEED, open(host.nova_conf).read())


class TestRefusedSettings(base.TestCase):

    def refused(self, phase, message, services=ALL_SERVICES, local_conf='',
                **settings):
        host = self.useFixture(Devstack(services, local_conf=local_conf,
                                        **settings))
        result = host.run(STACK, check=False)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn(message, result.stderr)
        self.assertEqual(1, len(host.calls('die')))
        # Nothing past the phase that refused.
        phases = [c[1] for c in host.calls('echo_summary')]
        if phase == 'pre-install':
            self.assertEqual([], phases)
            self.assertEqual([], host.calls('pip_install'))
        else:
            self.assertEqual(['Installing nova-gpu-p2p',
                              'Configuring nova-gpu-p2p'], phases)
        self.assertFalse(os.path.exists(host.cpu_conf))
        self.assertEqual([], host.calls('openstack'))

    def test_flavor_without_alias(self):
        self.refused('pre-install', 'GPU_P2P_FLAVOR_GPUS needs GPU_P2P_ALIAS',
                     GPU_P2P_FLAVOR_GPUS='2')

    def test_alias_without_product_id(self):
        self.refused('pre-install', 'needs GPU_P2P_PRODUCT_ID',
                     GPU_P2P_ALIAS='h100')

    def test_bad_vendor_id(self):
        self.refused('pre-install', 'GPU_P2P_VENDOR_ID=0x10de',
                     GPU_P2P_VENDOR_ID='0x10de', **PCI)

    def test_bad_alias_name(self):
        self.refused('pre-install', 'GPU_P2P_ALIAS=h100:8',
                     GPU_P2P_ALIAS='h100:8', GPU_P2P_PRODUCT_ID='2330')

    def test_bad_device_type(self):
        self.refused('pre-install', 'GPU_P2P_DEVICE_TYPE=PCI',
                     GPU_P2P_DEVICE_TYPE='PCI', **PCI)

    def test_not_a_number(self):
        self.refused('pre-install', 'GPU_P2P_FLAVOR_GPUS=eight',
                     GPU_P2P_FLAVOR_GPUS='eight', **PCI)
        self.refused('pre-install', 'GPU_P2P_PLACEMENT_CAP=-1',
                     GPU_P2P_PLACEMENT_CAP='-1')

    def test_leading_zeros(self):
        """00 is no cap of 0: Nova's max_placement_results needs 1 or more."""
        self.refused('pre-install', 'GPU_P2P_PLACEMENT_CAP=00: give a whole '
                     'number, without leading zeros',
                     GPU_P2P_PLACEMENT_CAP='00')
        self.refused('pre-install', 'GPU_P2P_FLAVOR_GPUS=08',
                     GPU_P2P_FLAVOR_GPUS='08', **PCI)

    def test_a_gpu_p2p_value_nova_compute_refuses(self):
        """Stops stack.sh at post-config, with the CLI's own message."""
        self.refused('post-config', "[gpu_p2p] p2p_level = 'NEAR'",
                     GPU_P2P_P2P_LEVEL='NEAR')
        self.refused('post-config', 'static_topology_file',
                     GPU_P2P_TOPOLOGY_BACKEND='static', **PCI)

    def test_pci_lines_in_local_conf_with_an_alias(self):
        """local.conf's [pci] would replace the plugin's lines: refused."""
        for conf_file, option, setting in (
                ('$NOVA_CONF', 'device_spec', 'GPU_P2P_PCI_DEVICE_SPECS'),
                ('$NOVA_CPU_CONF', 'passthrough_whitelist',
                 'GPU_P2P_PCI_DEVICE_SPECS'),
                ('$NOVA_CONF', 'alias', 'GPU_P2P_PCI_ALIASES')):
            local_conf = LOCAL_CONF_PCI.replace(
                '$NOVA_CONF', conf_file).replace('device_spec', option)
            self.refused(
                'pre-install', "local.conf's [[post-config|%s]] sets [pci] %s:"
                % (conf_file, option), local_conf=local_conf, **PCI)
            self.refused('pre-install', 'give its values in %s instead'
                         % setting, local_conf=local_conf, **PCI)

    def test_pci_lines_under_any_name_of_nova_conf(self):
        """Issue 42 item 8: each name evaluated as devstack does.

        Then compared as a path: not only the text ``$NOVA_CONF``.
        """
        for name in ('${NOVA_CONF}', 'NOVA', 'ETC/./nova.conf',
                     '$NOVA_CONF_DIR/nova-cpu.conf', '"$NOVA_CONF"'):
            host = self.useFixture(Devstack(**PCI))
            name = name.replace('NOVA', host.nova_conf, name == 'NOVA')
            name = name.replace('ETC', host.etc)
            with open(os.path.join(host.top_dir, 'local.conf'), 'w') as f:
                f.write(LOCAL_CONF_PCI.replace('$NOVA_CONF', name))
            result = host.run(STACK, check=False)
            self.assertEqual(1, result.returncode, name)
            self.assertIn("local.conf's [[post-config|%s]] sets [pci] "
                          "device_spec:" % name, result.stderr)
            self.assertEqual([], host.calls('pip_install'))

    def test_pci_lines_for_other_files_are_left_alone(self):
        host = self.useFixture(Devstack(**PCI))
        with open(os.path.join(host.top_dir, 'local.conf'), 'w') as f:
            f.write(LOCAL_CONF_PCI.replace('$NOVA_CONF', '$PLACEMENT_CONF')
                    + '[[post-config|$UNSET_BY_ANYONE/x.conf]]\n[DEFAULT]\n')
        host.run(['stack pre-install'])

    def test_other_virt_driver(self):
        self.refused('pre-install', 'VIRT_DRIVER=fake', VIRT_DRIVER='fake')

    def test_flavor_the_cli_refuses(self):
        # The CLI's own message, before Nova starts.
        self.refused('post-config', '--numa-nodes 3',
                     GPU_P2P_FLAVOR_GPUS='2', GPU_P2P_FLAVOR_NUMA_NODES='3',
                     **PCI)


class TestUnstackAndClean(base.TestCase):

    def test_unstack_does_nothing(self):
        host = self.useFixture(Devstack(**PCI))
        host.run(STACK)
        before = [open(p).read() for p in (host.nova_conf, host.cpu_conf)]
        os.unlink(host.log)
        host.run(['unstack'])
        self.assertEqual(['define_plugin'], [c[0] for c in host.calls()])
        self.assertEqual(
            before, [open(p).read() for p in (host.nova_conf, host.cpu_conf)])

    def test_clean_removes_what_stack_added(self):
        other = '{"name": "t4", "vendor_id": "10de", "product_id": "1eb8"}'
        seed = SEED + '\n[pci]\nalias = %s\n' % other
        settings = {'GPU_P2P_%s' % k.upper(): v
                    for k, v in OPTION_VALUES.items()}
        host = self.useFixture(Devstack(
            seed=seed, GPU_P2P_CPU_DEDICATED_SET='4-63',
            GPU_P2P_FLAVOR_GPUS='2', **PCI, **settings))
        host.run(STACK)
        self.assertNotEqual(host.parse(seed), host.ini())
        placement_seed = PLACEMENT_SEED
        self.assertNotEqual(host.parse(placement_seed),
                            host.ini(host.placement_conf))
        host.run(CLEAN)
        for path in (host.nova_conf, host.cpu_conf):
            self.assertEqual(host.parse(seed), host.ini(path))
        self.assertEqual(host.parse(placement_seed),
                         host.ini(host.placement_conf))
        # devstack's pip_uninstall takes one name: one call each.
        self.assertEqual([['pip_uninstall', 'nova-gpu-p2p',
                           'PIP_VIRTUAL_ENV='],
                          ['pip_uninstall', 'nova-gpu-p2p-guest',
                           'PIP_VIRTUAL_ENV=']],
                         host.calls('pip_uninstall'))

    def test_clean_keeps_what_others_set(self):
        """Their device_spec, filters and weighers; Nova's defaults go."""
        seed = seed_with(
            'available_filters = my.Filter',
            'weight_classes = my.Weigher,' + fc.NOVA_ALL_WEIGHERS) + (
            '\n[pci]\ndevice_spec = {"vendor_id": "15b3"}\n')
        host = self.useFixture(Devstack(seed=seed, **PCI))
        host.run(STACK)
        self.assertEqual(len(CLIQUE_SPECS) + 2,
                         len(host.ini()['pci']['device_spec']))
        host.run(CLEAN)
        for path in (host.nova_conf, host.cpu_conf):
            self.assertEqual(host.parse(seed), host.ini(path))

    def test_clean_leaves_options_an_operator_changed(self):
        host = self.useFixture(Devstack())
        host.run(STACK)
        with open(host.nova_conf) as f:
            text = f.read().replace('pci_in_placement = True',
                                    'pci_in_placement = False')
        with open(host.nova_conf, 'w') as f:
            f.write(text)
        host.run(CLEAN)
        self.assertEqual(['False'],
                         host.ini()['filter_scheduler']['pci_in_placement'])
        self.assertNotIn('pci', host.ini())

    def test_clean_in_devstacks_global_venv(self):
        host = self.useFixture(Devstack())
        venv = os.path.join(host.dest, 'data', 'venv')
        os.makedirs(venv)
        host.run(STACK)
        host.run(CLEAN, GLOBAL_VENV='True', DEVSTACK_VENV=venv)
        self.assertEqual([['pip_uninstall', 'nova-gpu-p2p',
                           'PIP_VIRTUAL_ENV=' + venv],
                          ['pip_uninstall', 'nova-gpu-p2p-guest',
                           'PIP_VIRTUAL_ENV=' + venv]],
                         host.calls('pip_uninstall'))
        self.assertEqual(host.parse(SEED), host.ini())

    def test_clean_keeps_an_operators_driver(self):
        host = self.useFixture(Devstack(services='n-cpu'))
        host.run(STACK)
        with open(host.nova_conf) as f:
            text = f.read().replace(DRIVER, 'ironic.IronicDriver')
        with open(host.nova_conf, 'w') as f:
            f.write(text)
        host.run(CLEAN)
        self.assertEqual(['ironic.IronicDriver'],
                         host.ini()['DEFAULT']['compute_driver'])

    def test_clean_without_nova_conf(self):
        host = self.useFixture(Devstack())
        os.unlink(host.nova_conf)
        host.run(CLEAN)
        self.assertEqual(2, len(host.calls('pip_uninstall')))


class TestShellcheck(base.TestCase):

    def test_shellcheck(self):
        shellcheck = shutil.which('shellcheck')
        if shellcheck is None:
            if os.environ.get(REQUIRE_TOOLS) == '1':
                self.fail('%s (%s=1)' % (MISSING_SHELLCHECK, REQUIRE_TOOLS))
            self.skipTest(MISSING_SHELLCHECK)
        files = [PLUGIN, SETTINGS, os.path.join(STANDIN, 'functions'),
                 os.path.join(STANDIN, 'bin', 'openstack'),
                 os.path.join(STANDIN, 'bin', 'nova-gpu-p2p'),
                 os.path.join(STANDIN, 'bin', 'nova-python'),
                 os.path.join(STANDIN, 'bin', 'sudo')]
        result = subprocess.run([shellcheck, '-x'] + files,
                                capture_output=True, text=True)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)


class TestDoc(base.TestCase):
    """doc/source/devstack.rst lists every setting with its default."""

    def settings_defaults(self):
        with open(SETTINGS) as f:
            text = f.read()
        found = {}
        for name, default in re.findall(
                r'^(GPU_P2P_\w+)=\$\{\1:-(.*)\}$', text, re.M):
            found[name] = default
        for name, default in re.findall(
                r'^(GPU_P2P_\w+)=\$\(trueorfalse (\w+) \1\)$', text, re.M):
            found[name] = default
        names = set(re.findall(r'^(GPU_P2P_\w+)=', text, re.M))
        self.assertEqual(names, set(found))
        return found

    def test_every_setting_is_documented_with_its_default(self):
        with open(DOC) as f:
            doc = f.read()
        block = doc.split('.. _devstack-all-settings:')[1]
        documented = dict(re.findall(r'^\s+(GPU_P2P_\w+)=(.*)$', block, re.M))
        defaults = self.settings_defaults()
        self.assertEqual(defaults, documented)
        for name in defaults:
            self.assertIn('``%s``' % name, doc)

    def test_the_example_stacks(self):
        with open(DOC) as f:
            doc = f.read()
        example = doc.split('[[local|localrc]]')[1].split('[[post-config')[0]
        settings = dict(re.findall(r'^\s+(GPU_P2P_\w+)=(.*)$', example,
                                   re.M))
        self.assertIn('enable_plugin nova-gpu-p2p ', example)
        host = self.useFixture(Devstack(**settings))
        host.run(STACK)
        ini = host.ini()
        self.assertEqual([DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertEqual(['8-31,40-63'], ini['compute']['cpu_dedicated_set'])
        self.assertIn('"name":"h100"', ini['pci']['alias'][0])
        create = host.calls('openstack')[1]
        self.assertEqual(['openstack', 'flavor', 'create', 'gpu-p2p.8x',
                          '--vcpus', '32', '--ram', '131072', '--disk',
                          '100'], create)

    def test_every_option_has_a_setting(self):
        defaults = self.settings_defaults()
        for opt in conf.OPTS:
            self.assertIn('GPU_P2P_%s' % opt.name.upper(), defaults)
            self.assertEqual('', defaults['GPU_P2P_%s' % opt.name.upper()])
