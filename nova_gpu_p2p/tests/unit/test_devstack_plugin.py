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
plugin.sh once per phase, as stack.sh, unstack.sh and clean.sh do. The
nova.conf written is read back with oslo.config's parser and checked with
the driver's own option types and Nova's own PCI alias schema.

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
import testtools

from nova_gpu_p2p import conf
from nova_gpu_p2p import flavor_commands as fc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
PLUGIN = os.path.join(REPO, 'devstack', 'plugin.sh')
SETTINGS = os.path.join(REPO, 'devstack', 'settings')
STANDIN = os.path.join(REPO, 'nova_gpu_p2p', 'tests', 'fixtures', 'devstack')
DOC = os.path.join(REPO, 'doc', 'source', 'devstack.rst')
REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
MISSING_SHELLCHECK = ('shellcheck not found: apt-get install shellcheck '
                      '(or run tools/install-ci-deps.sh)')

DRIVER = 'gpu_p2p.GPUP2PLibvirtDriver'
LIBVIRT_DRIVER = 'libvirt.LibvirtDriver'
P2P_FILTERS = ['PciPassthroughFilter', 'NUMATopologyFilter']
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
ALL_SERVICES = 'key,g-api,n-api,n-cond,n-sch,n-cpu,placement-api'
#: stack.sh's plugin phases in order, and nova-compute's start between
#: post-config and extra (start_nova_compute copies nova.conf to
#: nova-cpu.conf).
STACK = ['stack pre-install', 'stack install', 'stack post-config',
         'start-nova', 'stack extra', 'stack test-config']
CLEAN = ['unstack', 'clean']

#: Valid values for every [gpu_p2p] option, none of them the default.
OPTION_VALUES = {
    'topology_backend': 'static',
    'sysfs_root': '/srv/sys',
    'static_topology_file': '/etc/nova/gpu-topology.yaml',
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
}
PCI = {'GPU_P2P_ALIAS': 'h100', 'GPU_P2P_PRODUCT_ID': '2330'}


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

    def __init__(self, services=ALL_SERVICES, seed=SEED, **settings):
        super().__init__()
        self.services = services
        self.seed = seed
        self.settings = settings

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.dest = os.path.join(self.root, 'opt', 'stack')
        etc = os.path.join(self.root, 'etc', 'nova')
        os.makedirs(os.path.join(self.dest, 'async'))
        os.makedirs(etc)
        self.nova_conf = os.path.join(etc, 'nova.conf')
        self.cpu_conf = os.path.join(etc, 'nova-cpu.conf')
        self.log = os.path.join(self.root, 'calls.log')
        with open(self.nova_conf, 'w') as f:
            f.write(self.seed)

    def run(self, phases, check=True, prologue='', **settings):
        script = '\n'.join([
            'set -o errexit -o nounset -o pipefail',
            'source "$STANDIN/functions"',
            prologue,
            'source "$SETTINGS"',
            'for phase in "$@"; do',
            '    if [[ "$phase" == start-nova ]]; then',
            '        cp "$NOVA_CONF" "$NOVA_CPU_CONF"',
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
            'NOVA_CPU_CONF': self.cpu_conf,
            'NOVA_BIN_DIR': os.path.join(STANDIN, 'bin'),
        }
        env.update(self.settings)
        env.update(settings)
        result = subprocess.run(
            ['bash', '-c', script, 'devstack'] + list(phases), env=env,
            cwd=self.root, capture_output=True, text=True, timeout=120)
        if check and result.returncode:
            raise AssertionError('%s failed (%d):\n%s%s' % (
                phases, result.returncode, result.stdout, result.stderr))
        return result

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


class TestStack(testtools.TestCase):

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
            [alias] = ini['pci']['alias']
            alias = json.loads(alias)
            jsonschema.validate(alias, pci_request._ALIAS_SCHEMA)
            self.assertEqual({'name': 'h100', 'vendor_id': '10de',
                              'product_id': '2330',
                              'device_type': 'type-PCI'}, alias)
            [spec] = ini['pci']['device_spec']
            specs = whitelist.Whitelist([spec])
            gpu = {'vendor_id': '10de', 'product_id': '2330',
                   'address': '0000:81:00.0', 'parent_addr': None,
                   'dev_type': 'type-PCI'}
            self.assertIsNotNone(specs.device_assignable(gpu))
            self.assertIsNone(specs.device_assignable(
                dict(gpu, product_id='22a3')))
            # What Nova does not know stays as devstack wrote it.
            self.assertEqual(['none'], ini['libvirt']['cpu_mode'])
        self.assertEqual(
            [['pip_install', '--no-deps', os.path.join(host.dest,
                                                       'nova-gpu-p2p')]],
            host.calls('pip_install'))
        self.assertEqual([], host.calls('setup_develop'))
        self.assertFlavor(host, fc.FlavorRequest(gpus=8, alias='h100',
                                                 numa_nodes=2))

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

    def test_defaults_select_the_driver_only(self):
        host = self.stack()
        ini = host.ini()
        self.assertEqual([DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertNotIn('gpu_p2p', ini)
        self.assertNotIn('pci', ini)
        self.assertNotIn('compute', ini)
        self.assertEqual([DEVSTACK_FILTERS + ',' + ','.join(P2P_FILTERS)],
                         ini['filter_scheduler']['enabled_filters'])
        self.assertEqual([], host.calls('openstack'))
        group = load_gpu_p2p(host.nova_conf)
        for opt in conf.OPTS:
            self.assertEqual(opt.default, group[opt.dest], opt.name)
        # No restart: everything is written before stack.sh starts Nova.
        written = {c[1] for c in host.calls() if c[0].startswith('ini')
                   and c[0] not in ('iniget', 'ini_has_option')}
        self.assertEqual({host.nova_conf}, written)

    def test_filters_off(self):
        host = self.stack(GPU_P2P_SCHEDULER_FILTERS='False')
        self.assertEqual([DEVSTACK_FILTERS],
                         host.ini()['filter_scheduler']['enabled_filters'])

    def test_no_filter_list_starts_from_novas_default(self):
        seed = SEED.replace('enabled_filters = %s' % DEVSTACK_FILTERS, '')
        host = self.stack(seed=seed)
        nova_default = nova.conf.CONF.filter_scheduler.enabled_filters
        self.assertEqual(
            [','.join(nova_default + P2P_FILTERS)],
            host.ini()['filter_scheduler']['enabled_filters'])

    def test_filters_already_there_are_not_repeated(self):
        filters = 'NUMATopologyFilter,ComputeFilter,PciPassthroughFilter'
        seed = SEED.replace(DEVSTACK_FILTERS, filters)
        host = self.stack(seed=seed)
        self.assertEqual([filters],
                         host.ini()['filter_scheduler']['enabled_filters'])

    def test_compute_host(self):
        host = self.stack(services='n-cpu,placement-client',
                          GPU_P2P_FLAVOR_GPUS='2', **PCI)
        ini = host.ini()
        self.assertEqual([DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertEqual(1, len(ini['pci']['alias']))
        self.assertEqual(1, len(ini['pci']['device_spec']))
        self.assertEqual([DEVSTACK_FILTERS],
                         ini['filter_scheduler']['enabled_filters'])
        self.assertEqual([], host.calls('openstack'))

    def test_controller(self):
        host = self.stack(services='key,n-api,n-cond,n-sch',
                          GPU_P2P_FLAVOR_GPUS='2', **PCI)
        ini = host.ini()
        self.assertEqual([LIBVIRT_DRIVER], ini['DEFAULT']['compute_driver'])
        self.assertNotIn('gpu_p2p', ini)
        self.assertEqual(1, len(ini['pci']['alias']))
        self.assertNotIn('device_spec', ini['pci'])
        self.assertIn('PciPassthroughFilter',
                      ini['filter_scheduler']['enabled_filters'][0])
        self.assertFlavor(host, fc.FlavorRequest(gpus=2, alias='h100'))
        self.assertEqual(1, len(host.calls('pip_install')))

    def test_without_nova_nothing_happens(self):
        host = self.stack(services='key,g-api,placement-api', **PCI)
        self.assertEqual(SEED, open(host.nova_conf).read())
        self.assertEqual(['define_plugin'],
                         [c[0] for c in host.calls()])

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
        self.assertEqual(1, len(pci['device_spec']))
        self.assertEqual(
            [DEVSTACK_FILTERS + ',' + ','.join(P2P_FILTERS)],
            host.ini()['filter_scheduler']['enabled_filters'])

    def test_nvml_backend_installs_its_extra(self):
        host = self.stack(GPU_P2P_TOPOLOGY_BACKEND='nvml')
        setup = configparser.ConfigParser()
        setup.read(os.path.join(REPO, 'setup.cfg'))
        extra = setup['options.extras_require']['nvml'].split('#')[0]
        self.assertEqual(
            [['pip_install', '--no-deps',
              os.path.join(host.dest, 'nova-gpu-p2p')],
             ['pip_install', extra.strip()]],
            host.calls('pip_install'))

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


class TestRefusedSettings(testtools.TestCase):

    def refused(self, phase, message, services=ALL_SERVICES, **settings):
        host = self.useFixture(Devstack(services, **settings))
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

    def test_other_virt_driver(self):
        self.refused('pre-install', 'VIRT_DRIVER=fake', VIRT_DRIVER='fake')

    def test_flavor_the_cli_refuses(self):
        # The CLI's own message, before Nova starts.
        self.refused('post-config', '--numa-nodes 3',
                     GPU_P2P_FLAVOR_GPUS='2', GPU_P2P_FLAVOR_NUMA_NODES='3',
                     **PCI)


class TestUnstackAndClean(testtools.TestCase):

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
        host.run(CLEAN)
        for path in (host.nova_conf, host.cpu_conf):
            self.assertEqual(host.parse(seed), host.ini(path))
        self.assertEqual([['pip_uninstall', 'nova-gpu-p2p',
                           'PIP_VIRTUAL_ENV=']],
                         host.calls('pip_uninstall'))

    def test_clean_in_devstacks_global_venv(self):
        host = self.useFixture(Devstack())
        venv = os.path.join(host.dest, 'data', 'venv')
        os.makedirs(venv)
        host.run(STACK)
        host.run(CLEAN, GLOBAL_VENV='True', DEVSTACK_VENV=venv)
        self.assertEqual([['pip_uninstall', 'nova-gpu-p2p',
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
        self.assertEqual(1, len(host.calls('pip_uninstall')))


class TestShellcheck(testtools.TestCase):

    def test_shellcheck(self):
        shellcheck = shutil.which('shellcheck')
        if shellcheck is None:
            if os.environ.get(REQUIRE_TOOLS) == '1':
                self.fail('%s (%s=1)' % (MISSING_SHELLCHECK, REQUIRE_TOOLS))
            self.skipTest(MISSING_SHELLCHECK)
        files = [PLUGIN, SETTINGS, os.path.join(STANDIN, 'functions'),
                 os.path.join(STANDIN, 'bin', 'openstack'),
                 os.path.join(STANDIN, 'bin', 'nova-gpu-p2p')]
        result = subprocess.run([shellcheck, '-x'] + files,
                                capture_output=True, text=True)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)


class TestDoc(testtools.TestCase):
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
