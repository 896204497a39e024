"""The workflow.yaml loader of ``sluice workflows deploy``: the body it sends, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.cli.workflow_file import load_file
from sluice.errors import CliError

STEP = "export default defineComponent({ async run({ steps, $ }) { return 1; } });\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(CliError) as caught:
        load_file(path)
    message = caught.value.message
    assert "\n" not in message
    return message


def test_yaml_with_a_code_file_an_inline_step_and_an_action(tmp_path: Path) -> None:
    write(tmp_path / "steps" / "greet.mjs", STEP)
    file = write(
        tmp_path / "workflow.yaml",
        """\
id: p_Ab3xY9pQ2rTu
name: greeter
active: true
trigger:
  type: timer
  cron: "0 * * * *"
  timezone: Europe/Paris
steps:
  - name: greet
    code_file: ./steps/greet.mjs
    props:
      since: 2024-01-01      # a date stays the text written
  - name: shout
    code: |
      export default defineComponent({ async run({ steps }) { return 2; } });
  - name: post
    action: wf-echo
    props:
      text: "{{steps.greet.$return_value}}"
""",
    )
    loaded = load_file(file)
    assert loaded.id == "p_Ab3xY9pQ2rTu"
    assert loaded.path == file
    assert loaded.code_files == {0: "./steps/greet.mjs"}
    assert loaded.body == {
        "name": "greeter",
        "active": True,
        "trigger": {"type": "timer", "cron": "0 * * * *", "timezone": "Europe/Paris"},
        "steps": [
            {"name": "greet", "code": STEP, "props": {"since": "2024-01-01"}},
            {
                "name": "shout",
                "code": "export default defineComponent({ async run({ steps }) { return 2; } });\n",
            },
            {
                "name": "post",
                "action": "wf-echo",
                "props": {"text": "{{steps.greet.$return_value}}"},
            },
        ],
    }
    assert "id" not in loaded.body  # the id is the URL's, not the body's
    json.dumps(loaded.body)


def test_code_file_is_relative_to_the_workflow_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "wf" / "code" / "a.mjs", STEP)
    write(
        tmp_path / "wf" / "workflow.yml",
        "trigger: {type: manual}\nsteps:\n  - {name: a, code_file: code/a.mjs}\n",
    )
    monkeypatch.chdir(tmp_path)
    assert load_file(Path("wf/workflow.yml")).body["steps"][0]["code"] == STEP
    # A folder means the workflow file in it.
    assert load_file(Path("wf")).path == Path("wf/workflow.yml")


def test_json_files_have_the_same_structure(tmp_path: Path) -> None:
    write(tmp_path / "a.mjs", STEP)
    body = {
        "name": "j",
        "trigger": {"type": "http", "custom_response": True},
        "steps": [{"name": "a", "code_file": "a.mjs"}],
    }
    loaded = load_file(write(tmp_path / "workflow.json", json.dumps(body)))
    assert loaded.id is None
    assert loaded.body["trigger"] == {"type": "http", "custom_response": True}
    assert loaded.body["steps"] == [{"name": "a", "code": STEP}]

    bad = write(tmp_path / "bad.json", '{\n  "name": "x",\n  "steps": [,]\n}')
    assert error_of(bad).startswith(f"{bad}, line 3, column 13: not valid JSON")


def test_an_update_file_may_give_only_some_fields(tmp_path: Path) -> None:
    loaded = load_file(write(tmp_path / "w.yaml", "id: p_x\nactive: false\n"))
    assert (loaded.id, loaded.body) == ("p_x", {"active": False})


def test_missing_file_and_folder_without_one(tmp_path: Path) -> None:
    assert error_of(tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: no such file"
    assert "is a folder without workflow.yaml" in error_of(tmp_path)


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    file = write(tmp_path / "w.yaml", "name: x\ntrigger: {type: manual\nsteps: []\n")
    message = error_of(file)
    assert message.startswith(f"{file}, line 3, column 6: not valid YAML: ")
    assert "started on line 2" in message

    tabs = write(tmp_path / "t.yaml", "steps:\n  - name: a\n\tcode: x\n")
    assert error_of(tabs).startswith(f"{tabs}, line 3, column 1: not valid YAML")


def test_a_key_given_twice_is_an_error(tmp_path: Path) -> None:
    file = write(tmp_path / "w.yaml", "name: a\ntrigger: {type: manual}\nname: b\n")
    assert error_of(file) == (
        f"{file}, line 3, column 1: not valid YAML: key 'name' is given twice (first on line 1)"
    )


def test_unknown_keys_at_the_top_level_and_in_steps(tmp_path: Path) -> None:
    file = write(tmp_path / "w.yaml", "name: a\n\ntriger:\n  type: http\n")
    message = error_of(file)
    assert message.startswith(f"{file}, line 3: unknown key 'triger' at the top level")
    assert "id, name, trigger, steps, active" in message

    step = write(
        tmp_path / "s.yaml",
        "trigger: {type: manual}\nsteps:\n  - name: a\n    code: x\n    cod: y\n",
    )
    assert error_of(step).startswith(f"{step}, line 5: step 1 (a) has an unknown key 'cod'")


def test_shape_errors(tmp_path: Path) -> None:
    assert "is empty" in error_of(write(tmp_path / "e.yaml", "# nothing\n"))
    assert "is empty" in error_of(write(tmp_path / "e.json", "  \n"))
    listed = error_of(write(tmp_path / "l.yaml", "- name: a\n"))
    assert "the top level must be a mapping" in listed and "not a list" in listed
    assert "steps must be a list" in error_of(write(tmp_path / "s.yaml", "steps: {a: 1}\n"))
    item = error_of(write(tmp_path / "i.yaml", "steps:\n  - just text\n"))
    assert item.startswith(f"{tmp_path / 'i.yaml'}, line 2: step 1 must be a mapping")
    bad_id = error_of(write(tmp_path / "id.yaml", "id: dc_x\n"))
    assert "id must be a workflow id such as p_" in bad_id


def test_code_file_errors(tmp_path: Path) -> None:
    missing = write(
        tmp_path / "m.yaml", "trigger: {type: manual}\nsteps:\n  - name: a\n    code_file: x.mjs\n"
    )
    message = error_of(missing)
    assert message.startswith(f"{missing}, line 4: step 1 (a): code_file x.mjs: no such file")
    assert str(tmp_path / "x.mjs") in message

    both = write(tmp_path / "b.yaml", "steps:\n  - name: a\n    code: y\n    code_file: x.mjs\n")
    assert "has both code and code_file" in error_of(both)

    (tmp_path / "dir.mjs").mkdir()
    folder = write(tmp_path / "d.yaml", "steps:\n  - {name: a, code_file: dir.mjs}\n")
    assert "is a folder" in error_of(folder)

    empty = write(tmp_path / "n.yaml", "steps:\n  - {name: a, code_file: 3}\n")
    assert "code_file must be a path" in error_of(empty)


def test_values_json_cannot_carry(tmp_path: Path) -> None:
    file = write(tmp_path / "w.yaml", "trigger: {type: manual}\nname: .nan\n")
    assert "cannot be sent as JSON" in error_of(file)


def test_x_keys_hold_anchors_and_are_not_sent(tmp_path: Path) -> None:
    file = write(
        tmp_path / "w.yaml",
        """\
x-common: &common
  channel: "#alerts"
  text: hi
trigger: {type: manual}
steps:
  - name: a
    action: wf-echo
    props: {<<: *common, text: bye}
""",
    )
    loaded = load_file(file)
    assert "x-common" not in loaded.body
    assert loaded.body["steps"][0]["props"] == {"channel": "#alerts", "text": "bye"}
