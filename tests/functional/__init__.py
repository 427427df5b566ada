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
