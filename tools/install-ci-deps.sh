#!/usr/bin/env bash
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

# System tools the tests call: virt-xml-validate (Debian's libvirt-clients)
# checks the guest XML against libvirt's own schema in the functional
# tests; it runs xmllint (libxml2-utils), which libvirt-clients does not
# pull in without recommends. shellcheck checks the devstack plugin in the
# unit tests. Installs them where it can (root with apt-get); elsewhere it says
# what is missing and leaves the choice to the caller: the tests skip
# unless NOVA_GPU_P2P_REQUIRE_TOOLS=1. gcc, with libc6-dev's headers, builds
# the tests' stand-in for NVIDIA Fabric Manager's client library
# (tests/fixtures/nvfm); the tests that load it fail without it. pci.ids
# is the PCI ID database the driver names GPUs from: the tests use lines cut
# from it (tests/fixtures/pci.ids) and check them against the real file.
# libvirt-dev and pkg-config build libvirt-python, which tox -e pkg
# installs beside Nova as on a compute host; libvirt-dev comes from the
# release of the libvirt installed, if any (bookworm-backports' after
# tools/e2e/setup-stack.sh backports).
set -euo pipefail

readonly PACKAGES=(libvirt-clients libxml2-utils shellcheck gcc libc6-dev pci.ids
                   pkg-config)
readonly WHAT="virt-xml-validate, xmllint, shellcheck, gcc, libc6-dev, pci.ids, pkg-config or libvirt-dev"

if command -v virt-xml-validate >/dev/null 2>&1 &&
        command -v xmllint >/dev/null 2>&1 &&
        command -v shellcheck >/dev/null 2>&1 &&
        command -v gcc >/dev/null 2>&1 &&
        [[ -f /usr/include/stdio.h ]] &&
        [[ -f /usr/share/misc/pci.ids ]] &&
        pkg-config --exists libvirt 2>/dev/null; then
    echo "install-ci-deps: virt-xml-validate, xmllint, shellcheck, gcc, libc6-dev, pci.ids, pkg-config and libvirt-dev present"
    exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
    echo "install-ci-deps: not root, not installing ${PACKAGES[*]} ($WHAT missing)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-ci-deps: no apt-get, not installing ${PACKAGES[*]} ($WHAT missing)"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
release=()
if dpkg-query -W -f='${Version}' libvirt0 2>/dev/null | grep -q '~bpo'; then
    release=(-t bookworm-backports)
fi
apt-get install -y -q --no-install-recommends "${release[@]}" libvirt-dev
command -v virt-xml-validate xmllint shellcheck gcc pkg-config
pkg-config --modversion libvirt
