"""A new account, whole: its row, its default error workflow (every account has a global
error workflow from its first moment: one code step that e-mails a summary of each error,
``domain/default_error_workflow.py``, its id in ``accounts.error_workflow_id``; stored without
running Node, its code step is laid out on disk at its first run), and, as asked, its first API
key and its password hash.

One function, used by every way an account is made: ``Services.create_account`` (the API and
the tests), ``Services.create_owner`` (a fresh install's first visitor) and
``create_account_offline`` (``sluice accounts create``, straight in the store). It writes in the
caller's transaction, so an account never exists without its error workflow.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain import default_error_workflow
from sluice.domain.accounts import Account
from sluice.domain.workflows import Workflow
from sluice.storage import accounts, workflows


@dataclass(frozen=True)
class NewAccount:
    account: Account
    #: Its first API key, shown this once (only its hash is stored); None when none was asked.
    api_key: str | None


async def create(
    conn: AsyncConnection,
    *,
    username: str,
    email: str | None,
    base_url: str,
    now_s: int,
    is_admin: bool = False,
    with_key: bool = True,
    password_hash: str | None = None,
) -> NewAccount:
    """Make the account in ``conn``'s transaction. ``base_url`` is the public URL its error
    e-mails link to."""
    account = await accounts.create(
        conn, username=username, email=email, now_s=now_s, is_admin=is_admin
    )
    key = await accounts.create_key(conn, account.id, now_s=now_s) if with_key else None
    errors_to = Workflow(
        **default_error_workflow.fields(account.id, base_url=base_url, now_s=now_s)
    )
    await workflows.insert(conn, errors_to)
    await workflows.set_error_workflow_id(conn, account.id, errors_to.id)
    if password_hash is not None:
        await accounts.set_password_hash(conn, account.id, password_hash)
    return NewAccount(account, key)
