"""The schema's shared parts: the ``metadata`` every table is on, and the column types that
take any text or JSON (NUL and lone surrogates included)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from sluice.domain import text

metadata = sa.MetaData()


class StoredJSON(sa.types.TypeDecorator[Any]):
    """JSON (JSONB on PostgreSQL) that takes any JSON value, NUL and lone surrogates included:
    such a value is stored wrapped and read back as it was (``domain.text.to_stored``)."""

    impl = sa.JSON
    cache_ok = True
    # As sa.JSON: a Python None is JSON null, not SQL NULL (what the columns held before).
    should_evaluate_none = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        return dialect.type_descriptor(
            postgresql.JSONB() if dialect.name == "postgresql" else sa.JSON()
        )

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> Any:
        return text.to_stored(value)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> Any:
        return text.from_stored(value)


class Str(sa.types.TypeDecorator[str]):
    """A string column that never fails on NUL or a lone surrogate (PostgreSQL refuses NUL,
    UTF-8 the surrogates): they become U+FFFD, in stored values and in the values compared
    with it (a NUL in a looked-up id finds nothing instead of failing). Names are checked at
    the API; this is for text from user code (log lines, channels) and for lookups."""

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> Any:
        return text.clean(value) if isinstance(value, str) else value


class Txt(Str):
    impl = sa.Text
    cache_ok = True


JSON = StoredJSON()
