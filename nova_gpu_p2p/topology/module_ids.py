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

"""Which HGX module each GPU is: the name Fabric Manager gives it.

Fabric Manager names a partition's GPUs by module ID only. NVML knows a
GPU's module ID while the GPU is bound to the ``nvidia`` driver, not while
a guest has it on vfio-pci, and no sysfs file tells it; so every answer
NVML gives is kept in ``[gpu_p2p] module_id_file`` for the times the GPU
is away. The board's partition table is kept there too, for the times
Fabric Manager cannot be asked.
"""

from collections.abc import Collection
from collections.abc import Mapping
import contextlib
import json
import os
import tempfile
import types

from nova_gpu_p2p_guest import errors
from nova_gpu_p2p_guest import input_file
from oslo_log import log as logging

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.topology import nvml

LOG = logging.getLogger(__name__)

_LEFT = 'it is left as it is: remove it to have it written anew'

#: What Fabric Manager numbers modules up to: its most GPUs per partition.
MAX_MODULE_ID = nvfm.FM_MAX_NUM_GPUS


def read_nvml() -> tuple[dict[str, int], str | None]:
    """GPU address -> module ID from NVML, and why NVML could not answer.

    Only GPUs bound to the ``nvidia`` driver are seen. A GPU whose query
    fails is left out (logged): another source may know it.
    """
    try:
        with nvml.session() as pynvml:
            return _module_ids(pynvml)
    except exception.NvmlUnavailable as exc:
        return {}, 'NVML is not available: %s' % exc


def _module_ids(pynvml: types.ModuleType
                ) -> tuple[dict[str, int], str | None]:
    if not hasattr(pynvml, 'nvmlDeviceGetModuleId'):
        return {}, ('this pynvml has no nvmlDeviceGetModuleId; install '
                    'nvidia-ml-py 12.535 or later')
    try:
        gpus = nvml.devices(pynvml)
    except pynvml.NVMLError as exc:
        return {}, 'NVML cannot count GPUs: %s' % exc
    found = {}
    for handle, address in gpus:
        try:
            module_id = int(pynvml.nvmlDeviceGetModuleId(handle))
        except (pynvml.NVMLError, ValueError) as exc:
            LOG.debug('NVML GPU %s: no module ID: %s', address, exc)
            continue
        # Outside the range: no module to name (not an HGX board).
        if 1 <= module_id <= MAX_MODULE_ID:
            found[address] = module_id
        else:
            LOG.debug('NVML GPU %s: module ID %d is none', address,
                      module_id)
    return found, None


def _read(path: str) -> tuple[dict, str | None]:
    """The file's JSON object, and what is wrong with it.

    No file is one that keeps nothing yet.
    """
    try:
        data = json.loads(input_file.read_text(path))
    except FileNotFoundError:
        return {'module_ids': {}}, None
    except (OSError, ValueError, RecursionError) as exc:
        return {}, 'cannot read %s (%s); %s' % (path, exc, _LEFT)
    if not isinstance(data, dict):
        return {}, _malformed(path)
    return data, None


def _malformed(path: str) -> str:
    return ('%s is not {"module_ids": {"<PCI address>": <1 to %d>, ...}}; '
            '%s' % (path, MAX_MODULE_ID, _LEFT))


def _is_module_id(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and 1 <= value <= MAX_MODULE_ID)


def load(path: str) -> tuple[dict[str, int], str | None]:
    """The answers kept in ``path``, and what is wrong with the file.

    A missing file is no problem (nothing kept yet); an unreadable or
    malformed one is, and then nothing is read from it.
    """
    data, problem = _read(path)
    if problem:
        return {}, problem
    kept = data.get('module_ids')
    if not isinstance(kept, dict) or not all(
            map(_is_module_id, kept.values())):
        return {}, _malformed(path)
    return dict(kept), None


#: Partition IDs as JSON object keys: Fabric Manager's 0 to 63.
_PARTITION_KEYS = {str(i): i for i in range(nvfm.FM_MAX_FABRIC_PARTITIONS)}


def load_partitions(path: str) -> dict[int, frozenset[int]]:
    """The board's partition table kept in ``path``: ID -> module IDs.

    Fabric Manager after a restart answers nothing until told which
    partitions run, so what it answered before is kept here. Empty when
    nothing is kept; BadModuleIdFile, naming the file and the entry, when
    the table cannot be trusted.
    """
    data, problem = _read(path)
    if problem:
        raise exception.BadModuleIdFile(problem)
    kept = data.get('partitions', {})
    if not isinstance(kept, dict):
        raise exception.BadModuleIdFile(
            '%s: "partitions" is not {"<partition ID>": '
            '[<module ID>, ...], ...}' % path)
    table = {}
    for key, modules in kept.items():
        if (key not in _PARTITION_KEYS or not isinstance(modules, list)
                or not modules or not all(map(_is_module_id, modules))
                or len(set(modules)) != len(modules)):
            raise exception.BadModuleIdFile(
                '%s: partition entry %s: %s is not "<0 to %d>": '
                '[<distinct module IDs 1 to %d>, ...]; the kept partition '
                'table is not used until Fabric Manager\'s next answer '
                'replaces it' % (path, errors.quoted(key), json.dumps(modules),
                                 nvfm.FM_MAX_FABRIC_PARTITIONS - 1,
                                 MAX_MODULE_ID))
        table[_PARTITION_KEYS[key]] = frozenset(modules)
    return table


def _table(table: Mapping[int, Collection[int]]) -> dict[str, list[int]]:
    """The partition table as JSON: ``{"<ID>": [<module ID>, ...]}``."""
    return {str(partition_id): sorted(modules)
            for partition_id, modules in sorted(table.items())}


def save(path: str, modules: Mapping[str, int],
         partitions: Mapping[int, Collection[int]] | None = None
         ) -> str | None:
    """Keep ``modules`` (and ``partitions``) in ``path``; what went wrong.

    The file's partition table stays as it is when ``partitions`` is None.
    """
    new: dict[str, object] = {'module_ids': dict(sorted(modules.items()))}
    if partitions is not None:
        new['partitions'] = _table(partitions)
    return _update(path, new)


def save_partitions(path: str, table: Mapping[int, Collection[int]]
                    ) -> str | None:
    """Keep the board's partition table in ``path``; what went wrong.

    The module IDs kept there stay as they are.
    """
    return _update(path, {'partitions': _table(table)})


def _update(path: str, new: Mapping[str, object]) -> str | None:
    """Write ``new``'s keys over the file's; what went wrong, if anything.

    A file that cannot be read is left as it is: it may hold answers NVML
    cannot give again now.
    """
    data, problem = _read(path)
    if problem:
        return problem
    return _write(path, {**data, **new})


def _write(path: str, data: Mapping[str, object]) -> str | None:
    """Write ``data`` to ``path`` whole; what went wrong, if anything.

    Written to a new file renamed over the old, so a crash or a reader
    never sees half a file.
    """
    directory = os.path.dirname(path) or '.'
    try:
        fd, new = tempfile.mkstemp(prefix='.module-ids-', dir=directory)
    except OSError as exc:
        return 'cannot write %s: %s' % (path, exc)
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            json.dump(data, f, indent=2)
            f.write('\n')
            f.flush()
            os.fsync(f.fileno())
        os.chmod(new, 0o644)
        os.replace(new, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(new)
        return 'cannot write %s: %s' % (path, exc)
    return None


def merge(seen: Mapping[str, int], kept: Mapping[str, int]
          ) -> tuple[dict[str, int], tuple[str, ...]]:
    """What NVML sees now, and the kept answers for the GPUs it does not.

    NVML wins for the GPUs it sees. A kept answer that NVML contradicts, or
    whose module NVML now gives another GPU, is a finding and is dropped;
    GPUs left with one module between them all go unanswered.
    """
    findings = []
    merged = dict(seen)
    for address, module_id in sorted(kept.items()):
        if address in seen:
            if seen[address] != module_id:
                findings.append(
                    'NVML says GPU %s is module %d, not module %d as kept '
                    'before; module %d is kept now'
                    % (address, seen[address], module_id, seen[address]))
            continue
        holders = sorted(a for a, m in seen.items() if m == module_id)
        if holders:
            findings.append(
                'module %d was kept for GPU %s, but NVML now says it is GPU '
                '%s; GPU %s has no module ID until NVML sees it'
                % (module_id, address, holders[0], address))
            continue
        merged[address] = module_id
    by_module: dict[int, list[str]] = {}
    for address, module_id in merged.items():
        by_module.setdefault(module_id, []).append(address)
    for module_id, addresses in sorted(by_module.items()):
        if len(addresses) > 1:
            findings.append(
                'GPUs %s are all given module %d; none of them has a module '
                'ID until NVML sees them'
                % (', '.join(sorted(addresses)), module_id))
            for address in addresses:
                del merged[address]
    return merged, tuple(findings)


def gpu_list(addresses: list[str]) -> str:
    """``GPU a`` or ``GPUs a, b``, for findings."""
    return 'GPU%s %s' % ('s' if len(addresses) > 1 else '',
                         ', '.join(addresses))


def it(addresses: list[str]) -> str:
    """``it`` or ``them``, for findings."""
    return 'them' if len(addresses) > 1 else 'it'


def discover(path: str, gpus: Collection[str]
             ) -> tuple[dict[int, str], tuple[str, ...]]:
    """Module ID -> address for these GPUs, and findings.

    Asks NVML, merges with the answers kept in ``path`` and keeps the
    result there when it changed. Answers for GPUs not on the host now are
    kept too: a GPU that fell off the bus may come back.
    """
    seen, nvml_problem = read_nvml()
    kept, file_problem = load(path)
    merged, findings = merge(seen, kept)
    if merged != kept and not file_problem:
        file_problem = save(path, merged)
    if file_problem:
        findings += ('[gpu_p2p] module_id_file: %s' % file_problem,)
    missing = sorted(set(gpus) - merged.keys())
    if missing:
        them = it(missing)
        findings += (
            'no Fabric Manager module ID is known for %s, so the partitions '
            'holding %s are left out: NVML tells a GPU\'s module ID only '
            'while the GPU is bound to the nvidia driver%s, and [gpu_p2p] '
            'module_id_file (%s) has none for %s. Bind %s to nvidia once '
            'while no guest uses %s, or give module_id per GPU in the '
            'static topology file' % (
                gpu_list(missing), them,
                ' (%s)' % nvml_problem if nvml_problem else '', path,
                them, them, them),)
    return ({module_id: address for address, module_id in merged.items()
             if address in gpus}, findings)
