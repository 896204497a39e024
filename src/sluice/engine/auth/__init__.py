"""Who acts and with what: accounts (made whole, with their default error workflow), browser
logins, API keys and OAuth API clients, the app catalog, connected accounts (``apps``) and
their OAuth connection and fresh tokens (``oauth``, ``providers``, ``credentials``), and
verified e-mail addresses.

May import ``engine/state``, ``engine/queue`` and ``engine/outbound``; must not import
components, runs or the handlers.
"""
