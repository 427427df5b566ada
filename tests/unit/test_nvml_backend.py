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

"""The nvml backend over the HGX corpus host, with a fake pynvml.

No test host has NVIDIA GPUs bound to the NVIDIA driver, so pynvml is
replaced by a fake that answers from a table of links; the PCI tree is the
corpus' real sysfs tree, read by the sysfs backend underneath.
"""

import itertools
import sys
import types
from unittest import mock

from nova_gpu_p2p.topology import host_cliques as cliques
from nova_gpu_p2p.topology import link_class as lc
from nova_gpu_p2p.topology import nvml
from nova_gpu_p2p.topology import sysfs
from tests.fixtures import hosts
from tests.unit import base
from tests.unit import test_corpus

HGX = 'hgx-8gpu-nvswitch-2numa'
GPUS = hosts.EXPECTED[HGX].addresses
GPU0, GPU1, GPU2, GPU3 = GPUS[:4]
#: The host's four NVSwitches, as sysfs shows them.
NVSWITCHES = ('0000:0d:00.0', '0000:0e:00.0', '0000:0f:00.0',
              '0000:10:00.0')
GPU_TYPE = 0
SWITCH_TYPE = 2
NPU_TYPE = 1
#: A link table entry that makes the link's remote query fail.
FAILS = 'fails'


def bus_id(address: str) -> bytes:
    """``0000:8a:00.0`` as NVML spells it: ``00000000:8A:00.0``."""
    return ('0000' + address.upper()).encode('ascii')


class FakeNvml:
    """Just enough of pynvml: handles are GPU addresses.

    ``links`` maps (GPU, link) to (remote address, remote device type),
    to FAILS, or to None for a link that is down; links not in it do not
    exist, and NVML answers that with an error, as the real one does.
    """

    NVML_FEATURE_DISABLED = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_GPU = GPU_TYPE
    NVML_NVLINK_DEVICE_TYPE_SWITCH = SWITCH_TYPE

    class NVMLError(Exception):
        pass

    def __init__(self, gpus=GPUS, links=None, init_error=None,
                 remote_types=True):
        self.gpus = list(gpus)
        self.links = links or {}
        self.init_error = init_error
        self.shutdowns = 0
        if remote_types:
            # Absent from bindings older than the call, as with getattr.
            self.nvmlDeviceGetNvLinkRemoteDeviceType = self._remote_type

    def nvmlInit(self):
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.gpus[index]

    def nvmlDeviceGetPciInfo(self, handle):
        return types.SimpleNamespace(busId=bus_id(handle))

    def _link(self, handle, link):
        if (handle, link) not in self.links:
            raise self.NVMLError('Not Supported')
        return self.links[handle, link]

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if self._link(handle, link) is None:
            return self.NVML_FEATURE_DISABLED
        return self.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        remote = self._link(handle, link)
        if remote == FAILS:
            raise self.NVMLError('Unknown Error')
        # Newer pynvml decodes char arrays to str.
        return types.SimpleNamespace(busId=bus_id(remote[0]).decode())

    def _remote_type(self, handle, link):
        return self._link(handle, link)[1]


def both_ways(*pairs: tuple[str, str, int]) -> dict:
    """Direct GPU links (a, b, link number), as both GPUs report them."""
    links = {}
    for a, b, link in pairs:
        links[a, link] = (b, GPU_TYPE)
        links[b, link] = (a, GPU_TYPE)
    return links


def to_switches(gpus: tuple[str, ...] = GPUS) -> dict:
    """Every GPU linked to every NVSwitch, as on HGX boards."""
    return {(gpu, link): (switch, SWITCH_TYPE)
            for gpu in gpus for link, switch in enumerate(NVSWITCHES)}


def pair(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


class TestNvmlBackend(base.TestCase):

    def discover(self, fake):
        backend = nvml.NvmlBackend(
            test_corpus.make_conf(sysfs_root=test_corpus.tree(HGX)),
            read_config=sysfs.read_config_direct)
        with mock.patch.dict(sys.modules, {'pynvml': fake}):
            return backend.discover()

    def assertNvlinkCliques(self, topology, groups):
        """NV pairs come out NV; the NV level groups exactly them."""
        for a, b in itertools.combinations(GPUS, 2):
            self.assertEqual(
                pair(a, b) in topology.nvlink_pairs,
                lc.effective_class(topology, a, b) is lc.LinkClass.NV,
                '%s-%s' % (a, b))
        result = cliques.assign(topology, lc.LinkClass.NV)
        self.assertEqual(groups, [g for g in result.groups if len(g) > 1])

    def test_direct_links(self):
        fake = FakeNvml(links=both_ways(
            (GPU0, GPU1, 0), (GPU0, GPU1, 1), (GPU2, GPU3, 0))
            | {(GPU2, 1): None})
        topology = self.discover(fake)
        self.assertEqual({pair(GPU0, GPU1), pair(GPU2, GPU3)},
                         topology.nvlink_pairs)
        self.assertEqual((), topology.findings)
        self.assertEqual(1, fake.shutdowns)
        self.assertNvlinkCliques(topology, [(GPU0, GPU1), (GPU2, GPU3)])
        # Pairs without NVLink keep their PCIe class.
        self.assertEqual(lc.LinkClass.PHB,
                         lc.effective_class(topology, GPU0, GPU2))

    def test_nvswitch_joins_all_gpus(self):
        for remote_types in (True, False):
            topology = self.discover(FakeNvml(
                links=to_switches(), remote_types=remote_types))
            self.assertEqual(
                {pair(a, b) for a, b in itertools.combinations(GPUS, 2)},
                topology.nvlink_pairs, remote_types)
            self.assertNvlinkCliques(topology, [GPUS])
            self.assertEqual(
                8, cliques.assign(topology, lc.LinkClass.NV).largest())

    def test_gpu_without_switch_link_stays_out(self):
        topology = self.discover(FakeNvml(links=to_switches(GPUS[1:])))
        self.assertNvlinkCliques(topology, [GPUS[1:]])

    def test_failing_queries_skip_only_their_link(self):
        links = both_ways((GPU0, GPU1, 1))
        # Both ends of each pair's link 0 fail: GPU0-GPU1 has link 1 too.
        for gpu in GPUS[:4]:
            links[gpu, 0] = FAILS
        topology = self.discover(FakeNvml(links=links))
        self.assertEqual({pair(GPU0, GPU1)}, topology.nvlink_pairs)

    def test_failing_remote_type_falls_back_to_sysfs(self):
        fake = FakeNvml(links=to_switches(GPUS[:4])
                        | both_ways((GPUS[4], GPUS[5], 7)))

        def remote_type(handle, link):
            raise fake.NVMLError('Function Not Found')

        fake.nvmlDeviceGetNvLinkRemoteDeviceType = remote_type
        topology = self.discover(fake)
        self.assertNvlinkCliques(topology, [GPUS[:4], GPUS[4:6]])

    def test_links_to_unknown_or_non_gpu_ends_are_dropped(self):
        links = both_ways((GPU0, GPU1, 0))
        # A GPU sysfs does not show, a NIC that NVML calls a GPU, a CPU.
        links[GPU2, 0] = ('0000:3b:00.0', GPU_TYPE)
        links[GPU3, 0] = (hosts.EXPECTED[HGX].nics[0], GPU_TYPE)
        links[GPU3, 1] = ('0000:00:00.0', NPU_TYPE)
        for remote_types in (True, False):
            topology = self.discover(FakeNvml(
                links=links, remote_types=remote_types))
            self.assertEqual({pair(GPU0, GPU1)}, topology.nvlink_pairs,
                             remote_types)

    def test_shutdown_after_an_unexpected_error(self):
        fake = FakeNvml()
        fake.nvmlDeviceGetCount = mock.Mock(side_effect=RuntimeError('x'))
        self.assertRaises(RuntimeError, self.discover, fake)
        self.assertEqual(1, fake.shutdowns)

    def assertSysfsOnly(self, topology, reason):
        self.assertEqual(test_corpus.discover(HGX).functions,
                         topology.functions)
        self.assertEqual(frozenset(), topology.nvlink_pairs)
        [finding] = topology.findings
        self.assertIn(reason, finding)
        self.assertIn('NVLink is not reported', finding)

    def test_init_failure_gives_sysfs_topology_and_a_finding(self):
        fake = FakeNvml(links=to_switches(), init_error='Driver Not Loaded')
        self.assertSysfsOnly(self.discover(fake), 'Driver Not Loaded')
        self.assertEqual(0, fake.shutdowns)

    def test_missing_module_gives_sysfs_topology_and_a_finding(self):
        self.assertSysfsOnly(self.discover(None), 'pynvml')


class TestBusId(base.TestCase):

    def test_nvml_spellings(self):
        for bus in (b'00000000:8A:00.0', '00000000:8a:00.0', '0000:8a:00.0'):
            self.assertEqual('0000:8a:00.0', nvml.bus_id_address(bus))
        self.assertEqual('0001:01:00.0',
                         nvml.bus_id_address('00000001:01:00.0'))
        self.assertRaises(ValueError, nvml.bus_id_address, 'GPU-1234')
