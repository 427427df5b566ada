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
Each says what it can do (:class:`Capabilities`); the driver and the
checks ask that, never a backend's name.
"""

import abc
import dataclasses
import typing

from oslo_config import cfg
from stevedore import driver
from stevedore import exception as stevedore_exc
from stevedore import extension

from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import model

NAMESPACE = 'nova_gpu_p2p.topology'
#: The backend that reads nothing but the PCI tree under ``sysfs_root``:
#: the one for a copied tree.
TREE_ONLY = 'sysfs'


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a backend does beyond reading the PCI tree, and what it needs."""

    #: Fabric Manager partitions: one is activated for each server.
    partitions: bool = False
    #: Each GPU's module ID, the name Fabric Manager gives it.
    module_ids: bool = False
    #: Its topology is the bare PCI tree, with every function's driver and
    #: IOMMU group, so ``check`` judges bindings on it without a re-read.
    bindings: bool = False
    #: ``[gpu_p2p]`` options it cannot work without, each with what for.
    required: tuple[tuple[str, str], ...] = ()


class TopologyBackend(metaclass=abc.ABCMeta):

    capabilities: typing.ClassVar[Capabilities] = Capabilities()

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


def capabilities(name: str) -> Capabilities:
    """What the backend of this name can do; nothing, if there is none.

    Imports the backend's module without creating the backend. An unknown
    name is for :func:`load` to report, when discovery runs.
    """
    try:
        return driver.DriverManager(NAMESPACE, name).driver.capabilities
    except stevedore_exc.NoMatches:
        return Capabilities()


def offering(capability: str) -> list[str]:
    """The installed backends that have this capability, by name."""
    return [name for name in names()
            if getattr(capabilities(name), capability)]


def validate(conf: cfg.ConfigOpts) -> None:
    """Raise InvalidConfig when the backend lacks an option it needs."""
    group = conf.gpu_p2p
    for option, why in capabilities(group.topology_backend).required:
        if not getattr(group, option):
            raise exception.InvalidConfig(
                '[gpu_p2p] topology_backend = %s needs [gpu_p2p] %s %s'
                % (group.topology_backend, option, why))
