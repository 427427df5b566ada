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

"""What nova-api loads: the flavor extra spec validators.

Nova's API loads :mod:`nova_gpu_p2p.api.extra_spec_validators` through the
``nova.api.extra_spec_validators`` entry point (``gpu_p2p``); no other
room imports this one.
"""
