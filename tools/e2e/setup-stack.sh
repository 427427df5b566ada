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

# The libvirt/QEMU stack `tox -e e2e` talks to: libvirtd with its QEMU
# driver, virtlogd, QEMU, OVMF and SeaBIOS, from Debian bookworm (libvirt
# 9.0 / QEMU 7.2) or bookworm-backports (libvirt 11.3 / QEMU 10.0), then
# libvirtd and virtlogd (re)started directly: CI containers have no init
# system. Idempotent. Without root or apt-get it says what is missing in
# one line and exits 0; the e2e tests then skip (unless
# NOVA_GPU_P2P_REQUIRE_TOOLS=1).
#
# Usage: tools/e2e/setup-stack.sh bookworm|backports
set -euo pipefail

readonly URI=qemu:///system
readonly BACKPORTS_LIST=/etc/apt/sources.list.d/nova-gpu-p2p-bookworm-backports.list
readonly BACKPORTS_LINE='deb http://deb.debian.org/debian bookworm-backports main'
# The stack itself: upgraded together from backports (libvirt-dev, which
# tools/install-ci-deps.sh installs for libvirt-python, with its libvirt).
readonly STACK=(libvirt-daemon-system libvirt-daemon-driver-qemu
                libvirt-clients libvirt-dev qemu-system-x86 qemu-utils ovmf)
# What the tests and the guest boot test use besides it.
readonly TOOLS=(libxml2-utils seabios busybox-static linux-image-amd64
                cpio)

say() { echo "setup-stack: $*"; }

usage() {
    echo "usage: $0 bookworm|backports" >&2
    exit 2
}

[[ $# -eq 1 ]] || usage
stack=$1
[[ $stack == bookworm || $stack == backports ]] || usage

if [[ "$(id -u)" -ne 0 ]]; then
    say "not root: not installing libvirtd/QEMU/OVMF ($stack); e2e tests will skip"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get: not installing libvirtd/QEMU/OVMF ($stack); e2e tests will skip"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt_install=(apt-get install -y -q --no-install-recommends
             -o Dpkg::Options::=--force-confold)

if [[ $stack == backports ]]; then
    if [[ ! -f $BACKPORTS_LIST ]] &&
            ! grep -rqs 'bookworm-backports' /etc/apt/sources.list \
                /etc/apt/sources.list.d/; then
        echo "$BACKPORTS_LINE" >"$BACKPORTS_LIST"
    fi
    apt-get update -q
    "${apt_install[@]}" "${TOOLS[@]}"
    "${apt_install[@]}" -t bookworm-backports "${STACK[@]}"
else
    # Only update the lists when something is missing: saves a minute.
    missing=()
    for package in "${STACK[@]}" "${TOOLS[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
            grep -q 'install ok installed' || missing+=("$package")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        apt-get update -q
        "${apt_install[@]}" "${STACK[@]}" "${TOOLS[@]}"
    fi
fi

# virtlogd must run before libvirtd starts a guest; Debian's packages
# leave this directory to the service units, which do not run here.
mkdir -p /var/log/libvirt /var/log/libvirt/qemu /run/libvirt

stop() {
    local name=$1 pid
    for pid in $(pgrep -x "$name" || true); do
        kill "$pid" 2>/dev/null || true
    done
    for _ in $(seq 50); do
        pgrep -x "$name" >/dev/null || return 0
        sleep 0.1
    done
    say "$name did not stop"
    return 1
}

# Whether a daemon runs the installed binary: after an upgrade the old
# one runs a deleted file and must be restarted to be the stack tested.
current() {
    local name=$1 pid
    pid=$(pgrep -x "$name" | head -n1) || return 1
    [[ -n $pid ]] || return 1
    ! readlink "/proc/$pid/exe" | grep -q '(deleted)'
}

# Restart only what is missing or stale, so that a second call does not
# disturb guests another test is starting.
if current virtlogd && current libvirtd &&
        virsh -c "$URI" version >/dev/null 2>&1; then
    say "virtlogd and libvirtd already running the installed $stack stack"
else
    stop libvirtd
    stop virtlogd
    virtlogd -d
    libvirtd -d
fi

for _ in $(seq 100); do
    if virsh -c "$URI" version >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done
if ! virsh -c "$URI" version; then
    say "libvirtd does not answer at $URI"
    exit 1
fi
say "$stack stack ready: $(dpkg-query -W -f='libvirt ${Version}' libvirt-daemon), $(dpkg-query -W -f='QEMU ${Version}' qemu-system-x86), $(dpkg-query -W -f='OVMF ${Version}' ovmf)"
