"""Searching the registry by a sentence (Pipedream's ``GET /v1/components/search``), pure.

Pipedream matches a query such as "Send a message to Slack on new HubSpot contacts" to its
components by the cosine similarity of embeddings. Sluice has no model, so a component's score
is the share of the query's words (lowercase, without short and common words, a plural ``s``
dropped) found in its key, name and description; the ``similarity_threshold`` applies to it.

>>> found = rank("Send a message to Slack on new HubSpot contacts", [
...     Candidate("slack-send-message", "action", ("slack",), "Send Message", "Send a message"),
...     Candidate("hubspot-new-contact", "source", ("hubspot",), "New Contact", None),
...     Candidate("gitlab-new-issue", "source", ("gitlab",), "New Issue", None)])
>>> [(m.key, m.score) for m in found]
[('slack-send-message', 0.6), ('hubspot-new-contact', 0.4)]
>>> [m.key for m in rank("new contact", [], app="hubspot")]
[]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Words that say nothing of what a component does.
_COMMON = frozenset(
    {"a", "an", "and", "the", "to", "on", "of", "in", "for", "from", "with", "when", "whenever",
     "into", "my", "me", "i", "is", "are", "it", "its", "by", "at", "or", "as", "be", "new"}
)  # fmt: skip
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Candidate:
    key: str
    #: ``source`` or ``action``.
    component_type: str
    #: The apps it belongs to: its key's prefix and its app props' apps.
    apps: tuple[str, ...]
    name: str
    description: str | None


@dataclass(frozen=True)
class Match:
    key: str
    component_type: str
    #: 0 to 1, two decimals.
    score: float


def words(text: str) -> list[str]:
    """The words of ``text`` a match is scored on.

    >>> words("Send messages to Slack on new HubSpot contacts")
    ['send', 'message', 'slack', 'hubspot', 'contact']
    """
    out = []
    for w in _WORD.findall(text.lower()):
        if len(w) < 2 or w in _COMMON:
            continue
        stem = w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
        if stem not in out:
            out.append(stem)
    return out


def rank(
    query: str, candidates: list[Candidate], *, app: str | None = None, threshold: float = 0.0
) -> list[Match]:
    """The candidates that match at least one word (and ``threshold``), best first; ties keep
    the candidates' order. ``app`` keeps those of that app."""
    wanted = words(query)
    if not wanted:
        return []
    found = []
    for c in candidates:
        if app is not None and app not in c.apps:
            continue
        have = set(words(" ".join((c.key.replace("-", " "), c.name, c.description or ""))))
        hits = sum(1 for w in wanted if w in have)
        score = round(hits / len(wanted), 2)
        if hits and score >= threshold:
            found.append(Match(c.key, c.component_type, score))
    return sorted(found, key=lambda m: -m.score)
