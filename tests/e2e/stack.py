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

"""Whether this machine has the libvirt/QEMU stack the e2e tests need.

Kept free of Nova imports, so that ``generate_xml`` can decide in a
moment whether to spend minutes making XML nobody will check.
"""

import functools
import shutil
import subprocess

URI = 'qemu:///system'
REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
XML_DIR = 'NOVA_GPU_P2P_XML_DIR'
TOOLS = ('virsh', 'virt-xml-validate', 'xmllint')
NOT_REACHABLE = ('libvirtd not reachable at %s: run tools/e2e/setup-stack.sh '
                 'as root' % URI)


def _virsh_version() -> subprocess.CompletedProcess:
    return subprocess.run(['virsh', '-c', URI, 'version'],
                          capture_output=True, text=True, check=False,
                          timeout=60)


@functools.cache
def missing() -> str | None:
    """One line saying what this machine lacks; None: all there."""
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if absent:
        return '%s (%s not found)' % (NOT_REACHABLE, ', '.join(absent))
    result = _virsh_version()
    if result.returncode:
        lines = result.stderr.strip().splitlines()
        return '%s (%s)' % (NOT_REACHABLE, lines[-1] if lines
                            else 'virsh exit %d' % result.returncode)
    return None


@functools.cache
def version() -> str:
    """``virsh version``: which stack the checks ran against."""
    return _virsh_version().stdout.strip()
