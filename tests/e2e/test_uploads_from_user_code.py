"""A stored body's URL (``x-pd-upload-body``) downloaded by user code in the sandbox, through
the egress proxy, from a real ``sluice serve`` whose loopback address the operator allowed
(``SLUICE_EGRESS_ALLOW``): what a component reading ``event.body.raw_body_url`` does."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.e2e.test_cli import cli_server

FETCHER = """
import crypto from "crypto";
export default {
  name: "Fetcher", version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const response = await fetch(event.body.raw_body_url);
    const bytes = Buffer.from(await response.arrayBuffer());
    this.$emit({
      status: response.status,
      size: bytes.length,
      sha256: crypto.createHash("sha256").update(bytes).digest("hex"),
    });
  },
};
"""


@pytest.mark.timeout(240)  # a failed fetch emits nothing: the stream's keep-alives go on
def test_user_code_downloads_a_stored_body(tmp_path_factory: pytest.TempPathFactory) -> None:
    data_dir: Path = tmp_path_factory.mktemp("uploads-data")
    body = os.urandom(1_200_000)
    with cli_server(data_dir, {"SLUICE_EGRESS_ALLOW": "127.0.0.1:*"}) as cli:
        deployed = cli.api.post("/v1/sources", json={"component_code": FETCHER})
        assert deployed.status_code == 200, deployed.text
        source = deployed.json()["data"]
        # The source's live stream (SSE) is open before the request, so its emit is not missed.
        stream_url = f"/v1/sources/{source['id']}/sse"
        with cli.api.stream("GET", stream_url, timeout=90) as stream:
            assert stream.status_code == 200
            sent = cli.api.post(
                source["endpoint_url"], content=body, headers={"x-pd-upload-body": "1"}
            )
            assert sent.status_code == 200, sent.text
            emitted = next(
                json.loads(line[len("data:") :])
                for line in stream.iter_lines()
                if line.startswith("data:")
            )
        assert emitted["e"] == {
            "status": 200,
            "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
