"""The three Nexmark tables: they live in the streaming layer now
(:mod:`stream.sources.nexmark_schema`, beside the generator); re-exported here for the benchmark."""

from stream.sources.nexmark_schema import (AUCTION_COLUMNS, AUCTION_SCHEMA, BID_COLUMNS, BID_SCHEMA,  # noqa: F401
                                           PERSON_COLUMNS, PERSON_SCHEMA, arrow_schema)
