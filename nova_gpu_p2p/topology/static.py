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

"""The ``static`` backend: the host's GPUs as the operator describes them.

For hosts where sysfs cannot tell the truth, for example a P2P matrix
captured with ``nvidia-smi topo -p2p r`` on bare metal before the GPUs were
bound to vfio-pci. The format is documented in
``doc/source/static-topology.rst``. :mod:`static_schema` reads the file and
checks its structure; this module checks what a schema cannot say (address
syntax, ranges, ids that must exist, duplicates, the matrix) and builds the
topology. Every error names the file and the line.
"""

import dataclasses
import itertools

from nova_gpu_p2p_guest import input_file

from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p import pci_address
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import nvidia_smi
from nova_gpu_p2p.topology import static_schema
from nova_gpu_p2p.topology import sysfs

#: A 3D controller, as data-centre NVIDIA GPUs report themselves.
GPU_CLASS_CODE = 0x030200


@dataclasses.dataclass(frozen=True)
class _Gpu:
    function: model.PCIFunction
    clique: int | None
    #: Fabric Manager's module ID, read by the fabricmanager backend only.
    module_id: int | None = None


def parse(text: str, filename: str) -> model.HostTopology:
    """The topology a static file describes; ``filename`` is for errors.

    Raises TopologyError naming the file, the line, what is wrong and what
    is allowed.
    """
    try:
        return _topology(static_schema.read(text), filename)
    except exception.StaticLineError as exc:
        raise _error(exc, filename)


def module_ids(text: str, filename: str) -> dict[str, int]:
    """GPU address -> ``module_id``, for the GPUs the file gives one.

    For the fabricmanager backend, where the operator names each GPU's
    HGX module; errors as :func:`parse` raises them.
    """
    try:
        gpus = _gpus(static_schema.read(text))
    except exception.StaticLineError as exc:
        raise _error(exc, filename)
    return {gpu.function.address: gpu.module_id for gpu in gpus
            if gpu.module_id is not None}


def read(path: str | None) -> str:
    """The text of ``[gpu_p2p] static_topology_file``."""
    if not path:
        raise exception.TopologyError(
            '[gpu_p2p] static_topology_file is not set; the static '
            'topology backend reads the host\'s GPUs from that file')
    try:
        return input_file.read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise exception.TopologyError(
            'cannot read %s, named by [gpu_p2p] static_topology_file: %s'
            % (path, exc))


def _error(exc: exception.StaticLineError,
           filename: str) -> exception.TopologyError:
    return exception.TopologyError('%s line %d: %s'
                                   % (filename, exc.line, exc))


def _topology(document: static_schema.Document,
              filename: str) -> model.HostTopology:
    gpus = _gpus(document)
    numa_nodes: tuple[model.NumaNode, ...] = ()
    if 'numa_nodes' in document.data:
        numa_nodes = _numa_nodes(document)
        _check_gpu_nodes(document, gpus, numa_nodes)
    findings: list[str] = []
    if 'p2p_matrix' in document.data:
        overrides = _matrix(document, gpus)
        addresses = [gpu.function.address for gpu in gpus]
        if addresses != sorted(addresses):
            findings.append(
                'gpus in %s are not in PCI address order, the order in '
                'which nvidia-smi numbers GPUs; p2p_matrix was read '
                'with GPU<i> as the i-th entry of gpus' % filename)
        if any(gpu.clique is not None for gpu in gpus):
            findings.append(
                'clique in %s is ignored because p2p_matrix is given; '
                '[gpu_p2p] clique_map forces clique IDs' % filename)
    else:
        overrides = _clique_overrides(gpus)
    return model.HostTopology(
        functions={gpu.function.address: gpu.function for gpu in gpus},
        numa_nodes=numa_nodes,
        p2p_overrides=overrides,
        findings=tuple(findings))


def _gpus(document: static_schema.Document) -> list[_Gpu]:
    problem = model.size_problem(0, len(document.data['gpus']))
    if problem:
        raise exception.StaticLineError(
            document.line(('gpus', model.MAX_GPUS)), problem)
    gpus: list[_Gpu] = []
    lines: dict[str, int] = {}
    module_lines: dict[int, int] = {}
    for index, entry in enumerate(document.data['gpus']):
        path = ('gpus', index)
        try:
            address = pci_address.normalize(entry['address'])
        except ValueError:
            raise document.refuse(path + ('address',))
        if address in lines:
            raise exception.StaticLineError(
                document.line(path), 'duplicate GPU address %s, already '
                'listed on line %d; list each GPU once'
                % (address, lines[address]))
        lines[address] = document.line(path)
        numa_node = None
        if 'numa_node' in entry:
            numa_node = int(entry['numa_node'])
        clique = None
        if 'clique' in entry:
            clique = _bounded(document, path + ('clique',), 0,
                              host_cliques.MAX_CLIQUE_ID)
        module_id = None
        if 'module_id' in entry:
            module_id = _bounded(document, path + ('module_id',), 1,
                                 nvfm.FM_MAX_NUM_GPUS)
            line = document.line(path + ('module_id',))
            if module_id in module_lines:
                raise exception.StaticLineError(
                    line, 'duplicate module_id %d, already given on line '
                    '%d; each GPU has its own module' % (
                        module_id, module_lines[module_id]))
            module_lines[module_id] = line
        if 'root_complex' in entry:
            root_complex = entry['root_complex']
        elif numa_node is None:
            root_complex = 'static'
        else:
            root_complex = 'static-node%d' % numa_node
        gpus.append(_Gpu(
            function=model.PCIFunction(
                address=address,
                vendor=model.NVIDIA_VENDOR_ID,
                device=int(entry.get('device', '0'), 16),
                class_code=GPU_CLASS_CODE,
                parent=None,
                root_complex=root_complex,
                numa_node=numa_node,
                driver=None),
            clique=clique, module_id=module_id))
    return gpus


def _bounded(document: static_schema.Document, path: static_schema.Path,
             low: int, high: int) -> int:
    """The integer at ``path``, which the schema found to be digits."""
    value = int(document.value(path))
    if not low <= value <= high:
        raise document.refuse(path)
    return value


def _numa_nodes(
        document: static_schema.Document) -> tuple[model.NumaNode, ...]:
    nodes: dict[int, model.NumaNode] = {}
    id_lines: dict[int, int] = {}
    for index, entry in enumerate(document.data['numa_nodes']):
        path = ('numa_nodes', index)
        node_id = int(entry['id'])
        if node_id in nodes:
            raise exception.StaticLineError(
                document.line(path + ('id',)), 'duplicate NUMA node id %d, '
                'already listed on line %d' % (node_id, id_lines[node_id]))
        id_lines[node_id] = document.line(path + ('id',))
        cpus: frozenset[int] = frozenset()
        if 'cpus' in entry:
            try:
                cpus = sysfs.parse_cpulist(entry['cpus'])
            except ValueError:
                raise document.refuse(path + ('cpus',))
        distances = tuple(
            _bounded(document, path + ('distances', item),
                     static_schema.LOCAL_DISTANCE,
                     static_schema.UNREACHABLE_DISTANCE)
            for item in range(len(entry.get('distances', ()))))
        nodes[node_id] = model.NumaNode(id=node_id, cpus=cpus,
                                        distances=distances)
    order = sorted(nodes)
    for index, entry in enumerate(document.data['numa_nodes']):
        if 'distances' in entry:
            _check_distances(document, ('numa_nodes', index, 'distances'),
                             nodes[int(entry['id'])], order)
    return tuple(nodes[node_id] for node_id in order)


def _check_distances(document: static_schema.Document,
                     path: static_schema.Path, numa_node: model.NumaNode,
                     order: list[int]) -> None:
    """One distance per node in id order: 10 to itself, more to others.

    libvirt refuses a guest whose NUMA distances break these rules.
    """
    what = static_schema.name(path)
    if len(numa_node.distances) != len(order):
        raise exception.StaticLineError(
            document.line(path), '%s has %d values but numa_nodes lists %d '
            'nodes; give one distance per node, in id order (%s)'
            % (what, len(numa_node.distances), len(order),
               ', '.join(str(i) for i in order)))
    for other, distance in zip(order, numa_node.distances):
        if (other == numa_node.id) != (distance ==
                                       static_schema.LOCAL_DISTANCE):
            raise exception.StaticLineError(
                document.line(path), '%s: the distance from node %d to node '
                '%d is %d; it must be %d to the node itself and from %d to '
                '%d to other nodes' % (
                    what, numa_node.id, other, distance,
                    static_schema.LOCAL_DISTANCE,
                    static_schema.LOCAL_DISTANCE + 1,
                    static_schema.UNREACHABLE_DISTANCE))


def _check_gpu_nodes(document: static_schema.Document, gpus: list[_Gpu],
                     numa_nodes: tuple[model.NumaNode, ...]) -> None:
    ids = [node.id for node in numa_nodes]
    for index, gpu in enumerate(gpus):
        numa_node = gpu.function.numa_node
        if numa_node is not None and numa_node not in ids:
            path = ('gpus', index, 'numa_node')
            raise exception.StaticLineError(
                document.line(path), '%s %d is not one of the numa_nodes ids '
                '(%s)' % (static_schema.name(path), numa_node,
                          ', '.join(str(i) for i in ids)))


def _matrix(document: static_schema.Document,
            gpus: list[_Gpu]) -> dict[frozenset[str], bool]:
    """P2P answers for every pair, from ``nvidia-smi topo -p2p r``."""
    path = ('p2p_matrix',)
    if document.nodes[path].style != '|':
        # Folded or plain, YAML joins the matrix's lines.
        raise document.refuse(path)
    try:
        # A literal block's text starts on the line after its "|".
        capable = nvidia_smi.parse_p2p(document.data['p2p_matrix'],
                                       len(gpus), document.line(path) + 1)
    except exception.NvidiaSmiMatrixError as exc:
        raise exception.StaticLineError(exc.line, 'p2p_matrix: %s' % exc)
    return {frozenset((gpus[a].function.address,
                       gpus[b].function.address)): value
            for (a, b), value in capable.items()}


def _clique_overrides(gpus: list[_Gpu]) -> dict[frozenset[str], bool]:
    """Same clique ID: P2P capable; otherwise not. Empty without IDs."""
    if all(gpu.clique is None for gpu in gpus):
        return {}
    return {frozenset((a.function.address, b.function.address)):
            a.clique is not None and a.clique == b.clique
            for a, b in itertools.combinations(gpus, 2)}


class StaticBackend(backends.TopologyBackend):
    """Reads the file named by ``[gpu_p2p] static_topology_file``."""

    capabilities = backends.Capabilities(required=(
        ('static_topology_file', 'to name the topology file'),))

    def discover(self) -> model.HostTopology:
        path = self.conf.gpu_p2p.static_topology_file
        return parse(read(path), path)
