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

"""The in-process cloud's greenthreads keep their database transactions apart.

oslo.db keeps a request context's open transaction in a ``threading.local``
made when oslo.db is imported. Imported before eventlet patches the process,
that local is one per OS thread, so every greenthread shares it: a compute
greenthread reading with a context (the resource tracker's compute node
keeps one) makes another greenthread's write with it fail with "Can't
upgrade a READER transaction to a WRITER mid-transaction".
``tests/functional/__init__.py`` patches first, as Nova's own functional
tests do.
"""

import eventlet
from eventlet import event
from nova import context as nova_context
from nova.db.main import api as main_db
from nova import test


class GreenthreadTransactionsTest(test.TestCase):

    def test_writer_beside_another_greenthreads_reader(self):
        ctxt = nova_context.get_admin_context()
        reading = event.Event()
        release = event.Event()

        def reader():
            with main_db.context_manager.reader.using(ctxt):
                reading.send()
                release.wait()

        thread = eventlet.spawn(reader)
        reading.wait()
        try:
            with main_db.context_manager.writer.using(ctxt):
                pass
        finally:
            release.send()
            thread.wait()
