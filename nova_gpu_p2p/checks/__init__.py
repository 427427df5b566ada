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

"""Is this compute host ready for GPU P2P guests? (``nova-gpu-p2p check``)

One module per concern turns plain facts (versions, files under a root
directory, a :class:`~nova_gpu_p2p.topology.model.HostTopology`) into
:class:`~nova_gpu_p2p.checks.result.Check` results, so that every verdict
and its fix can be tested without a real host; :mod:`.host` runs them in
the order an operator fixes things and :mod:`.report` prints them as
``nova-status upgrade check`` does. The CLI only gathers the facts.
"""
