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

# The PCI ID databases Debian's suites ship (package pci.ids), for the tests
# that judge GPUs by the real files (tests/unit/test_gpu_identity.py): each
# suite's /usr/share/misc/pci.ids goes to DEST/<suite>/pci.ids, with the
# package's version in DEST/<suite>/version. Uses apt-get with a private
# sources list and state directory: the machine's own apt configuration and
# packages are left as they are, and nothing is installed. Without apt-get
# it says so and exits 0: the tests skip unless NOVA_GPU_P2P_REQUIRE_TOOLS=1.
#
#   tools/fetch-pci-ids.sh [DEST]   (default: .tox/pci-ids)
set -euo pipefail

readonly SUITES=(bookworm trixie sid)
readonly MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
dest=${1:-"$(dirname "$0")/../.tox/pci-ids"}

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "fetch-pci-ids: no apt-get or dpkg-deb, not fetching pci.ids of ${SUITES[*]}"
    exit 0
fi
if [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]]; then
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
else
    echo "fetch-pci-ids: no Debian archive keyring, not fetching pci.ids of ${SUITES[*]}"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/etc/preferences.d" "$dest"
for suite in "${SUITES[@]}"; do
    echo "Types: deb
URIs: $MIRROR
Suites: $suite
Components: main
Signed-By: $keyring
"
done > "$work/etc/debian.sources"
# Old suites' Release files outlive their Valid-Until on some mirrors.
apt=(apt-get -q
     -o "Dir::Etc::SourceList=/dev/null"
     -o "Dir::Etc::SourceParts=$work/etc"
     -o "Dir::Etc::Preferences=/dev/null"
     -o "Dir::Etc::PreferencesParts=$work/etc/preferences.d"
     -o "Dir::State::Lists=$work/lists"
     -o "Dir::State::status=/dev/null"
     -o "Dir::Cache=$work"
     -o "Dir::Cache::Archives=$work/archives"
     -o "APT::Architecture=$(dpkg --print-architecture)"
     -o "Acquire::Check-Valid-Until=false"
     -o "APT::Sandbox::User=root"
     -o "Debug::NoLocking=true")
"${apt[@]}" update >/dev/null
for suite in "${SUITES[@]}"; do
    rm -f "$work"/*.deb
    (cd "$work" && "${apt[@]}" download "pci.ids/$suite" >/dev/null)
    deb=$(ls "$work"/pci.ids_*.deb)
    mkdir -p "$dest/$suite" "$work/x-$suite"
    dpkg-deb -x "$deb" "$work/x-$suite"
    install -m 0644 "$work/x-$suite/usr/share/misc/pci.ids" "$dest/$suite/pci.ids"
    dpkg-deb -f "$deb" Version > "$dest/$suite/version"
    echo "fetch-pci-ids: $suite: pci.ids $(cat "$dest/$suite/version") -> $dest/$suite/pci.ids"
done
