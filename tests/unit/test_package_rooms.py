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

"""The package's rooms import one way, read from the source with ``ast``.

A room is a top-level subpackage or module of nova_gpu_p2p (``topology``,
``fabric``, ``scheduler``, ``driver`` ...). Every import counts, those
inside functions too; nothing is imported to find them.
"""

import ast
import pathlib

import fixtures

from tests.unit import base

PACKAGE = 'nova_gpu_p2p'
ROOT = pathlib.Path(__file__).resolve().parents[2]

#: What runs in nova-compute only: the scheduler imports none of it.
COMPUTE_SIDE = (
    'nova_gpu_p2p.compute',
    PACKAGE + '.driver',  # the shim
    'nova_gpu_p2p.guest',
    'nova_gpu_p2p.fabric.lifecycle',
    'nova_gpu_p2p.fabric.nvfm',
    'nova_gpu_p2p.privsep',
    'nova_gpu_p2p.topology.backends',
    'nova_gpu_p2p.topology.discovery',
    'nova_gpu_p2p.nova_signatures',
)
#: The most lines a product module may have.
MAX_LINES = 500
#: Rooms a service loads by name -> that service.
LOADED = {'compute': 'nova-compute', 'api': 'nova-api'}
#: Paths nova.conf and the product contract name, kept as shims.
NAMED_PATHS = (PACKAGE + '.driver',)
#: The plugin loader and what loads through it.
LOADERS = (
    'nova_gpu_p2p.topology.backends',
    'nova_gpu_p2p.topology.discovery',
    'stevedore',
)


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted((root / PACKAGE).rglob('*.py')):
        parts = path.relative_to(root).with_suffix('').parts
        if parts[-1] == '__init__':
            parts = parts[:-1]
        found['.'.join(parts)] = path
    return found


def _imports(name: str, path: pathlib.Path,
             known: set[str]) -> set[str]:
    """Everything the module imports: package modules, else top names.

    ``from a import b`` names module ``a.b`` where there is one, else
    ``a``; a name outside the package is kept as its first part.
    """
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')[:len(package.split('.'))
                                            - node.level + 1]
                base = '.'.join(anchor + ([base] if base else []))
            targets = [base + '.' + alias.name if base + '.' + alias.name
                       in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            found.add(target if target.startswith(PACKAGE + '.')
                      or target == PACKAGE else target.split('.')[0])
    return found


def import_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Module -> what it imports, for every module of the package."""
    modules = _modules(root)
    return {name: _imports(name, path, set(modules))
            for name, path in modules.items()}


def room(module: str) -> str | None:
    """``topology`` for ``nova_gpu_p2p.topology.sysfs``; None outside."""
    parts = module.split('.')
    return parts[1] if parts[0] == PACKAGE and len(parts) > 1 else None


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the other rooms it imports."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = room(module)
        if source is None:
            continue
        rooms.setdefault(source, set()).update(
            target for target in map(room, targets)
            if target is not None and target != source)
    return rooms


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that ends where it starts; None if none."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            cycle = visit(target, path + [node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start, [])
        if cycle:
            return cycle
    return None


def reachable(graph: dict[str, set[str]], starts) -> set[str]:
    """What ``starts`` import, directly or through package modules."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        module = todo.pop()
        for target in graph.get(module, ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _within(found: set[str], prefixes) -> list[str]:
    return sorted(name for name in found for prefix in prefixes
                  if name == prefix or name.startswith(prefix + '.'))


class TestRooms(base.TestCase):

    graph = import_graph()

    def test_every_module_is_read(self):
        self.assertIn('nova_gpu_p2p.topology.sysfs', self.graph)
        self.assertIn('nova_gpu_p2p.fabric.partitions',
                      self.graph['nova_gpu_p2p.topology.fabricmanager'])

    def test_no_cycle_between_rooms(self):
        cycle = find_cycle(room_graph(self.graph))
        self.assertIsNone(cycle, 'rooms import each other: %s'
                          % ' -> '.join(cycle or ()))

    def test_scheduler_imports_nothing_compute_side(self):
        scheduler = [m for m in self.graph if room(m) == 'scheduler']
        self.assertEqual([], _within(reachable(self.graph, scheduler),
                                     COMPUTE_SIDE))

    def test_guest_plan_imports_no_plugin_loader(self):
        self.assertEqual([], _within(
            reachable(self.graph, ['nova_gpu_p2p.guest.plan']), LOADERS))

    def test_loaded_rooms_are_imported_by_no_other(self):
        """What a service loads by name is the top of the house."""
        found = sorted(
            '%s imports %s' % (module, target)
            for module, targets in self.graph.items()
            for target in targets
            if room(target) in LOADED and room(module) != room(target)
            and module not in NAMED_PATHS)
        self.assertEqual([], found)

    def test_every_room_says_who_loads_it(self):
        for name in LOADED:
            doc = ast.get_docstring(ast.parse(
                (ROOT / PACKAGE / name / '__init__.py').read_text()))
            self.assertIn(LOADED[name], doc or '', name)

    def test_no_product_module_over_500_lines(self):
        """One concern per module: past 500 lines it holds two."""
        long = ['%s: %d lines' % (path.relative_to(ROOT), lines)
                for top in (PACKAGE, 'guest-agent/nova_gpu_p2p_guest')
                for path in sorted((ROOT / top).rglob('*.py'))
                for lines in [len(path.read_text().splitlines())]
                if lines > MAX_LINES]
        self.assertEqual([], long)


class TestTheChecksCanFail(base.TestCase):
    """The rules above catch what they are for, on a made-up package."""

    def package(self, files: dict[str, str]) -> dict[str, set[str]]:
        root = pathlib.Path(self.useFixture(fixtures.TempDir()).path)
        for name, text in files.items():
            path = root / PACKAGE / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return import_graph(root)

    def test_a_cycle_through_a_function_import(self):
        graph = self.package({
            '__init__.py': '',
            'topology/__init__.py': '',
            'topology/fm.py': 'from nova_gpu_p2p.fabric import nvfm\n',
            'fabric/__init__.py': '',
            'fabric/nvfm.py': '',
            'fabric/partitions.py':
                'def f():\n    from nova_gpu_p2p.topology import fm\n',
        })
        self.assertEqual(['fabric', 'topology', 'fabric'],
                         find_cycle(room_graph(graph)))

    def test_reached_through_another_module(self):
        graph = self.package({
            '__init__.py': '',
            'plan.py': 'from nova_gpu_p2p import hosts\n',
            'hosts.py': 'import stevedore.driver\n',
        })
        self.assertEqual(['stevedore'], _within(
            reachable(graph, ['nova_gpu_p2p.plan']), LOADERS))
