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

"""GPU identity that does not hang on the database's age.

A table of NVIDIA GPUs from V100 to B300, workstation cards, GeForce from
GTX 1080 to RTX 5090, the TITANs, CMP mining cards and mobile GeForce,
each named and unnamed, as a 3D controller and as a display controller;
then the same GPUs against the real ``pci.ids`` of Debian bookworm,
trixie and sid (``tools/fetch-pci-ids.sh`` puts them in
``.tox/pci-ids/<suite>/``; skipped without them unless
``NOVA_GPU_P2P_REQUIRE_TOOLS=1``, as in CI); then whole hosts read from
sysfs on Debian 12's database: an HGX B200 board under Fabric Manager,
an H200 NVL pair, RTX 5090 and TITAN V CEO Edition pairs, and the
operator's vouching.
"""

import dataclasses
import json
import os
import re
import sys

import fixtures
import testtools

from nova_gpu_p2p.checks import consumer_gpus as check
from nova_gpu_p2p.topology import capture
from nova_gpu_p2p.topology import consumer_gpus as cg
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import model
from nova_gpu_p2p.topology import nvml
from nova_gpu_p2p.topology import pci_ids
from nova_gpu_p2p.topology import sysfs
from nova_gpu_p2p import traits
import tests
from tests.fixtures import deadline
from tests.fixtures import fake_fm
from tests.fixtures import hosts
from tests.fixtures import sysfs_builder as b
from tests.unit import base
from tests.unit import test_cli
from tests.unit import test_corpus
from tests.unit import test_fabricmanager_backend as fm_tests
from tests.unit import test_module_ids

REQUIRE_TOOLS = 'NOVA_GPU_P2P_REQUIRE_TOOLS'
#: Where tools/fetch-pci-ids.sh puts each suite's file.
PCI_IDS_DIR = os.path.join(tests.ROOT, '.tox', 'pci-ids')
SUITES = ('bookworm', 'trixie', 'sid')
#: The ``Version:`` of the stable suites' files (packages
#: 0.0~2023.04.11-1 and 0.0~2025.06.09-1); sid's moves on (0.0~2026.10.24-1
#: when this was written).
STABLE_VERSIONS = {'bookworm': '2023.04.10', 'trixie': '2025.06.09'}

P, C, U = cg.Kind.PROFESSIONAL, cg.Kind.CONSUMER, cg.Kind.UNKNOWN
CLASS_3D, CLASS_VGA = b.CLASS_3D, b.CLASS_VGA


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    device: int
    #: Its name in pci.ids 2026.10.24 (sid).
    name: str
    #: Kinds when named as 3D controller, named as display controller,
    #: unnamed as 3D controller, unnamed as display controller.
    expect: str
    #: The class it enumerates as, as sold.
    native: int = CLASS_3D
    subsystem: tuple[int, int] | None = None
    #: A subsystem line's name, where that is what names the card.
    subsystem_name: str | None = None

    @property
    def board(self) -> tuple[int, int]:
        return self.subsystem or (model.NVIDIA_VENDOR_ID, self.device)

    def expected(self, named: bool, class_code: int) -> cg.Kind:
        index = (0 if named else 2) + (0 if class_code == CLASS_3D else 1)
        return {'P': P, 'C': C, 'U': U}[self.expect[index]]


def _dc(label, device, name):
    """Data-center, NVIDIA's board.

    A display controller only in display mode (A40, L40), and then only
    its name vouches for it.
    """
    return Row(label, device, name, 'PPPU')


def _ws(label, device, name, subsystem=None):
    """Workstation: a display controller.

    As a 3D controller (display mode off) the device rule takes it.
    """
    return Row(label, device, name, 'PPPU', CLASS_VGA, subsystem)


def _geforce(label, device, name, subsystem=None):
    """GeForce or TITAN on NVIDIA's own board (Founders Edition).

    Unnamed, as a 3D controller, the device rule would take it; no
    GeForce board enumerates so.
    """
    return Row(label, device, name, 'CCPU', CLASS_VGA, subsystem)


#: Partner boards carry the partner's subsystem vendor (ASUS: 1043).
ASUS, LENOVO = 0x1043, 0x17aa

TABLE = (
    _dc('V100 SXM2', 0x1db1, 'GV100GL [Tesla V100 SXM2 16GB]'),
    _dc('V100 PCIe', 0x1db4, 'GV100GL [Tesla V100 PCIe 16GB]'),
    _dc('A100 SXM4 80GB', 0x20b2, 'GA100 [A100 SXM4 80GB]'),
    _dc('A100 PCIe 80GB', 0x20b5, 'GA100 [A100 PCIe 80GB]'),
    _dc('A30', 0x20b7, 'GA100GL [A30 PCIe]'),
    _dc('A40', 0x2235, 'GA102GL [A40]'),
    _dc('L40', 0x26b5, 'AD102GL [L40]'),
    _dc('L40S', 0x26b9, 'AD102GL [L40S]'),
    _dc('L4', 0x27b8, 'AD104GL [L4]'),
    _dc('H100 SXM5', 0x2330, 'GH100 [H100 SXM5 80GB]'),
    _dc('H100 PCIe', 0x2331, 'GH100 [H100 PCIe]'),
    _dc('H100 NVL', 0x2321, 'GH100 [H100L 94GB]'),
    _dc('H200 SXM', 0x2335, 'GH100 [H200 SXM 141GB]'),
    _dc('H200 NVL', 0x233b, 'GH100 [H200 NVL]'),
    _dc('GH200', 0x2342, 'GH100 [GH200 120GB / 480GB]'),
    _dc('B200', 0x2901, 'GB100 [B200]'),
    _dc('HGX GB200', 0x2941, 'GB100 [HGX GB200]'),
    _dc('B300 SXM6', 0x3182, 'GB110 [B300 SXM6 AC]'),
    _dc('GB300', 0x31c2, 'GB110 [GB300]'),
    _dc('RTX PRO 6000 Blackwell Server', 0x2bb5,
        'GB202GL [RTX PRO 6000 Blackwell Server Edition]'),
    _ws('Quadro GV100', 0x1dba, 'GV100GL [Quadro GV100]',
        (model.NVIDIA_VENDOR_ID, 0x121a)),
    _ws('RTX A6000', 0x2230, 'GA102GL [RTX A6000]'),
    _ws('RTX 6000 Ada', 0x26b1, 'AD102GL [RTX 6000 Ada Generation]'),
    _ws('RTX PRO 6000 Blackwell Workstation', 0x2bb1,
        'GB202GL [RTX PRO 6000 Blackwell Workstation Edition]'),
    _ws('RTX PRO 6000 Blackwell Max-Q', 0x2bb4,
        'GB202GL [RTX PRO 6000 Blackwell Max-Q Workstation Edition]'),
    _geforce('GTX 1080', 0x1b80, 'GP104 [GeForce GTX 1080]'),
    _geforce('GTX 1080 Ti', 0x1b06, 'GP102 [GeForce GTX 1080 Ti]'),
    _geforce('RTX 2080 Ti', 0x1e07, 'TU102 [GeForce RTX 2080 Ti Rev. A]'),
    _geforce('RTX 3090', 0x2204, 'GA102 [GeForce RTX 3090]'),
    _geforce('RTX 4090', 0x2684, 'AD102 [GeForce RTX 4090]'),
    Row('RTX 4090 (ASUS)', 0x2684, 'AD102 [GeForce RTX 4090]', 'CCUU',
        CLASS_VGA, (ASUS, 0x889d)),
    _geforce('RTX 5080', 0x2c02, 'GB203 [GeForce RTX 5080]'),
    _geforce('RTX 5090', 0x2b85, 'GB202 [GeForce RTX 5090]'),
    _geforce('GeForce3', 0x0200, 'NV20 [GeForce3]'),
    _geforce('TITAN X Pascal', 0x1b00, 'GP102 [TITAN X Pascal]'),
    _geforce('TITAN Xp', 0x1b02, 'GP102 [TITAN Xp]'),
    _geforce('TITAN V', 0x1d81, 'GV100 [TITAN V]'),
    _geforce('TITAN RTX', 0x1e02, 'TU102 [TITAN RTX]'),
    _geforce('RTX TITAN Ada', 0x2681, 'AD102 [RTX TITAN Ada]'),
    # Named only on a subsystem line of the Quadro GV100's device ID.
    Row('TITAN V CEO Edition', 0x1dba, 'GV100GL [Quadro GV100]', 'CCPU',
        CLASS_VGA, (model.NVIDIA_VENDOR_ID, 0x12eb), 'TITAN V CEO Edition'),
    # GeForce silicon without display outputs: consumer, named or not.
    Row('CMP 170HX', 0x20c2, 'GA100 [CMP 170HX]', 'CCCC'),
    Row('CMP 100-210', 0x1df4, 'GV100 [CMP 100-210]', 'CCCC'),
    # Behind a laptop's integrated GPU, a 3D controller on its maker's
    # board.
    Row('RTX 3050 Ti Mobile', 0x25a0, 'GA107M [GeForce RTX 3050 Ti Mobile]',
        'CCUU', CLASS_3D, (LENOVO, 0x3a5d)),
    Row('RTX 4090 Laptop', 0x2757,
        'AD103M / GN21-X11 [GeForce RTX 4090 Laptop GPU]', 'CCUU', CLASS_3D,
        (ASUS, 0x1e63)),
)
BY_LABEL = {row.label: row for row in TABLE}

#: The rows each suite's database does not name with a product (Debian
#: 12's names 10de:2321 "GH100" and 10de:2757 "GN21-X11": chips only).
UNNAMED = {
    'bookworm': {
        'L40S', 'H100 NVL', 'H200 SXM', 'H200 NVL', 'GH200', 'B200',
        'HGX GB200', 'B300 SXM6', 'GB300', 'RTX PRO 6000 Blackwell Server',
        'RTX PRO 6000 Blackwell Workstation', 'RTX PRO 6000 Blackwell Max-Q',
        'RTX 5080', 'RTX 5090', 'CMP 100-210', 'RTX 4090 Laptop'},
    'trixie': {'B300 SXM6', 'GB300'},
    'sid': set(),
}


def gpu(device: int, class_code: int = CLASS_3D,
        subsystem: tuple[int, int] | None = None,
        address: str = '0000:03:00.0') -> model.PCIFunction:
    sub = subsystem or (None, None)
    return model.PCIFunction(
        address, model.NVIDIA_VENDOR_ID, device, class_code, None,
        'pci0000:00', subsystem_vendor=sub[0], subsystem_device=sub[1])


def table_db(row: Row) -> pci_ids.Database:
    """A database naming this row's GPU as pci.ids 2026.10.24 does."""
    subsystems = {}
    if row.subsystem_name:
        subsystems[(row.device,) + row.board] = row.subsystem_name
    return pci_ids.Database(path='table', names={row.device: row.name},
                            subsystems=subsystems)


EMPTY = pci_ids.Database(path='empty')


def real_db(test: testtools.TestCase, suite: str) -> pci_ids.Database:
    path = os.path.join(PCI_IDS_DIR, suite, 'pci.ids')
    if not os.path.isfile(path):
        message = ('%s missing: tools/fetch-pci-ids.sh fetches Debian %s\'s '
                   'package pci.ids' % (path, suite))
        if os.environ.get(REQUIRE_TOOLS) == '1':
            test.fail('%s (%s=1)' % (message, REQUIRE_TOOLS))
        test.skipTest(message)
    found = pci_ids.read(path)
    test.assertIsNone(found.error)
    return found


class TestTable(base.TestCase):
    """Each GPU named and unnamed, as a 3D and as a display controller."""

    def test_every_row_every_case(self):
        for row in TABLE:
            for named, database in ((True, table_db(row)), (False, EMPTY)):
                for class_code in (CLASS_3D, CLASS_VGA):
                    found = cg.judge_gpu(
                        gpu(row.device, class_code, row.board), database)
                    self.assertIs(
                        row.expected(named, class_code), found.kind,
                        '%s %s class %06x: %s' % (
                            row.label, 'named' if named else 'unnamed',
                            class_code, found.rule))
                    self.assertTrue(found.rule)
                    self.assertEqual(found.kind is P, found.lift is None)

    def test_the_deciding_rules(self):
        def rule(label, class_code=None, database=None, **kwargs):
            row = BY_LABEL[label]
            return cg.judge_gpu(
                gpu(row.device, class_code or row.native, row.board),
                table_db(row) if database is None else database,
                **kwargs).rule

        self.assertEqual(
            'a 3D controller (class 0x0302, no display) on a board NVIDIA '
            'built (subsystem vendor 10de), as data-center GPUs are',
            rule('B200', database=EMPTY))
        self.assertEqual(
            "the PCI ID database names its subsystem 10de:12eb 'TITAN V "
            "CEO Edition'", rule('TITAN V CEO Edition'))
        self.assertEqual("the PCI ID database names the device 'NV20 "
                         "[GeForce3]'", rule('GeForce3'))
        self.assertEqual('10de:1df4 is a CMP mining card: GeForce silicon '
                         'without display outputs',
                         rule('CMP 100-210', database=EMPTY))
        self.assertEqual(
            'a display controller (class 0x0300) on an NVIDIA board, that '
            'neither NVML nor the PCI ID database names (not listed in '
            'empty)', rule('RTX 5090', database=EMPTY))
        self.assertEqual(
            'a 3D controller (class 0x0302) on a board of subsystem vendor '
            '1043, not NVIDIA, that neither NVML nor the PCI ID database '
            "names (chip names only its chip, 'GN21-X11')",
            rule('RTX 4090 Laptop', database=pci_ids.Database(
                path='chip', names={0x2757: 'GN21-X11'})))
        self.assertEqual("NVML's brand is GeForce RTX",
                         rule('B200', brand='GeForce RTX'))
        self.assertEqual("NVML's brand is NVIDIA RTX",
                         rule('RTX 5090', database=EMPTY, brand='NVIDIA RTX'))

    def test_a_quadro_gv100_without_subsystem_may_be_a_titan(self):
        """Where the backend cannot read subsystems (static)."""
        database = table_db(BY_LABEL['TITAN V CEO Edition'])
        found = cg.judge_gpu(gpu(0x1dba, CLASS_VGA), database)
        self.assertIs(U, found.kind)
        self.assertEqual("10de:1dba is also a consumer card (subsystem "
                         "10de:12eb 'TITAN V CEO Edition'), and this GPU's "
                         "subsystem is unknown", found.rule)
        # Vouching does not open it; its own subsystem or NVML's brand do.
        self.assertIs(U, cg.judge_gpu(
            gpu(0x1dba, CLASS_VGA), database,
            trusted=(cg.parse_model_id('10de:1dba'),)).kind)
        self.assertIs(P, cg.judge_gpu(
            gpu(0x1dba, CLASS_VGA, (model.NVIDIA_VENDOR_ID, 0x121a)),
            database).kind)
        self.assertIs(P, cg.judge_gpu(gpu(0x1dba, CLASS_VGA), database,
                                      brand='Quadro').kind)

    def test_nvml_brand_decides_either_way(self):
        for brand in sorted(cg.CONSUMER_BRANDS):
            self.assertIs(C, cg.judge_gpu(
                gpu(0x2901, CLASS_3D, (0x10de, 0x1999)), EMPTY,
                brand=brand).kind)
        self.assertIs(P, cg.judge_gpu(gpu(0x2bb1, CLASS_VGA), EMPTY,
                                      brand='NVIDIA RTX').kind)
        # A brand never lifts the CMP exception.
        self.assertIs(C, cg.judge_gpu(gpu(0x1df4), EMPTY,
                                      brand='NVIDIA').kind)


class TestTrusted(base.TestCase):
    """The operator's vouching opens one model, never a consumer GPU."""

    def judge(self, entries, *gpus, database=EMPTY):
        topology = model.HostTopology(
            functions={g.address: g for g in gpus})
        return cg.judge(topology, database, allow=False, trusted=tuple(
            cg.parse_model_id(e) for e in entries))

    def test_one_model_only(self):
        pro = gpu(0x2bb1, CLASS_VGA, (0x10de, 0x204b), '0000:03:00.0')
        other = gpu(0x2bb4, CLASS_VGA, (0x10de, 0x204c), '0000:04:00.0')
        kinds = self.judge(['10de:2bb1'], pro, other)
        self.assertEqual(['0000:03:00.0'], kinds.of_kind(P))
        self.assertEqual(['0000:04:00.0'], sorted(kinds.barred))
        self.assertEqual('vouched for by [gpu_p2p] trusted_gpu_models entry '
                         '10de:2bb1', kinds.models['0000:03:00.0'].rule)
        # With a subsystem: that board only.
        self.assertEqual([], self.judge(['10de:2bb1:10de:2000'], pro,
                                        other).of_kind(P))
        self.assertEqual(['0000:03:00.0'], self.judge(
            ['10de:2bb1:10de:204b'], pro, other).of_kind(P))

    def test_never_a_named_geforce_titan_or_cmp(self):
        cases = (('RTX 5090', table_db(BY_LABEL['RTX 5090'])),
                 ('TITAN V CEO Edition',
                  table_db(BY_LABEL['TITAN V CEO Edition'])),
                 ('CMP 100-210', EMPTY))
        for label, database in cases:
            row = BY_LABEL[label]
            kinds = self.judge(['10de:%04x' % row.device],
                               gpu(row.device, row.native, row.board),
                               database=database)
            self.assertEqual(['0000:03:00.0'], kinds.of_kind(C), label)
            self.assertIn('allow_consumer_gpu_cliques', kinds.barred[
                '0000:03:00.0'])


class TestDuplicates(base.TestCase):
    """A database naming one ID twice is refused whole, as by pciutils."""

    def write(self, text: str) -> str:
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'pci.ids')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_each_kind_of_duplicate(self):
        for text, line, what in (
                ('10de  NVIDIA\n\t2684  A\n\t2901  B\n\t2684  C\n', 4,
                 'device 10de:2684'),
                ('10de  NVIDIA\n\t1dba  Q\n\t\t10de 12eb  T\n'
                 '\t\t10de 12eb  Q\n', 4, 'subsystem 10de:12eb of 10de:1dba'),
                ('10de  NVIDIA\n\t2684  A\n10df  Emulex\n10de  NVIDIA\n', 4,
                 'vendor 10de')):
            path = self.write(text)
            found = pci_ids.read(path)
            self.assertEqual(({}, {}), (found.names, found.subsystems))
            self.assertEqual(
                'the PCI ID database %s is refused as pciutils refuses it: '
                'Duplicate entry at line %d (%s named twice)'
                % (path, line, what), found.error)

    def test_comments_and_no_section(self):
        found = pci_ids.read(self.write(
            '#\tVersion: 2099.01.01\n10de  NVIDIA\n# a comment\n'
            '\t2901  GB100 [B200]\n#\t2901  commented out\n'
            '\t\t10de 1999  B200 SXM\n1002  AMD\n\t2901  X\n'))
        self.assertEqual(({0x2901: 'GB100 [B200]'},
                          {(0x2901, 0x10de, 0x1999): 'B200 SXM'},
                          '2099.01.01', None),
                         (found.names, found.subsystems, found.version,
                          found.error))
        found = pci_ids.read(self.write('1002  AMD\n\t2684  X\n'))
        self.assertEqual(({}, None), (found.names, found.error))

    def test_the_same_id_under_two_devices_is_no_duplicate(self):
        found = pci_ids.read(self.write(
            '10de  NVIDIA\n\t1dba  Q\n\t\t10de 12eb  T\n\t1db1  V\n'
            '\t\t10de 12eb  W\n1002  AMD\n\t2684  X\n'))
        self.assertIsNone(found.error)
        self.assertEqual({0x1dba: 'Q', 0x1db1: 'V'}, found.names)

    def test_refused_database_the_device_still_decides(self):
        """Fail closed on names, not on the device: B200 keeps P2P."""
        path = self.write(open(tests.PCI_IDS).read()
                          + '10de  NVIDIA Corporation\n')
        database = pci_ids.read(path)
        self.assertIn('Duplicate entry', database.error)
        topology = model.HostTopology(functions={
            g.address: g for g in (
                gpu(0x2901, CLASS_3D, (0x10de, 0x1999), '0000:03:00.0'),
                gpu(0x2684, CLASS_VGA, (0x10de, 0x167c), '0000:04:00.0'))})
        kinds = cg.judge(topology, database, allow=False)
        self.assertEqual(['0000:03:00.0'], kinds.of_kind(P))
        self.assertEqual(['0000:04:00.0'], kinds.of_kind(U))
        [row] = check.check_consumer_gpus(kinds)
        self.assertIn('refused as pciutils refuses it: Duplicate entry at '
                      'line', row.message)


class TestParsedAsPciutils(base.TestCase):
    """Issue 42 item 6: pci.ids line by line, as pciutils 3.9 reads it."""

    write = TestDuplicates.write

    def test_an_indented_comment_hides_no_subsystem(self):
        """pciutils skips it: the TITAN V CEO Edition stays a consumer."""
        for comment in ('  # spaces first\n', '\t\t# tabs first\n',
                        ' \t\n', '\n'):
            path = self.write(
                '10de  NVIDIA Corporation\n\t1dba  GV100GL [Quadro GV100]\n'
                + comment + '\t\t10de 12eb  TITAN V CEO Edition\n'
                '\t2684  AD102 [GeForce RTX 4090]\n')
            database = pci_ids.read(path)
            self.assertIsNone(database.error)
            self.assertEqual('TITAN V CEO Edition', database.subsystems[
                (0x1dba, 0x10de, 0x12eb)], repr(comment))
            self.assertIn(0x2684, database.names)
            found = cg.judge_gpu(gpu(0x1dba, CLASS_VGA, (0x10de, 0x12eb)),
                                 database)
            self.assertIs(C, found.kind, repr(comment))

    def test_a_blank_line_hides_no_duplicate(self):
        """pciutils refuses the file: both RTX 4090 names are doubtful."""
        path = self.write('10de  NVIDIA\n\t2684  AD102 [GeForce RTX 4090]\n'
                          '    \n\t2684  AD102 [RTX 4090 Pro]\n')
        self.assertEqual(
            'the PCI ID database %s is refused as pciutils refuses it: '
            'Duplicate entry at line 4 (device 10de:2684 named twice)'
            % path, pci_ids.read(path).error)

    def test_what_pciutils_refuses_anywhere_refuses_the_file(self):
        for text, why in (
                ('10de  NVIDIA\n\t2684  A\n\t2684' + ' ' * 200000 + '\n',
                 'Line too long at line 3'),
                ('10de  NVIDIA\n\t2684  A' + ' ' * 200000 + 'B\n',
                 'Line too long at line 2'),
                ('10de  NVIDIA\n\t2684  A\n\t\t\t1 2 3\n',
                 'Parse error at line 3'),
                ('10de  NVIDIA\n\t2684\n', 'Parse error at line 2'),
                ('1002  AMD\n\t687f  Vega\n\t687f  Vega 10\n'
                 '10de  NVIDIA\n\t2684  A\n', 'Duplicate entry at line 3 '
                 '(device 1002:687f named twice)'),
                ('C 03  Display\n\t00  VGA\n\t00  VGA again\n',
                 'Duplicate entry at line 3 (subclass 0300 named twice)'),
                ('S 1234\n', 'Vendor does not exist at line 1'),
                ('10de  NVIDIA\n\t2684  A\0B\n\t2685  C\n',
                 'Line too long at line 2')):
            path = self.write(text)
            database = deadline.run_briefly(pci_ids.read, path)
            self.assertEqual(
                'the PCI ID database %s is refused as pciutils refuses it: '
                '%s' % (path, why), database.error)
            self.assertEqual({}, database.names)

    def test_what_pciutils_accepts(self):
        database = pci_ids.read(self.write(
            '10de  NVIDIA\r\n\t2684  AD102 [GeForce RTX 4090] \r\n'
            'X  an unknown block\n\t2684  skipped\n'
            '10DE  \t NVIDIA again?\n'))
        self.assertEqual('Duplicate entry at line 5 (vendor 10de named '
                         'twice)', database.error.split(': ', 1)[1])
        database = pci_ids.read(self.write(
            '10de  NVIDIA\r\n\t2684  AD102 [GeForce RTX 4090]  \r\n'
            'X  an unknown block\n\t2684  skipped\n'))
        self.assertEqual({0x2684: 'AD102 [GeForce RTX 4090] '},
                         database.names)


class TestDebianDatabases(base.TestCase):
    """The real pci.ids of Debian bookworm, trixie and sid."""

    def test_versions(self):
        for suite, version in STABLE_VERSIONS.items():
            self.assertEqual(version, real_db(self, suite).version, suite)
        sid = real_db(self, 'sid').version
        self.assertGreater(sid, STABLE_VERSIONS['trixie'])

    def test_which_gpus_each_names(self):
        for suite in SUITES:
            database = real_db(self, suite)
            unnamed = {row.label for row in TABLE
                       if not re.search(r'\[.*\]',
                                        database.names.get(row.device, ''))}
            if suite == 'sid':
                # sid moves on: at least what trixie names.
                self.assertLessEqual(unnamed, UNNAMED['trixie'], suite)
            else:
                self.assertEqual(UNNAMED[suite], unnamed, suite)
            # Named only as a subsystem, in all three.
            self.assertEqual('TITAN V CEO Edition', database.subsystems[
                (0x1dba, 0x10de, 0x12eb)])

    def test_a_duplicate_in_a_real_file_names_its_line(self):
        database = real_db(self, 'bookworm')
        with open(database.path, encoding='utf-8', errors='replace') as f:
            lines = f.read().splitlines(True)
        at = lines.index('\t2330  GH100[H100 SXM5 80GB]\n')
        lines.insert(at + 1, '\t2330  GH100 [H100 SXM5 80GB]\n')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'pci.ids')
        with open(path, 'w', encoding='utf-8') as f:
            f.writelines(lines)
        self.assertEqual(
            'the PCI ID database %s is refused as pciutils refuses it: '
            'Duplicate entry at line %d (device 10de:2330 named twice)'
            % (path, at + 2), pci_ids.read(path).error)

    def test_the_table_on_each_database(self):
        for suite in SUITES:
            database = real_db(self, suite)
            for row in TABLE:
                named = row.label not in UNNAMED[suite]
                found = cg.judge_gpu(gpu(row.device, row.native, row.board),
                                     database)
                self.assertIs(row.expected(named, row.native), found.kind,
                              '%s on %s: %s' % (row.label, suite, found.rule))

    def test_every_named_geforce_and_titan_stays_barred(self):
        """On either class and any board, GeForce3-era cards included."""
        for suite in SUITES:
            database = real_db(self, suite)
            consumer = sorted(device for device, name in
                              database.names.items()
                              if cg.consumer_name(name))
            self.assertGreater(len(consumer), 500, suite)
            early = [d for d in consumer
                     if re.search(r'GeForce\d', database.names[d])]
            self.assertGreaterEqual(len(early), 37, suite)
            for device in consumer:
                for class_code in (CLASS_3D, CLASS_VGA):
                    for board in ((0x10de, device), (ASUS, 0x1000)):
                        self.assertIs(C, cg.judge_gpu(
                            gpu(device, class_code, board), database).kind,
                            '%s %04x' % (suite, device))

    def test_data_center_boards_are_nvidia_built_mobile_ones_are_not(self):
        """The evidence for the device rule, in the newest database."""
        database = real_db(self, 'sid')
        data_center = re.compile(r'\[(Tesla|A100|A30|A40|A16|A10|A2|L40|L4|'
                                 r'H100|H200|GH200|B200|B300|GB200)\b')
        # Mobile chips end in M: GA107M, AD103M.
        mobile = re.compile(r'mobile|max-q|laptop|\dM\b', re.IGNORECASE)
        vendors = {'data-center': set(), 'mobile GeForce': []}
        for (device, vendor, _), _name in database.subsystems.items():
            name = database.names[device]
            if data_center.search(name):
                vendors['data-center'].add(vendor)
            elif cg.consumer_name(name) and mobile.search(name):
                vendors['mobile GeForce'].append(vendor)
        self.assertEqual({0x10de}, vendors['data-center'])
        nvidia_built = vendors['mobile GeForce'].count(0x10de)
        self.assertLess(nvidia_built, 5)
        self.assertGreater(len(vendors['mobile GeForce']), 400)


def _pair(card: b.Endpoint, other: b.Endpoint | None = None) -> b.Host:
    """Two cards behind one switch, two others behind another."""
    switches = [b.switch(card, card)]
    if other is not None:
        switches.append(b.switch(other, other))
    return b.Host(b.numa_nodes('0-15'), (
        b.root_complex(0x00, 0, *switches),))


def debian_12_databases(test: testtools.TestCase) -> list[str]:
    """Debian 12's pci.ids: the fixture's lines, the real file if fetched.

    In CI it always is.
    """
    found = [tests.PCI_IDS]
    path = os.path.join(PCI_IDS_DIR, 'bookworm', 'pci.ids')
    if os.path.isfile(path) or os.environ.get(REQUIRE_TOOLS) == '1':
        found.append(real_db(test, 'bookworm').path)
    return found


class DebianTwelveHosts(base.TestCase):
    """Whole hosts read from sysfs, named from Debian 12's database."""

    def databases(self) -> list[str]:
        return debian_12_databases(self)

    def tree(self, host: b.Host) -> str:
        return self.useFixture(b.SysfsTree(host)).root

    def report(self, root: str, pci_ids_file: str, *options: str) -> dict:
        conf = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(conf, 'w') as f:
            f.write('[gpu_p2p]\nsysfs_root = %s\npci_ids_file = %s\n%s'
                    % (root, pci_ids_file, ''.join(
                        '%s\n' % o for o in options)))
        rc, out, err = test_cli.run('topology', '--json', '--config-file',
                                    conf)
        self.assertEqual((0, ''), (rc, err))
        return json.loads(out)

    def setUp(self):
        super().setUp()
        self.useFixture(test_cli.NoHostConfig())

    def test_h200_nvl_pair_keeps_its_clique(self):
        root = self.tree(_pair(b.nvidia_gpu('H200NVL')))
        for database in self.databases():
            report = self.report(root, database)
            self.assertEqual(
                [(0, 'professional')] * 2,
                [(g['clique'], g['kind']) for g in report['gpus']], database)
            self.assertIn('on a board NVIDIA built',
                          report['gpus'][0]['identity_rule'])
            self.assertEqual('10de:233b', report['gpus'][0]['subsystem'])
            self.assertIn('CUSTOM_GPU_P2P_CLIQUE_2', report['traits'])

    def test_consumer_pairs_stay_barred(self):
        for card, rule in (
                ('RTX5090', 'a display controller (class 0x0300) on an '
                            'NVIDIA board'),
                ('TITANV-CEO', "its subsystem 10de:12eb 'TITAN V CEO "
                               "Edition'")):
            root = self.tree(_pair(b.nvidia_gpu(card)))
            for database in self.databases():
                report = self.report(root, database)
                self.assertEqual([None, None],
                                 [g['clique'] for g in report['gpus']])
                self.assertIn(rule, report['gpus'][0]['identity_rule'])
                self.assertEqual([], [t for t in report['traits']
                                      if t.startswith('CUSTOM_GPU_P2P')])
                rc, out, _ = test_cli.run(
                    'topology', '--sysfs-root', root)
                self.assertIn('GPU0 0000:03:00.0: %s GPU: '
                              % report['gpus'][0]['kind'], out)

    def test_vouching_opens_one_model_only(self):
        root = self.tree(_pair(b.nvidia_gpu('RTXPRO6000'),
                               b.nvidia_gpu('RTX5090')))
        for database in self.databases():
            before = self.report(root, database)
            self.assertEqual([None] * 4,
                             [g['clique'] for g in before['gpus']])
            self.assertIn('add 10de:2bb1 (or 10de:2bb1:10de:2bb1 for this '
                          'board only) to [gpu_p2p] trusted_gpu_models',
                          before['gpus'][0]['no_clique'])
            after = self.report(root, database,
                                'trusted_gpu_models = 10de:2bb1')
            self.assertEqual([0, 0, None, None],
                             [g['clique'] for g in after['gpus']])
            self.assertEqual('vouched for by [gpu_p2p] trusted_gpu_models '
                             'entry 10de:2bb1',
                             after['gpus'][0]['identity_rule'])

    def test_a_bad_entry_is_one_line(self):
        conf = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(conf, 'w') as f:
            f.write('[gpu_p2p]\ntrusted_gpu_models = 10de:2bb1,geforce\n')
        rc, out, err = test_cli.run('topology', '--config-file', conf)
        self.assertEqual((2, ''), (rc, out))
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn("'geforce' is not vendor:device or "
                      "vendor:device:subvendor:subdevice", err)


class B200BoardUnderFabricManager(fm_tests.BackendTestCase):
    """An HGX B200 board: cliques and partition tags by default.

    On the database Debian 12 ships, which does not name 10de:2901.
    """

    def test_cliques_traits_and_partition_tags(self):
        root = self.useFixture(b.SysfsTree(hosts.HGX_B200)).root
        fm = fake_fm.FakeFM(self.tmp, 'b200')
        for database in debian_12_databases(self):
            self.assertNotIn(0x2901, pci_ids.read(database).names)
            conf = self.conf(fm, sysfs_root=root, pci_ids_file=database,
                             topology_backend='fabricmanager',
                             p2p_level='NV')
            found = discovery.discover(conf)
            self.assertIsNone(found.error)
            self.assertEqual({}, found.kinds.barred)
            self.assertEqual({0}, set(found.cliques.ids.values()))
            self.assertEqual(8, len(found.cliques.ids))
            self.assertIn('CUSTOM_GPU_P2P_CLIQUE_8', traits.p2p_traits(
                found.topology, found.cliques))
            path = os.path.join(self.tmp, 'nova.conf')
            with open(path, 'w') as f:
                f.write('[gpu_p2p]\n' + ''.join(
                    '%s = %s\n' % (key, conf.gpu_p2p[key]) for key in (
                        'sysfs_root', 'pci_ids_file', 'topology_backend',
                        'p2p_level', 'fabric_manager_address',
                        'fabric_manager_library', 'module_id_file')))
            rc, out, err = test_cli.run('topology', '--device-spec',
                                        '--config-file', path)
            self.assertEqual(0, rc, err)
            entries = [json.loads(line.split(' = ', 1)[1])
                       for line in out.splitlines()]
            self.assertEqual({'0'}, {e['gpu_p2p_clique'] for e in entries})
            self.assertEqual(
                {1: '1:8,2:4,4:2', 2: '1:8,2:4,4:2', 3: '1:8,2:4,5:2',
                 4: '1:8,2:4,5:2', 5: '1:8,3:4,6:2', 6: '1:8,3:4,6:2',
                 7: '1:8,3:4,7:2', 8: '1:8,3:4,7:2'},
                test_cli.partitions_by_module(entries))

    def test_nvml_brand_on_the_board(self):
        """GPUs left on the nvidia driver: NVML's brand decides them."""
        root = self.useFixture(b.SysfsTree(hosts.HGX_B200)).root
        gpus = fm_tests.GPUS
        self.nvml(BrandedNvml({gpus[0]: 5, **{a: 2 for a in gpus[1:]}}))
        found = discovery.discover(self.conf(
            fake_fm.FakeFM(self.tmp, 'b200'), sysfs_root=root,
            topology_backend='fabricmanager', p2p_level='NV'))
        self.assertEqual([gpus[0]], sorted(found.kinds.barred))
        self.assertEqual("NVML's brand is GeForce",
                         found.kinds.models[gpus[0]].rule)
        self.assertEqual({0}, {found.cliques.ids[a] for a in gpus[1:]})


class BrandedNvml(test_module_ids.FakeNvml):
    """The fakes of pynvml, with brands.

    ``brands`` maps each GPU NVML sees to a brand number, or to None for
    a query that fails.
    """

    NVML_BRAND_TESLA = 2
    NVML_BRAND_GEFORCE = 5
    NVML_BRAND_GEFORCE_RTX = 15

    def __init__(self, brands: dict[str, int | None], branding: bool = True):
        super().__init__({address: module for module, address in
                          fm_tests.MODULES.items()
                          if address in brands})
        self.brand_of = brands
        if branding:
            # Absent from bindings older than the call.
            self.nvmlDeviceGetBrand = self._brand

    def _brand(self, handle):
        if self.brand_of[handle] is None:
            raise self.NVMLError('Not Supported')
        return self.brand_of[handle]


class TestNvmlBrands(base.TestCase):

    def test_brands_by_address(self):
        gpus = fm_tests.GPUS
        fake = BrandedNvml({gpus[0]: 15, gpus[1]: 2, gpus[2]: None,
                            gpus[3]: 99, gpus[4]: 5})
        self.assertEqual({gpus[0]: 'GeForce RTX', gpus[1]: 'Tesla',
                          gpus[3]: 'NVML brand 99'},
                         nvml.brands(fake, set(gpus[:4])))
        self.assertEqual({}, nvml.brands(
            BrandedNvml(fake.brand_of, branding=False), set(gpus)))

    def test_the_backends_read_them(self):
        """nvml in its session, fabricmanager in one of its own."""
        gpus = fm_tests.GPUS
        fake = BrandedNvml({gpus[0]: 5, **{a: 2 for a in gpus[1:]}})
        self.useFixture(fixtures.MockPatchObject(sys, 'modules', dict(
            sys.modules, pynvml=fake)))
        conf = test_corpus.make_conf(
            sysfs_root=test_corpus.tree('hgx-8gpu-nvswitch-2numa'))
        found = discovery.evaluate(nvml.NvmlBackend(
            conf, read_config=sysfs.read_config_direct).discover(), conf)
        self.assertEqual('GeForce', found.topology.gpu_brands[gpus[0]])
        self.assertEqual([gpus[0]], sorted(found.kinds.barred))
        self.assertEqual("NVML's brand is Tesla",
                         found.kinds.models[gpus[1]].rule)
        self.assertEqual({'GeForce': 1, 'Tesla': 7}, {
            brand: list(nvml.read_brands(found.topology).values()).count(
                brand) for brand in ('GeForce', 'Tesla')})

    def test_an_unknown_brand_fails_closed_from_either_source(self):
        """Issue 42 item 7: one rule for captures and the live backend.

        Unnamed RTX 5090s (display class, a partner's board): a capture's
        ``geforce`` or ``""``, or a brand number NVML's table lacks, gives
        no clique; an operator's vouching still can.
        """
        topology = test_corpus.discover('hgx-8gpu-nvswitch-2numa')
        gpus = [g.address for g in topology.gpus()]
        rtx_5090 = {a: dataclasses.replace(
            topology.functions[a], device=0x2b85, class_code=CLASS_VGA,
            subsystem_vendor=0x1043, subsystem_device=0x89ec) for a in gpus}
        live = nvml.brands(BrandedNvml({gpus[0]: 42}), set(gpus))
        for brand in ('geforce', '', 'GEFORCE', live[gpus[0]]):
            branded = dataclasses.replace(
                topology, functions={**topology.functions, **rtx_5090},
                gpu_brands={a: brand for a in gpus})
            loaded = capture.from_dict(json.loads(json.dumps(
                capture.to_dict(branded))))
            kinds = cg.judge(loaded, EMPTY, allow=False)
            self.assertEqual(sorted(gpus), sorted(kinds.barred), brand)
            self.assertEqual(
                "NVML's brand %r is none this version knows (fail closed)"
                % brand, kinds.models[gpus[0]].rule)
            vouched = cg.judge(loaded, EMPTY, allow=False, trusted=(
                cg.parse_model_id('10de:2b85'),))
            self.assertEqual({}, vouched.barred)

    def test_brand_bars_and_is_kept_in_captures(self):
        topology = test_corpus.discover('hgx-8gpu-nvswitch-2numa')
        first = topology.gpus()[0].address
        branded = dataclasses.replace(topology,
                                      gpu_brands={first: 'GeForce'})
        kinds = cg.judge(branded, pci_ids.read(tests.PCI_IDS), allow=False)
        self.assertEqual([first], sorted(kinds.barred))
        self.assertEqual("NVML's brand is GeForce", kinds.models[first].rule)
        again = capture.from_dict(json.loads(json.dumps(
            capture.to_dict(branded))))
        self.assertEqual(branded, again)
        self.assertEqual((0x10de, 0x2330), (
            again.functions[first].subsystem_vendor,
            again.functions[first].subsystem_device))
