"""nova-gpu-p2p's tests: unit, functional (in-process Nova), e2e (real
libvirt and QEMU) and the fixtures they share."""

import os

# The simulated hosts' PCI ID database (harness.PCI_IDS) for every test.
import harness  # noqa: F401

#: The checkout the tests run from.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
