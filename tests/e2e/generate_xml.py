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

"""Write every corpus host x flavor kind's domain XML for the e2e checks.

Usage: ``python -m tests.e2e.generate_xml DIR``

The XML does not depend on the libvirt installed, so ``tox -e e2e``
makes it once and ``tox -e e2e-checks`` checks it against a second
stack. It runs the functional ``test_xml_schema`` (Nova's in-process
cloud with our driver, one test per corpus host) under stestr with
``NOVA_GPU_P2P_XML_DIR=DIR``, which keeps ``DIR/<host>/<kind>.xml`` or
``<kind>.refused.txt``. Where libvirtd is not reachable the checks would
skip anyway, so it says so in one line and writes nothing (unless
``NOVA_GPU_P2P_REQUIRE_TOOLS=1``: then the checks must fail, not skip).
"""

import os
import shutil
import subprocess
import sys

from tests.fixtures import stack

TEST_PATH = './tests/functional'
TEST_FILTER = 'test_xml_schema'


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print('usage: python -m tests.e2e.generate_xml DIR',
              file=sys.stderr)
        return 2
    folder = os.path.abspath(argv[0])
    missing = stack.missing()
    if missing and os.environ.get(stack.REQUIRE_TOOLS) != '1':
        print('generate_xml: not generating, e2e tests will skip: %s'
              % missing)
        return 0
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    env = dict(os.environ, **{stack.XML_DIR: folder})
    result = subprocess.run(
        [sys.executable, '-m', 'stestr', '--test-path=%s' % TEST_PATH,
         'run', TEST_FILTER], env=env, check=False)
    documents = sum(len(files) for _, _, files in os.walk(folder))
    print('generate_xml: %d documents under %s' % (documents, folder))
    return result.returncode


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
