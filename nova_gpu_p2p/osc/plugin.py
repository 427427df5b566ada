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

"""OpenStackClient plugin (``openstack.cli.extension``): ``gpu p2p``.

The client is openstacksdk's placement proxy (a keystoneauth adapter):
the cloud's placement endpoint from clouds.yaml, ``OS_CLOUD`` or the
``--os-*`` options, or ``placement_endpoint_override`` with
``auth_type: none`` for a placement without Keystone.
"""

from osc_lib import utils

API_NAME = 'gpu_p2p'
API_VERSION_OPTION = 'os_gpu_p2p_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = ('1',)


def make_client(instance):
    """Placement, as openstacksdk's connection reaches it."""
    return instance.sdk_connection.placement


def build_option_parser(parser):
    parser.add_argument(
        '--os-gpu-p2p-api-version', metavar='<gpu-p2p-api-version>',
        default=utils.env('OS_GPU_P2P_API_VERSION'),
        help='gpu p2p commands\' version (only 1; env '
        'OS_GPU_P2P_API_VERSION)')
    return parser
