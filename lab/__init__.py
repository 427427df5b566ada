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

"""The benchmark, the demo, the simulations and the baselines.

``bench.py`` (``tox -e bench``) and ``demo.py`` (``tox -e demo``) are the
scripts; the other modules are the in-process clouds they boot servers
on, the scheduling and placement simulations, the judges of decision
quality and NCCL's path rules, and the two published workarounds the
benchmark compares with (``baselines/``). Never shipped: ``nova_gpu_p2p``
never imports this package. It runs on the tests' infrastructure
(``tests/fixtures``, ``tests/cloud``), never on a test module, so the
tests may import it and nothing goes round in a circle.
"""

# The simulated hosts' PCI ID database (tests.PCI_IDS) for every run.
import tests  # noqa: F401
