"""Bearer API keys: every ``/v1`` route depends on ``current_account``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from sluice import errors
from sluice.platform import Account, Platform


def get_platform(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


async def current_account(request: Request) -> Account:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise errors.Unauthorized(
            "missing API key: send the header 'Authorization: Bearer <api key>'"
        )
    account = await get_platform(request).authenticate(token.strip())
    if account is None:
        raise errors.Unauthorized("invalid or revoked API key")
    return account


PlatformDep = Annotated[Platform, Depends(get_platform)]
AccountDep = Annotated[Account, Depends(current_account)]
