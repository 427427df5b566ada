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

"""The names nova.conf, setup.cfg and the product contract use import.

The modules moved into rooms by service (compute/, api/, cmd/); what an
operator or Nova names by path must not move with them.
"""

import configparser
import importlib

from oslo_utils import importutils

import tests
from tests.unit import base

#: Where the moved modules are now.
DRIVER = 'nova_gpu_p2p.compute.driver.GPUP2PLibvirtDriver'
VALIDATORS = 'nova_gpu_p2p.api.extra_spec_validators'


class ConfigNamesTest(base.TestCase):
    """What nova.conf and setup.cfg name loads.

    Nova's modules are imported when a test runs, not when the runner
    lists the tests: after the eventlet patching Nova's fixtures do.
    """

    def test_driver_class_paths(self):
        moved = importutils.import_class(DRIVER)
        for path in ('nova_gpu_p2p.driver.GPUP2PLibvirtDriver',
                     'nova.virt.gpu_p2p.GPUP2PLibvirtDriver'):
            self.assertIs(moved, importutils.import_class(path), path)

    def test_scheduler_classes(self):
        for name in ('GPUP2PCliqueFilter', 'GPUP2PCliqueFitWeigher'):
            cls = importutils.import_class('nova_gpu_p2p.scheduler.' + name)
            self.assertEqual(name, cls.__name__)

    def test_every_entry_point_of_setup_cfg_loads(self):
        parser = configparser.ConfigParser()
        parser.read(tests.ROOT + '/setup.cfg')
        loaded = []
        for group, lines in parser['options.entry_points'].items():
            for line in filter(None, lines.splitlines()):
                name, _, target = (part.strip() for part in
                                   line.partition('='))
                module, _, attr = target.partition(':')
                found = importlib.import_module(module)
                if attr:
                    found = getattr(found, attr)
                loaded.append((group, name, found))
        groups = {group for group, _, _ in loaded}
        self.assertIn('nova.api.extra_spec_validators', groups)
        self.assertIn(('nova.api.extra_spec_validators', 'gpu_p2p',
                       importlib.import_module(VALIDATORS)), loaded)
