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

"""The QEMU wrapper script of "Enabling GPUDirect P2P in OpenStack VMs".

The script replaces ``qemu-system-x86_64``: libvirt runs it with the
command line it made of Nova's domain XML; for each ``-device`` whose
value is a JSON object with ``"driver":"vfio-pci"`` and a ``"host"`` in
the hand-kept ``GPU_CLIQUE_MAP`` (PCI address -> clique), it appends
``"x-nv-gpudirect-clique":N`` before the closing brace, unless the
property is there already, and runs the real QEMU with the rest
unchanged. :func:`wrap` is that loop, with the script's own matching
(regular expressions on the JSON text, not a JSON parser), so it misses
what the script misses.

One departure: the published insertion, ``"${device_json%\\}}},\\"x-nv-
gpudirect-clique\\":$clique_id}"``, gives ``{...},"x-nv-gpudirect-
clique":0}`` in bash, a stray ``}`` QEMU's JSON parser refuses; the
article reports P2P working, so the page most likely lost a character.
:func:`modify_vfio_device` puts the property inside the object, as
intended.

The map is the operator's: the script ships one with every GPU of its
host in clique 0 (:func:`default_map`); at its best an operator writes
the host's real P2P groups (:func:`tests.fixtures.expected_cliques.
clique_map`). Either way it is per host and static: it knows nothing of
which GPUs an instance got.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import re

CLIQUE_PROPERTY = 'x-nv-gpudirect-clique'
_VFIO = re.compile(r'"driver":"vfio-pci"')
_HOST = re.compile(r'"host":"([0-9a-fA-F:.]+)"')
_JSON_OBJECT = re.compile(r'^\{.*\}$', re.DOTALL)


def default_map(gpus: Iterable[str]) -> dict[str, int]:
    """The script's shipped map: every GPU of the host in clique 0."""
    return {address: 0 for address in gpus}


def clique_id(address: str, clique_map: Mapping[str, int]) -> int | None:
    """``get_clique_id``: the address with ``0000:`` put in front."""
    if not address.startswith('0000:'):
        address = '0000:' + address
    return clique_map.get(address)


def modify_vfio_device(spec: str, clique_map: Mapping[str, int]) -> str:
    """``modify_vfio_device``: one ``-device`` JSON value."""
    if not _VFIO.search(spec):
        return spec
    host = _HOST.search(spec)
    if host is None:
        return spec
    clique = clique_id(host.group(1), clique_map)
    if clique is None or CLIQUE_PROPERTY in spec:
        return spec
    return '%s,"%s":%d}' % (spec[:-1], CLIQUE_PROPERTY, clique)


def wrap(argv: Sequence[str], clique_map: Mapping[str, int]) -> list[str]:
    """The command line the real QEMU gets from the wrapper."""
    result: list[str] = []
    words = iter(argv)
    for word in words:
        result.append(word)
        if word != '-device':
            continue
        spec = next(words, None)
        if spec is None:
            break
        result.append(modify_vfio_device(spec, clique_map)
                      if _JSON_OBJECT.match(spec) else spec)
    return result
