"""What invocations leave behind, written: the one writer of their results (``commit``: a
run, a source's emits, its job's done mark, in one transaction), the in-process fan-out of
what was committed (``broker``), each account's storage quota (``quotas``), and the account
data stores components read and write (``data_stores``, and a test run's scratch copy).

May import ``engine/queue`` (a commit enqueues jobs) and ``engine/outbound`` (it stores a
webhook's deliveries); must not import auth, components, runs or the handlers.
"""
