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

"""Every strategy's domain XML through libvirt before it is scored.

A layout libvirt refuses gives the guest nothing, so the benchmark
scores it zero; one it accepts is scored by what QEMU is then told. Per
document, as the e2e tests check ours (:mod:`tests.e2e`): ``virt-xml-
validate`` with the installed schema, then ``virsh domxml-to-native
qemu-argv`` by the running libvirtd, on a copy with only
:data:`tests.fixtures.qemu_argv.ADAPTATIONS` (this machine's NUMA nodes and
/dev/vfio are not the corpus host's). Without libvirtd nothing is
checked, and :func:`unavailable` says why.
"""

import dataclasses
import os
import subprocess
import tempfile

from tests.fixtures import qemu_argv
from tests.fixtures import stack

#: Seconds one tool may take.
TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What libvirt made of one domain XML."""

    #: True: valid and translated; False: refused; None: not checked.
    accepted: bool | None
    #: Why it was refused, or why it was not checked.
    reason: str | None = None
    #: The QEMU command line libvirt would run (accepted only).
    argv: str | None = None

    def as_dict(self) -> dict:
        return {'accepted': self.accepted, 'reason': self.reason}


def unavailable() -> str | None:
    """Why libvirt cannot check XML on this machine; None: it can."""
    return stack.missing()


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else '(no output)'


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False,
                          timeout=TIMEOUT_S)


def check(domain_xml: str) -> Verdict:
    """The schema, then libvirtd's QEMU command line, for one document."""
    missing = unavailable()
    if missing:
        return Verdict(None, missing)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, 'domain.xml')
        with open(path, 'w') as f:
            f.write(domain_xml)
        result = _run('virt-xml-validate', path, 'domain')
        if result.returncode:
            return Verdict(False, 'virt-xml-validate: %s' % _last_line(
                result.stderr + result.stdout))
        adapted = os.path.join(folder, 'adapted.xml')
        with open(adapted, 'wb') as f:
            f.write(qemu_argv.adapt_for_this_host(domain_xml))
        result = _run('virsh', '-c', stack.URI, 'domxml-to-native',
                      'qemu-argv', adapted)
        if result.returncode:
            return Verdict(False, 'domxml-to-native: %s' % _last_line(
                result.stderr + result.stdout))
    return Verdict(True, argv=result.stdout)
