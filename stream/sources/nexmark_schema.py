"""The three Nexmark tables as Nexmark defines them (the SQL versions of RisingWave and Flink):
column names and types, as Arrow schemas and as ``(name, DataType)`` pairs for state tables.

Timestamps are naive microseconds (``TIMESTAMP``, docs/format.md); the generator writes whole
microseconds of ``base + n x interval``. Callers: the generator (:mod:`stream.sources.nexmark`), the ``nexmark`` connector, the Nexmark
queries (:mod:`sql.nexmark_queries`).
"""

from __future__ import annotations

import pyarrow as pa

from relational.types import DataType as T

PERSON_COLUMNS = [("id", T.BIGINT), ("name", T.VARCHAR), ("email_address", T.VARCHAR),
                  ("credit_card", T.VARCHAR), ("city", T.VARCHAR), ("state", T.VARCHAR),
                  ("date_time", T.TIMESTAMP), ("extra", T.VARCHAR)]
AUCTION_COLUMNS = [("id", T.BIGINT), ("item_name", T.VARCHAR), ("description", T.VARCHAR),
                   ("initial_bid", T.BIGINT), ("reserve", T.BIGINT), ("date_time", T.TIMESTAMP),
                   ("expires", T.TIMESTAMP), ("seller", T.BIGINT), ("category", T.BIGINT),
                   ("extra", T.VARCHAR)]
BID_COLUMNS = [("auction", T.BIGINT), ("bidder", T.BIGINT), ("price", T.BIGINT), ("channel", T.VARCHAR),
               ("url", T.VARCHAR), ("date_time", T.TIMESTAMP), ("extra", T.VARCHAR)]

_ARROW = {T.BIGINT: pa.int64(), T.VARCHAR: pa.string(), T.TIMESTAMP: pa.timestamp("us")}


def arrow_schema(columns) -> pa.Schema:
    return pa.schema([pa.field(name, _ARROW[dtype], nullable=False) for name, dtype in columns])


PERSON_SCHEMA = arrow_schema(PERSON_COLUMNS)
AUCTION_SCHEMA = arrow_schema(AUCTION_COLUMNS)
BID_SCHEMA = arrow_schema(BID_COLUMNS)
