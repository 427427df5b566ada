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
``doc/source/static-topology.rst``. The YAML is composed, not loaded, so
that every error names its line, and so that values are read as the
operator typed them: YAML 1.1 would read ``81:00.0`` as a base-60 number.
"""

import dataclasses
import itertools
import re

import yaml

from nova_gpu_p2p import extra_specs
from nova_gpu_p2p import pci_address
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import sysfs

#: A 3D controller, as data-centre NVIDIA GPUs report themselves.
GPU_CLASS_CODE = 0x030200
TOP_KEYS = ('gpus', 'p2p_matrix', 'numa_nodes')
GPU_KEYS = ('address', 'numa_node', 'root_complex', 'clique', 'device')
NUMA_KEYS = ('id', 'cpus', 'distances')
#: ACPI SLIT distances, as libvirt accepts them.
LOCAL_DISTANCE = 10
UNREACHABLE_DISTANCE = 255
P2P_OK = 'OK'
SELF = 'X'
#: Linux's largest CONFIG_NR_CPUS: no CPU list names a CPU beyond it.
MAX_CPUS = 8192

_DECIMAL = re.compile(r'[0-9]+')
_DEVICE_ID = re.compile(r'(?:0x)?[0-9a-f]{1,4}', re.IGNORECASE)
_LABEL = re.compile(r'GPU(0|[1-9][0-9]*)')
_CPU_RANGE = re.compile(r'\s*([0-9]+)(?:-([0-9]+))?\s*')


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


@dataclasses.dataclass(frozen=True)
class _Gpu:
    function: model.PCIFunction
    clique: int | None
    #: Where its numa_node was given, for errors found later.
    numa_line: int


class _Parser:
    """Walks the composed YAML; every error names the file and line."""

    def __init__(self, filename: str) -> None:
        self.filename = filename

    def error(self, line: int, message: str) -> backends.TopologyError:
        return backends.TopologyError(
            '%s line %d: %s' % (self.filename, line, message))

    def parse(self, text: str) -> model.HostTopology:
        root = self.compose(text)
        if root is None:
            raise self.error(1, 'the file is empty; it needs at least a '
                                'gpus list')
        top = self.mapping(root, TOP_KEYS, 'the top level')
        if 'gpus' not in top:
            raise self.error(_line(root), 'no gpus key; the file must list '
                                          'the GPUs of this host under gpus')
        gpus = self.gpus(top['gpus'])
        numa_nodes: tuple[model.NumaNode, ...] = ()
        if 'numa_nodes' in top:
            numa_nodes = self.numa_nodes(top['numa_nodes'])
            self.check_gpu_nodes(gpus, numa_nodes)
        findings: list[str] = []
        if 'p2p_matrix' in top:
            overrides = self.matrix(top['p2p_matrix'], gpus)
            addresses = [gpu.function.address for gpu in gpus]
            if addresses != sorted(addresses):
                findings.append(
                    'gpus in %s are not in PCI address order, the order in '
                    'which nvidia-smi numbers GPUs; p2p_matrix was read '
                    'with GPU<i> as the i-th entry of gpus' % self.filename)
            if any(gpu.clique is not None for gpu in gpus):
                findings.append(
                    'clique in %s is ignored because p2p_matrix is given; '
                    '[gpu_p2p] clique_map forces clique IDs' % self.filename)
        else:
            overrides = _clique_overrides(gpus)
        return model.HostTopology(
            functions={gpu.function.address: gpu.function for gpu in gpus},
            numa_nodes=numa_nodes,
            p2p_overrides=overrides,
            findings=tuple(findings))

    def compose(self, text: str) -> yaml.Node | None:
        try:
            return yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.reader.ReaderError as exc:
            raise self.error(text.count('\n', 0, exc.position) + 1,
                             'YAML syntax error: %s' % exc.reason)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise self.error(
                mark.line + 1 if mark else 1,
                'YAML syntax error: %s' % ', '.join(
                    part for part in (exc.context, exc.problem) if part))

    def mapping(self, node: yaml.Node, allowed: tuple[str, ...],
                what: str) -> dict[str, yaml.Node]:
        """The mapping's values by key; unknown and repeated keys fail."""
        keys = ', '.join(allowed)
        if not isinstance(node, yaml.MappingNode):
            raise self.error(_line(node), '%s must be a mapping with the '
                                          'keys %s' % (what, keys))
        fields: dict[str, yaml.Node] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name not in allowed:
                raise self.error(
                    _line(key), "unknown key '%s' in %s; allowed keys are %s"
                    % (name or '?', what, keys))
            if name in fields:
                raise self.error(_line(key), "key '%s' appears twice in %s "
                                             "(first on line %d)"
                                 % (name, what, _line(fields[name])))
            fields[name] = value
        return fields

    def scalar(self, node: yaml.Node, what: str, expected: str) -> str:
        """The value exactly as typed (quotes and block indicators off)."""
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(_line(node), '%s must be %s, got a %s' % (
                what, expected,
                'list' if isinstance(node, yaml.SequenceNode) else 'mapping'))
        return node.value

    def integer(self, node: yaml.Node, what: str, low: int,
                high: int | None = None) -> int:
        expected = ('an integer >= %d' % low if high is None else
                    'an integer from %d to %d' % (low, high))
        text = self.scalar(node, what, expected)
        if (not _DECIMAL.fullmatch(text) or int(text) < low
                or (high is not None and int(text) > high)):
            raise self.error(_line(node), "%s must be %s, got '%s'"
                             % (what, expected, text))
        return int(text)

    def gpus(self, node: yaml.Node) -> list[_Gpu]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(_line(node), 'gpus must be a list of GPUs, '
                                          'each a mapping with an address')
        if not node.value:
            raise self.error(_line(node), 'gpus is empty; list at least '
                                          'one GPU')
        gpus: list[_Gpu] = []
        lines: dict[str, int] = {}
        for index, entry in enumerate(node.value):
            gpu = self.gpu(entry, 'GPU%d' % index)
            address = gpu.function.address
            if address in lines:
                raise self.error(
                    _line(entry), 'duplicate GPU address %s, already listed '
                    'on line %d; list each GPU once' % (address,
                                                        lines[address]))
            lines[address] = _line(entry)
            gpus.append(gpu)
        return gpus

    def gpu(self, node: yaml.Node, what: str) -> _Gpu:
        fields = self.mapping(node, GPU_KEYS, what)
        if 'address' not in fields:
            raise self.error(_line(node), '%s has no address; every GPU '
                                          'needs its PCI address' % what)
        text = self.scalar(fields['address'], what + ' address',
                           'a PCI address')
        try:
            address = pci_address.normalize(text)
        except ValueError as exc:
            raise self.error(_line(fields['address']),
                             '%s address: %s' % (what, exc))
        numa_node = None
        if 'numa_node' in fields:
            numa_node = self.integer(fields['numa_node'],
                                     what + ' numa_node', 0)
        clique = None
        if 'clique' in fields:
            clique = self.integer(fields['clique'], what + ' clique', 0,
                                  extra_specs.MAX_CLIQUE_ID)
        device = 0
        if 'device' in fields:
            text = self.scalar(fields['device'], what + ' device',
                               'a PCI device ID')
            if not _DEVICE_ID.fullmatch(text):
                raise self.error(
                    _line(fields['device']), "%s device must be a PCI "
                    "device ID, up to 4 hex digits such as 0x2330, got '%s'"
                    % (what, text))
            device = int(text, 16)
        if 'root_complex' in fields:
            root_complex = self.scalar(fields['root_complex'],
                                       what + ' root_complex', 'a name')
            if not root_complex.strip():
                raise self.error(_line(fields['root_complex']),
                                 '%s root_complex must not be empty' % what)
        elif numa_node is None:
            root_complex = 'static'
        else:
            root_complex = 'static-node%d' % numa_node
        return _Gpu(
            function=model.PCIFunction(
                address=address,
                vendor=model.NVIDIA_VENDOR_ID,
                device=device,
                class_code=GPU_CLASS_CODE,
                parent=None,
                root_complex=root_complex,
                numa_node=numa_node,
                driver=None),
            clique=clique,
            numa_line=_line(fields.get('numa_node', node)))

    def numa_nodes(self, node: yaml.Node) -> tuple[model.NumaNode, ...]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(_line(node), 'numa_nodes must be a list of '
                                          'mappings with the keys %s'
                             % ', '.join(NUMA_KEYS))
        nodes: dict[int, model.NumaNode] = {}
        id_lines: dict[int, int] = {}
        distance_nodes: dict[int, yaml.Node] = {}
        for number, entry in enumerate(node.value, 1):
            what = 'numa_nodes entry %d' % number
            fields = self.mapping(entry, NUMA_KEYS, what)
            if 'id' not in fields:
                raise self.error(_line(entry), '%s has no id; every NUMA '
                                               'node needs its id' % what)
            node_id = self.integer(fields['id'], what + ' id', 0)
            if node_id in nodes:
                raise self.error(
                    _line(fields['id']), 'duplicate NUMA node id %d, '
                    'already listed on line %d' % (node_id, id_lines[node_id]))
            cpus: frozenset[int] = frozenset()
            if 'cpus' in fields:
                text = self.scalar(fields['cpus'], what + ' cpus',
                                   'a CPU list')
                try:
                    cpus = _cpulist(text)
                except ValueError:
                    raise self.error(
                        _line(fields['cpus']), "%s cpus must be a CPU list "
                        "such as 0-31,64-95, got '%s'" % (what, text))
            distances: tuple[int, ...] = ()
            if 'distances' in fields:
                distance_nodes[node_id] = fields['distances']
                distances = self.distances(fields['distances'], node_id)
            id_lines[node_id] = _line(fields['id'])
            nodes[node_id] = model.NumaNode(id=node_id, cpus=cpus,
                                            distances=distances)
        order = sorted(nodes)
        for node_id, distance_node in distance_nodes.items():
            self.check_distances(distance_node, nodes[node_id], order)
        return tuple(nodes[node_id] for node_id in order)

    def distances(self, node: yaml.Node, node_id: int) -> tuple[int, ...]:
        what = 'distances of NUMA node %d' % node_id
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(_line(node), '%s must be a list of integers, '
                                          'such as [10, 21]' % what)
        return tuple(self.integer(item, what, LOCAL_DISTANCE,
                                  UNREACHABLE_DISTANCE)
                     for item in node.value)

    def check_distances(self, node: yaml.Node, numa_node: model.NumaNode,
                        order: list[int]) -> None:
        """One distance per node in id order: 10 to itself, more to others.

        libvirt refuses a guest whose NUMA distances break these rules.
        """
        what = 'distances of NUMA node %d' % numa_node.id
        if len(numa_node.distances) != len(order):
            raise self.error(
                _line(node), '%s has %d values but numa_nodes lists %d '
                'nodes; give one distance per node, in id order (%s)'
                % (what, len(numa_node.distances), len(order),
                   ', '.join(str(i) for i in order)))
        for other, distance in zip(order, numa_node.distances):
            if (other == numa_node.id) != (distance == LOCAL_DISTANCE):
                raise self.error(
                    _line(node), '%s: the distance to node %d is %d; it must '
                    'be %d to the node itself and from %d to %d to other '
                    'nodes' % (what, other, distance, LOCAL_DISTANCE,
                               LOCAL_DISTANCE + 1, UNREACHABLE_DISTANCE))

    def check_gpu_nodes(self, gpus: list[_Gpu],
                        numa_nodes: tuple[model.NumaNode, ...]) -> None:
        ids = [node.id for node in numa_nodes]
        for index, gpu in enumerate(gpus):
            numa_node = gpu.function.numa_node
            if numa_node is not None and numa_node not in ids:
                raise self.error(
                    gpu.numa_line, 'GPU%d numa_node %d is not one of the '
                    'numa_nodes ids (%s)' % (index, numa_node,
                                             ', '.join(str(i) for i in ids)))

    def matrix(self, node: yaml.Node,
               gpus: list[_Gpu]) -> dict[frozenset[str], bool]:
        """P2P answers for every pair, from ``nvidia-smi topo -p2p r``."""
        expected = 'a literal block: "p2p_matrix: |" (or "|2")'
        text = self.scalar(node, 'p2p_matrix', expected)
        if node.style != '|':
            raise self.error(_line(node), 'p2p_matrix must be %s followed by '
                                          'the matrix on indented lines, so '
                                          'that YAML keeps its lines'
                             % expected)
        # A literal block's text starts on the line after its "|".
        rows = []
        for offset, row_text in enumerate(text.splitlines()):
            tokens = row_text.split()
            if tokens and tokens[0].lower().startswith('legend'):
                break
            if tokens:
                rows.append((_line(node) + 1 + offset, tokens))
        if not rows:
            raise self.error(_line(node), 'p2p_matrix is empty')
        (header_line, header), body = rows[0], rows[1:]
        columns = [self.label(token, header_line, len(gpus))
                   for token in header]
        if len(set(columns)) != len(columns) or len(columns) != len(gpus):
            raise self.error(
                header_line, 'p2p_matrix header must name each of the %d '
                'GPUs in gpus once (GPU0 to GPU%d), got %s'
                % (len(gpus), len(gpus) - 1, ' '.join(header)))
        cells: dict[tuple[int, int], str] = {}
        row_lines: dict[int, int] = {}
        for line, tokens in body:
            row = self.label(tokens[0], line, len(gpus))
            if row in row_lines:
                raise self.error(line, 'p2p_matrix has a second row for '
                                       'GPU%d (first on line %d)'
                                 % (row, row_lines[row]))
            row_lines[row] = line
            if len(tokens) - 1 != len(columns):
                raise self.error(
                    line, 'p2p_matrix row GPU%d has %d values; it needs %d, '
                    'one per GPU' % (row, len(tokens) - 1, len(columns)))
            for column, value in zip(columns, tokens[1:]):
                value = value.upper()
                if row == column and value != SELF:
                    raise self.error(
                        line, "p2p_matrix: GPU%d to itself must be '%s', "
                        "got '%s'" % (row, SELF, value))
                if row != column and value == SELF:
                    raise self.error(
                        line, "p2p_matrix: GPU%d to GPU%d is '%s', which "
                        "only the diagonal may be; use %s or a "
                        "not-supported code such as NS"
                        % (row, column, SELF, P2P_OK))
                cells[row, column] = value
        missing = sorted(set(range(len(gpus))) - set(row_lines))
        if missing:
            raise self.error(
                header_line, 'p2p_matrix has no row for %s; it needs one '
                'row per GPU' % ', '.join('GPU%d' % i for i in missing))
        overrides = {}
        for a, b in itertools.combinations(range(len(gpus)), 2):
            capable = cells[a, b] == P2P_OK
            if capable != (cells[b, a] == P2P_OK):
                first, second = sorted((a, b), key=row_lines.get)
                raise self.error(
                    row_lines[second], 'p2p_matrix is not symmetric: GPU%d '
                    'to GPU%d is %s on line %d but GPU%d to GPU%d is %s; '
                    'P2P must be the same both ways'
                    % (first, second, cells[first, second],
                       row_lines[first], second, first,
                       cells[second, first]))
            overrides[frozenset((gpus[a].function.address,
                                 gpus[b].function.address))] = capable
        return overrides

    def label(self, token: str, line: int, count: int) -> int:
        match = _LABEL.fullmatch(token)
        if match is None or int(match.group(1)) >= count:
            raise self.error(
                line, "unknown GPU label '%s' in p2p_matrix; gpus lists %d "
                "GPUs, GPU0 to GPU%d in the order listed"
                % (token, count, count - 1))
        return int(match.group(1))


def _cpulist(text: str) -> frozenset[int]:
    """A CPU list as Linux writes it, which never runs backwards.

    ``31-0`` would otherwise read as no CPU at all, and ``0-99999999999``
    take the host's memory.
    """
    for part in filter(None, text.split(',')):
        match = _CPU_RANGE.fullmatch(part)
        if match is None:
            raise ValueError(part)
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if not first <= last < MAX_CPUS:
            raise ValueError(part)
    return sysfs.parse_cpulist(text)


def _clique_overrides(gpus: list[_Gpu]) -> dict[frozenset[str], bool]:
    """Same clique ID: P2P capable; otherwise not. Empty without IDs."""
    if all(gpu.clique is None for gpu in gpus):
        return {}
    return {frozenset((a.function.address, b.function.address)):
            a.clique is not None and a.clique == b.clique
            for a, b in itertools.combinations(gpus, 2)}


def parse(text: str, filename: str) -> model.HostTopology:
    """The topology a static file describes; ``filename`` is for errors.

    Raises TopologyError naming the file, the line, what is wrong and what
    is allowed.
    """
    return _Parser(filename).parse(text)


class StaticBackend(backends.TopologyBackend):
    """Reads the file named by ``[gpu_p2p] static_topology_file``."""

    def discover(self) -> model.HostTopology:
        path = self.conf.gpu_p2p.static_topology_file
        if not path:
            raise backends.TopologyError(
                '[gpu_p2p] static_topology_file is not set; the static '
                'topology backend reads the host\'s GPUs from that file')
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise backends.TopologyError(
                'cannot read %s, named by [gpu_p2p] static_topology_file: %s'
                % (path, exc))
        return parse(text, path)
