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

import logging

# Before anything else: eventlet patches the process here, as
# nova.tests.functional's own __init__ does for Nova's functional tests.
# oslo.context and oslo.db make threading.locals when imported (the
# request being logged; a context's open database transaction), and our
# test modules import nova.conf first: imported unpatched, those locals
# are one per OS thread, shared by every greenthread of the in-process
# cloud, and a compute write beside another greenthread's read with the
# same context fails ("Can't upgrade a READER transaction to a WRITER
# mid-transaction"; test_concurrency_mode).
import nova.tests.functional  # noqa: F401

# Nova logs two INFO lines per thread pool when a test's services stop,
# after the test's own log capture has ended: hundreds of lines in a CI
# log that say nothing. Everything else, failures included, stays.
logging.getLogger('nova.thread_pool_factory').setLevel(logging.WARNING)
