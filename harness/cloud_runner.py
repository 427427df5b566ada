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
shuts down; the tools print a report instead, and show that output only
when the run failed. Nothing of Nova is imported before the output is
redirected.
"""

import contextlib
import importlib
import os
import sys
import tempfile
import typing
import unittest
import warnings

#: How much of the captured output and traceback a failure shows.
FAILURE_TAIL = 8000


class CloudFailed(Exception):
    """The in-process cloud did not do what the method expected."""


@contextlib.contextmanager
def quiet() -> typing.Iterator[typing.TextIO]:
    """Send file descriptors 1 and 2 to a temporary file, then restore."""
    sys.stdout.flush()
    sys.stderr.flush()
    log = tempfile.TemporaryFile(mode='w+', encoding='utf-8',
                                 errors='replace')
    saved = os.dup(1), os.dup(2)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            yield log
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def patch_first() -> None:
    """Patch with eventlet as Nova's functional tests do, before Nova loads.

    oslo.db keeps each request context's transaction in a thread-local
    class made when it is imported: imported unpatched, every greenthread
    of an in-process cloud shares it, and a write beside another
    greenthread's read fails ("Can't upgrade a READER transaction to a
    WRITER"). The tools call this before they import anything of Nova.
    """
    with quiet():
        importlib.import_module('nova.tests.functional')


def run(method: str, cloud: str = 'demo_cloud.HGXCloud',
        **attributes: object) -> list:
    """Run ``HGXCloud(method)``; what it hands to its sink, in order.

    ``cloud`` names another test case class with a ``sink``, as
    ``module.Class`` under ``harness``.
    ``attributes`` are set on the test case first (rounds, number, goal).
    Raises CloudFailed, with the traceback and the tail of Nova's output,
    when the method fails, for example when the server does not go ACTIVE.
    """
    found: list = []
    with quiet() as log:
        module, _, name = cloud.rpartition('.')
        case = getattr(importlib.import_module(
            'harness.' + module), name)(method)
        case.sink = found.append
        for name, value in attributes.items():
            setattr(case, name, value)
        result = unittest.TestResult()
        case.run(result)
    problems = result.errors + result.failures
    if problems or not found:
        log.seek(0)
        output = log.read()[-FAILURE_TAIL:]
        details = '\n'.join(text[-FAILURE_TAIL:] for _, text in problems)
        raise CloudFailed('%s failed.\n--- output (tail) ---\n%s\n'
                          '--- failure ---\n%s' % (
                              method, output, details or 'nothing reported'))
    return found
