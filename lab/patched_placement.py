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

"""This environment's placement with ``patches/placement`` applied, aside.

The benchmark times placement as released and as the series makes it, on
the same machine and cloud: the series goes to a copy of the installed
package in a temporary directory, which a child process imports first
(:func:`lab.bench_privsep.child`'s ``first_path``), so the environment's
own placement stays as released.
"""

from collections.abc import Iterator
import contextlib
import pathlib
import shutil
import subprocess
import sys
import tempfile

TOOL = pathlib.Path(__file__).resolve().parents[1] / 'tools' / (
    'upstream_patches.py')


def is_patched() -> bool:
    """Whether the placement this Python imports carries the series."""
    from placement.objects import research_context
    return hasattr(research_context.RequestWideSearchContext,
                   'narrow_anchors')


@contextlib.contextmanager
def copy() -> Iterator[str]:
    """A directory holding the patched copy, removed afterwards."""
    import placement
    source = pathlib.Path(placement.__file__).parent
    with tempfile.TemporaryDirectory(prefix='placement-patched-') as path:
        shutil.copytree(source, pathlib.Path(path) / 'placement',
                        ignore=shutil.ignore_patterns('__pycache__'))
        run = subprocess.run(
            [sys.executable, str(TOOL), '--project', 'placement', 'apply',
             path], capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError('patches/placement: %s' % run.stdout.strip())
        yield path
