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

"""What NCCL does with the topology file, and the values that follow.

NVIDIA/nccl, ``src/graph``, 2026:

* ``xml.cc`` ``ncclTopoGetXmlFromFile`` / ``xmlLoadSub`` / ``xmlGetNode``:
  a hand-written parser. No ``<?xml?>`` declaration, attributes separated
  by one space, values quoted with no entities and shorter than 254
  characters, only spaces and line breaks between elements. ``<system
  version="1">`` holds ``<cpu>`` elements, which hold ``<pci>`` (and
  ``<nic>``); ``<pci>`` holds ``<pci>``, ``<gpu>``, ``<nic>``.
* ``topo.cc`` ``ncclTopoGetSystem``: the file is loaded first; then
  ``ncclTopoFillGpu`` / ``ncclTopoFillNet`` look the rank's GPU and each
  network device up by ``busid`` (lower case ``dddd:bb:dd.f``,
  ``int64ToBusId``) among the file's ``<pci>`` nodes, and
  ``ncclTopoGetXmlFromSys`` (``xml.cc``) only fills attributes the file
  does not give, and climbs sysfs only for a node without a parent: a
  device found in the file keeps the file's parents and ``link_speed`` /
  ``link_width``. A ``<pci>`` node that sysfs does not have (our switches)
  is kept as it is; ``ncclTopoTrimXml`` then drops every branch without a
  device NCCL uses.
* ``topo.cc`` ``ncclTopoAddPci``: ``class`` ``0x060400`` is a switch,
  ``link_speed`` (``kvDictPciGen``, Linux's ``max_link_speed`` text) and
  ``link_width`` give its bandwidth; ``ncclTopoAddCpu`` needs ``arch``, on
  x86 ``vendor``, and for Intel ``familyid`` and ``modelid``
  (``ncclTopoGetXmlFromCpu`` fills them from CPUID when missing, but only
  for CPUs it walks to).
* ``paths.cc`` ``ncclTopoSetPaths``: a path through one switch is
  ``PIX``, through a switch-to-switch link ``PXB``, through a CPU ``PHB``,
  between CPUs ``SYS``; ``ncclTopoCheckP2p`` uses P2P at ``PXB`` or closer
  (``NCCL_P2P_LEVEL``), ``ncclTopoCheckGdr`` GPUDirect RDMA likewise
  (``NCCL_NET_GDR_LEVEL``).
"""

import re

#: NCCL's path types (``src/include/graph.h``) that the PCI tree decides.
PATH = {'PIX': 4, 'PXB': 5, 'PHB': 8, 'SYS': 9}
#: A host link class in NCCL's terms: nvidia-smi's NODE (across root
#: complexes of one NUMA node) is NCCL's PHB. NV has none: NCCL finds
#: NVLink itself, through NVML.
OF_HOST = {'PIX': 'PIX', 'PXB': 'PXB', 'PHB': 'PHB', 'NODE': 'PHB',
           'SYS': 'SYS'}
#: NCCL's ``p2pLevel`` and ``netGdrLevel`` defaults.
DEFAULT_LEVEL = 'PXB'
#: The ``<system version>`` NCCL's parser reads.
XML_VERSION = 1
#: NCCL's parser refuses a value of MAX_STR_LEN - 1 = 254 characters.
MAX_VALUE = 253
#: Values that need no quoting or entities in NCCL's parser.
SAFE_VALUE = re.compile(r'[A-Za-z0-9 ._:/,+-]*\Z')
#: Linux's ``max_link_speed`` text, which ``kvDictPciGen`` knows.
LINK_SPEED = re.compile(r'[0-9]+(\.[0-9]+)? GT/s( PCIe)?\Z')
#: The ``class`` that makes a ``<pci>`` node a switch.
PCI_BRIDGE_CLASS = '0x060400'
