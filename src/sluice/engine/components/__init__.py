"""What user code is: components saved (files, dependencies, loaded in Node, checked) and
imported from the registry (``components``, ``registry_import``, ``core_components``,
``fetch``), workflows defined and checked (``workflows``, ``workflow_input``, ``env_vars``),
props resolved while configured (``options``, ``dynamic_props``), actions run on their own,
which deployment answers an endpoint (``directory``), subscriptions between emitters and
listeners, and the one builder of every ``Invocation`` the runner pool is handed
(``invocations``).

May import ``engine/auth``, ``engine/state``, ``engine/queue`` and ``engine/outbound``; must
not import runs or the handlers.
"""
