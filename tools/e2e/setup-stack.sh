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
# 9.0 / QEMU 7.2) or bookworm-backports (libvirt 11.3 / QEMU 10.0),
# installed on this machine, then libvirtd and virtlogd (re)started
# directly: CI containers have no init system. Or Debian sid's (libvirt
# 12.8 / QEMU 11.1 / SeaBIOS 1.17 / OVMF 2026.08), which a bookworm machine
# cannot install: debootstrapped into $SID_ROOT and run there, with the
# chroot's own /dev, /run and sockets, in a private mount namespace that
# also holds the host facts libvirt 12 asks before it translates a PCI
# hostdev (a non-empty /sys/kernel/iommu_groups and /dev/vfio/vfio); the
# host's own libvirt and /dev are left alone. $STACK_FILE names the
# chroot the tests then talk to (tests/fixtures/stack.py); the bookworm and
# backports stacks remove it. Idempotent. Without root or apt-get it says
# what is missing in one line and exits 0; the e2e tests then skip (unless
# NOVA_GPU_P2P_REQUIRE_TOOLS=1). `sid-install` only installs sid's chroot
# (debootstrap, its packages, the arm64 guest's): no daemon starts and the
# host's stack is untouched, so CI runs it in the background while the
# tests that need no libvirtd run; `sid` then finds it installed.
#
# Usage: tools/e2e/setup-stack.sh bookworm|backports|sid|sid-install
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
# Keep in step with tests/fixtures/stack.py.
readonly STACK_FILE=/run/nova-gpu-p2p/e2e-stack
readonly SID_ROOT=/var/lib/nova-gpu-p2p/e2e-sid
readonly SID_MIRROR=http://deb.debian.org/debian
# sid's stack in the chroot (virt-xml-validate: libvirt-clients and
# xmllint; virtlogd: libvirt-daemon-log, pulled in by libvirt-daemon).
# qemu-system-arm and qemu-efi-aarch64 (AAVMF): the Grace guests, aarch64
# `virt` under UEFI.
readonly SID_STACK=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
                    qemu-system-x86 seabios ovmf libxml2-utils
                    qemu-system-arm qemu-efi-aarch64)
# The aarch64 Grace guest's kernel and busybox (tests/e2e/test_grace_boot.py):
# sid's arm64 packages, downloaded once and kept as .deb files in the
# chroot (about 13 MB, and 11 MB of arm64 package lists).
readonly SID_ARM64_CACHE=/var/cache/nova-gpu-p2p/arm64
# On the host for sid: the guest's kernel and busybox (not part of the
# stack under test) and debootstrap.
readonly SID_HOST_TOOLS=(debootstrap busybox-static linux-image-amd64)
# sid's Release files may be past their Valid-Until date on a mirror.
readonly SID_APT=(apt-get -o Acquire::Check-Valid-Until=false)

say() { echo "setup-stack: $*"; }

usage() {
    echo "usage: $0 bookworm|backports|sid|sid-install" >&2
    exit 2
}

[[ $# -eq 1 ]] || usage
stack=$1
[[ $stack =~ ^(bookworm|backports|sid|sid-install)$ ]] || usage

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

# Packages of the list not installed in the system at ROOT.
not_installed() {
    local root=$1 package
    shift
    for package in "$@"; do
        dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' \
                "$package" 2>/dev/null |
            grep -q 'install ok installed' || echo "$package"
    done
}

# PIDs of the daemon NAME running in the root directory ROOT (/: the
# host's), so that the host's daemons and the chroot's never stop each
# other.
pids_in() {
    local name=$1 root=$2 pid
    for pid in $(pgrep -x "$name" || true); do
        [[ "$(readlink "/proc/$pid/root" 2>/dev/null)" == "$root" ]] &&
            echo "$pid"
    done
    return 0
}

stop() {
    local name=$1 root=$2 pid
    for pid in $(pids_in "$name" "$root"); do
        kill "$pid" 2>/dev/null || true
    done
    for _ in $(seq 50); do
        [[ -z "$(pids_in "$name" "$root")" ]] && return 0
        sleep 0.1
    done
    say "$name in $root did not stop"
    return 1
}

# Whether a daemon runs the installed binary: after an upgrade the old
# one runs a deleted file and must be restarted to be the stack tested.
current() {
    local name=$1 root=$2 pid
    pid=$(pids_in "$name" "$root" | head -n1)
    [[ -n $pid ]] || return 1
    ! readlink "/proc/$pid/exe" | grep -q '(deleted)'
}

# virsh as the tests run it: the host's, or the chroot's inside the
# libvirtd's own mount namespace (tests/fixtures/stack.py does the same).
stack_virsh() {
    local root=$1 pid
    shift
    if [[ $root == / ]]; then
        virsh -c "$URI" "$@"
        return
    fi
    pid=$(pids_in libvirtd "$root" | head -n1)
    [[ -n $pid ]] || return 1
    nsenter --target "$pid" --mount --root --wd virsh -c "$URI" "$@"
}

wait_for_libvirtd() {
    local root=$1
    for _ in $(seq 100); do
        if stack_virsh "$root" version >/dev/null 2>&1; then
            break
        fi
        sleep 0.2
    done
    if ! stack_virsh "$root" version; then
        say "libvirtd in $root does not answer at $URI"
        exit 1
    fi
}

install_host_stack() {
    if [[ $stack == backports ]]; then
        if [[ ! -f $BACKPORTS_LIST ]] &&
                ! grep -rqs 'bookworm-backports' /etc/apt/sources.list \
                    /etc/apt/sources.list.d/; then
            echo "$BACKPORTS_LINE" >"$BACKPORTS_LIST"
        fi
        apt-get update -q
        "${apt_install[@]}" "${TOOLS[@]}"
        "${apt_install[@]}" -t bookworm-backports "${STACK[@]}"
    # Only update the lists when something is missing: saves a minute.
    elif [[ -n "$(not_installed / "${STACK[@]}" "${TOOLS[@]}")" ]]
    then
        apt-get update -q
        "${apt_install[@]}" "${STACK[@]}" "${TOOLS[@]}"
    fi
}

# Close every descriptor above stderr in this (sub)shell but the script's
# own (255): a daemon started under `flock /tmp/e2e-stack.lock` would
# otherwise keep the lock's descriptor, and so the lock, as long as it runs.
close_inherited_fds() {
    local fd
    for fd in "/proc/$BASHPID/fd/"*; do
        fd=${fd##*/}
        if ((fd > 2 && fd != 255)); then
            eval "exec $fd>&-" 2>/dev/null || true
        fi
    done
}

start_host_daemons() {
    # virtlogd must run before libvirtd starts a guest; Debian's packages
    # leave this directory to the service units, which do not run here.
    mkdir -p /var/log/libvirt /var/log/libvirt/qemu /run/libvirt
    # Restart only what is missing or stale, so that a second call does
    # not disturb guests another test is starting.
    if current virtlogd / && current libvirtd / &&
            virsh -c "$URI" version >/dev/null 2>&1; then
        say "virtlogd and libvirtd already running the installed $stack stack"
    else
        stop libvirtd /
        stop virtlogd /
        (close_inherited_fds; virtlogd -d; libvirtd -d)
    fi
    wait_for_libvirtd /
}

# Commands run in the chroot during installation, in a private mount
# namespace with the chroot's own /proc (package scripts read it).
in_chroot() {
    # shellcheck disable=SC2016  # expanded by the inner shell
    unshare --mount --propagation private -- sh -c \
        'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$SID_ROOT" "$@"
}

install_sid() {
    local missing
    missing=$(not_installed / "${SID_HOST_TOOLS[@]}")
    if [[ -n $missing ]]; then
        apt-get update -q
        # shellcheck disable=SC2086  # one package a word
        "${apt_install[@]}" $missing
    fi
    if [[ ! -f $SID_ROOT/etc/nova-gpu-p2p-bootstrapped ]]; then
        rm -rf "$SID_ROOT"
        mkdir -p "$(dirname "$SID_ROOT")"
        debootstrap --variant=minbase sid "$SID_ROOT" "$SID_MIRROR"
        # No service starts from package scripts.
        printf '#!/bin/sh\nexit 101\n' >"$SID_ROOT/usr/sbin/policy-rc.d"
        chmod 755 "$SID_ROOT/usr/sbin/policy-rc.d"
        touch "$SID_ROOT/etc/nova-gpu-p2p-bootstrapped"
    fi
    missing=$(not_installed "$SID_ROOT" "${SID_STACK[@]}")
    if [[ -n $missing ]]; then
        in_chroot "${SID_APT[@]}" update -q
        # shellcheck disable=SC2086  # one package a word
        in_chroot env DEBIAN_FRONTEND=noninteractive "${SID_APT[@]}" \
            install -y -q --no-install-recommends $missing
    fi
    # No init system, no cgroup hierarchy of its own: libvirt places its
    # QEMUs in none (vCPU pinning still applies, by affinity). And no
    # private /dev per QEMU: in this chroot libvirt made QEMU's without
    # /dev/urandom ("Could not open '/dev/urandom'"); QEMU uses the
    # chroot's own /dev instead.
    local conf=$SID_ROOT/etc/libvirt/qemu.conf line
    for line in 'cgroup_controllers = [ ]' 'namespaces = [ ]'; do
        grep -qxF "$line" "$conf" || echo "$line" >>"$conf"
    done
    mkdir -p "$SID_ROOT/var/log/libvirt/qemu" "$SID_ROOT/run/libvirt"
    fetch_arm64_guest
}

# The kernel is linux-image-arm64's image's linux-binary-* package (the
# image itself only depends on it); the test unpacks both debs itself.
fetch_arm64_guest() {
    local cache=$SID_ROOT$SID_ARM64_CACHE image binary
    if compgen -G "$cache/linux-binary-*-arm64_*_arm64.deb" >/dev/null &&
            compgen -G "$cache/busybox-static_*_arm64.deb" >/dev/null; then
        return 0
    fi
    in_chroot dpkg --add-architecture arm64
    in_chroot "${SID_APT[@]}" update -q
    image=$(in_chroot apt-cache depends linux-image-arm64:arm64 |
        sed -n 's/^ *Depends: \(linux-image-[^:]*\):arm64$/\1/p')
    binary=$(in_chroot apt-cache depends "$image:arm64" |
        sed -n 's/^ *Depends: \(linux-binary-[^:]*\):arm64$/\1/p')
    [[ -n $image && -n $binary ]] || {
        say "no arm64 kernel package in sid (linux-image-arm64: '$image')"
        exit 1
    }
    rm -rf "$cache"
    mkdir -p "$cache"
    in_chroot chown _apt "$SID_ARM64_CACHE"
    # shellcheck disable=SC2016  # expanded by the inner shell
    in_chroot sh -c 'cd "$0" && exec "$@"' "$SID_ARM64_CACHE" \
        "${SID_APT[@]}" download "$binary:arm64" busybox-static:arm64
}

# The chroot's daemons, in a private mount namespace that holds its
# /proc, /sys and its own /dev: a tmpfs with the nodes QEMU and libvirt use
# (libvirt gives each QEMU a /dev of its own, copied from a /dev mount),
# never a bind of the host's, so that nothing in the chroot can re-own the
# host's nodes; /dev/kvm as the host has it, for the chroot's kvm group.
# And the host facts libvirt 12 checks before it translates a PCI
# hostdev: /dev/vfio/vfio (libvirt opens nothing there for
# domxml-to-native) and an IOMMU group in /sys/kernel/iommu_groups (a
# tmpfs over the namespace's sysfs). The host's /dev and /sys are not
# touched; the daemons keep the namespace alive after this script ends.
start_sid_daemons() {
    if current virtlogd "$SID_ROOT" && current libvirtd "$SID_ROOT" &&
            stack_virsh "$SID_ROOT" version >/dev/null 2>&1; then
        say "virtlogd and libvirtd already running in $SID_ROOT"
    else
        stop libvirtd "$SID_ROOT"
        stop virtlogd "$SID_ROOT"
        rm -f "$SID_ROOT"/run/libvirtd.pid "$SID_ROOT"/run/virtlogd.pid
        close_inherited_fds
        # shellcheck disable=SC2016  # expanded by the inner shell
        unshare --mount --propagation private -- sh -euc '
            root=$0
            mount -t proc proc "$root/proc"
            mount -t sysfs sysfs "$root/sys"
            mount -t tmpfs -o mode=0755,size=64k iommu_groups \
                "$root/sys/kernel/iommu_groups"
            mkdir -p "$root/sys/kernel/iommu_groups/0/devices"
            dev=$root/dev
            mount -t tmpfs -o mode=0755,size=1m,nosuid dev "$dev"
            mknod -m 0666 "$dev/null" c 1 3
            mknod -m 0666 "$dev/zero" c 1 5
            mknod -m 0666 "$dev/full" c 1 7
            mknod -m 0666 "$dev/random" c 1 8
            mknod -m 0666 "$dev/urandom" c 1 9
            mknod -m 0666 "$dev/tty" c 5 0
            ln -s /proc/self/fd "$dev/fd"
            ln -s /proc/self/fd/0 "$dev/stdin"
            ln -s /proc/self/fd/1 "$dev/stdout"
            ln -s /proc/self/fd/2 "$dev/stderr"
            mkdir "$dev/pts" "$dev/shm" "$dev/vfio"
            mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts \
                "$dev/pts"
            ln -s pts/ptmx "$dev/ptmx"
            mount -t tmpfs -o mode=1777,nosuid,nodev shm "$dev/shm"
            mknod -m 0666 "$dev/vfio/vfio" c 10 196
            if [ -c /dev/kvm ]; then
                mknod -m 0660 "$dev/kvm" c 10 232
                chroot "$root" chgrp kvm /dev/kvm
            fi
            chroot "$root" /usr/sbin/virtlogd -d
            chroot "$root" /usr/sbin/libvirtd -d' "$SID_ROOT"
    fi
    wait_for_libvirtd "$SID_ROOT"
    mkdir -p "$(dirname "$STACK_FILE")"
    echo "$SID_ROOT" >"$STACK_FILE"
}

if [[ $stack == sid-install ]]; then
    install_sid
    say "sid chroot installed in $SID_ROOT"
elif [[ $stack == sid ]]; then
    install_sid
    start_sid_daemons
    sid_versions=$(dpkg-query --admindir="$SID_ROOT/var/lib/dpkg" -W \
        -f='${Package} ${Version}, ' libvirt-daemon qemu-system-x86 seabios \
        ovmf)
    say "sid stack ready in $SID_ROOT: ${sid_versions%, }"
else
    install_host_stack
    start_host_daemons
    rm -f "$STACK_FILE"
    say "$stack stack ready: $(dpkg-query -W -f='libvirt ${Version}' libvirt-daemon), $(dpkg-query -W -f='QEMU ${Version}' qemu-system-x86), $(dpkg-query -W -f='OVMF ${Version}' ovmf)"
fi
