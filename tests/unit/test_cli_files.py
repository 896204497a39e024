"""What deploy, dev and publish send: the entry, what it imports by relative path, package.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.cli import files
from sluice.errors import CliError


def write(root: Path, files_: dict[str, str]) -> None:
    for path, text in files_.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_a_registry_layout_is_sent_from_its_package_root(tmp_path: Path) -> None:
    write(
        tmp_path / "slack",
        {
            "package.json": '{"dependencies": {"@pipedream/platform": "^3.0.0"}}',
            "slack.app.mjs": 'import { axios } from "@pipedream/platform"; export default {};',
            "actions/common/base.mjs": 'import "./util"; export default {};',
            "actions/common/util.js": "module.exports = {};",
            "actions/send/send.mjs": (
                'import slack from "../../slack.app.mjs";\n'
                'import base from "../common/base.mjs";\n'
                'import fs from "fs"; export default { slack, base };'
            ),
            "actions/other/other.mjs": "export default {};",
        },
    )
    bundle = files.collect(tmp_path / "slack" / "actions" / "send" / "send.mjs")
    assert bundle.root == tmp_path / "slack"
    assert bundle.entry_path == "actions/send/send.mjs"
    assert sorted(bundle.files) == [
        "actions/common/base.mjs",
        "actions/common/util.js",
        "package.json",
        "slack.app.mjs",
    ]
    assert bundle.body()["component_path"] == "actions/send/send.mjs"
    assert bundle.code.startswith('import slack from "../../slack.app.mjs"')
    assert tmp_path / "slack" / "slack.app.mjs" in bundle.paths()


def test_without_package_json_the_root_widens_to_hold_every_import(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "app.mjs": "export default {};",
            "src/c.mjs": 'import a from "../app.mjs"; export default a;',
        },
    )
    bundle = files.collect(tmp_path / "src" / "c.mjs")
    assert (bundle.entry_path, list(bundle.files)) == ("src/c.mjs", ["app.mjs"])


def test_a_lone_file_is_sent_alone(tmp_path: Path) -> None:
    write(tmp_path, {"c.cjs": 'const x = require("axios@1"); module.exports = {};'})
    bundle = files.collect(tmp_path / "c.cjs")
    assert (bundle.entry_path, bundle.files) == ("c.cjs", {})
    assert "files" not in bundle.body()


def test_commonjs_directory_imports_find_index_files(tmp_path: Path) -> None:
    write(tmp_path, {"c.js": 'require("./lib")', "lib/index.js": "module.exports = 1;"})
    assert list(files.collect(tmp_path / "c.js").files) == ["lib/index.js"]


def test_a_missing_import_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"c.mjs": 'import x from "./nope.mjs";'})
    with pytest.raises(CliError, match=r"imports './nope.mjs', which does not exist"):
        files.collect(tmp_path / "c.mjs")


def test_a_missing_entry_is_named(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="no such file"):
        files.collect(tmp_path / "none.mjs")
