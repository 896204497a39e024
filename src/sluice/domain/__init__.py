"""Pure decisions, no I/O: component shape and prop rules, dedupe, imports; and the values the
platform hands out (``Account``, ``Deployment``, ``Run``...), which storage returns. Imports
neither asyncio nor a framework, nor any other Sluice package but ``errors`` and ``ids``."""
