"""JavaScript tokens: just enough lexing to tell code from comments, strings, templates and
regex literals, so that ``imports.find_imports`` sees only real ``import``/``require`` code.

Pure (no I/O). Not a parser: a token's ``kind`` is all the scanner needs, and a source that is
not valid JavaScript still lexes (an unterminated literal becomes a ``bad`` token).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_TERMINATORS = "\n\r\u2028\u2029"
_WS_RE = re.compile(r"[\s\ufeff]+")
_LINE_COMMENT_RE = re.compile(rf"//[^{_LINE_TERMINATORS}]*")
_HASHBANG_RE = re.compile(rf"#![^{_LINE_TERMINATORS}]*")
_BLOCK_COMMENT_RE = re.compile(r"/\*.*?(?:\*/|\Z)", re.S)
_STRING_RES = {
    q: re.compile(rf"{q}(?:[^{q}\\{_LINE_TERMINATORS}]|\\(?:\r\n|[\s\S]))*{q}") for q in "\"'"
}
# Up to (not including) the next unescaped backtick or `${`.
_TEMPLATE_CHUNK_RE = re.compile(r"(?:[^`\\$]|\\[\s\S]|\$(?!\{))*")
_REGEX_RE = re.compile(
    rf"/(?![*/])(?:[^\\/\[{_LINE_TERMINATORS}]|\\[^{_LINE_TERMINATORS}]"
    rf"|\[(?:[^\]\\{_LINE_TERMINATORS}]|\\[^{_LINE_TERMINATORS}])*\])+/[\w$]*"
)
_NAME_RE = re.compile(r"[A-Za-z_$\u0080-\U0010ffff][\w$\u0080-\U0010ffff]*")
_NUMBER_RE = re.compile(r"\d[\w.]*|\.\d\w*")
_MULTI_PUNCT = ("...", "?.", "++", "--", "=>")

# After these keywords an expression starts, so `/` opens a regex rather than dividing.
_REGEX_AFTER_KEYWORDS = frozenset(
    {
        "return",
        "typeof",
        "instanceof",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "case",
        "do",
        "else",
        "yield",
        "await",
        "extends",
    }
)


@dataclass(frozen=True, slots=True)
class Token:
    """One token at ``source[start:end]``. A string's or template's ``text`` is what is
    between its quotes (escapes not decoded)."""

    # name | punct | num | str | tpl (template without substitutions) | tpl_end | regex
    # | bad (unterminated literal)
    kind: str
    text: str
    start: int
    end: int


def _regex_allowed(prev: Token | None) -> bool:
    """Whether a `/` after ``prev`` starts a regex literal (the usual previous-token heuristic)."""
    if prev is None:
        return True
    if prev.kind == "punct":
        # `}` usually ends a block (regex may follow); `)`/`]`/postfix ++ end an operand.
        return prev.text not in (")", "]", "++", "--")
    if prev.kind == "name":
        return prev.text in _REGEX_AFTER_KEYWORDS
    return False


def tokenize(src: str) -> list[Token]:
    """The tokens of ``src`` in source order; comments and whitespace are dropped."""
    return _Lexer(src).run()


class _Lexer:
    """One pass over a source: each method lexes the token starting at a position, appends it
    and returns where the next one may start."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.n = len(src)
        self.toks: list[Token] = []
        # One entry per open template substitution `${`: the `{` depth inside it, so the `}`
        # that closes the substitution (and resumes the template) is told apart from ordinary
        # braces.
        self.subst_depths: list[int] = []

    def run(self) -> list[Token]:
        i = 0
        if self.src.startswith("#!"):  # hashbang line
            m = _HASHBANG_RE.match(self.src, 0)
            i = m.end() if m else self.n
        while i < self.n:
            i = self.token(i)
        return self.toks

    def add(self, kind: str, text: str, start: int, end: int) -> int:
        self.toks.append(Token(kind, text, start, end))
        return end

    def token(self, i: int) -> int:
        src, n = self.src, self.n
        c = src[i]
        if c.isspace() or c == "\ufeff":
            m = _WS_RE.match(src, i)
            return m.end() if m else i + 1
        if c == "/":
            return self.slash(i)
        if c in "\"'":
            return self.string(i)
        if c == "`":
            return self.template(i + 1, i, head=True)
        if c == "}" and self.subst_depths and self.subst_depths[-1] == 0:
            self.subst_depths.pop()
            return self.template(i + 1, i, head=False)
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = _NUMBER_RE.match(src, i)
            end = m.end() if m else i + 1
            return self.add("num", src[i:end], i, end)
        if (m := _NAME_RE.match(src, i)) is not None:
            return self.add("name", m.group(), i, m.end())
        return self.punct(i)

    def slash(self, i: int) -> int:
        """A comment (skipped), a regex literal or the division operator."""
        src = self.src
        if src.startswith("//", i):
            m = _LINE_COMMENT_RE.match(src, i)
            return m.end() if m else self.n
        if src.startswith("/*", i):
            m = _BLOCK_COMMENT_RE.match(src, i)
            return m.end() if m else self.n
        m = (
            _REGEX_RE.match(src, i)
            if _regex_allowed(self.toks[-1] if self.toks else None)
            else None
        )
        if m:
            return self.add("regex", m.group(), i, m.end())
        return self.add("punct", "/", i, i + 1)

    def string(self, i: int) -> int:
        src, n = self.src, self.n
        m = _STRING_RES[src[i]].match(src, i)
        if m:
            return self.add("str", src[i + 1 : m.end() - 1], i, m.end())
        # Unterminated: skip to the end of the line, it cannot hold a specifier.
        j = i + 1
        while j < n and src[j] not in _LINE_TERMINATORS:
            j += 2 if src[j] == "\\" else 1
        return self.add("bad", src[i:j], i, min(j, n))

    def template(self, pos: int, tok_start: int, head: bool) -> int:
        """Scan template text from ``pos``; return where code resumes."""
        src, n = self.src, self.n
        m = _TEMPLATE_CHUNK_RE.match(src, pos)
        end = m.end() if m else pos
        if end >= n:
            return self.add("bad", src[tok_start:n], tok_start, n)
        if src[end] == "`":
            return self.add("tpl" if head else "tpl_end", src[pos:end], tok_start, end + 1)
        # `${`: code follows, as after any opening brace.
        self.subst_depths.append(0)
        return self.add("punct", "${", end, end + 2)

    def punct(self, i: int) -> int:
        src = self.src
        text = next((p for p in _MULTI_PUNCT if src.startswith(p, i)), src[i])
        if self.subst_depths and text == "{":
            self.subst_depths[-1] += 1
        elif self.subst_depths and text == "}":
            self.subst_depths[-1] -= 1
        return self.add("punct", text, i, i + len(text))


def calls_respond(src: str) -> bool:
    """Whether code (not a comment or a string) calls ``$.respond(`` or ``$respond(``.

    >>> calls_respond("async run({ $ }) { await $.respond({ status: 200 }); }")
    True
    >>> calls_respond('// TODO $.respond()\\nconst s = "$.respond(";')
    False
    """
    toks = [t for t in tokenize(src) if t.kind in ("name", "punct")]
    for i, tok in enumerate(toks):
        follows = [t.text for t in toks[i + 1 : i + 4]]
        if tok.text == "$" and follows == [".", "respond", "("]:
            return True
        if tok.text == "$respond" and follows[:1] == ["("]:
            return True
    return False
