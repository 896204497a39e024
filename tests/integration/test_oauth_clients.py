"""OAuth API clients (issue 27): ``POST /v1/oauth/token`` with ``client_credentials`` (RFC 6749
§4.4, Pipedream's shapes) over real HTTP, by httpx and by Authlib's OAuth 2 client; the token
as a ``/v1`` bearer; its expiry (fake clock), revocation, and what it may not do."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
from authlib.integrations.requests_client import OAuth2Session

from sluice.clock import FakeClock
from sluice.engine.auth.api_clients import ApiClients
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_public_url import live_server


async def new_client(api: Api, name: str | None = "ci") -> dict[str, Any]:
    made = await api.client.post("/v1/oauth/clients", json={"name": name} if name else None)
    assert made.status_code == 200, made.text
    data: dict[str, Any] = made.json()["data"]
    return data


def oauth_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"] == code, response.text
    assert response.json()["error_description"]
    assert response.headers["cache-control"] == "no-store"


async def test_client_credentials_token_is_a_bearer(api: Api, other_api: Api) -> None:
    client = await new_client(api)
    assert client["client_id"].startswith("oc_") and client["client_secret"].startswith("slcs_")
    listed = (await api.client.get("/v1/oauth/clients")).json()["data"]
    assert listed == [{k: v for k, v in client.items() if k != "client_secret"}]
    creds = {"client_id": client["client_id"], "client_secret": client["client_secret"]}
    async with live_server(api.platform) as base, httpx.AsyncClient(base_url=base) as http:
        # Pipedream's documented request: JSON, no Authorization header.
        issued = await http.post(
            "/v1/oauth/token", json={"grant_type": "client_credentials", **creds}
        )
        assert issued.status_code == 200, issued.text
        assert issued.headers["cache-control"] == "no-store"
        body = issued.json()
        assert set(body) == {"access_token", "token_type", "expires_in", "created_at"}
        assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
        bearer = {"Authorization": f"Bearer {body['access_token']}"}
        me = await http.get("/v1/users/me", headers=bearer)
        assert me.status_code == 200 and me.json()["data"]["id"] == api.account_id
        # It is the account's: the other account's resources stay out of reach.
        mine = await http.get("/v1/users/me/sources", headers=bearer)
        assert mine.status_code == 200

        # RFC 6749's form: x-www-form-urlencoded, the credentials in HTTP Basic auth.
        basic = base64.b64encode(f"{creds['client_id']}:{creds['client_secret']}".encode())
        by_form = await http.post(
            "/v1/oauth/token",
            content=b"grant_type=client_credentials",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Authorization": f"Basic {basic.decode()}",
            },
        )
        assert by_form.status_code == 200, by_form.text
        second = by_form.json()["access_token"]
        assert second != body["access_token"]

        # An OAuth library that knows nothing of Sluice gets and uses a token (its default:
        # the credentials in Basic auth, a form body).
        def library() -> tuple[dict[str, Any], dict[str, Any]]:
            with OAuth2Session(creds["client_id"], creds["client_secret"]) as session:
                token = session.fetch_token(
                    f"{base}/v1/oauth/token", grant_type="client_credentials"
                )
                return dict(token), session.get(f"{base}/v1/users/me", timeout=30).json()

        token, me_by_library = await asyncio.to_thread(library)
        assert token["token_type"] == "Bearer" and token["expires_in"] == 3600
        assert me_by_library["data"]["id"] == api.account_id

        # A token cannot make or remove clients (a lasting credential).
        refused = await http.post("/v1/oauth/clients", json={}, headers=bearer)
        assert_error(refused, 403, "forbidden")
        assert_error(
            await http.delete(f"/v1/oauth/clients/{client['client_id']}", headers=bearer),
            403,
            "forbidden",
        )

        # Revoked (RFC 7009): that token stops working, the others do not.
        revoked = await http.post("/v1/oauth/revoke", json={"token": second, **creds})
        assert revoked.status_code == 200 and revoked.json() == {}
        gone = await http.get("/v1/users/me", headers={"Authorization": f"Bearer {second}"})
        assert_error(gone, 401, "unauthorized")
        assert (await http.get("/v1/users/me", headers=bearer)).status_code == 200

    # Another account cannot delete it; deleting it ends its tokens at once.
    assert_error(
        await other_api.client.delete(f"/v1/oauth/clients/{client['client_id']}"), 404, "not_found"
    )
    assert (await api.client.delete(f"/v1/oauth/clients/{client['client_id']}")).json() == {}
    assert (await api.client.get("/v1/oauth/clients")).json()["data"] == []
    after = await api.client.get("/v1/users/me", headers=bearer)
    assert_error(after, 401, "unauthorized")


async def test_token_request_errors_follow_rfc_6749(api: Api) -> None:
    client = await new_client(api, None)
    assert client["name"] == "OAuth client"
    creds = {"client_id": client["client_id"], "client_secret": client["client_secret"]}
    http = api.client
    grant = {"grant_type": "client_credentials"}
    no_key = {"Authorization": ""}
    wrong = await http.post(
        "/v1/oauth/token",
        json={**grant, **creds, "client_secret": creds["client_secret"] + "x"},
        headers=no_key,
    )
    oauth_error(wrong, 401, "invalid_client")
    assert wrong.headers["www-authenticate"].startswith("Basic")
    unknown = {**grant, "client_id": "oc_nope", "client_secret": creds["client_secret"]}
    oauth_error(
        await http.post("/v1/oauth/token", json=unknown, headers=no_key), 401, "invalid_client"
    )
    oauth_error(
        await http.post("/v1/oauth/token", json=grant, headers=no_key), 401, "invalid_client"
    )
    oauth_error(
        await http.post("/v1/oauth/token", json=creds, headers=no_key), 400, "invalid_request"
    )
    password = {"grant_type": "password", **creds}
    oauth_error(
        await http.post("/v1/oauth/token", json=password, headers=no_key),
        400,
        "unsupported_grant_type",
    )
    scoped = {**grant, **creds, "scope": "admin"}
    oauth_error(
        await http.post("/v1/oauth/token", json=scoped, headers=no_key), 400, "invalid_scope"
    )
    basic = base64.b64encode(f"{creds['client_id']}:{creds['client_secret']}".encode()).decode()
    both = await http.post(
        "/v1/oauth/token", json={**grant, **creds}, headers={"Authorization": f"Basic {basic}"}
    )
    oauth_error(both, 400, "invalid_request")
    oauth_error(
        await http.post(
            "/v1/oauth/token", content=b"{", headers={"content-type": "application/json", **no_key}
        ),
        400,
        "invalid_request",
    )
    # A token that is not one is refused as a bearer like any wrong key.
    assert_error(
        await http.get("/v1/users/me", headers={"Authorization": "Bearer slo_x_y"}),
        401,
        "unauthorized",
    )


async def test_tokens_expire(api: Api) -> None:
    client = await new_client(api)
    clock = FakeClock(api.platform.clock.now_ms())
    clients = ApiClients(api.platform.db, api.platform.reader, clock, 3600)
    issued = await clients.issue(client["client_id"], client["client_secret"])
    assert issued is not None and issued.expires_in == 3600
    assert (await clients.authenticate(issued.access_token)).id == api.account_id  # type: ignore[union-attr]
    clock.advance(seconds=3599)
    assert await clients.authenticate(issued.access_token) is not None
    clock.advance(seconds=1)
    assert await clients.authenticate(issued.access_token) is None
    assert await clients.issue(client["client_id"], "slcs_wrong") is None
