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
import os
import sys
import types
from unittest import mock

import testtools

import tests

SCRIPT = os.path.join(tests.ROOT, 'tools', 'check_package.py')


def load_script() -> types.ModuleType:
    """tools/check_package.py, a script, not a module of the package."""
    spec = importlib.util.spec_from_file_location('check_package', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CheckPackageTest(testtools.TestCase):

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
