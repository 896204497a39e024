"""The runner's error codes are defined once (``runtime/js/codes.json``): Python's constants and
the JS runtime's both come from it, no JS module spells a code or an error name as a literal,
and docs/runner-protocol.md lists every code the runner sends."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from sluice.runtime import protocol

JS = Path(protocol.__file__).parent / "js"
DOC = Path(__file__).resolve().parents[2] / "docs" / "runner-protocol.md"
PYTHON_ONLY = {"RUNNER_CRASHED"}  # made by Python when the runner is gone


def test_python_reads_the_table() -> None:
    table = json.loads((JS / "codes.json").read_text())["codes"]
    assert table == protocol.CODES
    for name in ("TIMEOUT", "OUT_OF_MEMORY", "LOAD_FAILED", "NOT_A_COMPONENT", "NO_RUN"):
        assert getattr(protocol, name) == name


def test_the_js_runtime_exports_every_code_of_the_table() -> None:
    script = (
        f"const m = await import({json.dumps((JS / 'codes.mjs').as_uri())});"
        "process.stdout.write(JSON.stringify(m));"
    )
    out = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    exported = json.loads(out.stdout)
    codes = {v for v in exported.values() if v in protocol.CODES}
    assert codes == set(protocol.CODES) - PYTHON_ONLY
    names = {v for k, v in exported.items() if k.endswith("_ERROR")}
    assert names == {c["name"] for c in protocol.CODES.values() if c["name"]}


def test_no_js_module_spells_a_code_or_an_error_name() -> None:
    words = set(protocol.CODES) | {c["name"] for c in protocol.CODES.values() if c["name"]}
    literal = re.compile(r"""["'`]({})["'`]""".format("|".join(sorted(w for w in words if w))))
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(JS.glob("*.mjs"))
        if path.name != "codes.mjs"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("//") and literal.search(line)
    ]
    assert not found, "use the constants of codes.mjs:\n" + "\n".join(found)


def test_the_protocol_doc_lists_every_code_the_runner_sends() -> None:
    doc = DOC.read_text()
    missing = [c for c in set(protocol.CODES) - PYTHON_ONLY if f"| `{c}` |" not in doc]
    assert not missing, f"docs/runner-protocol.md's table lacks {missing}"
