from __future__ import annotations

import base64
import stat
import string
from pathlib import Path

import pytest

from sluice import errors, ids
from sluice.config import Settings
from sluice.crypto import Cipher


def test_cipher_round_trip_and_binding(tmp_path: Path) -> None:
    cipher = Cipher.load("", tmp_path)
    token = cipher.encrypt("hunter2", "deployed_components:dc_a:props.token")
    assert "hunter2" not in token and token.startswith("v1.1.")
    assert cipher.decrypt(token, "deployed_components:dc_a:props.token") == "hunter2"
    # Copied into another row or field: refused.
    with pytest.raises(errors.InternalError) as info:
        cipher.decrypt(token, "deployed_components:dc_b:props.token")
    assert "hunter2" not in str(info.value)
    tampered = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(errors.InternalError):
        cipher.decrypt(tampered, "deployed_components:dc_a:props.token")
    # Same plaintext twice: different ciphertexts (random nonce).
    assert cipher.encrypt("x", "a") != cipher.encrypt("x", "a")


def test_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    first = Cipher.load("", tmp_path)
    mode = stat.S_IMODE((tmp_path / "secret.key").stat().st_mode)
    assert mode == 0o600
    token = first.encrypt("v", "aad")
    assert Cipher.load("", tmp_path).decrypt(token, "aad") == "v"


def test_key_from_setting_must_be_32_bytes(tmp_path: Path) -> None:
    good = base64.b64encode(b"k" * 32).decode()
    assert (
        Cipher.load(good, tmp_path).decrypt(Cipher.load(good, tmp_path).encrypt("v", "a"), "a")
        == "v"
    )
    with pytest.raises(errors.InvalidRequest, match="32 bytes"):
        Cipher.load(base64.b64encode(b"short").decode(), tmp_path)
    with pytest.raises(errors.InvalidRequest, match="base64"):
        Cipher.load("not base64!!", tmp_path)


def test_settings_from_env_and_flags(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "SLUICE_PORT": "9001",
            "SLUICE_DATA_DIR": str(tmp_path),
            "SLUICE_MEMORY_MB": "128",
            "SLUICE_HOST": "",
        },
        host=None,
        port=9100,
    )
    assert settings.port == 9100  # the flag wins
    assert settings.host == "127.0.0.1"  # empty variable = unset
    assert settings.data_dir == tmp_path and settings.memory_mb == 128
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'sluice.db'}"
    assert settings.endpoint_url("ab12") == "http://127.0.0.1:9100/e/ab12"
    with pytest.raises(errors.InvalidRequest, match="SLUICE_PORT"):
        Settings.from_env({"SLUICE_PORT": "eighty"})


def test_ids_and_cursors() -> None:
    value = ids.new_id("dc")
    assert value.startswith("dc_") and len(value) == 15 and ids.has_prefix(value, "dc")
    assert ids.new_id("dc") != value
    with pytest.raises(ValueError):
        ids.new_id("zz")
    assert ids.parse_event_id("1606370816223-4") == (1606370816223, 4)
    assert ids.parse_event_id("1606370816223") is None
    assert ids.parse_event_id("abc-1") is None
    assert ids.encode_cursor("dc_K0uAee") == "ZGNfSzB1QWVl"  # Pipedream's documented example
    assert ids.decode_cursor("ZGNfSzB1QWVl") == "dc_K0uAee"


def test_random_tokens_are_base62_of_the_length_asked_and_use_every_symbol() -> None:
    tokens = [ids.random_token(n) for n in (1, 27, 32, 300) for _ in range(50)]
    assert [len(x) for x in tokens] == [n for n in (1, 27, 32, 300) for _ in range(50)]
    seen = set("".join(tokens))
    assert seen == set(string.ascii_letters + string.digits)  # 21,000 draws: all 62 appear
    assert len(set(tokens[50:100])) == 50
