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

"""What several ``tox -e bench`` sections share: corpus hosts' sysfs trees
built for the run, ``[gpu_p2p]`` options over a tree, best-of-N timing.
"""

import atexit
from collections.abc import Callable
import shutil
import tempfile
import timeit

from oslo_config import cfg

from nova_gpu_p2p import conf
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder

#: Discovery of the 16-GPU, ~500-function host must stay under
#: bench.DISCOVERY_GOAL_S; the privsep sections read it too.
DISCOVERY_GOAL_HOST = 'large-16gpu-8numa'


def tree(name: str) -> str:
    """A corpus host's sysfs tree, built for this run."""
    root = tempfile.mkdtemp(dir=sysfs_builder.scratch_dir())
    atexit.register(shutil.rmtree, root, True)
    sysfs_builder.build(hosts.HOSTS[name], root)
    return root


def opts(sysfs_root: str) -> cfg.ConfigOpts:
    """``[gpu_p2p]`` options reading ``sysfs_root``."""
    options = cfg.ConfigOpts()
    conf.register_opts(options)
    options([], default_config_files=[])
    options.set_override('sysfs_root', sysfs_root, group='gpu_p2p')
    return options


def best(func: Callable[[], object], rounds: int) -> float:
    return min(timeit.repeat(func, repeat=rounds, number=1))
