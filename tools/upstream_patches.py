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

"""Apply (or check) a patch series of ``patches/<project>`` to a tree.

The series we keep for upstream Nova (``patches/nova``) and placement
(``patches/placement``). ``--project`` (default ``nova``) names the series
and the package it patches.

``apply [DIR]``: each patch of ``patches/<project>/series`` in turn, with
``patch -p1``, to DIR (default: the directory holding the package this
Python imports, i.e. its site-packages or a source tree); a patch already
applied (named in ``<package>/.<project>-patches-applied``) is skipped,
so a reused tox env is patched once. Files are copied before they are
patched: installers hard-link files from their cache, and patching a
link would patch every environment sharing it. A patch's files under a
top directory DIR lacks (a release note, in site-packages) are left
out. ``check DIR``: ``patch --dry-run`` of the whole series, for an
unpacked sdist. Exit status 1 and one line naming the patch on failure.

For Nova, ``apply`` without DIR also copies the environment's
``etc/nova/api-paste.ini`` beside the installed package, where Nova's own
functional tests look for it (they expect a source tree), so that they
run from the installed wheel.
"""

import argparse
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

#: The series we keep, each applying to the package of its name.
PROJECTS = ('nova', 'placement')
PATCHES = pathlib.Path(__file__).resolve().parents[1] / 'patches'


def stamp(target: pathlib.Path, project: str) -> pathlib.Path:
    """Beside the patched package: the names of the patches applied to it."""
    return target / project / ('.%s-patches-applied' % project)


def series(project: str) -> list[pathlib.Path]:
    names = (PATCHES / project / 'series').read_text().split()
    return [PATCHES / project / name
            for name in names if not name.startswith('#')]


def installed_root(project: str) -> pathlib.Path:
    spec = importlib.util.find_spec(project)
    if spec is None or not spec.submodule_search_locations:
        sys.exit('%s is not importable by %s' % (project, sys.executable))
    return pathlib.Path(list(spec.submodule_search_locations)[0]).parent


def _for_target(target: pathlib.Path, patch: pathlib.Path) -> str:
    """The patch less its files whose top directory target lacks.

    A patch for upstream carries files beside the package, such as its
    release note, which a site-packages target has no place for: they are
    left out there rather than created in site-packages, and applied to a
    source tree.
    """
    kept = []
    keep = True
    for line in patch.read_text().splitlines(keepends=True):
        if line.startswith('diff --git a/'):
            top = line[len('diff --git a/'):].split('/', 1)[0]
            keep = (target / top).exists()
        if keep:
            kept.append(line)
    return ''.join(kept)


def _patch(target: pathlib.Path, patch: str, *args: str) -> bool:
    return subprocess.run(
        ['patch', '-p1', '--batch', '--silent', '-d', str(target), *args],
        input=patch, text=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0


def _unlink_copies(target: pathlib.Path, patch: str) -> None:
    """Give each file the patch touches an inode of its own."""
    for line in patch.splitlines():
        if not line.startswith('+++ b/'):
            continue
        path = target / line[len('+++ b/'):].split('\t')[0]
        if path.is_file() and path.stat().st_nlink > 1:
            copy = path.with_name(path.name + '.nova-patches')
            shutil.copy2(path, copy)
            os.replace(copy, path)


def apply(target: pathlib.Path, project: str) -> int:
    """Apply the patches not yet applied, recorded in a stamp file.

    A later patch may change what an earlier one added, so whether a
    patch is applied cannot be told by reversing it alone.
    """
    applied = stamp(target, project)
    done = applied.read_text().split() if applied.is_file() else []
    for patch in series(project):
        if patch.name in done:
            print('%s: already applied' % patch.name)
            continue
        text = _for_target(target, patch)
        if not _patch(target, text, '--dry-run', '--forward'):
            print('%s does not apply to %s' % (patch.name, target))
            return 1
        _unlink_copies(target, text)
        _patch(target, text, '--forward')
        done.append(patch.name)
        applied.write_text('\n'.join(done) + '\n')
        print('%s: applied' % patch.name)
    return 0


def place_api_paste(target: pathlib.Path) -> None:
    source = pathlib.Path(sys.prefix) / 'etc' / 'nova' / 'api-paste.ini'
    dest = target / 'etc' / 'nova' / 'api-paste.ini'
    if source.is_file() and not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


def check(target: pathlib.Path, project: str) -> int:
    """Dry-run the series in order on a scratch copy of the touched files."""
    if not (target / project).is_dir():
        print('%s holds no %s package' % (target, project))
        return 1
    scratch = target.parent / (target.name + '.upstream-patches-check')
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(target / project, scratch / project)
    try:
        for patch in series(project):
            if not _patch(scratch, _for_target(scratch, patch), '--forward'):
                print('%s does not apply to %s' % (patch.name, target))
                return 1
            print('%s: applies' % patch.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--project', choices=PROJECTS, default='nova')
    parser.add_argument('action', choices=('apply', 'check'))
    parser.add_argument('target', nargs='?', type=pathlib.Path)
    args = parser.parse_args()
    if args.action == 'check':
        return check(args.target or installed_root(args.project),
                     args.project)
    if args.target:
        return apply(args.target, args.project)
    root = installed_root(args.project)
    if args.project == 'nova':
        place_api_paste(root)
    return apply(root, args.project)


if __name__ == '__main__':
    sys.exit(main())
