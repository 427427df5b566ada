import logging

# Nova logs two INFO lines per thread pool when a test's services stop,
# after the test's own log capture has ended: hundreds of lines in a CI
# log that say nothing. Everything else, failures included, stays.
logging.getLogger('nova.thread_pool_factory').setLevel(logging.WARNING)
