"""The durable job queue: the worker that claims jobs and runs their handlers (``jobs``), what
it holds (slots, account shares, leases) and its wake-up at the next due job, in one module
(``jobs``); the group commit of new jobs (``enqueuer``), the scheduler that fires timers
as jobs, and the endpoints' load shedding on the queue's backlog (``admission``).

Must not import any other engine package: everything else enqueues through it, and the
handlers it runs are handed to it by the platform (``engine/handlers``).
"""
