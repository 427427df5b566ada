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

"""The side of ``verify-p2p`` that touches the GPUs, in its own process.

A CUDA call that never returns cannot be interrupted inside the process
that made it (NVIDIA/nccl#2335 hung in the driver), so
:mod:`.p2p_verify` runs this module as a child process and watches it:
before every CUDA call this process prints which one (a JSON object a
line on standard output), and whoever stops hearing from it within the
bound kills it and knows the pair, the path and the call.

For every ordered pair (A, B) it is given: fill A's buffer with this
run's random bytes, rotated by an offset of the pair's own; clear B's
buffer; move A's buffer into B's three ways: by a copy-engine peer copy
(cuMemcpyPeer), by A's SMs storing through the peer mapping, and by B's
SMs loading through it (:data:`PTX`; NCCL reads from peers where
``NCCL_P2P_READ_ENABLE`` is on, the default on some NVLink systems);
each time poison the host buffer, read B's buffer back into it through
B's own context and compare it with what A held.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

from nova_gpu_p2p_guest import cuda

#: The SM paths' kernel: ``count`` 16-byte words from ``src`` to ``dst``,
#: one of them the peer's memory (through the mapping
#: cuCtxEnablePeerAccess made): launched on the writer's GPU it stores
#: into the peer, on the reader's it loads from the peer. A grid-stride
#: loop, then a system-wide fence. PTX, which the
#: driver compiles for whatever GPU it has (ISA 6.0, sm_60 and newer), so
#: the image needs no compiler.
KERNEL = 'nova_p2p_store'
PTX = '''.version 6.0
.target sm_60
.address_size 64

.visible .entry nova_p2p_store(
\t.param .u64 nova_p2p_store_src,
\t.param .u64 nova_p2p_store_dst,
\t.param .u64 nova_p2p_store_count
)
{
\t.reg .pred \t%p<2>;
\t.reg .b32 \t%r<9>;
\t.reg .b64 \t%rd<9>;

\tld.param.u64 \t%rd1, [nova_p2p_store_src];
\tld.param.u64 \t%rd2, [nova_p2p_store_dst];
\tld.param.u64 \t%rd3, [nova_p2p_store_count];
\tcvta.to.global.u64 \t%rd1, %rd1;
\tcvta.to.global.u64 \t%rd2, %rd2;
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmov.u32 \t%r4, %nctaid.x;
\tcvt.u64.u32 \t%rd4, %r3;
\tmad.wide.u32 \t%rd4, %r1, %r2, %rd4;
\tmul.wide.u32 \t%rd5, %r4, %r2;
LOOP:
\tsetp.ge.u64 \t%p1, %rd4, %rd3;
\t@%p1 bra \tDONE;
\tshl.b64 \t%rd6, %rd4, 4;
\tadd.s64 \t%rd7, %rd1, %rd6;
\tadd.s64 \t%rd8, %rd2, %rd6;
\tld.global.v4.u32 \t{%r5, %r6, %r7, %r8}, [%rd7];
\tst.global.v4.u32 \t[%rd8], {%r5, %r6, %r7, %r8};
\tadd.s64 \t%rd4, %rd4, %rd5;
\tbra.uni \tLOOP;
DONE:
\tmembar.sys;
\tret;
}
'''
#: The kernel's launch: enough blocks of 256 threads to fill any GPU.
GRID = 1024
BLOCK = 256
#: The paths, as the result names them.
COPY_ENGINE = 'copy_engine'
SM_STORES = 'sm_stores'
SM_LOADS = 'sm_loads'
PATHS = (COPY_ENGINE, SM_STORES, SM_LOADS)
#: The status of SM loads where the reader cannot map the writer's
#: memory: nothing NCCL could do there to check.
UNREADABLE = 'not_peer_capable'
#: What B's buffer holds before each write: data that never arrived
#: reads back as this.
CLEARED = 0xA5
#: Mismatches are counted in chunks of this many bytes.
CHUNK = 64 * 1024


def emit(**event: object) -> None:
    """One event a line on standard output, at once: someone waits on it."""
    sys.stdout.write(json.dumps(event, sort_keys=True) + '\n')
    sys.stdout.flush()


def rotation(src: int, dst: int, size: int) -> int:
    """The pair's offset into this run's bytes: 4 more than a multiple of 16.

    Distinct for every pair of up to 64 GPUs at 1 MiB and more (1021 is
    odd), and never a whole number of 16-byte words, so data landing at
    another pair's offset, or where an earlier pair left it, reads back
    wrong.
    """
    return (4 + 16 * 1021 * (src * 64 + dst)) % size


#: Every byte's complement: the poison is what was wanted, inverted, so
#: that no byte of a read-back that copied nothing can pass.
INVERT = bytes(255 - i for i in range(256))


def compare(got: bytearray, want: bytearray, rotated: int,
            poison: bytes = b'') -> Optional[str]:
    """None where equal; otherwise how much differs, and where first.

    Where first: an offset into the owner's buffer, which holds ``want``
    rotated by ``rotated`` bytes. ``poison``: what ``got`` held before the
    read-back.
    """
    if got == want:
        return None
    bad, untouched, unread, first = 0, 0, 0, None
    cleared = bytes([CLEARED]) * CHUNK
    for start in range(0, len(want), CHUNK):
        chunk, expected = got[start:start + CHUNK], want[start:start + CHUNK]
        if chunk != expected:
            bad += 1
            untouched += chunk == cleared[:len(chunk)]
            unread += chunk == poison[start:start + CHUNK]
            if first is None:
                first = start + next(i for i, (a, b) in enumerate(
                    zip(chunk, expected)) if a != b)
    chunks = (len(want) + CHUNK - 1) // CHUNK
    if untouched == chunks:
        return ('nothing arrived: the owner reads back its cleared buffer '
                '(the writes went somewhere it never reads)')
    if unread == chunks:
        return ('the read-back copied nothing: the host buffer still holds '
                'the poison written before it, although the copy answered '
                'success')
    return ('%d of %d chunks of %d KiB differ, the first at byte %d of the '
            'buffer' % (bad, chunks, CHUNK // 1024,
                        (first - rotated) % len(want)))


def _address(buffer: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


def list_gpus(driver: cuda.Driver) -> List[dict]:
    """Each GPU's CUDA ordinal, name and PCI address (lower case)."""
    return [{'index': i, 'name': driver.text('cuDeviceGetName', i),
             'pci_bus_id': driver.text('cuDeviceGetPCIBusId', i).lower()}
            for i in range(driver.out_int('cuDeviceGetCount'))]


def peer_pairs(driver: cuda.Driver, count: int) -> List[List[int]]:
    """The ordered pairs CUDA says can access each other."""
    return [[a, b] for a in range(count) for b in range(count)
            if a != b and driver.out_int('cuDeviceCanAccessPeer', a, b)]


class Probe:
    """The GPUs, their contexts and buffers, and the checks of pairs."""

    def __init__(self, driver: cuda.Driver, size: int,
                 peers: List[List[int]]) -> None:
        self.driver = driver
        self.size = size
        self.peers = peers
        self.contexts: Dict[int, int] = {}
        self.functions: Dict[int, int] = {}
        self.buffers: Dict[int, Tuple[int, int]] = {}
        self.enabled: set = set()
        self.base = bytearray(os.urandom(size))
        self.poison = bytes(self.base.translate(INVERT))
        self.got = bytearray(size)
        self._base_at = _address(self.base)
        self._got_at = _address(self.got)

    def set_up(self, device: int) -> None:
        """Primary context (NCCL's), kernel and two buffers on ``device``."""
        d = self.driver
        context = d.out_pointer('cuDevicePrimaryCtxRetain', device)
        d.call('cuCtxSetCurrent', context)
        module = d.out_pointer('cuModuleLoadData', PTX.encode('ascii'))
        self.functions[device] = d.out_pointer(
            'cuModuleGetFunction', module, KERNEL.encode('ascii'))
        self.buffers[device] = (d.mem_alloc(self.size),
                                d.mem_alloc(self.size))
        self.contexts[device] = context

    def enable(self, src: int, dst: int) -> None:
        """``src``'s SMs may now address ``dst``'s memory."""
        if (src, dst) in self.enabled:
            return
        self.driver.call('cuCtxSetCurrent', self.contexts[src])
        try:
            self.driver.call('cuCtxEnablePeerAccess', self.contexts[dst], 0)
        except cuda.CudaError as exc:
            if exc.code != cuda.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
                raise
        self.enabled.add((src, dst))

    def check_pair(self, src: int, dst: int) -> None:
        """Every path from ``src`` into ``dst``, one event each.

        The run's bytes go to A's buffer rotated by the pair's offset and
        come back from B's rotated back, in two pieces each way, so that
        what B holds is compared with the run's bytes as they are.
        """
        d, n = self.driver, self.size
        k = rotation(src, dst, n)
        source, _ = self.buffers[src]
        _, target = self.buffers[dst]
        loaded = False
        for path in PATHS:
            if path == SM_LOADS and [dst, src] not in self.peers:
                emit(pair=[src, dst], path=path, status=UNREADABLE,
                     detail='CUDA says GPU %d cannot access GPU %d: no peer '
                     'reads this way' % (dst, src))
                continue
            emit(begin=[src, dst], path=path)
            try:
                if not loaded:
                    d.call('cuCtxSetCurrent', self.contexts[src])
                    d.call('cuMemcpyHtoD_v2', source, self._base_at + k,
                           n - k)
                    d.call('cuMemcpyHtoD_v2', source + n - k, self._base_at,
                           k)
                    d.call('cuCtxSynchronize')
                    loaded = True
                d.call('cuCtxSetCurrent', self.contexts[dst])
                d.call('cuMemsetD8_v2', target, CLEARED, n)
                d.call('cuCtxSynchronize')
                seconds = self._move(path, src, dst, source, target)
                self.got[:] = self.poison
                d.call('cuCtxSetCurrent', self.contexts[dst])
                d.call('cuMemcpyDtoH_v2', self._got_at + k, target, n - k)
                d.call('cuMemcpyDtoH_v2', self._got_at, target + n - k, k)
            except cuda.CudaError as exc:
                emit(pair=[src, dst], path=path, status='failed',
                     detail=str(exc))
                continue
            wrong = compare(self.got, self.base, k, self.poison)
            emit(pair=[src, dst], path=path,
                 status='failed' if wrong else 'passed', bytes=n,
                 seconds=round(seconds, 6),
                 gbps=round(n / seconds / 1e9, 2) if seconds > 0 else None,
                 detail=wrong)

    def _move(self, path: str, src: int, dst: int, source: int,
              target: int) -> float:
        """``source`` (on ``src``) into ``target`` (on ``dst``); seconds."""
        d, n = self.driver, self.size
        # The GPU whose engine or SMs do the work, and whose mapping of
        # the other's memory they use.
        actor, peer = (dst, src) if path == SM_LOADS else (src, dst)
        self.enable(actor, peer)
        d.call('cuCtxSetCurrent', self.contexts[actor])
        start = time.perf_counter()
        if path == COPY_ENGINE:
            d.call('cuMemcpyPeer', target, self.contexts[dst],
                   source, self.contexts[src], n)
        else:
            d.launch(self.functions[actor], GRID, BLOCK,
                     [source, target, n // 16])
        d.call('cuCtxSynchronize')
        return time.perf_counter() - start


def _too_small(driver: cuda.Driver, gpus: List[dict], size: int
               ) -> Optional[str]:
    """Why a GPU cannot hold the two buffers of ``size``; None if all can.

    A size past the GPU's memory is the caller's mistake, not a fault of
    P2P: it must not turn P2P off.
    """
    for gpu in gpus:
        total = driver.total_memory(gpu['index'])
        if 2 * size > total:
            return ('%d MiB: the check needs two buffers of that size on '
                    'each GPU, and GPU %d (%s) has %d MiB' % (
                        size >> 20, gpu['index'], gpu['pci_bus_id'],
                        total >> 20))
    return None


def run(request: dict) -> None:
    """Everything the request asks, as events; see :mod:`.p2p_verify`."""
    try:
        driver = cuda.load(request['library'],
                           lambda name: emit(call=name))
    except cuda.NotADriver as exc:
        emit(refuse=str(exc), option='--library')
        return
    if driver is None:
        emit(skip='no NVIDIA driver: %s does not load' % request['library'])
        return
    try:
        driver.call('cuInit', 0)
    except cuda.CudaError as exc:
        if exc.code == cuda.CUDA_ERROR_NO_DEVICE:
            emit(skip='no GPU: the NVIDIA driver sees none')
            return
        raise
    gpus = list_gpus(driver)
    if len(gpus) < 2:
        emit(skip='%s: GPU P2P needs two' % (
            'one GPU' if gpus else 'no GPU'))
        return
    peers = peer_pairs(driver, len(gpus))
    emit(gpus=gpus, peers=peers,
         driver_version=driver.out_int('cuDriverGetVersion'))
    pairs = request['pairs'] if request['pairs'] is not None else peers
    too_small = _too_small(driver, gpus, request['bytes'])
    if too_small:
        emit(refuse=too_small, option='--mib')
        return
    try:
        probe = Probe(driver, request['bytes'], peers)
    except MemoryError:
        emit(refuse='%d MiB three times over (the data, its poison and the '
             'read-back) is more host memory than this process can have'
             % (request['bytes'] >> 20), option='--mib')
        return
    for device in sorted({g for pair in pairs for g in pair}):
        probe.set_up(device)
    emit(ready=True)
    for src, dst in pairs:
        probe.check_pair(src, dst)
    emit(done=True)


def main() -> int:
    try:
        run(json.loads(sys.argv[1]))
    except cuda.CudaError as exc:
        emit(error=str(exc))
    except Exception as exc:  # reported, never a traceback
        emit(error='%s: %s' % (type(exc).__name__, exc))
    return 0


if __name__ == '__main__':
    sys.exit(main())
