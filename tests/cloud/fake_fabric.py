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

"""The HGX host's Fabric Manager in an in-process cloud (demo and bench).

A stand-in Fabric Manager of the cloud's own (:mod:`tests.fixtures.fake_fm`,
an H100 board), the ``[gpu_p2p]`` options that point the driver at it,
the module IDs NVML reports for the corpus' HGX host, and a record of
where each domain start falls in Fabric Manager's call log.
"""

import os

import fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
import testtools

from nova_gpu_p2p.compute import driver
from nova_gpu_p2p.fabric import nvfm
from tests.fixtures import fake_fm
from tests.fixtures import hosts

#: GPU address -> its HGX module ID, as NVML reports it: not PCI order.
MODULE_IDS = {address: module
              for module, address in hosts.HGX_MODULES.items()}
#: The stand-in Fabric Manager's board.
BOARD = 'h100'


def fabric_manager(case: testtools.TestCase,
                   board: str = BOARD) -> fake_fm.FakeFM:
    """A stand-in Fabric Manager for the case's HGX host, configured.

    Its state (and the log of its calls) and the module ID file live in a
    directory of the case's own, so each cloud has a Fabric Manager of
    its own. ``case`` is a Nova test case (``flags``); ``board`` one of
    :data:`tests.fixtures.fake_fm.BOARDS`.
    """
    directory = case.useFixture(fixtures.TempDir()).path
    fm = fake_fm.FakeFM(directory, board)
    case.flags(topology_backend='fabricmanager',
               fabric_manager_address=fm.address,
               fabric_manager_library=fake_fm.library(),
               module_id_file=os.path.join(directory, 'module_ids.json'),
               group='gpu_p2p')
    return fm


def record_starts(case: testtools.TestCase,
                  fm: fake_fm.FakeFM) -> list[int]:
    """Where each domain start falls in Fabric Manager's call log.

    The returned list gets, as libvirt starts each domain, how many calls
    Fabric Manager had answered by then: what came before was done before
    the guest ran.
    """
    starts: list[int] = []
    original = fakelibvirt.Domain.createWithFlags

    def create(domain, flags):
        starts.append(len(fm.calls()))
        return original(domain, flags)

    case.useFixture(fixtures.MockPatchObject(
        fakelibvirt.Domain, 'createWithFlags', create))
    return starts


def fabric_managers(case: testtools.TestCase,
                    hostnames: list[str]) -> dict[str, fake_fm.FakeFM]:
    """A stand-in Fabric Manager per HGX compute of one in-process cloud.

    Every compute runs in one process and ``[gpu_p2p]
    fabric_manager_address`` is one option: each compute's discovery gets
    its own address through the case's per-host options (start it with
    :func:`compute_options`), and each compute's Fabric Manager sessions
    (activation, release, reconcile; one at a time, under the driver's
    lock) reach the Fabric Manager of the compute that opens them.
    """
    managers = {hostnames[0]: fabric_manager(case)}
    for hostname in hostnames[1:]:
        managers[hostname] = fake_fm.FakeFM(
            case.useFixture(fixtures.TempDir()).path, BOARD)
    session_address: list[str] = []
    original_session = driver.GPUP2PLibvirtDriver._fm_session
    original_from_conf = nvfm.from_conf

    def session(compute_driver, call, *args):
        hostname = compute_driver._host.get_hostname()
        session_address.append(managers[hostname].address)
        try:
            return original_session(compute_driver, call, *args)
        finally:
            session_address.pop()

    def from_conf(conf):
        if not session_address:
            return original_from_conf(conf)
        return nvfm.FabricManager(session_address[-1],
                                  conf.gpu_p2p.fabric_manager_library)

    case.useFixture(fixtures.MockPatchObject(
        driver.GPUP2PLibvirtDriver, '_fm_session', session))
    case.useFixture(fixtures.MockPatchObject(nvfm, 'from_conf', from_conf))
    return managers


def compute_options(fm: fake_fm.FakeFM) -> dict[str, object]:
    """The ``[gpu_p2p]`` options of one compute's discovery: its own FM."""
    return {'fabric_manager_address': fm.address}
