"""Thin async orchestration over storage and runtime: saving components, deploying and
invoking sources, running actions."""
