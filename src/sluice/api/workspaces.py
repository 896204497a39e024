"""Pipedream's workspaces (orgs) in Sluice: an account is its own workspace, whose id is the
account's (``u_…``). ``GET /v1/users/me`` lists it as its one ``orgs`` entry, so a script that
reads its workspace's id there and lists ``/v1/workspaces/{id}/subscriptions`` or
``/v1/orgs/{id}/sources`` finds its own."""

from __future__ import annotations

from typing import Any

from sluice import errors
from sluice.platform import Account


def check(account: Account, workspace_id: str) -> None:
    """A workspace id other than the account's own is not found (and says which is)."""
    if workspace_id != account.id:
        raise errors.NotFound(
            f"no workspace {workspace_id!r}: a Sluice account is its own workspace, "
            f"{account.id} (GET /v1/users/me lists it in orgs)"
        )


def orgs(account: Account) -> list[dict[str, Any]]:
    """The ``orgs`` of ``GET /v1/users/me``: the account itself."""
    return [
        {
            "id": account.id,
            "orgname": account.username,
            "name": account.username,
            "email": account.email,
        }
    ]
