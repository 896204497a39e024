"""The HTTP edge: routes parse, make one platform call, render. Imports the platform, never
storage internals beyond reads, and nothing imports it but the CLI."""
