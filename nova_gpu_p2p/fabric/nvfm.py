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

"""Fabric Manager's partition API, through libnvfm.so.1 with ctypes.

NVIDIA ships the Fabric Manager API as a C library (libnvfm.so.1, with
nv_fm_agent.h and nv_fm_types.h in its development package) and a Go
binding (NVIDIA/go-nvfm); there is no Python binding, and partitions take
eight of its calls, so ctypes it is. The structs below follow
nv_fm_types.h field for field as of fmConnectParams_v2 (with
addressType), fmFabricPartitionList_v2 and
fmActivatedFabricPartitionList_v1, the header go-nvfm carries. Each
carries a version word (MAKE_FM_PARAM_VERSION: its size, with its version
in the top byte) that the library checks, so a layout that does not match
the library's is refused with FM_ST_VERSION_MISMATCH rather than misread.
fmConnect also takes fmConnectParams_v1, for libraries older than
addressType: a library that refuses version 2 is offered version 1.

The library is loaded when a FabricManager is first entered, not on
import: hosts without Fabric Manager import this module too.
"""

import collections.abc
import ctypes
import dataclasses
import threading
import typing

from oslo_log import log as logging

from nova_gpu_p2p import exception

LOG = logging.getLogger(__name__)

FM_ST_SUCCESS = 0
FM_ST_BADPARAM = -1
FM_ST_GENERIC_ERROR = -2
FM_ST_NOT_SUPPORTED = -3
FM_ST_UNINITIALIZED = -4
FM_ST_TIMEOUT = -5
FM_ST_VERSION_MISMATCH = -6
FM_ST_IN_USE = -7
FM_ST_NOT_CONFIGURED = -8
FM_ST_CONNECTION_NOT_VALID = -9
FM_ST_NVLINK_ERROR = -10
FM_ST_RESOURCE_BAD = -11
FM_ST_RESOURCE_IN_USE = -12
FM_ST_RESOURCE_NOT_IN_USE = -13
FM_ST_RESOURCE_EXHAUSTED = -14
FM_ST_RESOURCE_NOT_READY = -15
FM_ST_PARTITION_EXISTS = -16
FM_ST_PARTITION_ID_IN_USE = -17
FM_ST_PARTITION_ID_NOT_IN_USE = -18
FM_ST_PARTITION_NAME_IN_USE = -19
FM_ST_PARTITION_NAME_NOT_IN_USE = -20
FM_ST_PARTITION_ID_NAME_MISMATCH = -21
FM_ST_NOT_READY = -22
FM_ST_RESOURCE_USED_IN_THIS_PARTITION = -23
FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION = -24
FM_ST_PARTITION_MISWIRED_TRUNKS = -25
FM_ST_PARTITION_INSUFFICIENT_TRUNKS = -26
FM_ST_PARTITION_MISSING_SWITCHES = -27
FM_ST_PARTITION_NETWORK_CONFIG_ERROR = -28
FM_ST_PARTITION_ROUTE_PROGRAMMING_ERROR = -29

#: fmReturn_t value -> its name in nv_fm_types.h.
STATUS_NAMES: dict[int, str] = {
    value: name for name, value in list(globals().items())
    if name.startswith('FM_ST_')}

#: enum nvFmApiAddrTypes.
NV_FM_API_ADDR_TYPE_INET = 1
NV_FM_API_ADDR_TYPE_UNIX = 2

FM_MAX_STR_LENGTH = 256
FM_UUID_BUFFER_SIZE = 80
FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32
FM_MAX_NUM_GPUS = 16
FM_MAX_FABRIC_PARTITIONS = 64

DEFAULT_LIBRARY = 'libnvfm.so.1'


#: Each status's class, whichever the call; other statuses raise the
#: call's default: FmUnavailable for fmConnect, FmError otherwise.
_ERRORS: dict[int, type[exception.FmError]] = {
    FM_ST_BADPARAM: exception.FmError,
    FM_ST_VERSION_MISMATCH: exception.FmError,
    FM_ST_CONNECTION_NOT_VALID: exception.FmUnavailable,
    FM_ST_TIMEOUT: exception.FmUnavailable,
    FM_ST_IN_USE: exception.FmInUse,
    FM_ST_RESOURCE_IN_USE: exception.FmInUse,
    FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION: exception.FmInUse,
    FM_ST_NOT_CONFIGURED: exception.FmNotReady,
    FM_ST_NOT_READY: exception.FmNotReady,
}


#: fmDeactivateFabricPartition's own reading of FM_ST_UNINITIALIZED.
_DEACTIVATE_ERRORS = {**_ERRORS, FM_ST_UNINITIALIZED: exception.FmNotActive}


def make_version(struct: type[ctypes.Structure], version: int) -> int:
    """MAKE_FM_PARAM_VERSION: the struct's size, the version on top."""
    return ctypes.sizeof(struct) | version << 24


class ConnectParamsV1(ctypes.Structure):
    """fmConnectParams_v1: the address type is addressIsUnixSocket."""

    _fields_ = [
        ('version', ctypes.c_uint),
        ('addressInfo', ctypes.c_char * FM_MAX_STR_LENGTH),
        ('timeoutMs', ctypes.c_uint),
        ('addressIsUnixSocket', ctypes.c_uint),
    ]


class ConnectParams(ConnectParamsV1):
    """fmConnectParams_v2: version 1's fields, then addressType.

    addressIsUnixSocket is deprecated in version 2 but still there; a
    subclass's ctypes fields follow its base's, as in the header.
    """

    _fields_ = [
        ('addressType', ctypes.c_uint),  # enum nvFmApiAddrTypes
    ]


class PartitionGpuInfo(ctypes.Structure):
    """fmFabricPartitionGpuInfo_t."""

    _fields_ = [
        ('physicalId', ctypes.c_uint),  # the GPU's HGX module ID
        ('uuid', ctypes.c_char * FM_UUID_BUFFER_SIZE),
        ('pciBusId', ctypes.c_char * FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
        ('numNvLinksAvailable', ctypes.c_uint),
        ('maxNumNvLinks', ctypes.c_uint),
        ('nvlinkLineRateMBps', ctypes.c_uint),
    ]


class PartitionInfo(ctypes.Structure):
    """fmFabricPartitionInfo_t."""

    _fields_ = [
        ('partitionId', ctypes.c_uint),
        ('isActive', ctypes.c_uint),
        ('numGpus', ctypes.c_uint),
        ('gpuInfo', PartitionGpuInfo * FM_MAX_NUM_GPUS),
    ]


class PartitionList(ctypes.Structure):
    """fmFabricPartitionList_v2."""

    _fields_ = [
        ('version', ctypes.c_uint),
        ('numPartitions', ctypes.c_uint),
        ('maxNumPartitions', ctypes.c_uint),
        ('partitionInfo', PartitionInfo * FM_MAX_FABRIC_PARTITIONS),
    ]


class ActivatedPartitionList(ctypes.Structure):
    """fmActivatedFabricPartitionList_v1."""

    _fields_ = [
        ('version', ctypes.c_uint),
        ('numPartitions', ctypes.c_uint),
        ('partitionIds', ctypes.c_uint * FM_MAX_FABRIC_PARTITIONS),
    ]


#: fmConnectParams_version (fmConnectV2Params_version2),
#: fmConnectV1Params_version1, fmFabricPartitionList_version and
#: fmActivatedFabricPartitionList_version (version 1 of the v2 list: so in
#: nv_fm_types.h too).
CONNECT_PARAMS_VERSION = make_version(ConnectParams, 2)
CONNECT_PARAMS_V1_VERSION = make_version(ConnectParamsV1, 1)
PARTITION_LIST_VERSION = make_version(PartitionList, 1)
ACTIVATED_LIST_VERSION = make_version(ActivatedPartitionList, 1)

_HANDLE = ctypes.c_void_p
#: Each call's argument types, for ctypes; each returns an fmReturn_t.
_SIGNATURES = {
    'fmLibInit': [],
    'fmLibShutdown': [],
    # Either version: a pointer to version 1 takes version 2, its subclass.
    'fmConnect': [ctypes.POINTER(ConnectParamsV1), ctypes.POINTER(_HANDLE)],
    'fmDisconnect': [_HANDLE],
    'fmGetSupportedFabricPartitions': [_HANDLE, ctypes.POINTER(PartitionList)],
    'fmActivateFabricPartition': [_HANDLE, ctypes.c_uint],
    'fmDeactivateFabricPartition': [_HANDLE, ctypes.c_uint],
    'fmSetActivatedFabricPartitions': [
        _HANDLE, ctypes.POINTER(ActivatedPartitionList)],
}


@dataclasses.dataclass(frozen=True)
class PartitionGpu:
    module_id: int
    uuid: str
    #: As Fabric Manager spells it (NVML's ``00000000:1B:00.0``).
    pci_bus_id: str


@dataclasses.dataclass(frozen=True)
class Partition:
    id: int
    active: bool
    gpus: tuple[PartitionGpu, ...]

    @property
    def modules(self) -> frozenset[int]:
        return frozenset(gpu.module_id for gpu in self.gpus)


def _check(call: str, status: int,
           default: type[exception.FmError] = exception.FmError,
           errors: collections.abc.Mapping[
               int, type[exception.FmError]] = _ERRORS) -> None:
    if status != FM_ST_SUCCESS:
        raise errors.get(status, default)(call, status, status_text(status))


def status_text(status: int) -> str:
    """An fmReturn_t as errors name it: ``FM_ST_TIMEOUT (-6)``."""
    return '%s (%d)' % (STATUS_NAMES.get(status, 'unknown status'), status)


#: fmConnect's parameter versions, newest first.
CONNECT_VERSIONS = (2, 1)


def _connect_params(version: int, address: str,
                    timeout_ms: int) -> ConnectParamsV1:
    """fmConnect's parameters in ``version``, one of CONNECT_VERSIONS."""
    unix = address.startswith('/')
    if version == 1:
        params = ConnectParamsV1(version=CONNECT_PARAMS_V1_VERSION)
    else:
        params = ConnectParams(
            version=CONNECT_PARAMS_VERSION,
            addressType=(NV_FM_API_ADDR_TYPE_UNIX if unix
                         else NV_FM_API_ADDR_TYPE_INET))
    params.addressInfo = address.encode()
    params.timeoutMs = timeout_ms
    params.addressIsUnixSocket = int(unix)
    return params


class _Library:
    """One loaded libnvfm, initialised while any connection uses it.

    fmLibInit and fmLibShutdown act on the whole process, not on one
    connection, so they are counted: one FabricManager leaving must not
    shut the library down under another (NVIDIA's Go binding counts too).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            cdll = ctypes.CDLL(path)
        except OSError as e:
            raise exception.FmLibraryMissing(
                'dlopen(%s)' % path, None,
                '%s (the library comes with NVIDIA Fabric Manager\'s '
                'development package, nvidia-fabricmanager-dev)' % e) from e
        self.calls = {}
        for name, argtypes in _SIGNATURES.items():
            try:
                function = getattr(cdll, name)
            except AttributeError:
                raise exception.FmLibraryMissing(
                    'dlsym(%s)' % name, None, 'not in %s' % path) from None
            function.argtypes = argtypes
            function.restype = ctypes.c_int
            self.calls[name] = function
        self._users = 0
        self._lock = threading.Lock()
        #: The fmConnect version this library took, once one was taken.
        self.connect_version: int | None = None

    def acquire(self) -> None:
        with self._lock:
            if not self._users:
                _check('fmLibInit()', self.calls['fmLibInit']())
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if not self._users:
                _check('fmLibShutdown()', self.calls['fmLibShutdown']())

    def connect(self, address: str, timeout_ms: int,
                handle: _HANDLE) -> None:
        """fmConnect, in the newest parameter version the library takes.

        A library older than a version answers FM_ST_VERSION_MISMATCH to
        it, and the next older one is tried. The version it took (answered
        otherwise) is tried first from then on.
        """
        versions = sorted(CONNECT_VERSIONS,
                          key=lambda version: version != self.connect_version)
        for version in versions:
            params = _connect_params(version, address, timeout_ms)
            status = self.calls['fmConnect'](ctypes.byref(params),
                                             ctypes.byref(handle))
            if status == FM_ST_VERSION_MISMATCH:
                continue
            if version not in (self.connect_version, CONNECT_VERSIONS[0]):
                LOG.info('%s refuses fmConnect parameters version %d: '
                         'connecting with version %d', self.path,
                         CONNECT_VERSIONS[0], version)
            self.connect_version = version
            break
        _check('fmConnect(%s)' % address, status,
               default=exception.FmUnavailable)


_libraries: dict[str, _Library] = {}
_libraries_lock = threading.Lock()


def _library(path: str) -> _Library:
    with _libraries_lock:
        if path not in _libraries:
            _libraries[path] = _Library(path)
        return _libraries[path]


class FabricManager:
    """A connection to Fabric Manager, as a context manager.

    ``address`` is ``HOST:PORT`` (TCP; Fabric Manager listens on
    127.0.0.1:6666 by default) or an absolute path (its Unix socket).
    """

    def __init__(self, address: str, library: str = DEFAULT_LIBRARY,
                 timeout_ms: int = 3000) -> None:
        if len(address.encode()) >= FM_MAX_STR_LENGTH:
            raise ValueError(
                'Fabric Manager address %r is longer than the %d bytes '
                'fmConnect takes' % (address, FM_MAX_STR_LENGTH - 1))
        self.address = address
        self.library = library
        self.timeout_ms = timeout_ms
        self._lib: _Library | None = None
        self._handle = _HANDLE()

    def __enter__(self) -> 'FabricManager':
        lib = _library(self.library)
        lib.acquire()
        try:
            lib.connect(self.address, self.timeout_ms, self._handle)
        except exception.FmError:
            lib.release()
            raise
        self._lib = lib
        return self

    def __exit__(self, *exc_info: typing.Any) -> None:
        lib, self._lib = self._lib, None
        try:
            _check('fmDisconnect()', lib.calls['fmDisconnect'](self._handle))
        finally:
            lib.release()

    def _call(self, name: str, args: str, *argv: typing.Any,
              errors: collections.abc.Mapping[
                  int, type[exception.FmError]] = _ERRORS) -> None:
        if self._lib is None:
            raise RuntimeError('FabricManager used outside its with block')
        _check('%s(%s)' % (name, args),
               self._lib.calls[name](self._handle, *argv), errors=errors)

    def partitions(self) -> tuple[Partition, ...]:
        """Every partition the board supports, and whether it is active."""
        found = PartitionList(version=PARTITION_LIST_VERSION)
        self._call('fmGetSupportedFabricPartitions', '', ctypes.byref(found))
        return read_partitions(found)

    def activate(self, partition_id: int) -> None:
        """Route NVLink between the partition's GPUs for their guest."""
        self._call('fmActivateFabricPartition', str(partition_id),
                   _partition_id(partition_id))

    def deactivate(self, partition_id: int) -> None:
        """Tear the partition's routes down, after its guest is gone."""
        self._call('fmDeactivateFabricPartition', str(partition_id),
                   _partition_id(partition_id), errors=_DEACTIVATE_ERRORS)

    def set_activated(
            self, partition_ids: collections.abc.Sequence[int]) -> None:
        """Tell a restarted Fabric Manager which partitions are in use.

        A restarted Fabric Manager refuses (de)activation until it is told
        which partitions its predecessor left active for running guests.
        """
        if len(partition_ids) > FM_MAX_FABRIC_PARTITIONS:
            raise ValueError(
                '%d partitions given to fmSetActivatedFabricPartitions; it '
                'takes at most %d' % (len(partition_ids),
                                      FM_MAX_FABRIC_PARTITIONS))
        activated = ActivatedPartitionList(
            version=ACTIVATED_LIST_VERSION, numPartitions=len(partition_ids))
        activated.partitionIds[:len(partition_ids)] = [
            _partition_id(partition_id) for partition_id in partition_ids]
        self._call('fmSetActivatedFabricPartitions',
                   ', '.join(map(str, partition_ids)), ctypes.byref(activated))


def _partition_id(value: int) -> int:
    """A partition ID as fmFabricPartitionId_t holds it, or ValueError.

    ctypes would wrap 2**32 to 0, the whole board on an H100.
    """
    if not 0 <= value <= 0xffffffff:
        raise ValueError('Fabric Manager partition ID %d is out of range '
                         '(0 to 4294967295)' % value)
    return value


def read_partitions(found: PartitionList) -> tuple[Partition, ...]:
    """fmGetSupportedFabricPartitions' answer, checked before it is used.

    Counts beyond the fixed arrays, and a partition ID twice, are a
    broken (or hostile) answer: refused, never clamped into partitions.
    """
    call = 'fmGetSupportedFabricPartitions()'
    if found.numPartitions > FM_MAX_FABRIC_PARTITIONS:
        raise exception.FmError(
            call, None, '%d partitions answered; at most %d fit' % (
                found.numPartitions, FM_MAX_FABRIC_PARTITIONS))
    infos = found.partitionInfo[:found.numPartitions]
    for info in infos:
        if info.numGpus > FM_MAX_NUM_GPUS:
            raise exception.FmError(
                call, None, 'partition %d has %d GPUs; at most %d '
                'fit' % (info.partitionId, info.numGpus,
                         FM_MAX_NUM_GPUS))
    ids = [info.partitionId for info in infos]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise exception.FmError(call, None, 'partition ID(s) %s answered twice'
                                % ', '.join(map(str, twice)))
    return tuple(
        Partition(
            id=info.partitionId, active=bool(info.isActive),
            gpus=tuple(
                PartitionGpu(
                    module_id=gpu.physicalId,
                    uuid=gpu.uuid.decode('ascii', 'replace'),
                    pci_bus_id=gpu.pciBusId.decode('ascii', 'replace'))
                for gpu in info.gpuInfo[:info.numGpus]))
        for info in infos)


def from_conf(conf: typing.Any) -> FabricManager:
    """The Fabric Manager that ``[gpu_p2p]`` names."""
    return FabricManager(conf.gpu_p2p.fabric_manager_address,
                         conf.gpu_p2p.fabric_manager_library)
