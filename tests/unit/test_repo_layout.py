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

"""The checkout's top-level rooms import one way, read with :mod:`ast`.

The product (``nova_gpu_p2p``, the ``nova/`` shim) imports neither
``lab/`` nor ``tests/``. ``lab/`` (benchmark, demo, simulations,
baselines) runs on the tests' infrastructure, every module of ``tests/``
that is not a test module (``test_*.py``), and imports no test module;
the infrastructure imports no test module and nothing of ``lab/``. Test
modules may import anything. Imports inside functions count; nothing is
imported to find them.
"""

import ast
import os
import textwrap

import fixtures

import tests
from tests.unit import base

PRODUCT = ('nova_gpu_p2p', 'nova')
LAB = 'lab'
TESTS = 'tests'


def modules(root: str, package: str) -> dict[str, str]:
    """Dotted name -> file of every module of ``package`` under ``root``."""
    found = {}
    for folder, _, files in os.walk(os.path.join(root, package)):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, root)[:-len('.py')].split(os.sep)
            if parts[-1] == '__init__':
                parts.pop()
            found['.'.join(parts)] = path
    return found


def imports(module: str, path: str) -> set[str]:
    """Every module name the file imports, absolute.

    ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (``c`` may be a
    module); relative imports are resolved against ``module``.
    """
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    is_package = os.path.basename(path) == '__init__.py'
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                package = module.split('.')
                if not is_package:
                    package.pop()
                package = package[:len(package) - node.level + 1]
                base = '.'.join(package + ([base] if base else []))
            found.add(base)
            found.update('%s.%s' % (base, alias.name) for alias in node.names)
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + '.')


def is_test_module(name: str) -> bool:
    """A module (or a name in one) of ``tests/**/test_*.py``."""
    parts = name.split('.')
    return parts[0] == TESTS and any(p.startswith('test_') for p in parts)


def problems(root: str, lab: str = LAB) -> list[str]:
    """Each import that goes against the rooms' one way, as text."""
    found = []

    def check(package: str, barred, why: str) -> None:
        for module, path in sorted(modules(root, package).items()):
            if package == TESTS and is_test_module(module):
                continue
            for name in sorted(imports(module, path)):
                if barred(name):
                    found.append('%s imports %s (%s)' % (module, name, why))

    for package in PRODUCT:
        check(package, lambda name: within(name, lab) or within(name, TESTS),
              'the product imports neither %s nor %s' % (lab, TESTS))
    check(lab, is_test_module, 'a test module')
    check(TESTS, lambda name: is_test_module(name) or within(name, lab),
          'test infrastructure imports no test module and no %s' % lab)
    return found


class RepoLayoutTest(base.TestCase):

    def test_rooms_import_one_way(self):
        self.assertEqual([], problems(tests.ROOT))

    def test_rooms_exist(self):
        # Each room read above holds modules: a renamed room is not
        # silently skipped.
        for package in (LAB, TESTS) + PRODUCT:
            self.assertTrue(modules(tests.ROOT, package), package)

    def test_each_wrong_way_is_found(self):
        root = self.useFixture(fixtures.TempDir()).path
        files = {
            'nova_gpu_p2p/__init__.py': '',
            'nova_gpu_p2p/driver.py': '''
                def load():
                    from lab import bench
                import tests.fixtures.hosts
                ''',
            'nova/virt/gpu_p2p.py': 'from nova_gpu_p2p import driver\n',
            'lab/__init__.py': 'import tests\n',
            'lab/bench.py': '''
                from tests.cloud import scheduling
                from tests.functional import test_clique_scheduling
                from . import demo
                ''',
            'lab/demo.py': 'from tests.functional.test_demo import X\n',
            'tests/__init__.py': '',
            'tests/cloud/__init__.py': '',
            'tests/cloud/scheduling.py': '''
                from ..functional import test_guest_config
                from lab import demo
                ''',
            'tests/functional/__init__.py': '',
            'tests/functional/test_demo.py': '''
                from lab import demo
                from tests.functional import test_guest_config
                ''',
        }
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(textwrap.dedent(text))
        product = 'the product imports neither lab nor tests'
        infrastructure = ('test infrastructure imports no test module and '
                          'no lab')
        self.assertEqual([
            'nova_gpu_p2p.driver imports lab (%s)' % product,
            'nova_gpu_p2p.driver imports lab.bench (%s)' % product,
            'nova_gpu_p2p.driver imports tests.fixtures.hosts (%s)' % product,
            'lab.bench imports tests.functional.test_clique_scheduling '
            '(a test module)',
            'lab.demo imports tests.functional.test_demo (a test module)',
            'lab.demo imports tests.functional.test_demo.X (a test module)',
            'tests.cloud.scheduling imports lab (%s)' % infrastructure,
            'tests.cloud.scheduling imports lab.demo (%s)' % infrastructure,
            'tests.cloud.scheduling imports '
            'tests.functional.test_guest_config (%s)' % infrastructure,
        ], problems(root))
