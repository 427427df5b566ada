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

"""The exceptions of nova-gpu-p2p, in one place, as Nova keeps its own.

Two kinds stay where they are raised: the guest agent's (its own
distribution, nova_gpu_p2p_guest, runs in guests without this package),
and the driver's subclasses of Nova's exceptions
(nova_gpu_p2p.compute.driver.HostCannotHonour, FlavorCannotBeHonoured), which
steer Nova's compute manager: importing nova.exception here would load
Nova's API stack into every command line run.
"""

from nova_gpu_p2p_guest import errors


# Start-up: configuration and the Nova this runs on.


class InvalidConfig(Exception):
    """nova-compute must not start with these ``[gpu_p2p]`` options.

    Deliberately not a ValueError: Nova's driver loader reports any
    ValueError as "driver is not of type ComputeDriver", which would hide
    the real reason from the operator.
    """


class IncompatibleNova(Exception):
    """This Nova lacks a detail nova-gpu-p2p relies on."""


# Flavors and guest builds.


class InvalidExtraSpec(ValueError):
    """A flavor extra spec of ours holds a value we do not accept."""

    def __init__(self, key: str, value: str, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(
            f"Invalid value {errors.quoted(value)} for flavor extra spec "
            f"{key}: "
            f"allowed values are {allowed}.")


class InvalidFlavorRequest(ValueError):
    """The asked-for flavor cannot be a P2P flavor as given."""


class GuestLayoutError(Exception):
    """The devices cannot be laid out at all (too many for PCI)."""


class DescriptionTooLarge(ValueError):
    """The guest topology description does not fit one fw_cfg entry."""


# Topology discovery and its input files.


class TopologyError(Exception):
    """Discovery failed; the message says what and where."""


class StaticLineError(ValueError):
    """What is wrong at ``line`` of the file, and what is allowed."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class NvidiaSmiMatrixError(ValueError):
    """The matrix is not one nvidia-smi prints; ``line`` is where."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class NvmlUnavailable(Exception):
    """NVML cannot be asked here: not installed, or no NVIDIA driver."""


class BadModuleIdFile(ValueError):
    """The kept partition table cannot be used; the message says why."""


# NVIDIA Fabric Manager calls (nova_gpu_p2p.fabric.nvfm).


class FmError(Exception):
    """A Fabric Manager call failed; ``status`` is its fmReturn_t, if any."""

    def __init__(self, call: str, status: int | None, reason: str) -> None:
        self.call = call
        self.status = status
        super().__init__('Fabric Manager %s failed: %s' % (call, reason))


class FmLibraryMissing(FmError):
    """libnvfm.so.1 cannot be loaded, or lacks a call."""


class FmUnavailable(FmError):
    """Fabric Manager cannot be reached: it is down, or not listening."""


class FmInUse(FmError):
    """A GPU of the partition is in another, active partition."""


class FmNotReady(FmError):
    """Fabric Manager has no partition data yet: ask again after telling it.

    FM_ST_NOT_CONFIGURED, which nv_fm_agent.h documents for partition
    queries, activations and deactivations while "Fabric Manager instance
    is initializing and no data": initialising, or restarted in restart
    mode and awaiting fmSetActivatedFabricPartitions (FM_ST_NOT_READY is
    the global Fabric Manager's word for the same).
    """


class FmNotActive(FmError):
    """fmDeactivateFabricPartition: the partition is not active.

    nv_fm_agent.h gives this answer FM_ST_UNINITIALIZED ("specified
    partition is not activated"); for other calls that status means the
    library was not initialised.
    """


# The command line.


class UsageError(Exception):
    """A bad command line, nova.conf or file: one line, exit status 2."""
