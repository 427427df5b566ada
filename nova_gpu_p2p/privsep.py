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

"""The privileged reads nova-gpu-p2p needs, through oslo.privsep.

Reading PCI config space beyond its first 64 bytes (where the PCI Express
and ACS capabilities live) needs CAP_SYS_ADMIN. This runs in the
sys_admin privsep daemon nova-compute already starts, so no new rootwrap
filter is needed; the daemon imports this module by name.
"""

import os
import re

from nova import privsep

_SYSFS_CONFIG = re.compile(
    r'^/(?:.+/)?devices/pci[0-9a-f]{4}:[0-9a-f]{2}/(?:[0-9a-f:.]+/)*'
    r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/config$')


@privsep.sys_admin_pctxt.entrypoint
def read_pci_config(path: str, size: int) -> bytes:
    """Read a PCI function's sysfs config file, and nothing else."""
    real = os.path.realpath(path)
    if not _SYSFS_CONFIG.match(real):
        raise ValueError('%s is not a PCI config space file in sysfs' % path)
    with open(real, 'rb') as f:
        return f.read(size)
