"""The workflow file: finding, reading and checking a ``workflow.yaml`` (or ``.json``) before
``sluice workflows deploy`` sends it, and pointing the server's refusals back at it.

The file has the shape of the ``POST /v1/workflows`` body (``name``, ``trigger``, ``steps``,
``active``) plus an optional ``id`` (deploying again updates that workflow), and a step may
give ``code_file: ./steps/x.mjs`` (relative to the file) instead of inline ``code``. A ``.json``
file with the same structure works too. See docs/workflow-yaml.md.

    loaded = load_file(Path("workflow.yaml"))
    api.post("/v1/workflows", loaded.body)
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sluice.errors import CliError

#: The keys of a workflow file's top level (and ``x-…`` ones, ignored: YAML anchors), and of
#: each of its steps.
TOP_KEYS = ("id", "name", "trigger", "steps", "active", "global_errors")
STEP_KEYS = ("name", "code", "code_file", "action", "props")
#: What ``deploy`` looks for when given a folder.
FILE_NAMES = ("workflow.yaml", "workflow.yml", "workflow.json")
_DOCS = "see docs/workflow-yaml.md"
_STEP_SHAPE = "a name, code or code_file or action, and props"


@dataclass(frozen=True)
class WorkflowFile:
    """A loaded workflow file: the body for ``POST``/``PUT /v1/workflows`` (every
    ``code_file`` read into ``code``), the ``id`` it names, and where each step's code came
    from (for error messages)."""

    path: Path
    body: dict[str, Any]
    id: str | None = None
    #: Step index → the ``code_file`` it was read from, as written in the file.
    code_files: dict[int, str] = field(default_factory=dict)


class _Loader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice and keeps dates as the text written (the body
    is sent as JSON)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *defaults`: merged keys may be overridden
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            continue  # construct_pairs below says what is wrong
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice (first on line {seen[key]})",
                key_node.start_mark,
            )  # fmt: skip
        seen[key] = key_node.start_mark.line + 1
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


def _text(loader: _Loader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _text)


def find_file(path: Path) -> Path:
    """``path`` itself, or the ``workflow.yaml`` (``.yml``, ``.json``) in a folder."""
    if path.is_dir():
        for name in FILE_NAMES:
            if (path / name).is_file():
                return path / name
        raise CliError(
            f"{path} is a folder without {', '.join(FILE_NAMES)}: give the workflow file",
            code="usage",
        )
    if not path.exists():
        raise CliError(f"{path}: no such file", code="usage")
    return path


def load_file(path: Path) -> WorkflowFile:
    """Read and check a workflow file (YAML, or JSON when it ends in ``.json``). Every
    problem is a :class:`CliError` naming the file, and the line when it is known."""
    path = find_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path} is not UTF-8 text", code="bad_workflow_file") from exc
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", code="bad_workflow_file") from exc
    lines: dict[tuple[Any, ...], int] = {}
    if path.suffix.lower() == ".json":
        data = _parse_json(path, text)
    else:
        data, lines = _parse_yaml(path, text)
    return _check(_Where(path, lines), data)


def _parse_json(path: Path, text: str) -> Any:
    if not text.strip():
        raise CliError(
            f"{path} is empty: a workflow has a trigger and steps ({_DOCS})",
            code="bad_workflow_file",
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{path}, line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}",
            code="bad_workflow_file",
        ) from exc


def _parse_yaml(path: Path, text: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """The document, and the line of each top-level key and of each step and its keys."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        raise CliError(_yaml_problem(path, exc), code="bad_workflow_file") from exc
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not valid YAML: {exc}", code="bad_workflow_file") from exc
    finally:
        loader.dispose()
    if data is None:
        raise CliError(
            f"{path} is empty: a workflow has a trigger and steps ({_DOCS})",
            code="bad_workflow_file",
        )
    return data, _key_lines(node)


def _key_lines(node: yaml.Node | None) -> dict[tuple[Any, ...], int]:
    """The line of each top-level key, of each step and of each step's keys."""
    lines: dict[tuple[Any, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = getattr(key_node, "value", None)
            lines[(key,)] = key_node.start_mark.line + 1
            if key == "steps" and isinstance(value_node, yaml.SequenceNode):
                for i, step in enumerate(value_node.value):
                    lines[("steps", i)] = step.start_mark.line + 1
                    if isinstance(step, yaml.MappingNode):
                        for step_key, _ in step.value:
                            name = getattr(step_key, "value", None)
                            lines[("steps", i, name)] = step_key.start_mark.line + 1
    return lines


def _yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
    message = f"{where}: not valid YAML: {exc.problem or exc.context or 'cannot parse'}"
    if exc.problem and exc.context:
        message += f" ({exc.context}"
        if exc.context_mark is not None and exc.context_mark.line != getattr(mark, "line", None):
            message += f" started on line {exc.context_mark.line + 1}"
        message += ")"
    return message


@dataclass(frozen=True)
class _Where:
    """The file being checked, and the line of each key path in it (YAML only)."""

    path: Path
    lines: dict[tuple[Any, ...], int]

    def fail(self, *key: Any, message: str) -> CliError:
        """The error for a problem at ``key`` (a path such as ``("steps", 0, "code")``)."""
        line = self.lines.get(key) if key else None
        where = f"{self.path}, line {line}" if line else str(self.path)
        return CliError(f"{where}: {message}", code="bad_workflow_file")


def _check(where: _Where, data: Any) -> WorkflowFile:
    fail = where.fail
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else repr(data)
        raise fail(message=f"the top level must be a mapping of {', '.join(TOP_KEYS)}, not {kind}")
    for key in data:
        if key not in TOP_KEYS and not (isinstance(key, str) and key.startswith("x-")):
            raise fail(
                key,
                message=f"unknown key {key!r} at the top level; a workflow file has "
                f"{', '.join(TOP_KEYS)} ({_DOCS})",
            )
    workflow_id = data.get("id")
    if workflow_id is not None and not (
        isinstance(workflow_id, str) and workflow_id.startswith("p_")
    ):
        raise fail(
            "id", message=f"id must be a workflow id such as p_Ab3xY9pQ2rTu, not {workflow_id!r}"
        )
    body: dict[str, Any] = {
        k: data[k] for k in ("name", "trigger", "active", "global_errors") if k in data
    }
    code_files: dict[int, str] = {}
    if "steps" in data:
        body["steps"] = _check_steps(where, data["steps"], code_files)
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise fail(message=f"a value cannot be sent as JSON: {exc}") from exc
    return WorkflowFile(path=where.path, body=body, id=workflow_id, code_files=code_files)


def _check_steps(where: _Where, steps: Any, code_files: dict[int, str]) -> list[Any]:
    """The steps for the body, each ``code_file`` read into ``code`` (and noted in
    ``code_files``)."""
    if not isinstance(steps, list):
        raise where.fail("steps", message=f"steps must be a list; each step has {_STEP_SHAPE}")
    checked: list[Any] = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise where.fail(
                "steps",
                i,
                message=f"step {i + 1} must be a mapping of {_STEP_SHAPE}, not {step!r}",
            )
        label = f"step {i + 1}"
        if isinstance(step.get("name"), str):
            label += f" ({step['name']})"
        for key in step:
            if key not in STEP_KEYS:
                raise where.fail(
                    "steps",
                    i,
                    key,
                    message=f"{label} has an unknown key {key!r}; "
                    f"a step has {_STEP_SHAPE} ({_DOCS})",
                )
        if "code_file" in step:
            code_files[i] = step["code_file"]
            step = _with_code(where, i, label, step)
        checked.append(step)
    return checked


def _with_code(where: _Where, i: int, label: str, step: dict[str, Any]) -> dict[str, Any]:
    """The step with its ``code_file`` replaced by that file's text as ``code``."""
    if "code" in step:
        raise where.fail(
            "steps", i, "code_file", message=f"{label} has both code and code_file: keep one"
        )
    written = step["code_file"]
    try:
        code = _read_code(where.path, written)
    except ValueError as exc:
        raise where.fail("steps", i, "code_file", message=f"{label}: {exc}") from exc
    return {**{k: v for k, v in step.items() if k != "code_file"}, "code": code}


def _read_code(path: Path, written: Any) -> str:
    """The text of a step's ``code_file``, relative to the workflow file's folder."""
    if not isinstance(written, str) or not written.strip():
        raise ValueError(f"code_file must be a path such as ./steps/x.mjs, not {written!r}")
    code_path = path.parent / written
    try:
        return code_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(
            f"code_file {written}: no such file (looked for {code_path.absolute()})"
        ) from None
    except IsADirectoryError:
        raise ValueError(f"code_file {written} is a folder, not a module") from None
    except UnicodeDecodeError:
        raise ValueError(f"code_file {written} is not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"cannot read code_file {written}: {exc.strerror}") from None


#: The API's ``field`` as the client appends it to a message: `` (steps[1].code)``.
_FIELD = re.compile(r" \(((?:steps|trigger|name|active)\b[^()]*)\)$")
_CODE_FIELD = re.compile(r"\bsteps\[(\d+)\]\.code\b")


def explain(exc: CliError, loaded: WorkflowFile) -> CliError:
    """A server's refusal of the file's content, pointed at the file (and at the step's
    code_file when the problem is in its code)."""
    suffix = _FIELD.search(exc.message)
    if exc.status != 400 and not (exc.status in (404, 409, 422) and suffix):
        return exc
    message = exc.message
    code = _CODE_FIELD.search(message)
    written = loaded.code_files.get(int(code.group(1))) if code else None
    if written and suffix:
        message = f"{message[: suffix.end() - 1]}, from {written})"
    elif written:
        message += f" (from {written})"
    return CliError(
        f"{loaded.path}: {message}", code=exc.code, status=exc.status, details=exc.details
    )
