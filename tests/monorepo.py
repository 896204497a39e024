"""A small tree laid out as Pipedream's monorepo (github.com/PipedreamHQ/pipedream): each
``components/<app>/`` is what its ``@pipedream/<app>`` npm package holds, with its
``package.json``. Written by the tests (the shape, not Pipedream's code)."""

from __future__ import annotations

import json
from pathlib import Path


def app_files(
    app: str, version: str = "0.1.0", dependencies: dict[str, str] | None = None
) -> dict[str, str]:
    """One app directory, ``{relative path: text}``: an app file spreading a common module
    (as brex's does), an action using an npm dependency when given, and a source."""
    uses = next(iter(dependencies or {}), None)
    action_import = f'import dep from "{uses}";\n' if uses else ""
    action_value = "typeof dep" if uses else '"none"'
    meta = {
        "name": f"@pipedream/{app}",
        "version": version,
        "description": f"Pipedream {app.capitalize()} Components",
        "dependencies": dependencies or {},
    }
    return {
        "package.json": json.dumps(meta, indent=2),
        f"{app}.app.mjs": f'import common from "./common-app.mjs";\n'
        f'export default {{ ...common, type: "app", app: "{app}" }};\n',
        "common-app.mjs": "export default { propDefinitions: {}, methods: {\n"
        "  token() { return this.$auth.oauth_access_token; },\n"
        "  greet(name) { return `hi ${name}`; } } };\n",
        "actions/say-hi/say-hi.mjs": f'{action_import}import app from "../../{app}.app.mjs";\n'
        "export default {\n"
        f'  key: "{app}-say-hi", name: "Say Hi", version: "0.0.1", type: "action",\n'
        f'  props: {{ {app}: app, who: {{ type: "string", label: "Who" }} }},\n'
        "  async run() { return { text: this."
        + app
        + ".greet(this.who), dep: "
        + action_value
        + " }; },\n"
        "};\n",
        "sources/new-thing/new-thing.mjs": 'import base from "../common/base.mjs";\n'
        "export default { ...base,\n"
        f'  key: "{app}-new-thing", name: "New Thing", version: "0.0.2", type: "source",\n'
        '  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 900 } } },\n'
        "  async run() { this.$emit({ thing: this.kind() }); } };\n",
        "sources/common/base.mjs": 'export default { methods: { kind() { return "thing"; } } };\n',
        "README.md": f"# {app}\n",
    }


def write(root: Path, apps: dict[str, dict[str, str]]) -> Path:
    """``root`` as a checkout: ``components/<app>/…`` per app, the monorepo's own
    ``package.json``, a ``.git`` directory and a ``node_modules`` (neither ever read)."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config.json").write_text("{not json")
    (root / "package.json").write_text('{"name": "pipedream", "private": true}')
    for app, files in apps.items():
        base = root / "components" / app
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
        junk = base / "node_modules" / "junk" / "sources" / "x" / "x.mjs"
        junk.parent.mkdir(parents=True)
        junk.write_text("this is not read")
    return root
