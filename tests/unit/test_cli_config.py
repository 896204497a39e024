"""The CLI's config file: pd's INI-like format, profiles, environment overrides, mode 0600."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.cli import config
from sluice.errors import CliError


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"SLUICE_CONFIG": str(tmp_path / "sluice" / "config"), **extra}


def test_parse_reads_top_level_lines_as_the_default_profile() -> None:
    text = """
# comment
api_key = slk_a
base_url = "http://a:8000"

[work]
; another comment
api_key=slk_w
[default]
extra = 1
"""
    assert config.parse(text) == {
        "default": {"api_key": "slk_a", "base_url": "http://a:8000", "extra": "1"},
        "work": {"api_key": "slk_w"},
    }


def test_parse_names_the_line_it_cannot_read() -> None:
    with pytest.raises(CliError, match="line 2"):
        config.parse("api_key = x\nnonsense\n", "cfg")


def test_dump_round_trips() -> None:
    profiles = {"default": {"api_key": "k"}, "work": {"api_key": "w", "base_url": "http://w"}}
    assert config.parse(config.dump(profiles)) == profiles
    assert config.dump(profiles).startswith("api_key = k\n\n[work]\n")


def test_path_follows_sluice_config_then_xdg() -> None:
    assert config.path({"SLUICE_CONFIG": "/x/c"}) == Path("/x/c")
    assert config.path({"XDG_CONFIG_HOME": "/xdg"}) == Path("/xdg/sluice/config")
    assert config.path({}) == Path.home() / ".config" / "sluice" / "config"


def test_store_writes_0600_and_resolve_reads_it(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    file = config.store("default", "http://a:1/", "slk_a", env)
    config.store("work", "http://w:2", "slk_w", env)
    assert file.stat().st_mode & 0o777 == 0o600
    assert config.resolve("default", env) == config.Credentials(
        "http://a:1", "slk_a", "default", str(file)
    )
    assert config.resolve("work", env).base_url == "http://w:2"


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    config.store("default", "http://a:1", "slk_a", env)
    creds = config.resolve(
        "default", {**env, "SLUICE_API_KEY": "slk_env", "SLUICE_BASE_URL": "http://env"}
    )
    assert (creds.api_key, creds.base_url, creds.key_source) == (
        "slk_env",
        "http://env",
        "SLUICE_API_KEY",
    )
    assert "SLUICE_API_KEY" in creds.login_hint()


def test_a_named_profile_falls_back_to_the_top_level_base_url(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    config.save({"default": {"base_url": "http://top"}, "ci": {"api_key": "k"}}, env)
    assert config.resolve("ci", env).base_url == "http://top"


def test_no_key_says_how_to_log_in(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    with pytest.raises(CliError, match=r"run `sluice login`"):
        config.resolve("default", env)
    with pytest.raises(CliError, match=r"no profile 'work'.*sluice login --profile work"):
        config.resolve("work", env)


def test_forget_removes_only_the_key(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    config.store("default", "http://a", "slk_a", env)
    assert config.forget("default", env) is True
    assert config.load(env) == {"default": {"base_url": "http://a"}}
    assert config.forget("default", env) is False
