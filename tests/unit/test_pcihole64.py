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


"""The q35 64-bit hole rule of nova_gpu_p2p.guest.pcihole64.

Addresses are worked out by hand from the module docstring and the fact
measured with QEMU 10.0 (SPEC: a 1 TiB hole with 40 phys-bits ends at
0x1ffffffffff and the guest does not start).
"""

from nova_gpu_p2p.guest import pcihole64
from tests.unit import base

GiB = 1 << 30
TiB = 1 << 40
MiB = 1 << 20


class TestNeeded(base.TestCase):

    def test_no_bars(self):
        self.assertEqual(0, pcihole64.needed(()))

    def test_one_power_of_two(self):
        self.assertEqual(16 * GiB, pcihole64.needed((16 * GiB,)))

    def test_two_make_a_power_of_two(self):
        self.assertEqual(32 * GiB, pcihole64.needed((16 * GiB, 16 * GiB)))

    def test_three_round_up(self):
        self.assertEqual(128 * GiB,
                         pcihole64.needed((32 * GiB, 32 * GiB, 32 * GiB)))

    def test_bar_not_power_of_two_rounded(self):
        self.assertEqual(4 * GiB, pcihole64.needed((3 * GiB,)))

    def test_each_bar_rounded_before_summing(self):
        # 3 GiB -> 4 GiB, + 1 GiB = 5 GiB -> 8 GiB (summing first: 4 GiB).
        self.assertEqual(8 * GiB, pcihole64.needed((3 * GiB, GiB)))

    def test_small_bars(self):
        self.assertEqual(0x4000, pcihole64.needed((0x1000, 0x2000)))

    def test_mixed_sizes(self):
        # 64 GiB + 32 MiB + 16 MiB -> 128 GiB.
        self.assertEqual(128 * GiB, pcihole64.needed(
            (64 * GiB, 32 * MiB, 16 * MiB)))

    def test_exact_power_kept(self):
        self.assertEqual(64 * GiB, pcihole64.needed(
            (32 * GiB, 16 * GiB, 8 * GiB, 8 * GiB)))


class TestHoleEnd(base.TestCase):

    def test_measured_fact_one_tib_small_ram(self):
        # Starts at 4 GiB, aligned up to 1 TiB, ends at 2 TiB.
        end = pcihole64.hole_end(TiB, 1 * GiB)
        self.assertEqual(0x1ffffffffff, end - 1)
        self.assertGreater(end, 1 << 40)
        self.assertEqual(41, pcihole64.min_phys_bits(TiB, 1 * GiB))

    def test_small_hole_small_ram_starts_at_4g(self):
        self.assertEqual(5 * GiB, pcihole64.hole_end(GiB, 2 * GiB))

    def test_just_below_lowmem_threshold(self):
        # 0xafffffff bytes: all RAM below 4 GiB; hole at 4 GiB.
        self.assertEqual(5 * GiB, pcihole64.hole_end(GiB, 0xb0000000 - 1))

    def test_at_lowmem_threshold(self):
        # 2.75 GiB: 2 GiB stay low, 0.75 GiB above 4 GiB -> start at
        # 4.75 GiB, aligned up to 5 GiB, ends at 6 GiB.
        self.assertEqual(6 * GiB, pcihole64.hole_end(GiB, 0xb0000000))

    def test_above_threshold_aligned_start(self):
        # 4 GiB RAM: 2 GiB above 4 GiB -> start 6 GiB; 2 GiB hole
        # aligned: 6 GiB, ends at 8 GiB.
        self.assertEqual(8 * GiB, pcihole64.hole_end(2 * GiB, 4 * GiB))

    def test_large_ram(self):
        # 64 GiB RAM: start 4 + 62 = 66 GiB -> aligned to 128 GiB.
        self.assertEqual(192 * GiB,
                         pcihole64.hole_end(64 * GiB, 64 * GiB))

    def test_non_power_size_aligned_to_next_power(self):
        # 48 GiB aligned to 64 GiB: start 64 GiB, end 112 GiB.
        self.assertEqual(112 * GiB, pcihole64.hole_end(48 * GiB, GiB))

    def test_min_phys_bits(self):
        self.assertEqual(38, pcihole64.min_phys_bits(128 * GiB, 16 * GiB))
        self.assertEqual(40, pcihole64.min_phys_bits(512 * GiB, 16 * GiB))


class TestPlan(base.TestCase):

    def test_auto_no_bars(self):
        hole = pcihole64.plan('auto', (), 16 * GiB, 40)
        self.assertEqual(pcihole64.Hole64(size=None, needed=0), hole)

    def test_auto_below_default_sets_nothing(self):
        hole = pcihole64.plan('auto', (16 * GiB,), 16 * GiB, 40)
        self.assertIsNone(hole.size)
        self.assertEqual(16 * GiB, hole.needed)
        self.assertIsNone(hole.problem)

    def test_auto_at_default_sets_nothing(self):
        hole = pcihole64.plan('auto', (16 * GiB, 16 * GiB), 16 * GiB, 40)
        self.assertIsNone(hole.size)
        self.assertEqual(32 * GiB, hole.needed)

    def test_auto_above_default(self):
        hole = pcihole64.plan('auto', (32 * GiB, 32 * GiB, 32 * GiB),
                              16 * GiB, 40)
        self.assertEqual(128 * GiB, hole.size)
        self.assertEqual(128 * GiB, hole.needed)
        self.assertIsNone(hole.problem)

    def test_auto_just_above_default(self):
        hole = pcihole64.plan('auto', (32 * GiB, 16 * MiB), GiB, 40)
        self.assertEqual(64 * GiB, hole.size)

    def test_fixed_gib(self):
        hole = pcihole64.plan(64, (16 * GiB,), 16 * GiB, 40)
        self.assertEqual(64 * GiB, hole.size)
        self.assertEqual(16 * GiB, hole.needed)
        self.assertIsNone(hole.problem)

    def test_fixed_gib_even_below_default(self):
        hole = pcihole64.plan(8, (), GiB, 40)
        self.assertEqual(8 * GiB, hole.size)
        self.assertEqual(0, hole.needed)

    def test_fixed_gib_as_text(self):
        self.assertEqual(2 * GiB,
                         pcihole64.plan('2', (), GiB, 40).size)

    def test_fixed_too_big_for_bits(self):
        hole = pcihole64.plan(1024, (), GiB, 40)
        self.assertEqual(TiB, hole.size)
        self.assertIsNotNone(hole.problem)
        self.assertIn('hw:maxphysaddr_bits=41', hole.problem)

    def test_off(self):
        hole = pcihole64.plan('off', (512 * GiB, 512 * GiB), GiB, 40)
        self.assertIsNone(hole.size)
        self.assertEqual(TiB, hole.needed)
        self.assertIsNone(hole.problem)

    def test_one_tib_with_40_bits_is_a_problem(self):
        hole = pcihole64.plan('auto', (512 * GiB, 512 * GiB), GiB, 40)
        self.assertEqual(TiB, hole.size)
        self.assertIsNotNone(hole.problem)

    def test_one_tib_with_41_bits_fits_exactly(self):
        hole = pcihole64.plan('auto', (512 * GiB, 512 * GiB), GiB, 41)
        self.assertEqual(TiB, hole.size)
        self.assertIsNone(hole.problem)

    def test_512_gib_with_40_bits_fits_exactly_small_ram(self):
        # Start 4 GiB aligned to 512 GiB, end 1 TiB = 2 ** 40.
        hole = pcihole64.plan('auto', (256 * GiB, 256 * GiB), 16 * GiB, 40)
        self.assertEqual(512 * GiB, hole.size)
        self.assertIsNone(hole.problem)

    def test_ram_pushes_hole_beyond_bits(self):
        # 600 GiB RAM: start 602 GiB -> aligned to 1 TiB, end 1.5 TiB.
        hole = pcihole64.plan('auto', (256 * GiB, 256 * GiB), 600 * GiB,
                              40)
        self.assertIsNotNone(hole.problem)
        self.assertIn('hw:maxphysaddr_bits=41', hole.problem)

    def test_phys_bits_none_skips_check(self):
        hole = pcihole64.plan('auto', (512 * GiB, 512 * GiB), GiB, None)
        self.assertEqual(TiB, hole.size)
        self.assertIsNone(hole.problem)

    def test_problem_names_minimum_bits_and_fix(self):
        hole = pcihole64.plan('auto', (TiB, TiB), GiB, 40)
        # 2 TiB hole: starts at 2 TiB, ends at 4 TiB -> 42 bits.
        self.assertEqual(2 * TiB, hole.size)
        self.assertIn('2048 GiB PCI hole', hole.problem)
        self.assertIn('40 physical address bits', hole.problem)
        self.assertIn('hw:maxphysaddr_mode=emulate', hole.problem)
        self.assertIn('hw:maxphysaddr_bits=42', hole.problem)
        self.assertNotIn('microversion', hole.problem)

    def test_problem_with_more_bits(self):
        # 4 TiB hole: starts at 4 TiB, ends at 8 TiB = 2 ** 43.
        hole = pcihole64.plan('auto', (4 * TiB,), GiB, 42)
        self.assertIn('42 physical address bits', hole.problem)
        self.assertIn('hw:maxphysaddr_bits=43', hole.problem)


class TestOptionConsumers(base.TestCase):
    """Issue 35, item 6: a size QEMU cannot take is refused with the fix."""

    def test_explicit_size_smaller_than_the_bars(self):
        # pcihole64 = 1 with 1 TiB of BARs: a 1 GiB hole, without a word.
        hole = pcihole64.plan(1, (512 * GiB, 512 * GiB), GiB, 48)
        self.assertIsNotNone(hole.problem)
        self.assertIn('pcihole64 = 1 GiB is smaller than the 1024 GiB',
                      hole.problem)
        self.assertIn('pcihole64 = auto', hole.problem)

    def test_never_advises_more_bits_than_qemu_gives(self):
        # The largest size the option takes, above more RAM than it
        # leaves room for, with the host's bits unknown (None: before,
        # the hole went into the XML unchecked) and known: never
        # hw:maxphysaddr_bits=98.
        for bits in (None, 40, pcihole64.MAX_PHYS_BITS):
            hole = pcihole64.plan(2 ** 21, (), 4096 * TiB, bits)
            self.assertIsNotNone(hole.problem, bits)
            self.assertNotIn('hw:maxphysaddr_bits', hole.problem)
            self.assertIn('52 physical address bits', hole.problem)

    def test_largest_option_value_fits_a_small_guest(self):
        hole = pcihole64.plan(2 ** 21, (), GiB, pcihole64.MAX_PHYS_BITS)
        self.assertIsNone(hole.problem)
        self.assertEqual(pcihole64.MAX_PHYS_BITS,
                         pcihole64.min_phys_bits(hole.size, GiB))
