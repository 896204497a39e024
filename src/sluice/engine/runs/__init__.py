"""Running user code and keeping what it did: a source deployed, run by hand or on an event
(``sources``, ``source_props``, ``invoker``), a workflow run (``executor``), a run a client
waits for (``client_runs``), the builder's Test runs (``step_tests``), paused runs' resume and
cancel URLs (``pauses``), the files endpoints keep (``files``), and workflow runs as the API
reads them (``workflow_runs``).

May import every engine package but the handlers and the entries at ``engine/``'s top level.
"""
