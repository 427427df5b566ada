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

"""tools/check_package.py (``tox -e pkg``) fails where an install would.

``tox -e pkg`` itself runs the passing case on the built wheel.
"""

import importlib.util
import io
import os
import sys
import tarfile
import types
from unittest import mock
import zipfile

import fixtures

import tests
from tests.unit import base

SCRIPT = os.path.join(tests.ROOT, 'tools', 'check_package.py')


def load_script() -> types.ModuleType:
    """tools/check_package.py, a script, not a module of the package."""
    spec = importlib.util.spec_from_file_location('check_package', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CheckPackageTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.script = load_script()

    def test_missing_libvirt_python_fails(self):
        with mock.patch.dict(sys.modules, {'libvirt': None}):
            exc = self.assertRaises(self.script.PackageError,
                                    self.script.check_libvirt_python)
        self.assertIn('nova-compute cannot start its libvirt driver here',
                      str(exc))
        self.assertIn("install libvirt-python into Nova's environment "
                      '(python3-libvirt from the distribution, or pip '
                      'install libvirt-python', str(exc))

    def test_libvirt_python_found(self):
        libvirt = types.ModuleType('libvirt')
        libvirt.__file__ = '/venv/site-packages/libvirt.py'
        with mock.patch.dict(sys.modules, {'libvirt': libvirt}):
            self.assertIn('/venv/site-packages/libvirt.py',
                          self.script.check_libvirt_python())

    def test_a_warning_on_stderr_fails_a_quiet_check(self):
        warn = (sys.executable, '-c',
                'import warnings; warnings.warn("ours", UserWarning)')
        self.assertEqual('', self.script._run(*warn))
        exc = self.assertRaises(self.script.PackageError, self.script._run,
                                *warn, quiet=True)
        self.assertIn('printed on stderr', str(exc))
        self.assertIn('UserWarning: ours', str(exc))

    def test_eventlets_deprecation_notice_alone_is_filtered(self):
        importing = ('import warnings; warnings.filterwarnings("ignore", '
                     '%r, Warning); import eventlet; warnings.warn("ours")'
                     % self.script.EVENTLET_DEPRECATED)
        exc = self.assertRaises(self.script.PackageError, self.script._run,
                                sys.executable, '-c', importing, quiet=True)
        self.assertIn('UserWarning: ours', str(exc))
        self.assertNotIn('EventletDeprecationWarning', str(exc))
        # What it filters: eventlet's own warning, printed unfiltered.
        exc = self.assertRaises(self.script.PackageError, self.script._run,
                                sys.executable, '-c', 'import eventlet',
                                quiet=True)
        self.assertIn('EventletDeprecationWarning', str(exc))


class LicenseTest(base.TestCase):
    """Both distributions ship the Apache-2.0 text, in sdist and wheel."""

    def setUp(self):
        super().setUp()
        self.script = load_script()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def archives(self, sdist_names, wheel_names):
        sdist = os.path.join(self.dir, 'd-1.tar.gz')
        with tarfile.open(sdist, 'w:gz') as archive:
            for name in sdist_names:
                info = tarfile.TarInfo(name)
                archive.addfile(info, io.BytesIO(b''))
        wheel = os.path.join(self.dir, 'd-1-py3-none-any.whl')
        with zipfile.ZipFile(wheel, 'w') as archive:
            for name in wheel_names:
                archive.writestr(name, '')
        return sdist, wheel

    def test_shipped(self):
        sdist, wheel = self.archives(
            ['d-1/LICENSE', 'd-1/setup.cfg'],
            ['d/__init__.py', 'd-1.dist-info/licenses/LICENSE'])
        self.assertEqual('d-1.tar.gz and d-1-py3-none-any.whl ship LICENSE',
                         self.script.check_license(sdist, wheel))

    def test_missing_from_either(self):
        sdist, wheel = self.archives(['d-1/setup.cfg', 'd-1/d/LICENSE'],
                                     ['d-1.dist-info/LICENSE'])
        exc = self.assertRaises(self.script.PackageError,
                                self.script.check_license, sdist, wheel)
        self.assertEqual('LICENSE missing from d-1.tar.gz', str(exc))
        sdist, wheel = self.archives(['d-1/LICENSE'], ['d/LICENSE'])
        exc = self.assertRaises(self.script.PackageError,
                                self.script.check_license, sdist, wheel)
        self.assertEqual('LICENSE missing from d-1-py3-none-any.whl',
                         str(exc))

    def test_the_checkout_has_the_apache_text(self):
        for root in (tests.ROOT, os.path.join(tests.ROOT, 'guest-agent')):
            with open(os.path.join(root, 'LICENSE')) as f:
                text = f.read()
            self.assertIn('Apache License\n', text)
            self.assertIn('Version 2.0, January 2004', text)
            self.assertIn('END OF TERMS AND CONDITIONS', text)
