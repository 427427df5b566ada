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

"""Run one :mod:`demo_cloud` method from a script, with Nova kept quiet.

Nova's services, eventlet and the test fixtures write warnings and log
lines to stdout and stderr, from import time until the last thread pool
shuts down; the scripts print a report instead, and show that output
only when the run failed (:func:`tests.fixtures.output.quiet`). Nothing
of Nova is imported before the output is redirected.
"""

import importlib
import sys
import typing
import unittest

from tests.fixtures import output

#: How much of the captured output and traceback a failure shows.
FAILURE_TAIL = 8000


#: Nova's functional test package: importing it patches with eventlet.
FUNCTIONAL = 'nova.tests.functional'


class CloudFailed(Exception):
    """The in-process cloud did not do what the method expected."""


def patch_first() -> None:
    """Patch with eventlet as Nova's functional tests do, before Nova loads.

    oslo.db keeps each request context's transaction in a thread-local
    class made when it is imported: imported unpatched, every greenthread
    of an in-process cloud shares it, and a write beside another
    greenthread's read fails ("Can't upgrade a READER transaction to a
    WRITER"). The tools call this before they import anything of Nova;
    it refuses to run after, instead of leaving a cloud to fail at random.
    """
    if FUNCTIONAL in sys.modules:
        return  # Nova's functional tests (stestr) patched before Nova.
    if 'oslo_db.sqlalchemy.enginefacade' in sys.modules:
        raise RuntimeError(
            'oslo.db was imported before cloud_runner.patch_first(): '
            'import Nova (and what imports it) after the call')
    with output.quiet():
        importlib.import_module(FUNCTIONAL)


def run(method: str, cloud: str = 'demo_cloud.HGXCloud',
        progress: typing.Callable[[str], str] | None = None,
        **attributes: object) -> list:
    """Run ``HGXCloud(method)``; what it hands to its sink, in order.

    ``cloud`` names another test case class with a ``sink``, as
    ``module.Class`` under ``lab``.
    ``attributes`` are set on the test case first (rounds, number, goal).
    ``progress`` turns each step the case reports (its ``progress``
    attribute) into a line shown on standard output while Nova's own
    output is kept.
    Raises CloudFailed, with the traceback and the tail of Nova's output,
    when the method fails, for example when the server does not go ACTIVE.
    """
    found: list = []
    with output.terminal() as screen, output.quiet() as log:
        module, _, name = cloud.rpartition('.')
        case = getattr(importlib.import_module(
            'lab.' + module), name)(method)
        case.sink = found.append
        if progress is not None:
            case.progress = lambda step: print(progress(step), file=screen)
        for name, value in attributes.items():
            setattr(case, name, value)
        result = unittest.TestResult()
        case.run(result)
    problems = result.errors + result.failures
    if problems or not found:
        log.seek(0)
        tail = log.read()[-FAILURE_TAIL:]
        details = '\n'.join(text[-FAILURE_TAIL:] for _, text in problems)
        raise CloudFailed('%s failed.\n--- output (tail) ---\n%s\n'
                          '--- failure ---\n%s' % (
                              method, tail, details or 'nothing reported'))
    return found
