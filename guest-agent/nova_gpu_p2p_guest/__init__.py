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

"""``nova-gpu-p2p-guest``: NCCL inside the guest sees the host's topology.

Runs in the guest (``python3 -m nova_gpu_p2p_guest``, or the
``nova-gpu-p2p-guest`` script). It reads the topology description the
driver passes through QEMU fw_cfg (format version 1,
``doc/source/guest-topology.rst``), finds each described GPU and NIC in
the guest's sysfs, and writes the NCCL XML topology that NCCL loads before
it looks at the guest's PCI tree
(``/var/run/nvidia-topologyd/virtualTopology.xml``, or ``NCCL_TOPO_FILE``).

Its own distribution, ``nova-gpu-p2p-guest`` (``guest-agent/`` of the
nova-gpu-p2p repository): standard library only, Python 3.8 or later, so
that its wheel alone is enough in a guest image, which has neither Nova
nor oslo. It imports nothing of the driver; the driver imports its file
rules (:mod:`.input_file`, :mod:`.atomic_file`), never the other way
round. The few helpers it
shares in spirit with the driver (the PCI address check) are its own
copies, on purpose.

One module per step: :mod:`.fw_cfg` reads the entry, :mod:`.description`
checks it, :mod:`.guest_sysfs` finds the devices and the CPUs,
:mod:`.nccl` says what NCCL does with the file, :mod:`.nccl_tree` builds
the tree NCCL is to see, :mod:`.nccl_xml` writes it as NCCL's XML,
:mod:`.nccl_env` gives the ``--env`` lines, :mod:`.atomic_file` writes
the file, :mod:`.cli` is the command line; every file is read by
:mod:`.input_file`'s rule. ``verify-p2p`` proves P2P on the data path:
:mod:`.p2p_verify` watches :mod:`.p2p_probe`, which moves the data through
:mod:`.cuda`, and turns NCCL's P2P off in :mod:`.nccl_conf` where it fails.
"""
