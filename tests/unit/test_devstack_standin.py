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

"""The devstack stand-in does what devstack's own functions do.

Each case is a few calls of the helpers the plugin relies on, on one INI
file and one local.conf. What devstack's functions printed, left in the
file and returned was recorded from openstack/devstack (the commit in
tests/fixtures/devstack/recorded.json), which CI cannot fetch; the
stand-in must give the same. With ``NOVA_GPU_P2P_DEVSTACK_DIR`` naming a
devstack checkout, devstack's functions run too and must still give the
recording; ``python -m tests.unit.test_devstack_standin DIR`` records it
again from the checkout DIR.
"""

import json
import os
import subprocess
import sys
import tempfile

from tests.unit import base
from tests.unit import test_devstack_plugin as plugin_tests

RECORDED = os.path.join(plugin_tests.STANDIN, 'recorded.json')
INI = """[DEFAULT]
debug = True

[pci]
device_spec = {"a": 1}
device_spec = {"b": 2}
alias = x

[filter_scheduler]
enabled_filters = A,B
"""
LOCAL_CONF = r"""[[local|localrc]]
ADMIN_PASSWORD=secret

[[post-config|$NOVA_CONF]]
[pci]
device_spec = {"vendor_id": "15b3"}
alias = {\\\"name\\\": \\\"nic\\\"}
alias = two
[compute]
cpu_shared_set = 0-3

[[post-config|$NOVA_CPU_CONF]]
[pci]
alias = three

[[post-config|${NOVA_CONF}]]
[compute]
cpu_dedicated_set = 4-7
"""
#: name -> bash run after the functions are sourced, in a directory with
#: f.conf (INI), local.conf (LOCAL_CONF) and venv/bin/pip, which prints
#: its arguments.
CASES = {
    'iniset rewrites every line of a multi valued option':
        "iniset f.conf pci device_spec '{\"c\": 3}'",
    'iniset adds a section after a blank line':
        'iniset f.conf gpu_p2p p2p_level PHB',
    'iniset squeezes white space': "iniset f.conf DEFAULT x 'a   b  c'",
    'iniset on a file that does not exist': 'iniset new.conf s o v',
    'iniset_multiline splits on white space':
        "iniset_multiline f.conf pci alias one 'two three'",
    'iniadd_literal keeps the value as it is':
        "iniadd_literal f.conf pci alias '{\"name\":  \"y\"}'",
    'iniadd_literal takes backslashes as sed escapes':
        "iniadd_literal f.conf pci alias 'a\\\\qb\\\\\\\\c\\\\\"d'",
    'iniadd_literal without the section does nothing':
        'iniadd_literal f.conf nope o v',
    'inidelete removes every value': 'inidelete f.conf pci device_spec',
    'iniget of a multi valued option':
        'iniget f.conf pci device_spec; iniget f.conf pci nope',
    'iniget_multiline': 'iniget_multiline f.conf pci device_spec',
    'ini_has_option':
        'ini_has_option f.conf pci alias; echo $?; '
        'ini_has_option f.conf pci nope; echo $?',
    'is_service_enabled':
        'ENABLED_SERVICES=key,n-api,n-cond-cell1,n-cpu-2,placement-api\n'
        'for s in n-cond n-cond-cell1 nova n-cpu n-cpu-1 n.api placement '
        'placement-api "n-api n-sch" g-api; do\n'
        '    is_service_enabled $s; echo "$s $?"\n'
        'done',
    'trueorfalse':
        'for v in yes Yes TRUE 1 0 no FALSE maybe ""; do\n'
        '    X=$v; echo "$v: $(trueorfalse Dflt X)"\n'
        'done; (trueorfalse False) >/dev/null 2>&1; echo "no name: $?"',
    'pip_uninstall takes one name':
        'PIP_VIRTUAL_ENV=$PWD/venv pip_uninstall nova-gpu-p2p '
        'nova-gpu-p2p-guest',
    'conductor_conf': 'NOVA_CONF_DIR=/etc/nova; conductor_conf 1',
    'get_meta_section':
        "get_meta_section local.conf post-config '$NOVA_CONF'",
    'get_meta_section_files':
        'get_meta_section_files local.conf post-config',
    'merge_config_group':
        'NOVA_CONF=f.conf; NOVA_CPU_CONF=cpu.conf\n'
        'merge_config_group local.conf post-config 2>/dev/null; cat cpu.conf',
    'merge_config_file':
        'NOVA_CPU_CONF=f.conf\n'
        "merge_config_file local.conf post-config '$NOVA_CPU_CONF' "
        '2>/dev/null',
}
#: devstack's own library, as the stand-in's real mode sources it.
REAL = '''
CONFIG_AWK_CMD=gawk
source "$DEVSTACK_REAL_DIR/functions"
source <(sed -n '/^function conductor_conf /,/^}/p' \\
    "$DEVSTACK_REAL_DIR/lib/nova")
'''


def run_case(code: str, devstack_dir: str = '') -> dict[str, object]:
    """What the case printed, returned and left in f.conf."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (('f.conf', INI), ('local.conf', LOCAL_CONF)):
            with open(os.path.join(tmp, name), 'w') as f:
                f.write(text)
        os.makedirs(os.path.join(tmp, 'venv', 'bin'))
        pip = os.path.join(tmp, 'venv', 'bin', 'pip')
        with open(pip, 'w') as f:
            f.write('#!/bin/sh\necho pip "$@"\n')
        os.chmod(pip, 0o755)
        source = (REAL if devstack_dir else
                  'source "$STANDIN/functions"')
        env = {
            'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
            'LC_ALL': 'C.UTF-8',
            'STANDIN': plugin_tests.STANDIN,
            'DEVSTACK_REAL_DIR': devstack_dir,
            'DEVSTACK_STANDIN_LOG': os.path.join(tmp, 'calls.log'),
            'DEVSTACK_STANDIN_PYTHON': sys.executable,
            'ENABLED_SERVICES': '',
        }
        result = subprocess.run(
            ['bash', '-c', source + '\n' + code], cwd=tmp, env=env,
            capture_output=True, text=True, timeout=60)
        files = {}
        for name in ('f.conf', 'new.conf'):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                with open(path) as f:
                    files[name] = f.read()
        return {'stdout': result.stdout, 'returncode': result.returncode,
                'files': files}


def recorded() -> dict[str, object]:
    with open(RECORDED) as f:
        return json.load(f)


class TestStandIn(base.TestCase):

    def test_every_case_is_recorded(self):
        self.assertEqual(sorted(CASES), sorted(recorded()['cases']))

    def test_stand_in_does_what_devstack_did(self):
        cases = recorded()['cases']
        for name, code in CASES.items():
            self.assertEqual(cases[name], run_case(code), name)

    def test_devstack_still_does_it(self):
        if not plugin_tests.DEVSTACK_DIR:
            self.skipTest('NOVA_GPU_P2P_DEVSTACK_DIR not set: devstack\'s '
                          'own functions not run (the recording is)')
        cases = recorded()['cases']
        for name, code in CASES.items():
            self.assertEqual(cases[name],
                             run_case(code, plugin_tests.DEVSTACK_DIR), name)


def record(devstack_dir: str) -> None:
    commit = subprocess.run(
        ['git', '-C', devstack_dir, 'rev-parse', 'HEAD'], check=True,
        capture_output=True, text=True).stdout.strip()
    cases = {name: run_case(code, devstack_dir)
             for name, code in CASES.items()}
    with open(RECORDED, 'w') as f:
        json.dump({'devstack': commit, 'cases': cases}, f, indent=1,
                  sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    record(os.path.abspath(sys.argv[1]))
