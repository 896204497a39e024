"""Import discovery, specifier parsing and dependency planning (pure, no npm)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.domain.imports import (
    NODE_BUILTIN_MODULES,
    DependencyPlan,
    ImportKind,
    ImportRef,
    PackageSpec,
    dependencies_key,
    find_imports,
    parse_specifier,
    plan_dependencies,
)
from sluice.errors import InvalidComponent


def specs(source: str) -> list[tuple[str, str]]:
    return [(ref.specifier, ref.kind) for ref in find_imports(source)]


# ---------------------------------------------------------------------------- find_imports


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('import axios from "axios@0.19.2";', [("axios@0.19.2", "import")]),
        ("import _, { get as g } from 'lodash@^4'", [("lodash@^4", "import")]),
        ('import * as ns from "@s/n@1.2.3/sub/p.js"', [("@s/n@1.2.3/sub/p.js", "import")]),
        ('import "side-effect"', [("side-effect", "import")]),
        ('import {\n  a,\n  b as c,\n} from "multi-line"', [("multi-line", "import")]),
        ('import { "odd name" as x } from "quoted"', [("quoted", "import")]),
        ('import from from "from-pkg"', [("from-pkg", "import")]),
        ('import cfg from "./c.json" with { type: "json" }', [("./c.json", "import")]),
        ('import type { T } from "types-only"', [("types-only", "import")]),
        ('export { a, b as c } from "re"', [("re", "import")]),
        (
            'export * from "star"; export * as ns from "star-ns"',
            [("star", "import"), ("star-ns", "import")],
        ),
        ("const x = require(\"x\"); const y = require('y')", [("x", "require"), ("y", "require")]),
        ("const t = require(`tpl`)", [("tpl", "require")]),
        ('import x = require("ts-cjs")', [("ts-cjs", "require")]),
        (
            'await import("dyn"); import(\'d2\', { with: { type: "json" } })',
            [("dyn", "dynamic"), ("d2", "dynamic")],
        ),
        ("const { default: m } = await import(`tpl-dyn`)", [("tpl-dyn", "dynamic")]),
        ('#!/usr/bin/env node\nrequire("after-hashbang")', [("after-hashbang", "require")]),
    ],
)
def test_finds_every_import_form(source: str, expected: list[tuple[str, str]]) -> None:
    assert specs(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        '// require("line-comment")',
        '/* import x from "block" */',
        "/* multi\nline require('x')\n*/",
        "const s = \"require('in-string')\"",
        "const s = 'import x from \"in-string\"'",
        "const u = \"http://example.com//path\"; const v = 'a /* b'",
        'const t = `require("in-template")`',
        "const t = `a ${b} import('nope')`",
        'const r = /require("in-regex")/g',
        'const r = x.replace(/["\']/g, ""); const q = /import("y")/',
        'obj.require("member"); obj?.require("opt"); this.#require("priv")',
        'x.import("member-import")',
        "const m = import.meta.url",
        'export default "not-a-module"',
        'export const from = "not-a-module"',
        'require("a", "b")',
        "require(name)",
        'import(prefix + "x")',
        "require(`tpl-${x}`)",
        'require("esc\\u0061ped")',
    ],
)
def test_ignores_non_imports(source: str) -> None:
    assert specs(source) == []


def test_code_inside_template_substitutions_is_scanned() -> None:
    source = (
        'const t = `a ${require("inside")} b ${ {k: `x${require("nested")}`}.k } c`;'
        ' require("after")'
    )
    assert [s for s, _ in specs(source)] == ["inside", "nested", "after"]


def test_division_is_not_mistaken_for_a_regex() -> None:
    source = 'const a = b / 2 / require("after-div"); const c = (d) / e; require("after-paren-div")'
    assert [s for s, _ in specs(source)] == ["after-div", "after-paren-div"]


def test_regex_with_quote_and_slash_in_class() -> None:
    source = 'const q = (x) => /"[/]/.test(x) && require("after-regex")'
    assert [s for s, _ in specs(source)] == ["after-regex"]


def test_regex_after_block_end() -> None:
    source = 'if (a) { b() } /"/.exec(s); require("ok")'
    assert [s for s, _ in specs(source)] == ["ok"]


def test_unterminated_literals_do_not_crash() -> None:
    assert specs('const s = "unterminated\nrequire("next-line")') == [("next-line", "require")]
    assert specs("const t = `never closed require('x')") == []
    assert specs('/* never closed require("x")') == []


def test_offsets_point_at_the_specifier_text() -> None:
    source = "import a from \"lodash@^4\";\nconst b = require('@s/p@1/x.js');\nawait import(`dyn`)"
    refs = find_imports(source)
    assert [source[r.start : r.end] for r in refs] == ["lodash@^4", "@s/p@1/x.js", "dyn"]
    assert refs[0] == ImportRef("lodash@^4", 15, 24, "import")


def test_real_component_shape() -> None:
    source = """
import { axios, ConfigurationError } from "@pipedream/platform";
import common from "../common/base.mjs";
import get from "lodash/get.js";
import crypto from "crypto";
import { readFile } from "node:fs/promises";

export default {
  ...common,
  key: "slack-send-message",
  props: { url: { type: "string", description: "e.g. https://hooks.slack.com/x" } },
  async run({ $ }) {
    const re = /^https:\\/\\/hooks\\.slack\\.com\\//;
    if (!re.test(this.url)) throw new ConfigurationError(`Bad URL: ${this.url}`);
    const { default: FormData } = await import("form-data");
    return axios($, { url: this.url, data: new FormData() });
  },
};
"""
    assert [s for s, _ in specs(source)] == [
        "@pipedream/platform",
        "../common/base.mjs",
        "lodash/get.js",
        "crypto",
        "node:fs/promises",
        "form-data",
    ]


# ---------------------------------------------------------------------------- parse_specifier


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("axios", PackageSpec("axios", None, None)),
        ("axios@0.19.2", PackageSpec("axios", "0.19.2", None)),
        ("lodash@^4", PackageSpec("lodash", "^4", None)),
        ("lodash/get.js", PackageSpec("lodash", None, "/get.js")),
        ("lodash@4.17.21/get", PackageSpec("lodash", "4.17.21", "/get")),
        ("@pipedream/platform", PackageSpec("@pipedream/platform", None, None)),
        (
            "@pipedream/platform@^3.1/dist/axios.js",
            PackageSpec("@pipedream/platform", "^3.1", "/dist/axios.js"),
        ),
        ("got@~11.0.0", PackageSpec("got", "~11.0.0", None)),
        ("uuid@latest", PackageSpec("uuid", "latest", None)),
        ("pkg@next", PackageSpec("pkg", "next", None)),
        ("pkg@>=1.2.3", PackageSpec("pkg", ">=1.2.3", None)),
        ("pkg@^1||^2", PackageSpec("pkg", "^1||^2", None)),
        ("pkg@1.x", PackageSpec("pkg", "1.x", None)),
        ("pkg@*", PackageSpec("pkg", "*", None)),
        ("pkg@1.0.0-rc.1+build.5", PackageSpec("pkg", "1.0.0-rc.1+build.5", None)),
        ("JSONStream", PackageSpec("JSONStream", None, None)),  # legacy mixed-case name
        ("punycode/", PackageSpec("punycode", None, "/")),  # Node: userland, not built-in
        ("events@3.3.0", PackageSpec("events", "3.3.0", None)),
        ("fs/not-builtin", PackageSpec("fs", None, "/not-builtin")),
    ],
)
def test_parse_bare_specifiers(spec: str, expected: PackageSpec) -> None:
    assert parse_specifier(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "./x.mjs",
        "../common/base.mjs",
        "/abs/path.js",
        ".",
        "..",
        "#internal",
        "fs",
        "fs/promises",
        "node:fs",
        "node:test",
        "node:sqlite",
        "crypto",
        "worker_threads",
        "http://example.com/x.js",
        "https://esm.sh/lodash",
        "data:text/javascript,export default 1",
        "file:///tmp/x.mjs",
    ],
)
def test_non_packages_are_none(spec: str) -> None:
    assert parse_specifier(spec) is None


def test_every_node_builtin_is_none() -> None:
    assert len(NODE_BUILTIN_MODULES) == 68
    for name in NODE_BUILTIN_MODULES:
        assert parse_specifier(name) is None
        assert parse_specifier(f"node:{name}") is None


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "lodash@",
        "@scope",
        "@scope/",
        ".hidden",
        "_private",
        "-dash",
        "@scope/.dot",
        "node_modules",
        "with space",
        "a%20b",
        "caf\u00e9",
        "x" * 215,
        "lodash@>=4<5",
        "lodash@..",
        "lodash@.5",
        "lodash@^4%",
        "lodash@-1",
    ],
)
def test_invalid_bare_specifiers_raise(spec: str) -> None:
    with pytest.raises(InvalidComponent) as info:
        parse_specifier(spec)
    assert repr(spec) in info.value.message


def test_package_spec_bare() -> None:
    assert PackageSpec("@s/p", "1", "/x.js").bare == "@s/p/x.js"
    assert PackageSpec("p", "1", None).bare == "p"


# ---------------------------------------------------------------------------- plan_dependencies


def test_empty_plan_has_a_fixed_key() -> None:
    plan = plan_dependencies({"a.mjs": 'import x from "./x.mjs"; import fs from "fs"'})
    assert plan.dependencies == {}
    assert plan.key == hashlib.sha256(b"{}").hexdigest()
    assert plan.key == plan_dependencies({}).key == dependencies_key({})


def test_pinned_specifiers_are_rewritten_to_bare_names() -> None:
    files = {
        "actions/send/send.mjs": (
            'import axios from "axios@0.19.2";\n'
            'import { axios as pd } from "@pipedream/platform@^3.1/dist/axios.js";\n'
            'import app from "../../slack.app.mjs";\n'
        ),
        "slack.app.mjs": 'import get from "lodash/get.js";\nexport default {};\n',
        "README.md": 'require("axios@9")',
    }
    plan = plan_dependencies(files)
    assert plan.dependencies == {
        "axios": "0.19.2",
        "@pipedream/platform": "^3.1",
        "lodash": "latest",
    }
    assert plan.files == {
        "actions/send/send.mjs": (
            'import axios from "axios";\n'
            'import { axios as pd } from "@pipedream/platform/dist/axios.js";\n'
            'import app from "../../slack.app.mjs";\n'
        ),
        "slack.app.mjs": files["slack.app.mjs"],
        "README.md": files["README.md"],
    }
    assert plan.key == dependencies_key(plan.dependencies)


def test_different_pins_of_one_package_get_aliases() -> None:
    files = {
        "a.mjs": 'import odd from "is-odd@3.0.1";',
        "b.cjs": 'const odd = require("is-odd@^2"); const o2 = require("is-odd@^2/index.js");',
        "c.js": 'const again = require("is-odd@3.0.1");',
    }
    plan = plan_dependencies(files)
    alias = f"is-odd__{hashlib.sha256(b'is-odd@^2').hexdigest()[:8]}"
    assert plan.dependencies == {"is-odd": "3.0.1", alias: "npm:is-odd@^2"}
    assert plan.files["a.mjs"] == 'import odd from "is-odd";'
    assert plan.files["b.cjs"] == (
        f'const odd = require("{alias}"); const o2 = require("{alias}/index.js");'
    )
    assert plan.files["c.js"] == 'const again = require("is-odd");'


def test_unpinned_use_keeps_the_name_and_pins_get_aliases() -> None:
    plan = plan_dependencies(
        {"a.mjs": 'import _ from "lodash@^3";', "b.mjs": 'import _ from "lodash";'}
    )
    assert plan.dependencies["lodash"] == "latest"
    (alias,) = (name for name in plan.dependencies if name != "lodash")
    assert plan.dependencies[alias] == "npm:lodash@^3"
    assert plan.files["a.mjs"] == f'import _ from "{alias}";'
    assert plan.files["b.mjs"] == 'import _ from "lodash";'


def test_scoped_alias_name_is_flattened_and_valid() -> None:
    plan = plan_dependencies(
        {"a.mjs": 'import "@pipedream/platform@^3"; import "@pipedream/platform@^1/x.js";'}
    )
    (alias,) = (name for name in plan.dependencies if name != "@pipedream/platform")
    assert alias.startswith("pipedream__platform__")
    assert plan.dependencies[alias] == "npm:@pipedream/platform@^1"
    assert parse_specifier(alias) == PackageSpec(alias, None, None)
    assert f'import "{alias}/x.js"' in plan.files["a.mjs"]


def test_pinned_package_named_like_a_builtin_is_aliased() -> None:
    # Rewriting "events@3.3.0" to "events" would load Node's built-in instead.
    plan = plan_dependencies({"a.cjs": 'require("events@3.3.0"); require("fs")'})
    (alias,) = plan.dependencies
    assert alias.startswith("events__")
    assert plan.dependencies == {alias: "npm:events@3.3.0"}
    assert plan.files["a.cjs"] == f'require("{alias}"); require("fs")'


def test_package_json_ranges_apply_to_unpinned_imports() -> None:
    package_json = {
        "dependencies": {"@pipedream/platform": "^3.0.0", "unused": "1"},
        "peerDependencies": {"axios": "^1", "@pipedream/platform": "^1"},
        "optionalDependencies": {"got": ">= 11 < 12"},
    }
    files = {
        "a.mjs": (
            'import { axios } from "@pipedream/platform"; import ax from "axios";'
            ' import got from "got"; import x from "x@2"; import y from "y";'
        )
    }
    plan = plan_dependencies(files, package_json)
    assert plan.dependencies == {
        "@pipedream/platform": "^3.0.0",
        "axios": "^1",
        "got": ">= 11 < 12",
        "x": "2",
        "y": "latest",
    }


def test_pin_wins_over_package_json() -> None:
    plan = plan_dependencies({"a.mjs": 'import "axios@0.19.2"'}, {"dependencies": {"axios": "^1"}})
    assert plan.dependencies == {"axios": "0.19.2"}


@pytest.mark.parametrize(
    "value", ["file:../x", "github:u/r", "git+https://x/y.git", "npm:other@1", 3, "../up"]
)
def test_non_registry_package_json_range_raises(value: object) -> None:
    with pytest.raises(InvalidComponent, match="axios"):
        plan_dependencies({"a.mjs": 'import "axios"'}, {"dependencies": {"axios": value}})


def test_invalid_specifier_in_a_file_raises_naming_it() -> None:
    with pytest.raises(InvalidComponent, match="lodash@>=4<5"):
        plan_dependencies({"a.mjs": 'import "lodash@>=4<5"'})


def test_key_is_independent_of_file_order() -> None:
    a = {"a.mjs": 'import "x@1"', "b.mjs": 'import "y@2"'}
    b = dict(reversed(list(a.items())))
    assert plan_dependencies(a).key == plan_dependencies(b).key
    assert (
        plan_dependencies(a).key
        == hashlib.sha256(
            json.dumps({"x": "1", "y": "2"}, separators=(",", ":")).encode()
        ).hexdigest()
    )


def test_ts_and_commonjs_files_are_scanned() -> None:
    plan = plan_dependencies(
        {"a.ts": 'import { defineAction } from "@pipedream/types@0.3.4"', "b.cjs": 'require("c")'}
    )
    assert plan.dependencies == {"@pipedream/types": "0.3.4", "c": "latest"}
    assert isinstance(plan, DependencyPlan)


# ---------------------------------------------------------------------------- properties

_name_part = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,12}", fullmatch=True)
_names = st.one_of(
    _name_part.filter(lambda n: n not in NODE_BUILTIN_MODULES and n != "node_modules"),
    st.builds(lambda s, p: f"@{s}/{p}", _name_part, _name_part),
)
_ranges = st.one_of(
    st.none(),
    st.sampled_from(["latest", "next", "^4", "~1.2.3", "1.2.3", ">=2", "1.x", "^1||^2", "*"]),
    st.builds(lambda a, b, c: f"{a}.{b}.{c}", *(st.integers(0, 30) for _ in range(3))),
)
_subpaths = st.one_of(st.none(), st.sampled_from(["/get.js", "/dist/axios.js", "/a/b/c", "/"]))


@st.composite
def _bare_specifiers(draw: st.DrawFn) -> tuple[str, PackageSpec]:
    name, rng, sub = draw(_names), draw(_ranges), draw(_subpaths)
    spec = name + (f"@{rng}" if rng is not None else "") + (sub or "")
    return spec, PackageSpec(name, rng, sub)


_specifiers = st.one_of(
    _bare_specifiers().map(lambda pair: pair[0]),
    st.sampled_from(["./x.mjs", "../common/a.mjs", "fs", "node:path", "https://x.y/z.js"]),
)
_FORMS: list[tuple[str, ImportKind]] = [
    ('import x from "{}";', "import"),
    ("import {{ a, b as c }} from '{}'", "import"),
    ('import "{}"', "import"),
    ('export * from "{}"', "import"),
    ('const m = require("{}")', "require"),
    ("require(`{}`)", "require"),
    ("await import('{}')", "dynamic"),
]
# Code that contains no import of its own, including look-alikes the scanner must skip.
_FILLERS = [
    "\n",
    "const a = b / c / 2;\n",
    '// require("commented")\n',
    '/* import x from "block" */',
    "const s = \"require('in-string')\";\n",
    "const u = 'http://example.com//x';\n",
    "const t = `import('in-template') ${a + 1}`;\n",
    'const r = /require("re")[/"]/g;\n',
    'obj.require("member");\n',
    "const m = import.meta.url;\n",
    "export default { key: 'k', async run({ $ }) { return $.export('$summary', 'ok') } };\n",
]


@st.composite
def _sources(draw: st.DrawFn) -> tuple[str, list[ImportRef]]:
    parts: list[str] = []
    expected: list[ImportRef] = []
    pos = 0
    for _ in range(draw(st.integers(0, 8))):
        parts.append(filler := draw(st.sampled_from(_FILLERS)))
        pos += len(filler)
        form, kind = draw(st.sampled_from(_FORMS))
        spec = draw(_specifiers)
        before, after = form.replace("{{", "{").replace("}}", "}").split("{}")
        statement = before + spec + after
        expected.append(ImportRef(spec, pos + len(before), pos + len(before) + len(spec), kind))
        parts.append(statement + "\n")
        pos += len(statement) + 1
    return "".join(parts), expected


@given(_bare_specifiers())
def test_parse_specifier_splits_what_was_joined(pair: tuple[str, PackageSpec]) -> None:
    spec, expected = pair
    assert parse_specifier(spec) == expected


@given(_sources())
def test_find_imports_finds_exactly_the_inserted_imports(
    case: tuple[str, list[ImportRef]],
) -> None:
    source, expected = case
    assert find_imports(source) == expected


@given(
    st.text(
        alphabet=st.sampled_from(list("ab/*'\"`${}()\\\n =.;require import from")), max_size=200
    )
)
@settings(max_examples=300)
def test_find_imports_offsets_hold_on_arbitrary_text(source: str) -> None:
    for ref in find_imports(source):
        assert source[ref.start : ref.end] == ref.specifier


def _gaps(source: str) -> list[str]:
    pieces, pos = [], 0
    for ref in find_imports(source):
        pieces.append(source[pos : ref.start])
        pos = ref.end
    pieces.append(source[pos:])
    return pieces


@given(st.lists(_sources(), min_size=1, max_size=3))
def test_rewriting_touches_only_specifiers(cases: list[tuple[str, list[ImportRef]]]) -> None:
    files = {f"f{i}.mjs": source for i, (source, _) in enumerate(cases)}
    plan = plan_dependencies(files)
    assert plan.key == dependencies_key(plan.dependencies)
    for path, source in files.items():
        new = plan.files[path]
        old_refs, new_refs = find_imports(source), find_imports(new)
        assert _gaps(new) == _gaps(source)
        assert len(new_refs) == len(old_refs)
        for old, rewritten in zip(old_refs, new_refs, strict=True):
            spec = parse_specifier(old.specifier)
            if spec is None or spec.range is None:
                assert rewritten.specifier == old.specifier
                continue
            # Rewritten: no range left, resolving to an installed name or alias of this range.
            target = parse_specifier(rewritten.specifier)
            assert target is not None and target.range is None
            assert target.subpath == spec.subpath
            installed = plan.dependencies[target.name]
            assert installed in (spec.range, f"npm:{spec.name}@{spec.range}")
