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

"""``tox -e demo``: load the driver the way nova-compute does and show it.

Runs without libvirtd: Nova's own libvirt test double stands in for the
libvirt connection. Extra arguments are passed to oslo.config, so
``tox -e demo -- --config-file my-nova.conf`` shows that file's effect.
"""

import sys

from nova.api.validation.extra_specs import validators
from nova import conf as nova_conf
from nova.tests import fixtures as nova_fixtures
from nova.virt import driver as virt_driver

from nova_gpu_p2p import conf
from nova_gpu_p2p import extra_specs

CONF = nova_conf.CONF

SAMPLE_FLAVOR = {
    'pci_passthrough:alias': 'nvidia-h100:8',
    'hw:cpu_policy': 'dedicated',
    'hw:numa_nodes': '2',
    'trait:CUSTOM_GPU_P2P_CLIQUE_8': 'required',
    extra_specs.CLIQUE_KEY: 'required',
    extra_specs.NUMA_AFFINITY_KEY: 'preferred',
}


def main(argv: list[str]) -> int:
    conf.register_opts(CONF)
    CONF(argv, project='nova', default_config_files=[])
    CONF.set_override('compute_driver', 'gpu_p2p.GPUP2PLibvirtDriver')

    with nova_fixtures.LibvirtFixture():
        driver = virt_driver.load_compute_driver(None)
    print('Nova loaded compute_driver = %s as %s.%s' % (
        CONF.compute_driver, type(driver).__module__,
        type(driver).__qualname__))

    print('\nEffective [gpu_p2p] options:')
    for _group, opts in conf.list_opts():
        for opt in opts:
            print('  %-22s = %s' % (opt.dest, CONF.gpu_p2p[opt.dest]))

    print('\nSample P2P flavor extra specs, checked by Nova\'s API '
          'validators:')
    for key, value in SAMPLE_FLAVOR.items():
        validators.validate(key, value)
        print('  %s=%s' % (key, value))
    request = extra_specs.parse(SAMPLE_FLAVOR)
    print('\nParsed by nova-gpu-p2p:')
    print('  clique: mode=%s id=%s' % (
        request.clique.mode.value, request.clique.clique_id))
    print('  numa_affinity: %s' % request.numa_affinity.value)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
