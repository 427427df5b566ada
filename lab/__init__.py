"""The benchmark, the demo, the simulations and the baselines.

``bench.py`` (``tox -e bench``) and ``demo.py`` (``tox -e demo``) are the
scripts; the other modules are the in-process clouds they boot servers
on, the scheduling and placement simulations, the judges of decision
quality and NCCL's path rules, and the two published workarounds the
benchmark compares with (``baselines/``). Never shipped: ``nova_gpu_p2p``
never imports this package. It runs on the tests' infrastructure
(``tests/fixtures``, ``tests/cloud``), never on a test module, so the
tests may import it and nothing goes round in a circle.
"""

# The simulated hosts' PCI ID database (tests.PCI_IDS) for every run.
import tests  # noqa: F401
