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
validate`` with the stack's schema, then ``virsh domxml-to-native
qemu-argv`` by its libvirtd, on a copy with only the adaptations
:func:`tests.fixtures.qemu_argv.adaptations` lists (this machine's NUMA
nodes and VFIO are not the corpus host's), through
:func:`tests.fixtures.stack.translate`. Without libvirtd nothing is
checked, and :func:`unavailable` says why.
"""

import dataclasses

from tests.fixtures import stack


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


def check(domain_xml: str) -> Verdict:
    """The schema, then libvirtd's QEMU command line, for one document."""
    missing = unavailable()
    if missing:
        return Verdict(None, missing)
    translation = stack.translate(domain_xml.encode())
    if translation.refused_by == 'virt-xml-validate':
        return Verdict(False, 'virt-xml-validate: %s' % _last_line(
            translation.output))
    if translation.refused_by is not None:
        return Verdict(False, 'domxml-to-native: %s' % _last_line(
            translation.output))
    return Verdict(True, argv=translation.output)
