"""``/v1/data_stores``: the account's key-value stores, as components' ``data_store`` props use
them. A store is named by its id (``ds_…``) or its name. See docs/api.md, "Data stores"."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice import errors
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import DataStoreCreate, DataStoreRecord

router = APIRouter()


@router.get("/v1/users/me/data_stores")
async def list_mine(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    stores = await platform.data_stores.all(account.id)
    return {"data": [render.data_store(s) for s in stores]}


@router.post("/v1/data_stores")
async def create(
    body: DataStoreCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    return {"data": render.data_store(await platform.data_stores.create(account.id, body.name))}


@router.get("/v1/data_stores/{ref}")
async def read(ref: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    return {"data": render.data_store(await platform.data_stores.get(account.id, ref))}


@router.delete("/v1/data_stores/{ref}")
async def delete(ref: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    await platform.data_stores.delete(account.id, ref)
    return {}


@router.get("/v1/data_stores/{ref}/records")
async def records(ref: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    pairs = await platform.data_stores.records(account.id, ref)
    return {"data": [render.data_store_record(k, v) for k, v in pairs]}


@router.delete("/v1/data_stores/{ref}/records")
async def clear(ref: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    await platform.data_stores.call(account.id, ref, "clear")
    return {}


@router.get("/v1/data_stores/{ref}/records/{key:path}")
async def read_record(
    ref: str, key: str, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    value = await platform.data_stores.record(account.id, ref, key)
    return {"data": render.data_store_record(key, value)}


@router.put("/v1/data_stores/{ref}/records/{key:path}")
async def write_record(
    ref: str, key: str, body: DataStoreRecord, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    if "value" not in body.model_fields_set:
        raise errors.InvalidRequest('give the record\'s value: {"value": …}', field="value")
    await platform.data_stores.call(account.id, ref, "set", key=key, value=body.value, ttl=body.ttl)
    return {"data": render.data_store_record(key, body.value)}


@router.delete("/v1/data_stores/{ref}/records/{key:path}")
async def delete_record(
    ref: str, key: str, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    await platform.data_stores.call(account.id, ref, "delete", key=key)
    return {}
