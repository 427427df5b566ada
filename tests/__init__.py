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

"""nova-gpu-p2p's tests: unit, functional (in-process Nova), e2e (real
libvirt and QEMU) and the infrastructure they run on (``fixtures/``,
``cloud/``), which ``lab/`` uses too; no module here but a test module
(``test_*.py``) imports a test module."""

import os

from oslo_config import cfg

from nova_gpu_p2p import conf

#: The checkout the tests run from (worker processes put it on their
#: path).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The PCI ID database every simulated host is named from: lines of the
#: real file, so that results depend neither on the machine's copy nor on
#: whether it has one.
PCI_IDS = os.path.join(ROOT, 'tests', 'fixtures', 'pci.ids')

# Every [gpu_p2p] group registered in this process, nova-compute's in the
# in-process clouds included, reads it unless a test names another.
cfg.set_defaults(conf.OPTS, pci_ids_file=PCI_IDS)
