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

"""``tox -e pkg``: build the sdists and wheels as an operator would, and
prove each wheel works on its own.

For the driver (``nova-gpu-p2p``, this directory) and the guest agent
(``nova-gpu-p2p-guest``, ``guest-agent/``), builds the sdist, then the
wheel from it (so a file missing from the sdist fails here), and runs
``twine check --strict`` on both. The agent's wheel must hold its own
package only (no ``nova/``, no ``nova_gpu_p2p/``), parse as Python 3.8,
and install alone into a fresh virtualenv of Python 3.8 (of the running
Python where no 3.8 is found), where its command runs. The driver's wheel
must hold none of the agent: it is installed with its ``nvml`` extra and
the agent's wheel (which it requires) into a fresh virtualenv with uv
(from the package cache tox-uv shares), and there, outside this checkout,
checks what Nova and an operator use: the console scripts, every entry
point of setup.cfg, the driver shim ``nova.virt.gpu_p2p``, Nova's loading
of our extra spec validators and the scheduler's filter and weigher,
libvirt-python (which nova-compute cannot start without) and that
``nova-gpu-p2p --version`` says what pip says. Those checks print nothing
on stderr, or fail: only eventlet's deprecation notice, which every import
of Nova prints, is filtered out.
"""

import argparse
import ast
import configparser
import glob
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import warnings
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTRIBUTION = 'nova-gpu-p2p'
AGENT_ROOT = os.path.join(ROOT, 'guest-agent')
AGENT_DISTRIBUTION = 'nova-gpu-p2p-guest'
AGENT_PACKAGE = 'nova_gpu_p2p_guest'
#: The oldest Python the agent supports, and the driver.
AGENT_PYTHON = (3, 8)
DRIVER_REQUIRES_PYTHON = '>=3.11'
#: The only file of ours in Nova's package; Nova's own __init__ files must
#: never be in the wheel (installing it would replace Nova's).
SHIM = 'nova/virt/gpu_p2p.py'
NOT_OURS = ('nova/__init__.py', 'nova/virt/__init__.py')
CONSOLE_SCRIPTS = ('nova-gpu-p2p', 'nova-gpu-p2p-guest')
#: Classes nova.conf names, which nova-scheduler imports by path.
SCHEDULER_CLASSES = ('nova_gpu_p2p.scheduler.GPUP2PCliqueFilter',
                     'nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher')
VALIDATED_KEYS = ('hw:gpu_p2p_clique', 'hw:gpu_numa_affinity')
#: eventlet's EventletDeprecationWarning (8 lines), printed when Nova is
#: imported; by message, since the class is eventlet's, which must not be
#: imported before the filter.
EVENTLET_DEPRECATED = r'\s*Eventlet is deprecated'


class PackageError(Exception):
    """The built package is not what an operator needs."""


def declared_entry_points(setup_cfg: str) -> dict[str, set[str]]:
    """Group -> entry point names, as setup.cfg declares them."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    declared = {}
    for group, lines in parser['options.entry_points'].items():
        declared[group] = {line.split('=', 1)[0].strip()
                           for line in lines.splitlines() if line.strip()}
    return declared


def _run(*command: str, cwd: str | None = None,
         quiet: bool = False) -> str:
    """The command's output; PackageError if it fails.

    :param quiet: fail too if it prints anything on stderr (a warning).
    """
    result = subprocess.run(command, cwd=cwd, capture_output=True,
                            text=True)
    if result.returncode or (quiet and result.stderr):
        raise PackageError('%s %s:\n%s%s' % (
            ' '.join(command), 'failed (exit %d)' % result.returncode
            if result.returncode else 'printed on stderr',
            result.stdout, result.stderr))
    return result.stdout


def _one(directory: str, suffix: str) -> str:
    found = [name for name in os.listdir(directory) if name.endswith(suffix)]
    if len(found) != 1:
        raise PackageError('expected one %s in %s, found %s'
                           % (suffix, directory, found))
    return os.path.join(directory, found[0])


def build(dist: str, source: str) -> tuple[str, str]:
    """The sdist of ``source`` and the wheel built from it, in ``dist``."""
    shutil.rmtree(dist, ignore_errors=True)
    _run(sys.executable, '-m', 'build', '--installer', 'uv', '--outdir',
         dist, source)
    return _one(dist, '.tar.gz'), _one(dist, '.whl')


def _venv(venv: str, python: str) -> str:
    shutil.rmtree(venv, ignore_errors=True)
    _run(sys.executable, '-m', 'uv', 'venv', '--quiet', '--python', python,
         venv)
    return os.path.join(venv, 'bin', 'python')


def install(wheel: str, agent_wheel: str, venv: str,
            pins: list[str]) -> str:
    """A fresh virtualenv with the wheel, its nvml extra and the agent."""
    python = _venv(venv, sys.executable)
    _run(sys.executable, '-m', 'uv', 'pip', 'install', '--quiet',
         '--python', python, wheel + '[nvml]', agent_wheel, *pins)
    return python


def wheel_files(wheel: str) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def check_driver_wheel(wheel: str) -> str:
    """The driver's wheel holds none of the agent."""
    agent = [name for name in wheel_files(wheel)
             if name.startswith(AGENT_PACKAGE + '/')]
    if agent:
        raise PackageError('the driver\'s wheel holds the agent: %s'
                           % agent)
    return 'the driver\'s wheel holds no %s file' % AGENT_PACKAGE


def check_license(sdist: str, wheel: str) -> str:
    """The Apache-2.0 text ships in the sdist and in the wheel's metadata.

    setuptools copies ``LICENSE`` into ``*.dist-info/`` (``licenses/``
    since setuptools 77); pbr puts every file git tracks in the sdist.
    """
    with tarfile.open(sdist) as archive:
        in_sdist = [name for name in archive.getnames()
                    if name.count('/') == 1 and name.endswith('/LICENSE')]
    in_wheel = [name for name in wheel_files(wheel)
                if '.dist-info/' in name and name.endswith('/LICENSE')]
    if not in_sdist or not in_wheel:
        raise PackageError('LICENSE missing from %s' % ' and '.join(
            os.path.basename(path) for path, found in (
                (sdist, in_sdist), (wheel, in_wheel)) if not found))
    return '%s and %s ship LICENSE' % (os.path.basename(sdist),
                                       os.path.basename(wheel))


def check_agent_wheel(wheel: str) -> list[str]:
    """Its own package only, every module Python 3.8 syntax."""
    files = wheel_files(wheel)
    # The package, and the metadata in nova_gpu_p2p_guest-VERSION.dist-info.
    foreign = [name for name in files
               if not name.startswith((AGENT_PACKAGE + '/',
                                       AGENT_PACKAGE + '-'))]
    if foreign or not any(name.startswith(AGENT_PACKAGE + '/')
                          for name in files):
        raise PackageError('the agent\'s wheel must hold %s/ and its '
                           'metadata only; it has %s' % (
                               AGENT_PACKAGE, foreign or files))
    modules = [name for name in files if name.endswith('.py')]
    with zipfile.ZipFile(wheel) as archive:
        for name in modules:
            try:
                ast.parse(archive.read(name), name,
                          feature_version=AGENT_PYTHON)
            except SyntaxError as exc:
                raise PackageError('%s is not Python %d.%d: %s'
                                   % ((name,) + AGENT_PYTHON + (exc,)))
    return ['the agent\'s wheel holds %s/ only, no nova/ or nova_gpu_p2p/'
            % AGENT_PACKAGE,
            'its %d modules parse as Python %d.%d'
            % ((len(modules),) + AGENT_PYTHON)]


def oldest_python() -> str | None:
    """A Python 3.8 to install the agent with, or None.

    ``NOVA_GPU_P2P_PYTHON38``, else ``python3.8`` on the path, else
    pyenv's; each must run and be 3.8.
    """
    candidates = [os.environ.get('NOVA_GPU_P2P_PYTHON38'),
                  shutil.which('python3.8')] + sorted(glob.glob(
                      os.path.expanduser(
                          '~/.pyenv/versions/3.8*/bin/python3.8')))
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run(
                [candidate, '-c', 'import sys; print(sys.version_info[:2])'],
                capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError:
            continue
        if found == str(AGENT_PYTHON):
            return candidate
    return None


def install_agent(wheel: str, venv: str) -> list[str]:
    """The agent's wheel alone in a fresh virtualenv of Python 3.8."""
    python = oldest_python()
    done = []
    if python is None:
        done.append('no Python %d.%d found (NOVA_GPU_P2P_PYTHON38): '
                    'installed with Python %d.%d instead' % (
                        AGENT_PYTHON + sys.version_info[:2]))
        python = sys.executable
    python = _venv(venv, python)
    _run(sys.executable, '-m', 'uv', 'pip', 'install', '--quiet',
         '--python', python, wheel)
    # From the virtualenv, where no checkout's metadata can be found.
    listed = _run(python, '-c', 'import importlib.metadata as m; print(" '
                  '".join(sorted(d.metadata["Name"] for d in '
                  'm.distributions())))', cwd=venv).split()
    if listed != [AGENT_DISTRIBUTION]:
        raise PackageError('the agent\'s virtualenv holds %s, not %s alone'
                           % (listed, AGENT_DISTRIBUTION))
    version = _run(python, '-c', 'import sys; print("%d.%d" % '
                   'sys.version_info[:2])', cwd=venv).strip()
    done.append('the agent\'s wheel installs alone on Python %s' % version)
    # A real run: no fw_cfg entry to read is one line and exit status 2.
    result = subprocess.run(
        [os.path.join(venv, 'bin', AGENT_DISTRIBUTION), '--fw-cfg',
         os.path.join(venv, 'absent')], capture_output=True, text=True,
        cwd=venv)
    if (result.returncode, result.stdout) != (2, '') or (
            not result.stderr.startswith(AGENT_DISTRIBUTION + ': cannot')):
        raise PackageError('%s --fw-cfg ABSENT: exit %d, %r %r' % (
            AGENT_DISTRIBUTION, result.returncode, result.stdout,
            result.stderr))
    _run(python, '-m', AGENT_PACKAGE, '--help', cwd=venv)
    # verify-p2p starts its probe as python -m from the installed package:
    # without a driver library it says it skipped, and why.
    absent = os.path.join(venv, 'absent', 'libcuda.so.1')
    result = subprocess.run(
        [os.path.join(venv, 'bin', AGENT_DISTRIBUTION), 'verify-p2p',
         '--library', absent, '--result', '-', '--nccl-conf',
         os.path.join(venv, 'nccl.conf')], capture_output=True, text=True,
        cwd=venv)
    skipped = 'skipped: no NVIDIA driver: %s does not load' % absent
    if result.returncode != 0 or skipped not in result.stderr or (
            json.loads(result.stdout or '{}').get('status') != 'skipped'):
        raise PackageError('%s verify-p2p --library ABSENT: exit %d, %r %r'
                           % (AGENT_DISTRIBUTION, result.returncode,
                              result.stdout, result.stderr))
    done.append('%s, its verify-p2p and python -m %s run there'
                % (AGENT_DISTRIBUTION, AGENT_PACKAGE))
    return done


def check_libvirt_python() -> str:
    """What nova-compute's libvirt driver imports first; PackageError."""
    try:
        module = importlib.import_module('libvirt')
    except ImportError as exc:
        raise PackageError(
            'nova-compute cannot start its libvirt driver here: %s; install '
            'libvirt-python into Nova\'s environment (python3-libvirt from '
            'the distribution, or pip install libvirt-python, which builds '
            'with pkg-config and libvirt-dev)' % exc)
    return 'nova-compute\'s libvirt driver can import libvirt-python (%s)' % (
        module.__file__)


def check_version(bin_dir: str) -> str:
    """``nova-gpu-p2p --version`` says the version pip installed."""
    version = importlib.metadata.version(DISTRIBUTION)
    output = _run(os.path.join(bin_dir, CONSOLE_SCRIPTS[0]), '--version',
                  quiet=True)
    if output != '%s %s\n' % (CONSOLE_SCRIPTS[0], version):
        raise PackageError('%s --version printed %r; pip installed %s'
                           % (CONSOLE_SCRIPTS[0], output, version))
    return '%s --version says %s, as pip does' % (CONSOLE_SCRIPTS[0],
                                                  version)


def check_installed(setup_cfg: str) -> list[str]:
    """Run inside the new virtualenv: what works, or PackageError."""
    warnings.filterwarnings('ignore', EVENTLET_DEPRECATED, Warning)
    from nova.api.validation.extra_specs import validators
    from oslo_utils import importutils

    import nova_gpu_p2p
    from nova_gpu_p2p.compute import driver

    done = []
    if not nova_gpu_p2p.__file__.startswith(sys.prefix):
        raise PackageError('nova_gpu_p2p imported from %s, not from the '
                           'virtualenv' % nova_gpu_p2p.__file__)
    files = {str(path) for path in
             importlib.metadata.files(DISTRIBUTION) or ()}
    if SHIM not in files or files & set(NOT_OURS):
        raise PackageError('the wheel must install %s and none of %s; it '
                           'has %s' % (SHIM, NOT_OURS, sorted(
                               f for f in files if f.startswith('nova/'))))
    requires = importlib.metadata.metadata(DISTRIBUTION)['Requires-Python']
    if requires != DRIVER_REQUIRES_PYTHON:
        raise PackageError('the driver requires Python %s, not %s'
                           % (requires, DRIVER_REQUIRES_PYTHON))
    done.append('the driver requires Python %s' % requires)
    shim = importutils.import_class('nova.virt.gpu_p2p.GPUP2PLibvirtDriver')
    if shim is not driver.GPUP2PLibvirtDriver:
        raise PackageError('nova.virt.gpu_p2p gives %r' % shim)
    done.append('compute_driver = gpu_p2p.GPUP2PLibvirtDriver loads %s.%s'
                % (shim.__module__, shim.__name__))

    ours = importlib.metadata.distribution(DISTRIBUTION).entry_points
    for group, names in sorted(declared_entry_points(setup_cfg).items()):
        installed = {ep.name: ep for ep in ours if ep.group == group}
        if set(installed) != names:
            raise PackageError('entry points %s: setup.cfg declares %s, the '
                               'wheel has %s' % (group, sorted(names),
                                                 sorted(installed)))
        for entry in installed.values():
            entry.load()
        done.append('entry points %s: %s load' % (group, ', '.join(
            sorted(names))))

    for key in VALIDATED_KEYS:
        if validators.VALIDATORS[key].__module__ != (
                'nova_gpu_p2p.api.extra_spec_validators'):
            raise PackageError('Nova did not load our validator for %s'
                               % key)
    done.append('Nova\'s API validates %s with ours' % ', '.join(
        VALIDATED_KEYS))
    for path in SCHEDULER_CLASSES:
        importutils.import_class(path)
    done.append('nova-scheduler can load %s' % ', '.join(SCHEDULER_CLASSES))
    importutils.import_module('pynvml')
    done.append('the nvml extra installed pynvml')
    done.append(check_libvirt_python())

    bin_dir = os.path.dirname(sys.executable)
    done.append(check_version(bin_dir))
    for script in CONSOLE_SCRIPTS:
        output = _run(os.path.join(bin_dir, script), '--help', quiet=True)
        if 'usage:' not in output:
            raise PackageError('%s --help printed no usage:\n%s'
                               % (script, output))
    done.append('%s --help work' % ' and '.join(CONSOLE_SCRIPTS))
    return done


def _size(path: str) -> str:
    return '%s (%d KiB)' % (os.path.basename(path),
                            os.path.getsize(path) // 1024)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--dist', default=os.path.join(ROOT, 'dist'),
                        help='where to build (emptied first)')
    parser.add_argument('--venv', default=os.path.join(ROOT, 'dist', 'venv'),
                        help='the virtualenv to install into (made anew; the '
                             'agent\'s alone goes to VENV-guest)')
    parser.add_argument('--inside', action='store_true',
                        help=argparse.SUPPRESS)
    parser.add_argument('pins', nargs='*', metavar='REQUIREMENT',
                        help='installed beside the wheel, e.g. nova==34.0.0')
    args = parser.parse_args(argv)
    setup_cfg = os.path.join(ROOT, 'setup.cfg')
    try:
        if args.inside:
            for line in check_installed(setup_cfg):
                print('  ok: %s' % line)
            return 0
        start = time.monotonic()
        sdist, wheel = build(os.path.join(args.dist, DISTRIBUTION), ROOT)
        agent_sdist, agent_wheel = build(
            os.path.join(args.dist, AGENT_DISTRIBUTION), AGENT_ROOT)
        built = time.monotonic()
        print('Built %s in %.0f s' % (', '.join(
            _size(path) for path in (sdist, wheel, agent_sdist,
                                     agent_wheel)), built - start))
        print(_run(sys.executable, '-m', 'twine', '--no-color', 'check',
                   '--strict', sdist, wheel, agent_sdist,
                   agent_wheel).rstrip())
        for line in [check_license(sdist, wheel),
                     check_license(agent_sdist, agent_wheel),
                     check_driver_wheel(wheel)] + check_agent_wheel(
                agent_wheel) + install_agent(agent_wheel,
                                             args.venv + '-guest'):
            print('  ok: %s' % line)
        built = time.monotonic()
        python = install(wheel, agent_wheel, args.venv, args.pins)
        installed = time.monotonic()
        print('Installed the wheel[nvml] and the agent\'s into %s in %.0f s'
              % (args.venv, installed - built))
        # From outside the checkout, so that only the installed copy
        # can be imported.
        print(_run(python, os.path.abspath(__file__), '--inside',
                   cwd=args.venv, quiet=True).rstrip())
        print('Package checks passed in %.0f s' % (time.monotonic() - start))
        print('Built, in %s: %s' % (args.dist, ', '.join(
            os.path.relpath(path, args.dist) for path in (
                sdist, wheel, agent_sdist, agent_wheel))))
    except PackageError as exc:
        print('Package check failed: %s' % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
