"""In-process clouds and simulations shared by the tests, the benchmark
and the demo (``tools/``); never shipped, and never imported by
``nova_gpu_p2p``."""

import os

#: The checkout the harness runs from (worker processes put it on their
#: path).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
