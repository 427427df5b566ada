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

"""One verdict of ``nova-gpu-p2p check``: oslo.upgradecheck's Result.

``nova-status upgrade check`` reports with oslo.upgradecheck, so our
results are its ``Result`` (a :class:`~oslo_upgradecheck.upgradecheck.Code`
and details), named by what they are about. Distribution-specific advice
(package names, boot loader steps, register recipes) is not in the
messages: they name a section of the troubleshooting guide instead, so
that the advice is kept, and corrected, in one place.
"""

import enum

from oslo_upgradecheck import upgradecheck

Code = upgradecheck.Code


class Doc(str, enum.Enum):
    """Sections of doc/source/troubleshooting.rst that messages name.

    The values are the section titles, which tests hold to the document.
    """

    IOMMU = 'IOMMU off'
    VFIO_PCI = 'GPU not on vfio-pci'
    ACS_REDIRECT = 'ACS P2P Request Redirect'
    ACS_UNKNOWN = 'ACS unknown'
    OVMF = 'No UEFI firmware (OVMF)'
    UEFI_XML = 'UEFI guests refused by libvirt 9.0 (Nova 34)'
    OLD_LIBVIRT = 'Old libvirt or QEMU'
    FM_MODE = 'Fabric Manager mode'
    FM_UNREACHABLE = 'Fabric Manager unreachable'
    FM_MODULE_IDS = 'GPU module IDs unknown'
    CONSUMER_GPUS = 'Consumer GPUs'
    LIBVIRT_PYTHON = 'libvirt-python missing'
    GRACE = 'Grace GPUs'
    NOVA_MOVE_CLAIMS = 'Moves after a nova-compute restart'


def see(section: Doc) -> str:
    """Where an operator finds the steps for their distribution."""
    return 'see troubleshooting: %s' % section.value


class Check(upgradecheck.Result):
    """A verdict on one subject: what was found and, maybe, the fix.

    The details are the message and the fix (``; fix: ...``), as the
    table and ``--json`` show them; the parts stay apart for callers that
    need one of them.
    """

    def __init__(self, code: Code, subject: str, message: str,
                 fix: str | None = None) -> None:
        super().__init__(code, message + ('; fix: ' + fix if fix else ''))
        self.subject = subject
        self.message = message
        self.fix = fix

    def __repr__(self) -> str:
        return 'Check(%s, %r, %r, %r)' % (self.code.name, self.subject,
                                          self.message, self.fix)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Check)
                and (self.code, self.subject, self.message, self.fix)
                == (other.code, other.subject, other.message, other.fix))


def success(subject: str, message: str) -> Check:
    return Check(Code.SUCCESS, subject, message)


def warning(subject: str, message: str, fix: str | None = None) -> Check:
    return Check(Code.WARNING, subject, message, fix)


def failure(subject: str, message: str, fix: str | None = None) -> Check:
    return Check(Code.FAILURE, subject, message, fix)
