"""Where the CLI finds its server and key: profiles in a config file, overridden by the environment.

The file is INI-like, as pd's: top-level ``api_key`` / ``base_url`` lines are the default
profile, each ``[name]`` section another profile::

    api_key = slk_…
    base_url = http://127.0.0.1:8000

    [work]
    api_key = slk_…
    base_url = https://sluice.example.com

Path: ``$SLUICE_CONFIG``, else ``$XDG_CONFIG_HOME/sluice/config``, else
``~/.config/sluice/config``. ``SLUICE_API_KEY`` and ``SLUICE_BASE_URL`` win over the file (CI,
containers). The file holds API keys, so it is written 0600, atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from sluice.errors import CliError

DEFAULT_PROFILE = "default"
#: Where ``sluice serve`` listens by default.
DEFAULT_BASE_URL = "http://127.0.0.1:8000"

ProfileOpt = Annotated[
    str,
    typer.Option(
        "--profile",
        "-p",
        envvar="SLUICE_PROFILE",
        help="Which profile of the config file to use (sluice login --profile NAME adds one).",
    ),
]

Profiles = dict[str, dict[str, str]]


@dataclass(frozen=True)
class Credentials:
    base_url: str
    api_key: str
    profile: str
    #: Where the key came from, for error messages: "SLUICE_API_KEY" or the file's path.
    key_source: str

    def login_hint(self) -> str:
        if self.key_source == "SLUICE_API_KEY":
            return "set SLUICE_API_KEY to a valid key"
        return f"run `{login_command(self.profile)}` or set SLUICE_API_KEY"


def login_command(profile: str) -> str:
    return "sluice login" if profile == DEFAULT_PROFILE else f"sluice login --profile {profile}"


def path(env: Mapping[str, str] = os.environ) -> Path:
    if env.get("SLUICE_CONFIG"):
        return Path(env["SLUICE_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sluice" / "config"


def parse(text: str, where: str = "config") -> Profiles:
    """``{profile: {key: value}}``; top-level lines (and a ``[default]`` section) are
    ``"default"``. Blank lines and ``#``/``;`` comments are skipped."""
    profiles: Profiles = {DEFAULT_PROFILE: {}}
    section = DEFAULT_PROFILE
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]") and line[1:-1].strip():
            section = line[1:-1].strip()
            profiles.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise CliError(
                f"{where}, line {number}: cannot read {line!r}; write `key = value` or `[profile]`",
                code="bad_config",
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        profiles[section][key.strip()] = value
    return profiles


def dump(profiles: Profiles) -> str:
    lines = [f"{k} = {v}" for k, v in profiles.get(DEFAULT_PROFILE, {}).items()]
    for name, values in profiles.items():
        if name == DEFAULT_PROFILE or not values:
            continue
        if lines:
            lines.append("")
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {v}" for k, v in values.items())
    return "\n".join(lines) + "\n" if lines else ""


def load(env: Mapping[str, str] = os.environ) -> Profiles:
    file = path(env)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {DEFAULT_PROFILE: {}}
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror}", code="bad_config") from exc
    return parse(text, str(file))


def save(profiles: Profiles, env: Mapping[str, str] = os.environ) -> Path:
    """Write the file atomically, readable by its owner only (it holds API keys)."""
    file = path(env)
    file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(dump(profiles))
        os.chmod(tmp, 0o600)  # O_CREAT's mode is masked by the umask; be explicit
        os.replace(tmp, file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return file


def resolve(profile: str, env: Mapping[str, str] = os.environ) -> Credentials:
    """The base URL and key to use: the environment first, then the profile, then defaults.
    A named profile without ``base_url`` falls back to the top-level one."""
    profiles = load(env)
    values = profiles.get(profile, {})
    top = profiles.get(DEFAULT_PROFILE, {})
    base_url = (
        env.get("SLUICE_BASE_URL")
        or values.get("base_url")
        or top.get("base_url")
        or DEFAULT_BASE_URL
    )
    if env.get("SLUICE_API_KEY"):
        return Credentials(base_url.rstrip("/"), env["SLUICE_API_KEY"], profile, "SLUICE_API_KEY")
    key = values.get("api_key")
    if not key:
        known = "" if profile in profiles else f" (no profile {profile!r} in {path(env)})"
        raise CliError(
            f"not logged in{known}: run `{login_command(profile)}` or set SLUICE_API_KEY",
            code="not_logged_in",
        )
    return Credentials(base_url.rstrip("/"), key, profile, str(path(env)))


def store(profile: str, base_url: str, api_key: str, env: Mapping[str, str] = os.environ) -> Path:
    profiles = load(env)
    profiles.setdefault(profile, {}).update(api_key=api_key, base_url=base_url.rstrip("/"))
    return save(profiles, env)


def forget(profile: str, env: Mapping[str, str] = os.environ) -> bool:
    """Remove the profile's API key (its base URL stays). False when it had none."""
    profiles = load(env)
    if not profiles.get(profile, {}).pop("api_key", None):
        return False
    save(profiles, env)
    return True
