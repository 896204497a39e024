"""Pure decisions, no I/O: component shape and prop rules, dedupe, imports. Imports neither
asyncio nor a framework, nor any other Sluice package but ``errors``."""
