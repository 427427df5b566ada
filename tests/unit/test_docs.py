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

"""The names the documentation tells operators to type exist in the code.

Scans ``doc/source/**/*.rst``, ``README.md`` and every file under
``devstack/`` for

* ``[gpu_p2p]`` options: ``[gpu_p2p] name`` (the name may be on the next
  line), ``gpu_p2p.name``, ``iniset FILE gpu_p2p name`` and ``name = value``
  lines under a ``[gpu_p2p]`` header of an ini snippet; the name must be an
  option of :data:`nova_gpu_p2p.conf.OPTS` and a literal value must pass
  the option's type (a ``topology_backend`` must be an installed backend);
* flavor extra specs ``hw:gpu_*``: one of our two keys, and a literal value
  (``hw:gpu_p2p_clique=required``) one the key accepts;
* placement traits ``CUSTOM_GPU_*``: one of :data:`nova_gpu_p2p.traits.OWNED`
  or a per-GPU ``CUSTOM_GPU_P2P_CLIQUE_ID_<0-15>`` or
  ``CUSTOM_GPU_P2P_PARTITION_<id>``; a name cut short by a wildcard or
  placeholder (``CUSTOM_GPU_P2P_CLIQUE_*``, ``..._<N>``) must be the start
  of one;
* commands ``nova-gpu-p2p <subcommand> [--flag ...]``: after a ``$`` or
  ``sudo`` prompt, or in a literal or at the start of a line when options
  or nothing follow the subcommand (so that prose such as "nova-gpu-p2p is
  a driver" and log messages are left alone): the subcommand must exist in
  :func:`nova_gpu_p2p.cmd.cli.build_parser` and each ``--flag`` on the same
  line must be one of its options.

* devstack variables ``GPU_P2P_*``: defined in ``devstack/settings``, and
  a literal value of one named after an option (``GPU_P2P_P2P_LEVEL=PHB``)
  must pass that option's type.

Release notes are not scanned: they record what was true when written.
A failure lists every unknown name as ``file:line: ...``.
"""

import argparse
import collections
from importlib import metadata
import os
import re

from nova_gpu_p2p.cmd import cli
from nova_gpu_p2p import conf
from nova_gpu_p2p import exception
from nova_gpu_p2p import extra_specs
from nova_gpu_p2p import min_versions
from nova_gpu_p2p.topology import host_cliques
from nova_gpu_p2p import traits
import tests
from tests.unit import base

ROOT = tests.ROOT

Ref = collections.namedtuple('Ref', 'kind name value detail line')

# Whitespace between two words of one reference: spaces, or one line break
# with the indentation of a wrapped reST line.
_GAP = r'(?:[ \t]+|[ \t]*\n[ \t]*)'
_NAME = r'[a-z][a-z0-9_]*'
_VALUE = r'''([^\s`'",;)\]]+)'''
_OPTION_INLINE = re.compile(
    r'(?<![\w/-])\[gpu_p2p\]' + _GAP + '(' + _NAME + r')\b'
    r'(?:[ \t]*=[ \t]*' + _VALUE + ')?')
_OPTION_ATTR = re.compile(r'(?<![\w/$-])gpu_p2p\.(' + _NAME + r')\b')
_OPTION_INISET = re.compile(
    r'\biniset\s+\S+\s+["\']?gpu_p2p["\']?\s+["\']?(' + _NAME + r')\b')
_INI_HEADER = re.compile(r'^([ \t]*)\[([A-Za-z0-9_.-]+)\][ \t]*$')
_INI_META_HEADER = re.compile(r'^[ \t]*\[\[.*\]\][ \t]*$')
_INI_OPTION = re.compile(r'^([ \t]*)(' + _NAME + r')[ \t]*=[ \t]*(.*?)\s*$')
# Words that may follow "[gpu_p2p]" in prose without naming an option.
_PROSE = frozenset(['section', 'group', 'option', 'options', 'settings'])

_FLAVOR_KEY = re.compile(
    r'(?<![\w:])(hw:gpu_[a-z0-9_]*)(\*)?(?:=[\'"]?([A-Za-z0-9_]+))?')
_TRAIT = re.compile(r'(?<![\w])(CUSTOM_GPU_[A-Z0-9_]*)([*<])?')
_COMMAND = re.compile(
    r'(?:(?P<lead>`|\$ |sudo )|^[ \t]*)nova-gpu-p2p' + _GAP
    + r'(?P<sub>[a-z][a-z0-9-]*)(?P<rest>[^\n`|;&#)]*)', re.MULTILINE)
_FLAG = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*)')
_DEVSTACK_VARIABLE = re.compile(
    r'(?<![A-Za-z0-9_])(GPU_P2P_[A-Z0-9_]*)(?:=([^\s`\'"]+))?')
_DEVSTACK_DEFINITION = re.compile(r'^(GPU_P2P_[A-Z0-9_]+)=', re.MULTILINE)
#: Per-GPU trait prefixes -> the largest number they take: a clique ID,
#: or a Fabric Manager partition ID (FM's unsigned int).
_PER_GPU_TRAITS = {traits.CLIQUE_ID_PREFIX: host_cliques.MAX_CLIQUE_ID,
                   traits.PARTITION_PREFIX: 2 ** 32 - 1}


def _line_of(text, offset):
    return text.count('\n', 0, offset) + 1


def _placeholder(value, upper=False):
    """Whether a value stands for something, not itself.

    ``upper``: an all-capitals value (``=N``, ``=ID``) is a placeholder too;
    not so for options, whose values may be capitals (``p2p_level = PXB``).
    """
    return (not value or (upper and value.isupper()) or '$' in value
            or '<' in value or '...' in value or value.startswith('%'))


def ini_options(text):
    """``(line, name, value)`` of option lines under ``[gpu_p2p]`` headers.

    A header opens a section in an ini snippet wherever it stands (reST
    literal block, Markdown fence, local.conf); the section ends at the
    next header, at a Markdown fence, or at a line indented less than the
    header (the end of the literal block).
    """
    section = None
    indent = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        header = _INI_HEADER.match(line)
        if header:
            section, indent = header.group(2), len(header.group(1))
            continue
        if (_INI_META_HEADER.match(line) or line.lstrip().startswith('```')
                or width < indent):
            section = None
            continue
        if section != conf.GROUP.name:
            continue
        option = _INI_OPTION.match(line)
        if option:
            yield number, option.group(2), option.group(3)


def references(text):
    """Every reference of ours in ``text``, as :class:`Ref` tuples."""
    refs = []
    for match in _OPTION_INLINE.finditer(text):
        if match.group(1) not in _PROSE:
            refs.append(Ref('option', match.group(1), match.group(2), None,
                            _line_of(text, match.start())))
    for pattern in (_OPTION_ATTR, _OPTION_INISET):
        for match in pattern.finditer(text):
            refs.append(Ref('option', match.group(1), None, None,
                            _line_of(text, match.start())))
    for number, name, value in ini_options(text):
        refs.append(Ref('option', name, value, None, number))
    for match in _FLAVOR_KEY.finditer(text):
        if not match.group(2):
            refs.append(Ref('flavor key', match.group(1), match.group(3),
                            None, _line_of(text, match.start())))
    for match in _TRAIT.finditer(text):
        refs.append(Ref('trait', match.group(1), None, match.group(2),
                        _line_of(text, match.start())))
    for match in _COMMAND.finditer(text):
        rest = match.group('rest')
        # After a prompt it is a command. In a literal or at a line's start
        # only when options or nothing follow: "nova-gpu-p2p is a driver"
        # is prose, ``nova-gpu-p2p driver loaded:`` a log message.
        if (match.group('lead') not in ('$ ', 'sudo ') and rest.strip()
                and not rest.lstrip().startswith(('-', '['))):
            continue
        refs.append(Ref('command', match.group('sub'), None,
                        _FLAG.findall(rest), _line_of(text, match.start())))
    for match in _DEVSTACK_VARIABLE.finditer(text):
        # GPU_P2P_<OPTION>, GPU_P2P_${option^^}: a pattern, not a name.
        if not match.group(1).endswith('_'):
            refs.append(Ref('devstack variable', match.group(1),
                            match.group(2), None,
                            _line_of(text, match.start())))
    return refs


def _subcommands():
    parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {name: set(sub._option_string_actions)
                    for name, sub in action.choices.items()}
    return {}


def _backends():
    return {entry.name for entry in
            metadata.entry_points(group='nova_gpu_p2p.topology')}


def _devstack_variables():
    """The GPU_P2P_* variables devstack/settings defines, or None."""
    try:
        with open(os.path.join(ROOT, 'devstack', 'settings'),
                  encoding='utf-8') as f:
            return set(_DEVSTACK_DEFINITION.findall(f.read())) or None
    except OSError:
        return None


def problems(refs, devstack_variables=None):
    """What is wrong with ``refs``: one message per bad reference.

    ``devstack_variables``: the ``GPU_P2P_*`` names devstack defines; None
    leaves devstack variables unchecked, but for their values.
    """
    options = {opt.dest: opt for opt in conf.OPTS}
    keys = {extra_specs.CLIQUE_KEY: extra_specs.parse_clique,
            extra_specs.NUMA_AFFINITY_KEY: extra_specs.parse_numa_affinity}
    commands = _subcommands()
    backends = _backends()
    found = []
    for ref in refs:
        where = 'line %d: ' % ref.line
        if ref.kind == 'option':
            opt = options.get(ref.name)
            if opt is None:
                found.append(where + '[gpu_p2p] %s is not an option (known: '
                             '%s)' % (ref.name, ', '.join(sorted(options))))
            elif not _placeholder(ref.value):
                try:
                    opt.type(ref.value)
                except ValueError as exc:
                    found.append(where + '[gpu_p2p] %s = %s: %s'
                                 % (ref.name, ref.value, exc))
                else:
                    if (ref.name == 'topology_backend' and backends
                            and ref.value not in backends):
                        found.append(
                            where + '[gpu_p2p] topology_backend = %s is not '
                            'an installed backend (%s)'
                            % (ref.value, ', '.join(sorted(backends))))
        elif ref.kind == 'flavor key':
            parse = keys.get(ref.name)
            if parse is None:
                found.append(where + 'flavor key %s does not exist (ours: '
                             '%s)' % (ref.name, ', '.join(sorted(keys))))
            elif not _placeholder(ref.value, upper=True):
                try:
                    parse(ref.value)
                except exception.InvalidExtraSpec as exc:
                    found.append(where + str(exc))
        elif ref.kind == 'trait':
            if ref.detail:
                # Cut short by "*" or "<...>": must start a real name.
                ok = (any(t.startswith(ref.name) for t in traits.OWNED)
                      or any(p.startswith(ref.name) or ref.name.startswith(p)
                             for p in _PER_GPU_TRAITS))
            elif ref.name.startswith(tuple(_PER_GPU_TRAITS)):
                prefix = next(p for p in _PER_GPU_TRAITS
                              if ref.name.startswith(p))
                suffix = ref.name[len(prefix):]
                ok = (suffix.isdigit()
                      and int(suffix) <= _PER_GPU_TRAITS[prefix])
            else:
                ok = ref.name in traits.OWNED
            if not ok:
                found.append(where + 'trait %s%s is not one the driver '
                             'reports (%s, %s0 to %d, or %s<id>)' % (
                                 ref.name, ref.detail or '',
                                 ', '.join(sorted(traits.OWNED)),
                                 traits.CLIQUE_ID_PREFIX,
                                 host_cliques.MAX_CLIQUE_ID,
                                 traits.PARTITION_PREFIX))
        elif ref.kind == 'devstack variable':
            if (devstack_variables is not None
                    and ref.name not in devstack_variables):
                found.append(where + 'devstack variable %s is not defined in '
                             'devstack/settings' % ref.name)
            opt = options.get(ref.name[len('GPU_P2P_'):].lower())
            if opt is not None and not _placeholder(ref.value):
                try:
                    opt.type(ref.value)
                except ValueError as exc:
                    found.append(where + '%s=%s ([gpu_p2p] %s): %s' % (
                        ref.name, ref.value, opt.dest, exc))
        elif ref.kind == 'command':
            flags = commands.get(ref.name)
            if flags is None:
                found.append(where + 'nova-gpu-p2p %s is not a subcommand '
                             '(known: %s)' % (ref.name,
                                              ', '.join(sorted(commands))))
                continue
            for flag in ref.detail:
                if flag not in flags:
                    found.append(where + 'nova-gpu-p2p %s has no option %s '
                                 '(known: %s)' % (
                                     ref.name, flag, ', '.join(sorted(
                                         f for f in flags
                                         if f.startswith('--')))))
    return found


def documents():
    """Repository-relative paths of the files the operators read."""
    paths = []
    for top, _dirs, files in os.walk(os.path.join(ROOT, 'doc', 'source')):
        paths.extend(os.path.join(top, f) for f in files
                     if f.endswith('.rst'))
    paths.append(os.path.join(ROOT, 'README.md'))
    for top, _dirs, files in os.walk(os.path.join(ROOT, 'devstack')):
        paths.extend(os.path.join(top, f) for f in files)
    return sorted(os.path.relpath(p, ROOT) for p in paths
                  if os.path.isfile(p))


class TestScanner(base.TestCase):
    """The scanner itself, on made-up text."""

    def _names(self, text, kind):
        return [(r.name, r.line) for r in references(text) if r.kind == kind]

    def test_option_forms(self):
        text = ('Set ``[gpu_p2p] p2p_level`` and ``[gpu_p2p]\n'
                '   acs_policy = route``; CONF.gpu_p2p.pcihole64.\n'
                'The ``[gpu_p2p]`` section and nova/virt/gpu_p2p.py and\n'
                'gpu_p2p.GPUP2PLibvirtDriver and nova_gpu_p2p.conf.\n'
                '\n'
                '.. code-block:: ini\n'
                '\n'
                '   [gpu_p2p]\n'
                '   # a comment = not an option\n'
                '   report_traits = False\n'
                '   [libvirt]\n'
                '   cpu_mode = host-passthrough\n'
                '\n'
                'iniset "$NOVA_CONF" gpu_p2p topology_backend "$X"\n')
        self.assertEqual(
            [('p2p_level', 1), ('acs_policy', 1), ('pcihole64', 2),
             ('topology_backend', 14), ('report_traits', 10)],
            self._names(text, 'option'))

    def test_ini_section_ends_with_block(self):
        text = ('::\n\n   [gpu_p2p]\n   p2p_level = PXB\n\n'
                'prose = not an option\n')
        self.assertEqual([('p2p_level', 4)], list(
            (n, ln) for ln, n, _ in ini_options(text)))

    def test_markdown_fence_ends_section(self):
        text = '```ini\n[gpu_p2p]\np2p_level = PXB\n```\nfoo = bar\n'
        self.assertEqual(['p2p_level'],
                         [n for _, n, _ in ini_options(text)])

    def test_unknown_names_fail_with_line(self):
        text = ('Use ``[gpu_p2p] p2p_levle``.\n'
                '``hw:gpu_clique=auto`` and ``hw:gpu_p2p_clique=sometimes``\n'
                'trait:CUSTOM_GPU_P2P_CLIQUE_3=required, '
                'CUSTOM_GPU_P2P_CLIQUE_ID_16 CUSTOM_GPU_P2P_PARTITION_X\n'
                '   $ nova-gpu-p2p topolgy\n'
                '``nova-gpu-p2p topology --jsn``\n'
                '``[gpu_p2p] p2p_level = PXE``\n')
        found = problems(references(text))
        self.assertEqual(9, len(found), found)
        for line, needle in ((1, 'p2p_levle'), (2, 'hw:gpu_clique'),
                             (2, 'sometimes'),
                             (3, 'CUSTOM_GPU_P2P_CLIQUE_3'),
                             (3, 'CUSTOM_GPU_P2P_CLIQUE_ID_16'),
                             (3, 'CUSTOM_GPU_P2P_PARTITION_X'),
                             (4, 'topolgy'), (5, '--jsn'), (6, 'PXE')):
            self.assertTrue(
                any(f.startswith('line %d: ' % line) and needle in f
                    for f in found), (line, needle, found))

    def test_good_names_pass(self):
        text = ('``hw:gpu_p2p_clique=7`` ``hw:gpu_numa_affinity=preferred``'
                ' ``hw:gpu_*`` CUSTOM_GPU_P2P_CLIQUE_* '
                'CUSTOM_GPU_P2P_CLIQUE_<N> CUSTOM_GPU_P2P_CLIQUE_ID_<ID>\n'
                'CUSTOM_GPU_P2P_CLIQUE_ID_15 CUSTOM_GPU_NUMA_AFFINITY '
                'CUSTOM_HGX_H100 CUSTOM_GPU_P2P_PARTITION_3 '
                'CUSTOM_GPU_P2P_PARTITION_<id>\n'
                '``[gpu_p2p] clique_map = 0000:81:00.0:0`` '
                '``[gpu_p2p] pcihole64 = 2048``\n'
                '``[gpu_p2p] topology_backend = static``\n'
                '$ sudo nova-gpu-p2p topology --sysfs-root /tmp/x --json\n'
                'nova-gpu-p2p flavor --gpus 2 --alias a100\n'
                'nova-gpu-p2p is a driver; enable_plugin nova-gpu-p2p URL\n')
        self.assertEqual([], problems(references(text)))

    def test_devstack_variables(self):
        text = ('GPU_P2P_P2P_LEVEL=PHB GPU_P2P_ACS_POLICY=sometimes\n'
                '$GPU_P2P_ALIAS GPU_P2P_ALIASES _GPU_P2P_INTERNAL '
                'GPU_P2P_<OPTION> GPU_P2P_${option^^}\n')
        found = problems(references(text),
                         {'GPU_P2P_P2P_LEVEL', 'GPU_P2P_ACS_POLICY',
                          'GPU_P2P_ALIAS'})
        self.assertEqual(2, len(found), found)
        self.assertIn('line 1: GPU_P2P_ACS_POLICY=sometimes ([gpu_p2p] '
                      'acs_policy)', found[0])
        self.assertEqual('line 2: devstack variable GPU_P2P_ALIASES is not '
                         'defined in devstack/settings', found[1])

    def test_prose_mentions_are_not_commands(self):
        text = ('nova-gpu-p2p makes GPUs work\n'
                '# nova-gpu-p2p devstack settings\n'
                'logs ``nova-gpu-p2p driver loaded: ...``\n'
                'pip install nova-gpu-p2p\n')
        self.assertEqual([], self._names(text, 'command'))


class TestDocumentedNamesExist(base.TestCase):
    """The docs, README and devstack plugin name only what exists."""

    def setUp(self):
        super().setUp()
        if not os.path.isdir(os.path.join(ROOT, 'doc', 'source')):
            self.skipTest('no doc/source next to the package (installed '
                          'without its source tree)')

    def test_every_reference_exists(self):
        found = []
        counts = collections.Counter()
        variables = _devstack_variables()
        for path in documents():
            try:
                with open(os.path.join(ROOT, path), encoding='utf-8') as f:
                    text = f.read()
            except UnicodeDecodeError:
                continue
            refs = references(text)
            counts.update(ref.kind for ref in refs)
            found.extend('%s:%s' % (path, problem[len('line '):])
                         for problem in problems(refs, variables))
        self.assertEqual([], found, '\n' + '\n'.join(found))
        # The patterns must keep finding the references they look for:
        # a scanner that finds nothing passes everything.
        for kind in ('option', 'flavor key', 'trait', 'command'):
            self.assertGreater(counts[kind], 10, kind)
        if variables is not None:
            self.assertGreater(counts['devstack variable'], 10)

    def test_docs_cover_every_option(self):
        """Each [gpu_p2p] option is explained outside the generated page."""
        named = set()
        for path in documents():
            with open(os.path.join(ROOT, path), encoding='utf-8') as f:
                named.update(ref.name for ref in references(f.read())
                             if ref.kind == 'option')
        missing = sorted({opt.dest for opt in conf.OPTS} - named)
        self.assertEqual([], missing)


#: "CUSTOM_GPU_NUMA_AFFINITY`` from libvirt 8.0.0 and QEMU 6.2.0".
_AFFINITY_VERSIONS = re.compile(
    r'NUMA_AFFINITY\W+(?:from|needs|with)' + _GAP + r'libvirt' + _GAP
    + r'(\d+(?:\.\d+)+)' + _GAP + 'and' + _GAP + 'QEMU' + _GAP
    + r'(\d+(?:\.\d+)+)')


def _version(text: str) -> tuple[int, ...]:
    """``8.0`` and ``8.0.0`` alike."""
    parts = tuple(int(part) for part in text.split('.'))
    return parts + (0,) * (3 - len(parts))


class TestStatedMinimums(base.TestCase):
    """Pages state the NUMA trait's libvirt and QEMU as the code checks.

    (:mod:`nova_gpu_p2p.min_versions`).
    """

    def test_numa_affinity_versions(self):
        stated = []
        for path in documents():
            with open(os.path.join(ROOT, path), encoding='utf-8') as f:
                text = f.read()
            stated.extend((path, _line_of(text, m.start()), m.group(1),
                           m.group(2))
                          for m in _AFFINITY_VERSIONS.finditer(text))
        self.assertNotEqual([], stated)
        wrong = ['%s:%s: libvirt %s and QEMU %s' % found
                 for found in stated if (_version(found[2]), _version(
                     found[3])) != (min_versions.LIBVIRT_NUMA_AFFINITY,
                                    min_versions.QEMU_NUMA_AFFINITY)]
        self.assertEqual([], wrong)
