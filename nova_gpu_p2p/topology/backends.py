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

"""Topology backends: how the host's GPU topology is learnt.

Backends are found by name in the ``nova_gpu_p2p.topology`` entry point
namespace (``[gpu_p2p] topology_backend``), so a site can add its own.
"""

import abc

from oslo_config import cfg
from stevedore import driver
from stevedore import exception as stevedore_exc
from stevedore import extension

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import model

NAMESPACE = 'nova_gpu_p2p.topology'


class TopologyBackend(metaclass=abc.ABCMeta):

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    @abc.abstractmethod
    def discover(self) -> model.HostTopology:
        """Read the host; raise TopologyError when that is impossible."""


def names() -> list[str]:
    return sorted(extension.ExtensionManager(NAMESPACE).names())


def load(name: str, conf: cfg.ConfigOpts) -> TopologyBackend:
    try:
        return driver.DriverManager(
            NAMESPACE, name, invoke_on_load=True,
            invoke_args=(conf,)).driver
    except stevedore_exc.NoMatches:
        raise exception.TopologyError(
            '[gpu_p2p] topology_backend = %s: no such backend; installed '
            'backends are %s' % (name, ', '.join(names())))
