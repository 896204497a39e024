"""POST /v1/components: ESM, CommonJS, several files, configurable_props, every validation rule."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

ESM = """
export default {
  name: "RSS",
  key: "rss-new-item",
  version: "0.0.1",
  description: "Emit new items",
  props: {
    url: { type: "string", label: "Feed URL", description: "Any public RSS feed." },
    timer: { type: "$.interface.timer", default: { intervalSeconds: 900 } },
    count: { type: "integer", min: 1, max: 10, optional: true, default: 3 },
    color: { type: "string", options: ["red", { label: "Blue", value: "blue" }], optional: true },
    tags: { type: "string[]", optional: true },
    db: "$.service.db",
    region: { type: "string", async options({ page }) { return ["eu", "us"]; }, optional: true },
  },
  async run() {},
};
"""

CJS = """
module.exports = {
  name: "Legacy",
  version: "1",
  props: { flag: { type: "boolean", optional: true } },
  async run(event) { this.$emit({ flag: this.flag }); },
};
"""


async def save(api: Api, **body: object) -> dict:
    response = await api.client.post("/v1/components", json=body)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def test_esm_component_is_saved_with_configurable_props(api: Api) -> None:
    data = await save(api, component_code=ESM)
    assert data["id"].startswith("sc_")
    assert (data["name"], data["key"], data["version"]) == ("RSS", "rss-new-item", "0.0.1")
    assert data["component_type"] == "source"
    assert len(data["code_hash"]) == 64 and data["code"] == ESM
    props = {p["name"]: p for p in data["configurable_props"]}
    assert [p["name"] for p in data["configurable_props"]] == [
        "url",
        "timer",
        "count",
        "color",
        "tags",
        "db",
        "region",
    ]
    assert props["url"] == {
        "name": "url",
        "type": "string",
        "label": "Feed URL",
        "description": "Any public RSS feed.",
    }
    assert props["timer"]["default"] == {"intervalSeconds": 900}
    assert props["db"]["type"] == "$.service.db"
    assert props["region"]["remoteOptions"] is True and "options" not in props["region"]
    assert props["color"]["options"][1] == {"label": "Blue", "value": "blue"}
    # Readable back by id and by key.
    assert (await api.client.get(f"/v1/components/{data['id']}")).json()["data"]["id"] == data["id"]
    assert (await api.client.get("/v1/components/rss-new-item")).json()["data"]["id"] == data["id"]


async def test_commonjs_component_loads(api: Api) -> None:
    data = await save(api, component_code=CJS)
    assert data["name"] == "Legacy" and data["entry_path"] == "component.cjs"
    assert data["configurable_props"] == [{"name": "flag", "type": "boolean", "optional": True}]


async def test_component_spanning_files_like_the_registry(api: Api) -> None:
    app = """
export default {
  type: "app",
  app: "demo",
  propDefinitions: {
    channel: { type: "string", label: "Channel", description: "Where to post",
               async options() { return ["general"]; } },
  },
  methods: { greet(name) { return `hello ${name} from ${this.$auth.team}`; } },
};
"""
    common = "export default { methods: { shout(s) { return s.toUpperCase(); } } };\n"
    action = """
import demo from "../../demo.app.mjs";
import common from "../common/base.mjs";
export default {
  ...common,
  key: "demo-send",
  name: "Send",
  version: "0.1.0",
  type: "action",
  props: { demo, channel: { propDefinition: [demo, "channel"], optional: true } },
  async run({ $ }) {
    $.export("$summary", this.shout(this.demo.greet(this.channel ?? "nobody")));
    return 1;
  },
};
"""
    data = await save(
        api,
        component_code=action,
        component_path="actions/send/send.mjs",
        files={"demo.app.mjs": app, "actions/common/base.mjs": common},
    )
    assert data["component_type"] == "action"
    assert data["files"] == ["actions/common/base.mjs", "demo.app.mjs"]
    props = {p["name"]: p for p in data["configurable_props"]}
    assert props["demo"] == {"name": "demo", "type": "app", "app": "demo"}
    assert props["channel"]["label"] == "Channel" and props["channel"]["remoteOptions"]

    connected = await api.client.post(
        "/v1/accounts", json={"app": "demo", "credentials": {"team": "T1"}}
    )
    run = await api.client.post(
        "/v1/actions/run",
        json={
            "component_id": data["id"],
            "configured_props": {
                "demo": {"authProvisionId": connected.json()["data"]["id"]},
                "channel": "general",
            },
        },
    )
    assert run.status_code == 200, run.text
    result = run.json()["data"]
    assert result["ok"], result
    assert result["summary"] == "HELLO GENERAL FROM T1"
    assert result["ret"] == 1


@pytest.mark.parametrize(
    ("code", "field", "words"),
    [
        ('export default { version: "1", async run() {} }', "name", "name is required"),
        ('export default { name: "x", async run() {} }', "version", "version is required"),
        ('export default { name: "x", version: "1" }', "run", "run is required"),
        ('export default { name: "x", version: "1", run: 5 }', "run", "run is required"),
        (
            'export default { name: "x", version: "1", type: "widget", async run() {} }',
            "type",
            '"action"',
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "number" } }, run() {} }',
            "props.a.type",
            "not a valid prop type",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "object[]" } }, run() {} }',
            "props.a.type",
            "no array form",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "app[]" } }, run() {} }',
            "props.a.type",
            "no array form",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "string", default: "d" } },'
            " run() {} }",
            "props.a.default",
            "only on optional props",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "integer", secret: true,'
            " optional: true } }, run() {} }",
            "props.a.secret",
            "only on string props",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "string", min: 1 } },'
            " run() {} }",
            "props.a.min",
            "only on integer props",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "boolean", max: 1 } },'
            " run() {} }",
            "props.a.max",
            "only on integer props",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "integer", min: 1.5 } },'
            " run() {} }",
            "props.a.min",
            "must be an integer",
        ),
        (
            'export default { name: "x", version: "1", type: "action", props: { h: { type: '
            '"$.interface.http" } }, run() {} }',
            "props.h.type",
            "for sources only",
        ),
        (
            'export default { name: "x", version: "1", type: "action", props: { t: '
            '"$.interface.timer" }, run() {} }',
            "props.t.type",
            "for sources only",
        ),
        (
            'export default { name: "x", version: "1", type: "action", props: { db: "$.service.db" },'
            " run() {} }",
            "props.db.type",
            "for sources only",
        ),
        (
            'export default { name: "x", version: "1", type: "action", hooks: { async deploy() {} },'
            " run() {} }",
            "hooks",
            "sources only",
        ),
        (
            'export default { name: "x", version: "1", hooks: { async start() {} }, run() {} }',
            "hooks.start",
            "unknown hook",
        ),
        (
            'export default { name: "x", version: "1", dedupe: "newest", run() {} }',
            "dedupe",
            "unique, greatest, last",
        ),
        (
            'export default { name: "x", version: "1", props: { a: { type: "app" } }, run() {} }',
            "props.a.app",
            "app",
        ),
        (
            'export default { name: "x", version: "1", props: { t: { type: "$.interface.timer",'
            " default: { every: 5 } } }, run() {} }",
            "props.t.default",
            "intervalSeconds or cron",
        ),
    ],
)
async def test_invalid_components_get_a_clear_error_naming_the_field(
    api: Api, code: str, field: str, words: str
) -> None:
    response = await api.client.post("/v1/components", json={"component_code": code})
    body = assert_error(response, 400, "invalid_component")
    assert body["field"] == field, body
    assert words in body["error"], body


async def test_unknown_prop_definition_is_named(api: Api) -> None:
    app = 'export default { type: "app", app: "demo", propDefinitions: {} };\n'
    code = (
        'import demo from "./demo.app.mjs";\nexport default { name: "x", version: "1",'
        ' props: { demo, ch: { propDefinition: [demo, "nope"] } }, run() {} };\n'
    )
    response = await api.client.post(
        "/v1/components", json={"component_code": code, "files": {"demo.app.mjs": app}}
    )
    body = assert_error(response, 400, "invalid_component")
    assert body["field"] == "props.ch" and "nope" in body["error"]


async def test_load_failures_are_clear(api: Api) -> None:
    body = assert_error(
        await api.client.post(
            "/v1/components",
            json={"component_code": "export default { name: 'x', version: '1', run() { ) };"},
        ),
        400,
        "component_load_failed",
    )
    assert "SyntaxError" in body["error"]
    assert "/components/" not in body["error"]  # no server paths leak
    body = assert_error(
        await api.client.post(
            "/v1/components",
            json={"component_code": "import x from './missing.mjs';\nexport default x;"},
        ),
        400,
        "component_load_failed",
    )
    assert "missing.mjs" in body["error"]
    assert_error(
        await api.client.post("/v1/components", json={"component_code": "export default 5;"}),
        400,
        "invalid_component",
    )


async def test_file_paths_must_stay_inside_the_component(api: Api) -> None:
    for path in ("../evil.mjs", "/etc/passwd", "a/../../b.mjs", "node_modules/x/index.js"):
        response = await api.client.post(
            "/v1/components", json={"component_code": CJS, "files": {path: "x"}}
        )
        body = assert_error(response, 400, "invalid_request")
        assert body["field"].startswith("files."), body
