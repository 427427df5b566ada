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

"""Long work off nova-compute's eventlet hub, and what must stay on it.

Under eventlet, nova-compute runs every greenthread on one OS thread: a
call that never yields (discovery reads thousands of sysfs files and may
call NVML) stalls them all for as long as it runs. :func:`run` runs such a
call in eventlet's pool of native threads while the hub goes on.

The privsep client works only on the hub's thread (its futures are green
objects), so a native thread cannot call privsep. :func:`on_hub` hands a
call back to the greenthread waiting in :func:`run`, which makes it on
the hub (waiting on the daemon yields to the other greenthreads) and
passes the result back.

Where nova-compute runs in Nova's native threading mode, or eventlet has
not patched the process (the CLI, tests), both just make the call.
"""

from collections.abc import Callable
import functools
from typing import Any

#: How often the greenthread waiting in :func:`run` looks for calls from
#: its native thread.
POLL_S = 0.002

# A native-thread-local (eventlet's original threading.local), set on the
# first run under eventlet: the calls its native thread hands back.
_local: Any = None


def _eventlet_patched() -> bool:
    from nova import monkey_patch
    return monkey_patch.is_patched()


def _outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, call()
    except Exception as exc:
        return False, exc


def run(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)``, in a native thread where eventlet runs the hub."""
    if not _eventlet_patched():
        return func(*args)
    import eventlet
    from eventlet import patcher
    from eventlet import tpool
    global _local
    if _local is None:
        _local = patcher.original('threading').local()
    native_queue = patcher.original('queue')
    requests = native_queue.Queue()
    get_ident = patcher.original('threading').get_ident
    hub_thread = get_ident()

    def job() -> tuple[bool, Any]:
        # tpool runs it right here when it has no threads: then there is
        # nobody to hand calls back to, and none is needed.
        if get_ident() != hub_thread:
            _local.requests = requests
        try:
            return _outcome(functools.partial(func, *args))
        finally:
            _local.requests = None

    worker = eventlet.spawn(tpool.execute, job)
    while not worker.dead:
        try:
            call, reply = requests.get_nowait()
        except native_queue.Empty:
            eventlet.sleep(POLL_S)
            continue
        reply.put(_outcome(call))
    ok, value = worker.wait()
    if not ok:
        raise value
    return value


def on_hub(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` on the hub's thread, from a :func:`run` thread.

    Called anywhere else, it just calls.
    """
    requests = getattr(_local, 'requests', None)
    if requests is None:
        return func(*args)
    from eventlet import patcher
    reply = patcher.original('queue').Queue(maxsize=1)
    requests.put((functools.partial(func, *args), reply))
    ok, value = reply.get()
    if not ok:
        raise value
    return value
