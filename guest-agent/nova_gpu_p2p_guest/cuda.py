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

"""The CUDA driver API through ctypes: the calls ``verify-p2p`` makes.

No toolkit in the guest image, only the driver's ``libcuda.so.1``. The
names bound are the symbols ``cuda.h`` maps its API to (``cuMemAlloc`` is
``cuMemAlloc_v2`` since CUDA 3.2: the unsuffixed symbols take 32-bit
pointers). Every call goes through :meth:`Driver.call`, which first tells
``before_call`` its name: the process that watches this one knows which
call did not come back.
"""

from __future__ import annotations

import ctypes
from typing import Callable, List, Optional

#: cuda.h's CUresult codes the check tells apart.
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704

_P = ctypes.c_void_p
_INT_P = ctypes.POINTER(ctypes.c_int)
_PTR = ctypes.c_uint64  # CUdeviceptr
_SIZE = ctypes.c_size_t
_UINT = ctypes.c_uint

#: symbol -> argument types (every one returns CUresult, an int).
PROTOTYPES = {
    'cuInit': (_UINT,),
    'cuDriverGetVersion': (_INT_P,),
    'cuDeviceGetCount': (_INT_P,),
    'cuDeviceGet': (_INT_P, ctypes.c_int),
    'cuDeviceGetName': (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    'cuDeviceGetPCIBusId': (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    'cuDeviceCanAccessPeer': (_INT_P, ctypes.c_int, ctypes.c_int),
    'cuDeviceTotalMem_v2': (ctypes.POINTER(_SIZE), ctypes.c_int),
    'cuDevicePrimaryCtxRetain': (ctypes.POINTER(_P), ctypes.c_int),
    'cuCtxSetCurrent': (_P,),
    'cuCtxSynchronize': (),
    'cuCtxEnablePeerAccess': (_P, _UINT),
    'cuMemAlloc_v2': (ctypes.POINTER(_PTR), _SIZE),
    'cuMemcpyHtoD_v2': (_PTR, _P, _SIZE),
    'cuMemcpyDtoH_v2': (_P, _PTR, _SIZE),
    'cuMemsetD8_v2': (_PTR, ctypes.c_ubyte, _SIZE),
    'cuMemcpyPeer': (_PTR, _P, _PTR, _P, _SIZE),
    'cuModuleLoadData': (ctypes.POINTER(_P), ctypes.c_char_p),
    'cuModuleGetFunction': (ctypes.POINTER(_P), _P, ctypes.c_char_p),
    'cuLaunchKernel': (_P, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT,
                       _P, ctypes.POINTER(_P), ctypes.POINTER(_P)),
    'cuGetErrorName': (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
}


class CudaError(Exception):
    """A CUDA call answered an error: the call and cuda.h's name of it."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__('%s: %s (%d)' % (call, name, code))
        self.call = call
        self.code = code


class NotADriver(Exception):
    """The library loads but lacks the driver API's symbols."""


class Driver:
    """libcuda.so.1, loaded; OSError where it cannot be.

    :class:`NotADriver` where it loads and is no CUDA driver (the Python
    binary itself is what ``ctypes.CDLL('')`` loads).
    """

    def __init__(self, library: str,
                 before_call: Callable[[str], None] = lambda name: None
                 ) -> None:
        self._lib = ctypes.CDLL(library)
        self._before_call = before_call
        self._functions = {}
        for name, argtypes in PROTOTYPES.items():
            try:
                function = getattr(self._lib, name)
            except AttributeError:
                raise NotADriver('%s has no %s: not a CUDA driver library'
                                 % (library, name))
            function.argtypes = argtypes
            function.restype = ctypes.c_int
            self._functions[name] = function

    def error_name(self, code: int) -> str:
        name = ctypes.c_char_p()
        if self._functions['cuGetErrorName'](code, ctypes.byref(name)):
            return 'CUresult %d' % code
        return (name.value or b'').decode('ascii', 'replace')

    def call(self, name: str, *args: object) -> int:
        """``name(*args)``; CudaError unless it answers CUDA_SUCCESS."""
        self._before_call(name)
        code = self._functions[name](*args)
        if code != CUDA_SUCCESS:
            raise CudaError(name, code, self.error_name(code))
        return code

    def out_int(self, name: str, *args: object) -> int:
        """The int a call writes through its first argument."""
        value = ctypes.c_int()
        self.call(name, ctypes.byref(value), *args)
        return value.value

    def out_pointer(self, name: str, *args: object) -> int:
        """The handle (context, module, function) a call writes."""
        value = ctypes.c_void_p()
        self.call(name, ctypes.byref(value), *args)
        return value.value or 0

    def text(self, name: str, device: int) -> str:
        """cuDeviceGetName / cuDeviceGetPCIBusId's string."""
        buffer = ctypes.create_string_buffer(256)
        self.call(name, buffer, len(buffer), device)
        return buffer.value.decode('ascii', 'replace')

    def total_memory(self, device: int) -> int:
        """``device``'s memory in bytes."""
        size = _SIZE()
        self.call('cuDeviceTotalMem_v2', ctypes.byref(size), device)
        return size.value

    def mem_alloc(self, size: int) -> int:
        pointer = _PTR()
        self.call('cuMemAlloc_v2', ctypes.byref(pointer), size)
        return pointer.value

    def launch(self, function: int, grid: int, block: int,
               params: List[int]) -> None:
        """``function`` over a 1-D grid, its parameters all 64-bit."""
        values = [ctypes.c_uint64(p) for p in params]
        pointers = (_P * len(values))(
            *[ctypes.cast(ctypes.byref(v), _P) for v in values])
        self.call('cuLaunchKernel', function, grid, 1, 1, block, 1, 1, 0,
                  None, pointers, None)


def load(library: str, before_call: Callable[[str], None]
         ) -> Optional[Driver]:
    """The driver, or None where no libcuda.so.1 loads (no driver)."""
    try:
        return Driver(library, before_call)
    except OSError:
        return None
