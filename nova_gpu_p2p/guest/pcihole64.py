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

"""The q35 guest's 64-bit PCI hole (``<pcihole64>`` on ``pcie-root``).

Behind expander buses, the guest firmware must fit every 64-bit BAR of
the passthrough devices into the hole that QEMU describes; the q35
default (32 GiB) is too small for several large-BAR GPUs and the guest
then fails to boot. The rule:

* needed = the sum of the devices' 64-bit BARs (each a power of two),
  rounded up to a power of two; nothing is set when that fits in QEMU's
  default.
* QEMU places the hole above guest RAM, aligned to its size, and refuses
  to start when it ends beyond the guest's physical address bits
  (measured: a 1 TiB hole with 40 bits ends at 0x1ffffffffff). So the
  hole must end within ``2 ** phys_bits``; otherwise the plan says how
  many bits the flavor must give the guest.
"""

import dataclasses

from oslo_utils import units

#: QEMU's q35 default 64-bit hole (Q35_PCI_HOST_HOLE64_SIZE_DEFAULT).
QEMU_DEFAULT_SIZE = 32 * units.Gi
#: QEMU's phys-bits for named CPU models without host-phys-bits (Nova's
#: host-model and custom cpu_mode): the bits a guest has unless told.
QEMU_DEFAULT_PHYS_BITS = 40
#: QEMU refuses to start an x86-64 guest whose phys-bits lie outside 32 to
#: TARGET_PHYS_ADDR_SPACE_BITS (52).
MIN_PHYS_BITS = 32
MAX_PHYS_BITS = 52
PHYS_BITS_ALLOWED = (
    f'integers from {MIN_PHYS_BITS} to {MAX_PHYS_BITS} (QEMU\'s x86-64 '
    f'phys-bits)')
#: q35 keeps at most 2 GiB of RAM below 4 GiB when the guest has 2.75 GiB
#: or more; the rest starts at 4 GiB.
_LOWMEM = 2 * units.Gi
_LOWMEM_THRESHOLD = 0xb0000000
_FOUR_GIB = 4 * units.Gi


@dataclasses.dataclass(frozen=True)
class Hole64:
    #: Size to set, in bytes; None: leave QEMU's default.
    size: int | None
    #: What the BARs need, in bytes.
    needed: int
    #: Why the hole cannot be set as asked; None when it can.
    problem: str | None = None


def _pow2_ceil(value: int) -> int:
    return 1 << max(value - 1, 0).bit_length()


def needed(bars: tuple[int, ...]) -> int:
    """Bytes of 64-bit window the BARs need once aligned."""
    return _pow2_ceil(sum(_pow2_ceil(bar) for bar in bars)) if bars else 0


def hole_end(size: int, memory: int) -> int:
    """First address after a hole of ``size`` for a guest of ``memory``."""
    above_4g = memory - _LOWMEM if memory >= _LOWMEM_THRESHOLD else 0
    start = _FOUR_GIB + above_4g
    alignment = _pow2_ceil(size)
    start = (start + alignment - 1) // alignment * alignment
    return start + size


def min_phys_bits(size: int, memory: int) -> int:
    return (hole_end(size, memory) - 1).bit_length()


def plan(setting: str | int, bars: tuple[int, ...], memory: int,
         phys_bits: int | None) -> Hole64:
    """Size the hole per ``[gpu_p2p] pcihole64`` (``auto``, ``off``, GiB).

    :param memory: guest RAM in bytes.
    :param phys_bits: the guest CPU's physical address bits; None where
        they follow a host that is not known here (no check then).
    """
    need = needed(bars)
    if setting == 'off':
        return Hole64(size=None, needed=need)
    if setting == 'auto':
        if need <= QEMU_DEFAULT_SIZE:
            return Hole64(size=None, needed=need)
        size = need
    else:
        size = int(setting) * units.Gi
        if size < need:
            return Hole64(size=size, needed=need, problem=(
                '[gpu_p2p] pcihole64 = %d GiB is smaller than the %d GiB '
                'the devices\' 64-bit BARs need: the guest firmware would '
                'leave GPUs without their BARs; set pcihole64 = auto (or '
                'at least %d)' % (size // units.Gi, _gib(need), _gib(need))))
    bits = min_phys_bits(size, memory)
    if bits > MAX_PHYS_BITS:
        return Hole64(size=size, needed=need, problem=(
            'a %d GiB PCI hole above %d MiB of guest RAM ends beyond the %d '
            'physical address bits QEMU can give a guest: give the flavor '
            'less RAM or fewer GPUs%s' % (
                size // units.Gi, memory // units.Mi, MAX_PHYS_BITS,
                '' if setting == 'auto'
                else ', or set [gpu_p2p] pcihole64 lower')))
    if phys_bits is not None and bits > phys_bits:
        return Hole64(size=size, needed=need, problem=(
            'set hw:maxphysaddr_mode=emulate, hw:maxphysaddr_bits=%d: the '
            'BARs need a %d GiB PCI hole, beyond the guest\'s %d physical '
            'address bits' % (bits, size // units.Gi, phys_bits)))
    return Hole64(size=size, needed=need)


def _gib(size: int) -> int:
    return -(-size // units.Gi)
