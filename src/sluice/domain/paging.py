"""A page of a list (``storage/paging.py`` reads one newest first, by keyset). Plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list, and how many items the whole list holds (the API's
    ``page_info.total_count``)."""

    items: list[T]
    total_count: int
