"""``sluice data-stores``: the account's data stores and their records (``/v1/data_stores``).

A store is named by its id (``ds_…``) or its name. Values are JSON; a value that is not JSON is
stored as a string (``sluice data-stores set cache greeting hello``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from sluice.cli import config, render
from sluice.cli.client import Client, segment

app = typer.Typer(help="Manage the account's data stores (key-value stores).", no_args_is_help=True)

Store = Annotated[str, typer.Argument(help="The data store's id (ds_…) or name.")]
Key = Annotated[str, typer.Argument(help="The record's key.")]


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="data-stores")


def _api(profile: str) -> Client:
    return Client(config.resolve(profile))


def _records(store: str) -> str:
    return f"/v1/data_stores/{segment(store)}/records"


@app.command("list")
def list_(
    profile: config.ProfileOpt = config.DEFAULT_PROFILE, json_: render.JsonOpt = False
) -> None:
    """List the account's data stores: name, id, records and size."""
    stores = _api(profile).get("/v1/users/me/data_stores")["data"]
    if json_:
        render.data(stores)
        return
    table = Table("NAME", "ID", "RECORDS", "BYTES", box=None)
    for s in stores:
        table.add_row(s["name"], s["id"], str(s["record_count"]), str(s["size_bytes"]))
    render.print_table(table, len(stores), "No data stores.")


@app.command()
def create(name: str, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Create a data store named NAME."""
    store = _api(profile).post("/v1/data_stores", {"name": name})["data"]
    render.line(("Created ", ""), (store["id"], "bold"), f" ({store['name']})")


@app.command()
def delete(store: Store, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Delete a data store and all its records."""
    _api(profile).delete(f"/v1/data_stores/{segment(store)}")
    render.line(f"Deleted {store}")


@app.command()
def records(store: Store, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Print every record of a store, one JSON object {key, value} a line."""
    for record in _api(profile).get(_records(store))["data"]:
        render.data_line(record)


@app.command()
def get(store: Store, key: Key, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Print the value at KEY (JSON)."""
    render.data(_api(profile).get(f"{_records(store)}/{segment(key)}")["data"]["value"])


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@app.command("set")
def set_(
    store: Store,
    key: Key,
    value: Annotated[str, typer.Argument(help="JSON, or any other text (stored as a string).")],
    ttl: Annotated[
        float | None, typer.Option(help="Seconds until the record expires (default: never).")
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Write VALUE at KEY."""
    body = {"value": _value(value), "ttl": ttl}
    _api(profile).put(f"{_records(store)}/{segment(key)}", body)
    render.line(f"Set {key}")


@app.command("delete-key")
def delete_key(store: Store, key: Key, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Delete the record at KEY."""
    _api(profile).delete(f"{_records(store)}/{segment(key)}")
    render.line(f"Deleted {key}")


@app.command()
def clear(store: Store, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Delete every record of a store (the store stays)."""
    _api(profile).delete(_records(store))
    render.line(f"Cleared {store}")
