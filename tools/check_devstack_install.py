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

"""``tox -e devstack``: the plugin's install on Nova installed as devstack's.

devstack installs Nova from its git checkout with ``pip install -e``
(``setup_develop``) into its global venv, then runs the plugin's ``stack
install``. Here: Nova's sdist from PyPI, unpacked, stands for that
checkout (``$NOVA_DIR``); a fresh virtualenv gets Nova's dependencies with
uv from the package cache the other envs filled, then Nova editable with
pip, in setuptools' default editable mode (an import finder) and in its
``compat`` mode (a ``.pth`` line). For each, devstack/plugin.sh's ``stack
install`` runs with a real pip (``pip_install`` as devstack's, for a global
venv: ``$DEVSTACK_VENV/bin/pip install ARGS``), then Nova's Python must
import ``nova.cmd.compute`` and ``nova.virt.gpu_p2p`` (our driver) from
the checkout, with no ``site-packages/nova/`` left; then ``clean`` must
uninstall both distributions, remove the shim and leave Nova importing.
"""

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time

import check_package

ROOT = check_package.ROOT
STANDIN = os.path.join(ROOT, 'tests', 'fixtures', 'devstack')
IMPORTS = 'import nova.cmd.compute, nova.virt.gpu_p2p'
#: setuptools' editable modes devstack's pip install -e may get.
MODES = ('', 'compat')
#: devstack's pip_install and pip_uninstall for a global venv: the first
#: uses DEVSTACK_VENV, the second only PIP_VIRTUAL_ENV (else the system's
#: Python, here an unset variable) and its first argument. The stand-in
#: (tests/fixtures/devstack/functions) gives the rest.
PROLOGUE = '''
function pip_install { "$DEVSTACK_VENV/bin/pip" install --quiet "$@"; }
function pip_uninstall {
    "$PIP_VIRTUAL_ENV/bin/pip" uninstall --quiet -y "$1" || true
}
'''


def nova_checkout(workdir: str, pip: str, requirement: str) -> str:
    """Nova's sdist unpacked: what devstack's git clone holds."""
    check_package._run(pip, 'download', '--quiet', '--no-deps',
                       '--no-binary', ':all:', '--dest', workdir,
                       requirement)
    [sdist] = [name for name in os.listdir(workdir)
               if name.endswith('.tar.gz')]
    with tarfile.open(os.path.join(workdir, sdist)) as tar:
        tar.extractall(workdir, filter='data')
    return os.path.join(workdir, sdist[:-len('.tar.gz')])


def plugin(phase: str, venv: str, nova_dir: str, log: str) -> None:
    """One plugin phase, as stack.sh or clean.sh runs it, with a real pip."""
    script = '\n'.join([
        'set -o errexit -o nounset -o pipefail',
        'source "$STANDIN/functions"',
        PROLOGUE,
        'source "$REPO/devstack/settings"',
        'source "$REPO/devstack/plugin.sh" ' + phase,
    ])
    env = dict(
        os.environ, STANDIN=STANDIN, REPO=ROOT, DEVSTACK_STANDIN_LOG=log,
        DEVSTACK_STANDIN_PYTHON=sys.executable,
        ENABLED_SERVICES='n-api,n-cond,n-sch,n-cpu,placement-api',
        DEST=os.path.dirname(nova_dir), GPU_P2P_DIR=ROOT, NOVA_DIR=nova_dir,
        GLOBAL_VENV='True', DEVSTACK_VENV=venv,
        PYTHON=os.path.join(venv, 'bin', 'python3'),
        NOVA_BIN_DIR=os.path.join(venv, 'bin'),
        # Config files nothing wrote: clean leaves them alone.
        NOVA_CONF_DIR=os.path.join(venv, 'etc'),
        NOVA_CONF=os.path.join(venv, 'etc', 'nova.conf'),
        NOVA_CPU_CONF=os.path.join(venv, 'etc', 'nova-cpu.conf'),
        PLACEMENT_CONF=os.path.join(venv, 'etc', 'placement.conf'))
    result = subprocess.run(['bash', '-c', script], env=env,
                            cwd=os.path.dirname(nova_dir),
                            capture_output=True, text=True)
    if result.returncode:
        raise check_package.PackageError(
            'plugin.sh %s failed (exit %d):\n%s%s' % (
                phase, result.returncode, result.stdout, result.stderr))


def _python(python: str, code: str) -> str:
    """Run CODE outside this checkout, whose nova/ would shadow Nova's."""
    return check_package._run(python, '-c', code, cwd=os.path.dirname(python))


def site_packages(python: str) -> str:
    return _python(python, 'import sysconfig; '
                           'print(sysconfig.get_path("purelib"))').strip()


def check_mode(mode: str, venv: str, nova_dir: str, log: str) -> str:
    python = os.path.join(venv, 'bin', 'python3')
    pip = os.path.join(venv, 'bin', 'pip')
    config = ['--config-settings', 'editable_mode=' + mode] if mode else []
    check_package._run(pip, 'install', '--quiet', '--no-deps',
                       '--no-build-isolation', *config, '-e', nova_dir)
    _python(python, 'import nova.cmd.compute')
    plugin('stack install', venv, nova_dir, log)
    found = _python(
        python, IMPORTS + '; import nova; print(nova.__file__); '
        'print(nova.virt.gpu_p2p.GPUP2PLibvirtDriver.__module__)').split()
    if found != [os.path.join(nova_dir, 'nova', '__init__.py'),
                 'nova_gpu_p2p.compute.driver']:
        raise check_package.PackageError(
            'Nova or the driver from the wrong place: %s' % found)
    if os.path.exists(os.path.join(site_packages(python), 'nova')):
        raise check_package.PackageError(
            'site-packages/nova/ left beside the editable Nova')
    plugin('clean', venv, nova_dir, log)
    _python(python, 'import nova.cmd.compute')
    left = _python(
        python, 'import importlib.metadata as m; print(sorted('
        'd.metadata["Name"] for d in m.distributions() if '
        'd.metadata["Name"].startswith("nova-gpu-p2p")))').strip()
    if left != '[]' or os.path.lexists(
            os.path.join(nova_dir, 'nova', 'virt', 'gpu_p2p.py')):
        raise check_package.PackageError(
            'clean left %s and the shim %s' % (left, os.path.lexists(
                os.path.join(nova_dir, 'nova', 'virt', 'gpu_p2p.py'))))
    return 'editable Nova (%s mode): stack install imports %s; clean ' \
           'uninstalls both' % (mode or 'default', IMPORTS[len('import '):])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('nova', help='the Nova to install, e.g. nova==34.0.0')
    parser.add_argument('--workdir', help='keep the files here')
    args = parser.parse_args(argv)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        venv = os.path.join(workdir, 'venv')
        check_package._run(sys.executable, '-m', 'uv', 'venv', '--quiet',
                           '--seed', '--python', sys.executable, venv)
        python = os.path.join(venv, 'bin', 'python3')
        # Nova's dependencies, then Nova itself editable, as devstack's.
        check_package._run(sys.executable, '-m', 'uv', 'pip', 'install',
                           '--quiet', '--python', python, args.nova,
                           'setuptools', 'pbr')
        check_package._run(sys.executable, '-m', 'uv', 'pip', 'uninstall',
                           '--quiet', '--python', python, 'nova')
        nova_dir = nova_checkout(os.path.join(workdir, 'stack'),
                                 os.path.join(venv, 'bin', 'pip'), args.nova)
        log = os.path.join(workdir, 'calls.log')
        try:
            for mode in MODES:
                print(check_mode(mode, venv, nova_dir, log))
        except check_package.PackageError as exc:
            print('check_devstack_install: %s' % exc, file=sys.stderr)
            return 1
    print('%.0f s' % (time.monotonic() - start))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
