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

"""The value types of ``[gpu_p2p]`` options, and their bounds.

Each parses and checks one option's value when oslo.config reads it,
so a bad value is refused at start in one line.
"""

import math

from nova_gpu_p2p_guest import errors
from oslo_config import types

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p import pci_address
from nova_gpu_p2p.topology import consumer_gpus
from nova_gpu_p2p.topology import host_cliques


#: The largest ``pcihole64`` in GiB: a hole that size, aligned to its
#: size above 4 GiB, ends at 2 ** 52, the most physical address bits QEMU
#: gives an x86-64 guest (``guest.pcihole64.MAX_PHYS_BITS``).
MAX_PCIHOLE64_GIB = 2 ** 21
#: fmConnect copies the address into a 256-byte string (NUL included);
#: a Unix socket path must also fit ``sun_path``, 108 bytes with its NUL.
MAX_FM_ADDRESS_BYTES = 255
MAX_UNIX_SOCKET_BYTES = 107


class _ParsedType(types.ConfigType):
    """Base of our value types: equal by class, written back with str()."""

    TYPE_NAME = 'value'

    def __init__(self) -> None:
        super().__init__(type_name=self.TYPE_NAME)

    def _formatter(self, value) -> str:
        return str(value)

    def __eq__(self, other) -> bool:
        return self.__class__ == other.__class__


class CliqueAssignment(_ParsedType):
    """One ``clique_map`` entry, ``BDF:ID``, parsed to ``(address, id)``."""

    TYPE_NAME = 'clique assignment value'

    def __call__(self, value):
        if isinstance(value, tuple):
            return value
        address, sep, clique = value.strip().rpartition(':')
        clique_id = ascii_decimal.parse(clique)
        if not sep or clique_id is None:
            raise ValueError(
                f"{errors.quoted(value)} is not BDF:ID (for example "
                f"0000:81:00.0:0)")
        if clique_id > host_cliques.MAX_CLIQUE_ID:
            raise ValueError(
                f"clique ID {clique_id} in {errors.quoted(value)} is out of "
                f"range: QEMU "
                f"accepts 0 to {host_cliques.MAX_CLIQUE_ID}")
        return pci_address.normalize(address), clique_id

    def _formatter(self, value) -> str:
        return '%s:%d' % value if isinstance(value, tuple) else str(value)


class GpuModelId(_ParsedType):
    """A ``trusted_gpu_models`` entry: ``10de:DEV[:SUBVENDOR:SUBDEV]``."""

    TYPE_NAME = 'GPU model ID'

    def __call__(self, value):
        if isinstance(value, consumer_gpus.ModelId):
            return value
        return consumer_gpus.parse_model_id(str(value))


class PCIHole64(_ParsedType):
    """``auto``, ``off`` or a size in GiB, 1 to :data:`MAX_PCIHOLE64_GIB`.

    A larger hole ends beyond any guest's physical address bits, so QEMU
    would refuse every guest it is given to.
    """

    TYPE_NAME = 'pcihole64 value'
    CHOICES = ('auto', 'off')

    def __call__(self, value):
        if isinstance(value, int):
            size = value
        else:
            text = str(value).strip()
            if text in self.CHOICES:
                return text
            size = ascii_decimal.parse(text)
            if size is None:
                raise ValueError(
                    f"{errors.quoted(value)} is not auto, off or a size in "
                    f"GiB (a positive integer, at most {MAX_PCIHOLE64_GIB})")
        if not 1 <= size <= MAX_PCIHOLE64_GIB:
            raise ValueError(
                f"pcihole64 size must be at least 1 GiB and at most "
                f"{MAX_PCIHOLE64_GIB} GiB (a hole that ends within QEMU's "
                f"52 guest physical address bits), got {size}")
        return size


class FabricManagerAddress(_ParsedType):
    """``HOST:PORT`` (TCP) or an absolute path (Unix socket), as text.

    What fmConnect takes; checked here so a typo stops nova-compute at
    start-up rather than at the first GPU boot.
    """

    TYPE_NAME = 'Fabric Manager address'

    def __call__(self, value):
        text = str(value).strip()
        if text.startswith('/'):
            size = len(text.encode('utf-8', 'surrogateescape'))
            if size > MAX_UNIX_SOCKET_BYTES or not text.isprintable():
                raise ValueError(
                    f"Unix socket path {errors.quoted(value)} is not one line "
                    f"of at most {MAX_UNIX_SOCKET_BYTES} bytes (the "
                    f"kernel's sun_path), it has {size}")
            return text
        host, sep, port = text.rpartition(':')
        number = ascii_decimal.parse(port)
        if (not sep or not host or not host.isascii()
                or not host.isprintable() or ' ' in host
                or len(text) > MAX_FM_ADDRESS_BYTES
                or len(port) > 5 or number is None
                or not 1 <= number <= 65535):
            raise ValueError(
                f"{errors.quoted(value)} is neither HOST:PORT with an ASCII "
                f"host name or address and a port from 1 to 65535 (for "
                f"example 127.0.0.1:6666) nor an absolute Unix socket path")
        return text


class Path(_ParsedType):
    """A file or directory name on one line: no control character.

    A NUL makes every file call raise ValueError; a newline comes from a
    continuation line in nova.conf, never from a real path. An empty one
    names nothing: left to run, it reads no file where the option's
    default or search would have read one (``pci_ids_file =`` barred the
    GPUs the system's database names).
    """

    TYPE_NAME = 'path'

    def __call__(self, value):
        text = str(value)
        if not text:
            raise ValueError('an empty path names no file: give one, or '
                             'leave the option out for its default')
        if not text.isprintable():
            raise ValueError(f"{errors.quoted(value)} is not a path on one "
                             f"line (it holds a control character)")
        return text


class AsciiInteger(types.Integer):
    """oslo.config's Integer, in ASCII decimal only (ascii_decimal)."""

    def __call__(self, value):
        if isinstance(value, str) and ascii_decimal.parse(
                value.strip().removeprefix('-')) is None:
            raise ValueError(f"{errors.quoted(value)} is not a whole number "
                             f"in ASCII decimal")
        return super().__call__(value)


class FiniteFloat(types.Float):
    """oslo.config's Float, finite, in ASCII: ``nan`` and ``inf`` parse.

    A NaN weight multiplier would make every host's weight NaN, and
    Nova's weighers sort by weight.
    """

    def __call__(self, value):
        number = super().__call__(value)
        if (number is None or (isinstance(value, str)
                               and not value.isascii())
                or not math.isfinite(number)):
            raise ValueError(f"{errors.quoted(value)} is not a finite number "
                             f"in ASCII")
        return number
