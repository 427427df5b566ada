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

"""Nova's own in-process cloud, with our driver as the compute driver."""

import os
import sysconfig

from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base as libvirt_base


def api_paste_config() -> str:
    """Where Nova's api-paste.ini is in this environment.

    Nova's test config expects it beside the nova package, as in a source
    checkout; a nova wheel installs it under the environment's etc/nova/.
    """
    candidates = [
        os.path.join(sysconfig.get_path('data'), 'etc', 'nova',
                     'api-paste.ini'),
        os.path.join(sysconfig.get_path('purelib'), 'etc', 'nova',
                     'api-paste.ini'),
    ]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise RuntimeError('Nova\'s api-paste.ini not found in %s' % candidates)


class _PasteConfigMixin:

    def _setup_services(self):
        self.flags(api_paste_config=api_paste_config(), group='wsgi')
        super()._setup_services()


class APITestBase(_PasteConfigMixin, integrated_helpers._IntegratedTestBase):
    """Real API, conductor, scheduler and placement; Nova's fake driver."""

    ADMIN_API = True
    microversion = 'latest'


class GPUP2PServersTestBase(_PasteConfigMixin, libvirt_base.ServersTestBase):
    """Nova's libvirt functional base, with our driver loaded by name."""

    ADMIN_API = True
    microversion = 'latest'

    def _setup_compute_service(self):
        # Compute services are started by each test, once it has described
        # the host (see ServersTestBase.start_compute).
        self.flags(compute_driver='gpu_p2p.GPUP2PLibvirtDriver')
