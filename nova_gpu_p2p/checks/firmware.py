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

"""Guest firmware: OVMF where libvirt's firmware autoselection finds it.

GPUs with BARs of tens of GiB need UEFI guests; Nova 34 asks libvirt to
pick the firmware (``<os firmware='efi'>``), and libvirt picks from QEMU's
firmware descriptors (QEMU's docs/interop/firmware.json).
"""

import glob
import json
import os

from nova_gpu_p2p.checks import result

#: Where QEMU's firmware descriptors are looked for, under the root.
FIRMWARE_DESCRIPTOR_DIRS = ('usr/share/qemu/firmware', 'etc/qemu/firmware')
#: OVMF code files as distributions install them, to tell "OVMF without
#: a descriptor" from "no OVMF".
OVMF_CODE_FILES = (
    'usr/share/OVMF/OVMF_CODE_4M.fd',
    'usr/share/OVMF/OVMF_CODE.fd',
    'usr/share/edk2/ovmf/OVMF_CODE.fd',
    'usr/share/edk2/x64/OVMF_CODE.4m.fd',
    'usr/share/qemu/ovmf-x86_64-code.bin',
)


def _descriptors(root: str) -> list[tuple[str, str]]:
    """(descriptor, executable) of each x86_64 UEFI firmware descriptor."""
    found = []
    for directory in FIRMWARE_DESCRIPTOR_DIRS:
        for path in sorted(glob.glob(os.path.join(root, directory,
                                                  '*.json'))):
            try:
                with open(path) as f:
                    data = json.load(f)
                executable = data['mapping']['executable']['filename']
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if 'uefi' not in data.get('interface-types', ()):
                continue
            if not any(t.get('architecture') == 'x86_64'
                       for t in data.get('targets', ())
                       if isinstance(t, dict)):
                continue
            secure = 'secure-boot' in data.get('features', ())
            found.append((secure, path, executable))
    # Plain UEFI first: what Nova's <loader secure='no'/> selects.
    return [(path, executable) for _, path, executable in sorted(found)]


def check_firmware(root: str = '/') -> result.Check:
    """UEFI for large-BAR GPUs, as libvirt would select it."""
    fix = ('install OVMF with its QEMU firmware descriptors, then restart '
           'libvirtd or virtqemud (%s)' % result.see(result.Doc.OVMF))
    usable = [(d, exe) for d, exe in _descriptors(root)
              if os.path.exists(os.path.join(root, exe.lstrip('/')))]
    if usable:
        return result.success('guest firmware',
                              'UEFI (OVMF) for large-BAR GPUs: %s (%s)' % (
                                  usable[0][1],
                                  os.path.basename(usable[0][0])))
    code = [p for p in OVMF_CODE_FILES
            if os.path.exists(os.path.join(root, p))]
    if code:
        return result.warning(
            'guest firmware',
            '/%s is there but no QEMU firmware descriptor '
            '(/usr/share/qemu/firmware/*.json) names it: libvirt cannot '
            'autoselect UEFI for <os firmware=\'efi\'>' % code[0], fix)
    return result.warning(
        'guest firmware',
        'no UEFI firmware (OVMF): large-BAR GPUs need UEFI guests '
        '(hw_firmware_type=uefi); BIOS guests still boot', fix)
