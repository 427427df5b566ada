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

"""Detecting Nova's move-claim fix, and the check row that reports it."""

import pathlib

from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_gpu_p2p.checks import move_claims
from nova_gpu_p2p.checks import result
from nova_gpu_p2p import nova_fix
from tests.unit import base

SERIES = pathlib.Path(__file__).resolve().parents[2] / 'patches' / 'nova'


class Unfixed:
    def _move_claim(self, context, instance, new_flavor, nodename,
                    migration, allocations, move_type=None,
                    image_meta=None, limits=None):
        pass


class Fixed(Unfixed):
    def _move_claim(self, context, instance, new_flavor, nodename,
                    migration, allocations, move_type=None,
                    image_meta=None, limits=None, pci_requests=None):
        pass

    @staticmethod
    def _get_pci_requests_for_move(instance, new_flavor, pci_requests):
        pass


class HalfFixed(Unfixed):
    """A helper of that name, but the claim does not take the requests."""

    _get_pci_requests_for_move = Fixed._get_pci_requests_for_move


class TestSignature(base.TestCase):

    def test_carried_by(self):
        self.assertTrue(nova_fix.carried_by(Fixed))
        self.assertFalse(nova_fix.carried_by(Unfixed))
        self.assertFalse(nova_fix.carried_by(HalfFixed))
        self.assertFalse(nova_fix.carried_by(None))

    def test_this_nova_matches_the_series_applied_to_it(self):
        """The signature is the one the series gives Nova's code."""
        from nova.compute import resource_tracker
        patched = '_get_pci_requests_for_move' in pathlib.Path(
            resource_tracker.__file__).read_text()
        self.assertEqual(patched, nova_fix.carried())

    def test_series_adds_the_signature(self):
        text = ''.join(path.read_text()
                       for path in sorted(SERIES.glob('*.patch')))
        self.assertIn('+    def _get_pci_requests_for_move(', text)
        self.assertIn('move_type=None, image_meta=None, limits=None, '
                      'pci_requests=None,', text)


class TestCheckRow(base.TestCase):

    def test_fixed(self):
        row = move_claims.check_move_claims(True, True)
        self.assertEqual(result.Code.SUCCESS, row.code)
        self.assertIn('one partition', row.message)

    def test_unfixed(self):
        row = move_claims.check_move_claims(False, False)
        self.assertEqual(result.Code.WARNING, row.code)
        self.assertIn('one clique', row.message)
        self.assertIn('keeps running', row.message)
        self.assertIn('order tags', row.message)
        self.assertIn(result.Doc.NOVA_MOVE_CLAIMS.value, row.fix)


class TestOnItsNode(base.TestCase):
    """The devices an evacuated server's domain gets on an unfixed Nova."""

    def setUp(self):
        super().setUp()
        objects.register_all()

    @staticmethod
    def instance(compute_id, *nodes):
        """As loaded: nothing changed yet."""
        instance = objects.Instance(
            uuid=uuids.instance, compute_id=compute_id,
            pci_devices=objects.PciDeviceList(objects=[
                objects.PciDevice(compute_node_id=node, address='0000:0%d:00.0'
                                  % n) for n, node in enumerate(nodes)]))
        instance.obj_reset_changes(recursive=True)
        return instance

    def test_only_those_on_its_node_in_a_copy(self):
        instance = self.instance(2, 1, 2, 1, 2)
        found = nova_fix.on_its_node(instance)
        self.assertEqual(['0000:01:00.0', '0000:03:00.0'],
                         [d.address for d in found.pci_devices])
        self.assertEqual(uuids.instance, found.uuid)
        # The instance itself is untouched, so nothing of it is saved.
        self.assertEqual(4, len(instance.pci_devices))
        self.assertNotIn('pci_devices', instance.obj_what_changed())

    def test_unchanged_where_nothing_to_drop(self):
        for instance in (self.instance(2, 2, 2), self.instance(2, 1, 1),
                         self.instance(None, 1, 2), self.instance(2),
                         objects.Instance(uuid=uuids.instance)):
            self.assertIs(instance, nova_fix.on_its_node(instance))
