"""A deterministic Nexmark event generator, vectorized with numpy into Arrow record batches.

The rules are Nexmark's (the Beam/Flink generator that RisingWave and Arroyo follow):

- event ``n`` (from 0) has kind by ``n mod 50`` (the proportions 1 : 3 : 46): 0 a person,
  1-3 an auction, 4-49 a bid; its time is ``base_time + n x inter_event_delay`` (100 µs: the
  default 10,000 events/s of event time);
- person ids and auction ids are consecutive from 1000, in event order
  (:func:`last_base0_person_id`, :func:`last_base0_auction_id`);
- an auction's seller is, with probability 1 - 1/``hot_seller_ratio`` (3/4), the first person
  of the latest group of 100 ("hot sellers"), else a random recent person: one of the last
  ``num_active_people`` (1000) or up to 10 ids not yet generated (``PERSON_ID_LEAD``); its
  category is 10-14; ``initial_bid`` and the reserve's increment follow the price rule below;
  it expires 1 ms .. 2 x horizon later, where horizon is the event time until
  ``num_in_flight_auctions`` (100) more auctions exist;
- a bid's auction is, with probability 1 - 1/``hot_auction_ratio`` (1/2), the first auction of
  the latest group of 100 ("hot auctions"), else one of the last 100 in flight or up to 10 not
  yet generated (``AUCTION_ID_LEAD``); its bidder is, with probability 3/4, the second person of
  the latest group of 100 ("hot bidders"), else a recent person as for sellers; half of the
  bids come from 4 hot channels, the rest from 10,000 channels, each with its own URL;
- prices are ``round(10 ** (6 u) x 100)`` for ``u`` uniform in [0, 1) (log-uniform, 100 ..
  100,000,000 cents); the ``extra`` column pads each event to an average size (person 200,
  auction 500, bid 100 bytes) +- 20 %; strings are random lowercase text.

Determinism: every random value of event ``n`` is a hash of ``(seed, n, draw)`` (splitmix64),
never the state of a sequential generator, so any range of events is the same whatever the
batches it is cut into, and any batch can be generated on its own (a parallel source can
split the event numbers). Text comes from one pool of random letters made from the seed.

Layout: this module (rules, vectorized draws, string assembly); ``nexmark_schema.py`` (the
three tables). It lives in the streaming layer because the ``nexmark`` connector
(:mod:`stream.sources.connector`) generates its rows; ``bench/nexmark/generator.py`` re-exports
it and measures it (``python -m bench.nexmark.generator --events 1000000`` for events/s).
Callers: the ``nexmark`` connector, the Nexmark benchmark and demo, tests
(``tests/test_nexmark_generator.py``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from stream.sources.nexmark_schema import AUCTION_SCHEMA, BID_SCHEMA, PERSON_SCHEMA

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10       # ids not yet generated that sellers and bidders may name
AUCTION_ID_LEAD = 10      # ids not yet generated that bids may name
HOT_GROUP = 100           # hot sellers / auctions / bidders: the first of each group of 100
NUM_CHANNELS = 10_000
MIN_STRING_LEN = 3
KIND_PERSON, KIND_AUCTION, KIND_BID = 0, 1, 2

_FIRST_NAMES = ["Ada", "Bram", "Chloe", "Dmitri", "Elena", "Femi", "Greta", "Hugo", "Ines", "Jonas", "Kiri"]
_LAST_NAMES = ["Alvarez", "Brandt", "Cohen", "Dubois", "Eriksen", "Fischer", "Gallo", "Horvat", "Ivanova"]
_CITIES = ["Tucson", "Sacramento", "Oakland", "Eugene", "Spokane", "Tacoma", "Laramie", "Reno", "Provo", "Boise"]
_STATES = ["AZ", "CA", "NV", "OR", "WA", "WY", "UT", "ID"]
_HOT_CHANNELS = ["Search", "Social", "Mail", "Partner"]

_POOL_SIZE = 1 << 20
_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)


@dataclasses.dataclass(frozen=True)
class NexmarkConfig:
    """The generator's parameters (Nexmark's defaults). Two generators with equal configs
    produce equal events."""

    seed: int = 0
    base_time_us: int = 1_767_225_600_000_000   # 2026-01-01 00:00:00, naive microseconds
    inter_event_delay_us: int = 100             # 10,000 events per second of event time
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    hot_auction_ratio: int = 2
    hot_seller_ratio: int = 4
    hot_bidder_ratio: int = 4
    hot_channel_ratio: int = 2
    num_active_people: int = 1000
    num_in_flight_auctions: int = 100
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if f.name in (
                    "seed", "base_time_us") else 1):
                raise ValueError(f"NexmarkConfig.{f.name} must be a positive int, got {value!r}")

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion


class NexmarkEvents(NamedTuple):
    """The events of one range, one record batch per table, each in event order."""

    person: pa.RecordBatch
    auction: pa.RecordBatch
    bid: pa.RecordBatch

    @property
    def num_events(self) -> int:
        return self.person.num_rows + self.auction.num_rows + self.bid.num_rows


# --- the id rules (vectorized over event numbers) -------------------------------------------------

def event_kinds(config: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    """KIND_PERSON / KIND_AUCTION / KIND_BID of each event number."""
    offset = n % config.total_proportion
    return np.where(offset < config.person_proportion, KIND_PERSON,
                    np.where(offset < config.person_proportion + config.auction_proportion, KIND_AUCTION, KIND_BID))


def last_base0_person_id(config: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    """The newest person id (from 0) at event ``n``: the event's own when it is a person."""
    epoch, offset = np.divmod(n, config.total_proportion)
    return epoch * config.person_proportion + np.minimum(offset, config.person_proportion - 1)


def last_base0_auction_id(config: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    """The newest auction id (from 0) at event ``n`` (-1 before the first auction)."""
    epoch, offset = np.divmod(n, config.total_proportion)
    p, a = config.person_proportion, config.auction_proportion
    last_of_epoch = epoch * a + a - 1
    return np.where(offset < p, last_of_epoch - a, np.where(offset < p + a, epoch * a + offset - p, last_of_epoch))


def timestamps_us(config: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    return config.base_time_us + n * config.inter_event_delay_us


def _recent_person(config, n, u) -> np.ndarray:
    """A random person among the last ``num_active_people`` or the next ``PERSON_ID_LEAD``."""
    people = last_base0_person_id(config, n) + 1
    active = np.minimum(people, config.num_active_people)
    return people - active + _below(u, active + PERSON_ID_LEAD)


def _recent_auction(config, n, u) -> np.ndarray:
    """A random auction among the last ``num_in_flight_auctions`` or the next ``AUCTION_ID_LEAD``."""
    newest = last_base0_auction_id(config, n)
    oldest = np.maximum(newest - config.num_in_flight_auctions, 0)
    return oldest + _below(u, newest - oldest + 1 + AUCTION_ID_LEAD)


# --- random draws: a hash of (seed, event, draw) --------------------------------------------------

def _splitmix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _uniforms(seed: int, n: np.ndarray, draws: int) -> np.ndarray:
    """``(draws, len(n))`` floats uniform in [0, 1), a pure function of (seed, n, draw)."""
    salt = _splitmix(np.array([seed % (1 << 64)], dtype=_U64))[0]
    state = _splitmix(n.astype(_U64) * _GOLDEN + salt)
    out = np.empty((draws, len(n)), dtype=np.float64)
    for d in range(draws):
        h = _splitmix(state + _U64((d + 1) * 0x9E3779B97F4A7C15 % (1 << 64)))
        out[d] = (h >> _U64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return out


def _below(u: np.ndarray, bound) -> np.ndarray:
    """An int uniform in ``[0, bound)`` from ``u`` uniform in [0, 1)."""
    return np.minimum((u * bound).astype(np.int64), np.asarray(bound, dtype=np.int64) - 1)


def _prices(u: np.ndarray) -> np.ndarray:
    """Nexmark's log-uniform price in cents: ``round(10 ** (6u) * 100)``, halves rounded up."""
    return np.floor(np.power(10.0, u * 6.0) * 100.0 + 0.5).astype(np.int64)


def _extra_lengths(u: np.ndarray, current: np.ndarray, average: int) -> np.ndarray:
    """Padding so an event averages ``average`` bytes: the missing bytes +- 20 %, 0 when over."""
    desired = np.maximum(average - current, 0)
    delta = np.floor(desired * 0.2 + 0.5).astype(np.int64)
    return np.where(delta > 0, desired - delta + _below(u, np.maximum(2 * delta, 1)), desired)


# --- strings: pieces gathered into one Arrow string array -----------------------------------------

class _Vocab:
    """A list of strings as one byte buffer with starts and lengths, for :func:`_concat`."""

    def __init__(self, words):
        encoded = [w.encode() for w in words]
        self.data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self.lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.size = len(encoded)
        self.array = pa.array(list(words), pa.string())

    def take(self, index: np.ndarray) -> pa.Array:
        """The words at ``index`` as one Arrow string array (Arrow's own gather)."""
        return self.array.take(pa.array(index, pa.int64()))

    def piece(self, index: np.ndarray):
        return self.data, self.starts[index], self.lengths[index]


def _const(text: str, count: int):
    return np.frombuffer(text.encode(), dtype=np.uint8), np.zeros(count, np.int64), np.full(count, len(text), np.int64)


def _concat(count: int, pieces) -> pa.Array:
    """One string per row: the concatenation of each piece's ``data[start:start+length]``."""
    if len(pieces) == 1:
        return _slices(*pieces[0])
    total = np.zeros(count, dtype=np.int64)
    for _, _, lengths in pieces:
        total += lengths
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(total, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        raise ValueError("a batch of Nexmark strings over 2 GiB: generate smaller batches")
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    position = offsets[:-1].copy()
    for data, starts, lengths in pieces:
        m = int(lengths.sum())
        if m:
            before = np.cumsum(lengths) - lengths          # bytes of this piece in earlier rows
            step = np.arange(m, dtype=np.int64)
            out[np.repeat(position - before, lengths) + step] = data[np.repeat(starts - before, lengths) + step]
        position += lengths
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out))


def _slices(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """One string per row, ``data[start:start+length]``: rows of a sliding window over ``data``
    (one row copy each) compressed by a length mask -- no per-byte index arrays."""
    count = len(starts)
    width = int(lengths.max()) if count else 0
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        raise ValueError("a batch of Nexmark strings over 2 GiB: generate smaller batches")
    if width == 0:
        out = np.empty(0, dtype=np.uint8)
    else:
        if int(starts.max()) + width > len(data):   # vocabularies: pad so every window fits
            data = np.concatenate([data, np.zeros(width, dtype=np.uint8)])
        windows = np.lib.stride_tricks.sliding_window_view(data, width)[starts]
        out = windows[np.arange(width) < lengths[:, None]]
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out))


class NexmarkGenerator:
    """Generates the events ``[start, stop)`` of a :class:`NexmarkConfig` (module doc)."""

    def __init__(self, config: NexmarkConfig | None = None):
        self.config = config or NexmarkConfig()
        rng = np.random.default_rng(self.config.seed)
        letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz" * 2 + b"  ", dtype=np.uint8)
        self._pool = letters[rng.integers(0, len(letters), _POOL_SIZE)]
        self._first = _Vocab(_FIRST_NAMES)
        self._last = _Vocab(_LAST_NAMES)
        self._cities = _Vocab(_CITIES)
        self._states = _Vocab(_STATES)
        self._digits4 = _Vocab([f"{i:04d}" for i in range(10_000)])
        letters5 = (rng.integers(0, 26, (3 * (len(_HOT_CHANNELS) + NUM_CHANNELS), 5)) + 97).astype(np.uint8)
        words = [row.tobytes().decode() for row in letters5]
        urls = [f"https://www.nexmark.com/{words[3 * i]}/{words[3 * i + 1]}/{words[3 * i + 2]}/item.htm?query=1"
                + ("" if i < len(_HOT_CHANNELS) else f"&channel_id={i - len(_HOT_CHANNELS)}")
                for i in range(len(_HOT_CHANNELS) + NUM_CHANNELS)]
        self._channels = _Vocab(_HOT_CHANNELS + [f"channel-{k}" for k in range(NUM_CHANNELS)])
        self._urls = _Vocab(urls)

    # --- public ---

    def generate(self, start: int, stop: int) -> NexmarkEvents:
        """The events numbered ``[start, stop)``, split by table, each in event order."""
        if not 0 <= start <= stop:
            raise ValueError(f"need 0 <= start <= stop, got [{start}, {stop})")
        n = np.arange(start, stop, dtype=np.int64)
        kinds = event_kinds(self.config, n)
        return NexmarkEvents(self._persons(n[kinds == KIND_PERSON]), self._auctions(n[kinds == KIND_AUCTION]),
                             self._bids(n[kinds == KIND_BID]))

    def batches(self, count: int, batch_size: int = 100_000, start: int = 0):
        """Yield :class:`NexmarkEvents` for ``[start, start + count)`` in ranges of ``batch_size``."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        for low in range(start, start + count, batch_size):
            yield self.generate(low, min(low + batch_size, start + count))

    # --- one table each ---

    def _text(self, u_len, u_start, max_len: int):
        """Nexmark's random string: 3 .. max_len-1 characters."""
        lengths = MIN_STRING_LEN + _below(u_len, max_len - MIN_STRING_LEN)
        return self._pool, _below(u_start, _POOL_SIZE - max_len), lengths

    def _extra(self, u_len, u_start, current, average: int):
        lengths = _extra_lengths(u_len, current, average)
        return self._pool, _below(u_start, np.maximum(_POOL_SIZE - lengths, 1)), lengths

    def _persons(self, n: np.ndarray) -> pa.RecordBatch:
        c, k = self.config, len(n)
        u = _uniforms(c.seed, n, 14)
        name = [self._first.piece(_below(u[0], self._first.size)), _const(" ", k),
                self._last.piece(_below(u[1], self._last.size))]
        email = [self._text(u[2], u[3], 7), _const("@", k), self._text(u[4], u[5], 5), _const(".com", k)]
        card = [self._digits4.piece(_below(u[6], 10_000)), _const(" ", k), self._digits4.piece(_below(u[7], 10_000)),
                _const(" ", k), self._digits4.piece(_below(u[8], 10_000)), _const(" ", k),
                self._digits4.piece(_below(u[9], 10_000))]
        city, state = _below(u[10], self._cities.size), _below(u[11], self._states.size)
        current = 8 + sum(p[2] for p in name + email + card) + self._cities.lengths[city] + self._states.lengths[state]
        columns = [last_base0_person_id(c, n) + FIRST_PERSON_ID, _concat(k, name), _concat(k, email),
                   _concat(k, card), self._cities.take(city), self._states.take(state), _timestamps(c, n),
                   _concat(k, [self._extra(u[12], u[13], current, c.avg_person_bytes)])]
        return pa.RecordBatch.from_arrays(_arrays(columns), schema=PERSON_SCHEMA)

    def _auctions(self, n: np.ndarray) -> pa.RecordBatch:
        c, k = self.config, len(n)
        u = _uniforms(c.seed, n, 12)
        last_person = last_base0_person_id(c, n)
        hot = u[0] >= 1.0 / c.hot_seller_ratio
        seller = np.where(hot, last_person // HOT_GROUP * HOT_GROUP, _recent_person(c, n, u[1])) + FIRST_PERSON_ID
        initial = _prices(u[3])
        reserve = initial + _prices(u[9])
        ts = timestamps_us(c, n)
        ahead = c.num_in_flight_auctions * c.total_proportion // c.auction_proportion
        horizon_ms = ahead * c.inter_event_delay_us // 1000
        expires = ts + 1000 * (1 + _below(u[4], max(2 * horizon_ms, 1)))
        name, desc = self._text(u[5], u[6], 20), self._text(u[7], u[8], 100)
        current = 8 + name[2] + desc[2] + 40
        columns = [last_base0_auction_id(c, n) + FIRST_AUCTION_ID, _concat(k, [name]), _concat(k, [desc]),
                   initial, reserve, _timestamps(c, n), pa.array(expires, pa.timestamp("us")), seller,
                   FIRST_CATEGORY_ID + _below(u[2], NUM_CATEGORIES),
                   _concat(k, [self._extra(u[10], u[11], current, c.avg_auction_bytes)])]
        return pa.RecordBatch.from_arrays(_arrays(columns), schema=AUCTION_SCHEMA)

    def _bids(self, n: np.ndarray) -> pa.RecordBatch:
        c, k = self.config, len(n)
        u = _uniforms(c.seed, n, 9)
        hot_auction = u[0] >= 1.0 / c.hot_auction_ratio
        auction = np.where(hot_auction, last_base0_auction_id(c, n) // HOT_GROUP * HOT_GROUP,
                           _recent_auction(c, n, u[1])) + FIRST_AUCTION_ID
        hot_bidder = u[2] >= 1.0 / c.hot_bidder_ratio
        bidder = np.where(hot_bidder, last_base0_person_id(c, n) // HOT_GROUP * HOT_GROUP + 1,
                          _recent_person(c, n, u[3])) + FIRST_PERSON_ID
        hot_channel = u[5] >= 1.0 / c.hot_channel_ratio
        channel = np.where(hot_channel, _below(u[6], len(_HOT_CHANNELS)), len(_HOT_CHANNELS) + _below(u[6], NUM_CHANNELS))
        columns = [auction, bidder, _prices(u[4]), self._channels.take(channel), self._urls.take(channel),
                   _timestamps(c, n),
                   _concat(k, [self._extra(u[7], u[8], np.full(k, 32, np.int64), c.avg_bid_bytes)])]
        return pa.RecordBatch.from_arrays(_arrays(columns), schema=BID_SCHEMA)


def _timestamps(config: NexmarkConfig, n: np.ndarray) -> pa.Array:
    return pa.array(timestamps_us(config, n), pa.timestamp("us"))


def _arrays(columns) -> list:
    return [c if isinstance(c, pa.Array) else pa.array(c, pa.int64()) for c in columns]
