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

"""The start-up check fails loudly for each Nova detail taken away.

One test per detail listed in :mod:`nova_gpu_p2p.nova_signatures`, generated
from its tables: each patches the detail away in the installed Nova and
expects :class:`~nova_gpu_p2p.exception.IncompatibleNova` naming it.
"""

from unittest import mock

import fixtures
from nova.compute import pci_placement_translator
from nova.compute import provider_tree
from nova import objects
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg

from nova_gpu_p2p.compute import driver
from nova_gpu_p2p import exception
from nova_gpu_p2p.guest import libvirt_config
from nova_gpu_p2p import nova_signatures
from tests.unit import base

PREFIX = 'nova-gpu-p2p does not support this Nova release: '


class TestNovaHooks(base.TestCase):

    def setUp(self):
        super().setUp()
        # Fields are cached per class: a patched __init__ must be seen.
        libvirt_config.nova_fields.cache_clear()
        self.addCleanup(libvirt_config.nova_fields.cache_clear)

    def refused(self, *needles: str) -> str:
        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_signatures.check)
        message = str(exc)
        self.assertTrue(message.startswith(PREFIX), message)
        for needle in needles:
            self.assertIn(needle, message)
        return message

    def test_installed_nova_accepted(self):
        nova_signatures.check()
        nova_signatures.check(libvirt_driver.LibvirtDriver)
        nova_signatures.check(driver.GPUP2PLibvirtDriver)

    def test_every_problem_named_at_once(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.host.Host.get_capabilities',
            fixtures.MonkeyPatch.delete))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.config.LibvirtConfigGuestFeatureKvmHidden',
            fixtures.MonkeyPatch.delete))
        message = self.refused()
        self.assertEqual(
            PREFIX + 'nova.virt.libvirt.host.Host.get_capabilities is '
            'missing; LibvirtConfigGuestFeatureKvmHidden is missing. Install '
            'a nova-gpu-p2p release made for it.', message)

    def test_changed_signature(self):
        def exists(self, version=None):
            pass

        self.useFixture(fixtures.MockPatchObject(
            provider_tree.ProviderTree, 'exists', exists))
        self.refused('nova.compute.provider_tree.ProviderTree.exists takes '
                     '(version), expected (name_or_uuid)')

    def _patch_init_without(self, nova_class: type, field: str) -> None:
        original = nova_class.__init__

        def init(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            if type(obj) is nova_class:
                delattr(obj, field)

        self.useFixture(fixtures.MockPatchObject(nova_class, '__init__', init))

    def test_nova_writes_an_alias(self):
        original = vconfig.LibvirtConfigGuestHostdevPCI.format_dom

        def format_dom(obj):
            dom = original(obj)
            if obj.alias is not None:
                dom.append(obj._new_node('alias', name=obj.alias))
            return dom

        self.useFixture(fixtures.MockPatchObject(
            vconfig.LibvirtConfigGuestHostdevPCI, 'format_dom', format_dom))
        self.refused('LibvirtConfigGuestHostdevPCI writes <alias> itself, '
                     'which nova-gpu-p2p adds')

    def test_nova_writes_interface_address(self):
        original = vconfig.LibvirtConfigGuestInterface.format_dom

        def format_dom(obj):
            dom = original(obj)
            if obj.device_addr is not None:
                dom.append(obj.device_addr.format_dom())
            return dom

        self.useFixture(fixtures.MockPatchObject(
            vconfig.LibvirtConfigGuestInterface, 'format_dom', format_dom))
        self.refused('LibvirtConfigGuestInterface writes <address> itself')

    def test_nova_writes_numa_distances(self):
        original = vconfig.LibvirtConfigGuestCPUNUMACell.format_dom

        def format_dom(obj):
            dom = original(obj)
            dom.append(obj._new_node('distances'))
            return dom

        self.useFixture(fixtures.MockPatchObject(
            vconfig.LibvirtConfigGuestCPUNUMACell, 'format_dom', format_dom))
        self.refused('LibvirtConfigGuestCPUNUMACell writes <distances>')

    def test_provider_naming_changed(self):
        def lower_case(self, addr):
            return '%s_%s' % (self.root_rp_name, addr)

        self.useFixture(fixtures.MockPatchObject(
            pci_placement_translator.PlacementView,
            '_get_rp_name_for_address', lower_case))
        self.refused('Nova names a PCI device provider node_0000:af:00.0, '
                     'not node_0000:AF:00.0')


def _add(name: str, test) -> None:
    test.__name__ = name
    setattr(TestNovaHooks, name, test)


def _slug(text: str) -> str:
    return ''.join(c if c.isalnum() else '_' for c in text).lower()


def _callable_test(path: str):
    dotted = path.replace(':', '.')

    def test(self):
        self.useFixture(fixtures.MonkeyPatch(dotted,
                                             fixtures.MonkeyPatch.delete))
        # Missing, or a base class's with other parameters showing.
        self.refused(dotted)
    return test


def _hook_test(name: str, expected: tuple[str, ...]):
    def test(self):
        changed = type('Changed', (libvirt_driver.LibvirtDriver,),
                       {name: lambda self, other: None})
        exc = self.assertRaises(exception.IncompatibleNova,
                                nova_signatures.check, changed)
        self.assertIn('Changed.%s takes (other), expected (%s)'
                      % (name, ', '.join(expected)), str(exc))
    return test


def _field_test(class_name: str, field: str):
    def test(self):
        self._patch_init_without(getattr(vconfig, class_name), field)
        self.refused('%s has no %s' % (class_name, field))
    return test


def _class_test(class_name: str):
    def test(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.config.' + class_name,
            fixtures.MonkeyPatch.delete))
        self.refused('%s is missing' % class_name)
    return test


def _object_field_test(object_name: str, field: str):
    def test(self):
        objects.register_all()
        fields = getattr(objects, object_name).fields
        self.useFixture(fixtures.MockPatchObject(
            getattr(objects, object_name), 'fields',
            {k: v for k, v in fields.items() if k != field}))
        self.refused('objects.%s has no %s' % (object_name, field))
    return test


def _option_test(group: str, name: str):
    def test(self):
        conf = cfg.ConfigOpts()
        for other_group, other in nova_signatures.OPTIONS:
            if (other_group, other) != (group, name):
                conf.register_opt(cfg.StrOpt(other),
                                  group=None if other_group == 'DEFAULT'
                                  else other_group)
        with mock.patch('nova.conf.CONF', conf):
            self.refused('nova.conf has no [%s] %s' % (group, name))
    return test


for _hook, _expected in nova_signatures.HOOKS.items():
    _add('test_changed_hook_' + _slug(_hook), _hook_test(_hook, _expected))
for _path in nova_signatures.CALLABLES:
    _add('test_missing_' + _slug(_path), _callable_test(_path))
for _class_name, _fields in nova_signatures.CONFIG_FIELDS.items():
    _add('test_missing_' + _slug(_class_name), _class_test(_class_name))
    for _field in _fields:
        _add('test_missing_%s_%s' % (_slug(_class_name), _field),
             _field_test(_class_name, _field))
for _object_name, _fields in nova_signatures.OBJECT_FIELDS.items():
    for _field in _fields:
        _add('test_missing_object_%s_%s' % (_slug(_object_name), _field),
             _object_field_test(_object_name, _field))
for _group, _name in nova_signatures.OPTIONS:
    _add('test_missing_option_%s_%s' % (_group.lower(), _name),
         _option_test(_group, _name))
