"""Nexmark q0-q8 as streaming-SQL materialized views, written as RisingWave writes them
(risingwave/e2e_test/streaming/nexmark/views/q*.slt.part), over the tables of ``schema.py``.

Differences from RisingWave's text, each for a reason: q3 compares ``state`` with upper-case
codes (``'OR'``, as Flink's q3 does; our generator, like Nexmark's, writes upper-case states,
so RisingWave's lower-case literals would select nothing); the tables are ``APPEND ONLY``
tables without a primary key (RisingWave reads Nexmark from a source, which we do not have).

``Query.needs`` names the SQL feature a query waits for; ``None`` means it runs today. The
benchmark and the tests try every query and report ``UnsupportedError`` for those that still
fail; :data:`EXPECTED_TO_WORK` (tests/test_nexmark_queries.py imports it) is the list the
lead extends as features land.

It lives in ``sql/`` for the demo (``cli/demo.py``); ``bench/nexmark/queries.py`` re-exports it.
Callers: ``bench/nexmark/__main__.py``, ``cli/demo.py``, tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream.sources.nexmark_schema import AUCTION_COLUMNS, BID_COLUMNS, PERSON_COLUMNS

TABLES = {"person": PERSON_COLUMNS, "auction": AUCTION_COLUMNS, "bid": BID_COLUMNS}

@dataclass(frozen=True)
class Query:
    name: str
    select: str                # the query the MV maintains
    reads: tuple               # the tables it reads (the feeder fills only these)
    needs: str | None = None   # a missing SQL feature, or None
    about: str = ""

    @property
    def mv(self) -> str:
        return f"nexmark_{self.name}"

    def create_sql(self) -> str:
        return f"CREATE MATERIALIZED VIEW {self.mv} AS\n{self.select}"


def create_tables_sql(push: bool = False) -> list:
    """``CREATE TABLE`` of person, auction and bid (append-only, hidden row ids); with ``push``,
    ``CREATE SOURCE ... WITH (connector = 'push')`` of the same columns instead: fed the same way
    (INSERT / ``insert_arrow``), stored nowhere -- RisingWave runs Nexmark over sources."""
    tail = " WITH (connector = 'push')" if push else " APPEND ONLY"
    kind = "SOURCE" if push else "TABLE"
    return [f"CREATE {kind} {name} ({', '.join(f'{c} {t.sql_name()}' for c, t in columns)}){tail}"
            for name, columns in TABLES.items()]


QUERIES = {q.name: q for q in [
    Query("q0", "SELECT auction, bidder, price, date_time FROM bid", ("bid",),
          about="pass-through: every bid"),
    Query("q1", "SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid", ("bid",),
          about="currency conversion of every bid's price"),
    Query("q2", "SELECT auction, price FROM bid\n"
                "WHERE auction = 1007 OR auction = 1020 OR auction = 2001 OR auction = 2019 OR auction = 2087",
          ("bid",), about="selection: bids on five auctions"),
    Query("q3", "SELECT P.name, P.city, P.state, A.id\n"
                "FROM auction AS A INNER JOIN person AS P ON A.seller = P.id\n"
                "WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')",
          ("person", "auction"), about="local item suggestion: a join of auctions and sellers"),
    Query("q4", "SELECT Q.category, AVG(Q.final) AS avg\n"
                "FROM (\n"
                "  SELECT MAX(B.price) AS final, A.category\n"
                "  FROM auction A, bid B\n"
                "  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires\n"
                "  GROUP BY A.id, A.category\n"
                ") Q\n"
                "GROUP BY Q.category", ("auction", "bid"),
          about="average closing price per category (join, then two aggregations)"),
    Query("q5", "SELECT AuctionBids.auction, AuctionBids.num FROM (\n"
                "  SELECT bid.auction, count(*) AS num, window_start AS starttime\n"
                "  FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)\n"
                "  GROUP BY window_start, bid.auction\n"
                ") AS AuctionBids\n"
                "JOIN (\n"
                "  SELECT max(CountBids.num) AS maxn, CountBids.starttime_c\n"
                "  FROM (\n"
                "    SELECT count(*) AS num, window_start AS starttime_c\n"
                "    FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)\n"
                "    GROUP BY bid.auction, window_start\n"
                "  ) AS CountBids\n"
                "  GROUP BY CountBids.starttime_c\n"
                ") AS MaxBids\n"
                "ON AuctionBids.starttime = MaxBids.starttime_c AND AuctionBids.num >= MaxBids.maxn",
          ("bid",), about="hot items: the most-bid auctions per sliding window"),
    Query("q6", "SELECT Q.seller,\n"
                "  AVG(Q.final) OVER (PARTITION BY Q.seller ORDER BY Q.date_time\n"
                "                     ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg\n"
                "FROM (\n"
                "  SELECT MAX(B.price) AS final, A.seller, B.date_time\n"
                "  FROM auction AS A, bid AS B\n"
                "  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires\n"
                "  GROUP BY A.id, A.seller, B.date_time\n"
                ") AS Q", ("auction", "bid"),
          about="average selling price per seller over its last 10 auctions"),
    Query("q7", "SELECT B.auction, B.price, B.bidder, B.date_time\n"
                "FROM bid B\n"
                "JOIN (\n"
                "  SELECT MAX(price) AS maxprice, window_end AS date_time\n"
                "  FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)\n"
                "  GROUP BY window_end\n"
                ") B1 ON B.price = B1.maxprice\n"
                "WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time",
          ("bid",), about="highest bid per 10 s tumbling window"),
    Query("q8", "SELECT P.id, P.name, P.starttime\n"
                "FROM (\n"
                "  SELECT id, name, window_start AS starttime, window_end AS endtime\n"
                "  FROM TUMBLE(person, date_time, INTERVAL '10' SECOND)\n"
                "  GROUP BY id, name, window_start, window_end\n"
                ") P\n"
                "JOIN (\n"
                "  SELECT seller, window_start AS starttime, window_end AS endtime\n"
                "  FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND)\n"
                "  GROUP BY seller, window_start, window_end\n"
                ") A ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime",
          ("person", "auction"), about="new users who opened an auction in the same 10 s window"),
]}

#: RisingWave's published Nexmark rates, events/s per core (other hardware): the yardstick
RISINGWAVE_PER_CORE = {"q0": 118_000, "q1": 119_000, "q2": 127_000, "q3": 97_000, "q4": 13_900, "q5": 5_200,
                       "q7": 20_300, "q8": 60_700}

#: the queries that run today (tests assert each one's MV equals its batch recomputation);
EXPECTED_TO_WORK = ("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8")


def resolve(names) -> list:
    """``["all"]`` or query names -> :class:`Query` objects, in q0..q8 order."""
    if isinstance(names, str):
        names = [names]
    wanted = list(QUERIES) if "all" in names else list(names)
    unknown = [n for n in wanted if n not in QUERIES]
    if unknown:
        raise ValueError(f"unknown Nexmark quer{'y' if len(unknown) == 1 else 'ies'} {unknown}; "
                         f"one of {', '.join(QUERIES)} or all")
    return [QUERIES[n] for n in QUERIES if n in wanted]
