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

"""A file written whole or not at all.

NCCL reads the topology file whenever a job starts; a boot that stops
half-way must leave the old file or none, never half of one.
"""

from __future__ import annotations

import os
import tempfile

from nova_gpu_p2p.guest_agent import errors


def write_atomic(path: str, text: str) -> None:
    """``text`` at ``path`` whole or not at all: temp file, os.replace."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix='.%s.' % os.path.basename(path), dir=directory)
        with os.fdopen(fd, 'w', encoding='ascii') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise errors.Problem('cannot write %s: %s'
                             % (path, exc.strerror or exc))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
