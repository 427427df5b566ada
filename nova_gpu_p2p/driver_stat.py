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

"""The compute node stat that says this driver runs on a host now.

Placement traits outlive the driver that set them: after a rollback to
``libvirt.LibvirtDriver`` the host's provider keeps ``CUSTOM_GPU_P2P``
and the clique-size traits until an operator removes them. A compute
node's stats do not: on every resource update (at start and each
period) Nova's resource tracker clears them and copies in what the
driver's ``get_available_resource`` returned. So the driver reports
:data:`KEY`, and ``GPUP2PCliqueFilter`` passes a host for a
``hw:gpu_p2p_clique=required`` server only while the host shows it.
"""

from collections.abc import Mapping

#: ComputeNode.stats key (the scheduler's HostState.stats).
KEY = 'gpu_p2p_driver'
#: Its value: what the running driver promises; raised when that changes.
VALUE = '1'


def reported(stats: Mapping[str, str] | None) -> dict[str, str]:
    """The driver's stats with :data:`KEY` added."""
    return dict(stats or {}, **{KEY: VALUE})


def running(stats: Mapping[str, str] | None) -> bool:
    """Whether a compute node's stats say this driver runs there now."""
    return bool(stats) and stats.get(KEY) == VALUE
