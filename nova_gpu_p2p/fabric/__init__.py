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

"""NVIDIA Fabric Manager partitions on HGX boards.

On an HGX board the GPUs reach each other over NVLink through NVSwitches,
which Fabric Manager programs. With GPUs passed through to guests (its
shared NVSwitch virtualization mode) it routes NVLink only within the
partitions it has activated: fixed sets of GPU modules that the board
supports. This package talks to Fabric Manager and turns its partitions
into the GPU addresses that the topology backends, the driver and the
scheduler work with; it sits below nova_gpu_p2p.topology's backends and
imports no Nova.
"""
