"""The Nexmark generator (bench/nexmark/generator.py) against Nexmark's rules: determinism, the
mod-50 mix, id ranges and referential sanity, batch independence, the hot ratios and the price
distribution. A reference model of the id rules in plain Python (one event at a time) checks
the vectorized ones."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.nexmark import generator as gen
from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
from bench.nexmark.schema import AUCTION_SCHEMA, BID_SCHEMA, PERSON_SCHEMA

N = 50_000


@pytest.fixture(scope="module")
def events():
    return NexmarkGenerator(NexmarkConfig(seed=7)).generate(0, N)


def _model_last_person(n: int) -> int:
    """Nexmark's lastBase0PersonId, one event at a time."""
    epoch, offset = divmod(n, 50)
    return epoch + min(offset, 0)


def _model_last_auction(n: int) -> int:
    """Nexmark's lastBase0AuctionId, one event at a time."""
    epoch, offset = divmod(n, 50)
    if offset < 1:
        return (epoch - 1) * 3 + 2
    if offset >= 4:
        return epoch * 3 + 2
    return epoch * 3 + offset - 1


def test_id_rules_match_the_one_event_model():
    config = NexmarkConfig()
    n = np.arange(0, 5_000)
    assert gen.last_base0_person_id(config, n).tolist() == [_model_last_person(i) for i in n]
    assert gen.last_base0_auction_id(config, n).tolist() == [_model_last_auction(i) for i in n]


def test_same_seed_same_events_other_seed_other_events():
    a = NexmarkGenerator(NexmarkConfig(seed=3)).generate(1000, 6000)
    b = NexmarkGenerator(NexmarkConfig(seed=3)).generate(1000, 6000)
    c = NexmarkGenerator(NexmarkConfig(seed=4)).generate(1000, 6000)
    for x, y, z in zip(a, b, c):
        assert x.equals(y)
    assert not a.bid.equals(c.bid) and not a.person.equals(c.person)
    # what the seed does not touch: ids, kinds and times follow from the event numbers alone
    assert a.person.column("id").equals(c.person.column("id"))
    assert a.bid.column("date_time").equals(c.bid.column("date_time"))


def test_schemas_and_the_mod_50_mix(events):
    assert events.person.schema == PERSON_SCHEMA
    assert events.auction.schema == AUCTION_SCHEMA
    assert events.bid.schema == BID_SCHEMA
    n = np.arange(N)
    assert events.person.num_rows == np.sum(n % 50 == 0) == N // 50
    assert events.auction.num_rows == np.sum((n % 50 >= 1) & (n % 50 <= 3)) == 3 * N // 50
    assert events.bid.num_rows == np.sum(n % 50 >= 4) == 46 * N // 50
    config = NexmarkConfig(seed=7)
    base, step = config.base_time_us, config.inter_event_delay_us
    times = lambda batch: (batch.column("date_time").cast(pa.int64()).to_numpy() - base) // step  # noqa: E731
    assert (times(events.person) % 50 == 0).all()
    assert np.isin(times(events.auction) % 50, [1, 2, 3]).all()
    assert (times(events.bid) % 50 >= 4).all()
    assert np.array_equal(times(events.person), n[n % 50 == 0])   # base + n x interval, exactly


def test_id_ranges_and_referential_sanity(events):
    person_ids = events.person.column("id").to_numpy()
    auction_ids = events.auction.column("id").to_numpy()
    assert np.array_equal(person_ids, np.arange(1000, 1000 + len(person_ids)))   # consecutive from 1000
    assert np.array_equal(auction_ids, np.arange(1000, 1000 + len(auction_ids)))
    config = NexmarkConfig(seed=7)

    def event_numbers(batch):
        return (batch.column("date_time").cast(pa.int64()).to_numpy() - config.base_time_us) // config.inter_event_delay_us

    # auctions: sellers exist or lie within the id lead; categories 10..14; prices and times sane
    a_n = event_numbers(events.auction)
    seller = events.auction.column("seller").to_numpy() - 1000
    last_person = gen.last_base0_person_id(config, a_n)
    assert (seller >= 0).all() and (seller <= last_person + gen.PERSON_ID_LEAD).all()
    assert set(events.auction.column("category").to_pylist()) == {10, 11, 12, 13, 14}
    initial = events.auction.column("initial_bid").to_numpy()
    assert (initial >= 100).all() and (initial <= 100_000_000).all()
    assert (events.auction.column("reserve").to_numpy() > initial).all()
    expires = events.auction.column("expires").cast(pa.int64()).to_numpy()
    assert (expires > events.auction.column("date_time").cast(pa.int64()).to_numpy()).all()

    # bids: the auction is one of the last 100 in flight (or a hot one) or within the lead
    b_n = event_numbers(events.bid)
    auction = events.bid.column("auction").to_numpy() - 1000
    newest = gen.last_base0_auction_id(config, b_n)
    assert (auction <= newest + gen.AUCTION_ID_LEAD).all()
    assert (auction >= np.maximum(newest - config.num_in_flight_auctions, 0)).all()
    bidder = events.bid.column("bidder").to_numpy() - 1000
    last_person = gen.last_base0_person_id(config, b_n)
    assert (bidder >= np.maximum(last_person + 1 - config.num_active_people, 0)).all()
    assert (bidder <= last_person + gen.PERSON_ID_LEAD).all()
    # most bids name an auction generated before them: only a random (non-hot, 1/2) pick can
    # land in the lead, 10 of its 111 choices, so about 4.5 % are ahead
    assert 0.94 < np.mean(auction <= newest) < 0.97


def test_hot_ratios_and_price_distribution(events):
    config = NexmarkConfig(seed=7)
    b_n = (events.bid.column("date_time").cast(pa.int64()).to_numpy() - config.base_time_us) // 100
    auction = events.bid.column("auction").to_numpy() - 1000
    hot_auction = gen.last_base0_auction_id(config, b_n) // 100 * 100
    # P(hot) = 1 - 1/2, plus the random picks that land on the hot one by chance
    assert 0.48 < np.mean(auction == hot_auction) < 0.56
    bidder = events.bid.column("bidder").to_numpy() - 1000
    hot_bidder = gen.last_base0_person_id(config, b_n) // 100 * 100 + 1
    assert 0.73 < np.mean(bidder == hot_bidder) < 0.80
    a_n = (events.auction.column("date_time").cast(pa.int64()).to_numpy() - config.base_time_us) // 100
    seller = events.auction.column("seller").to_numpy() - 1000
    assert 0.72 < np.mean(seller == gen.last_base0_person_id(config, a_n) // 100 * 100) < 0.80
    hot_channels = np.isin(events.bid.column("channel").to_numpy(zero_copy_only=False), gen._HOT_CHANNELS)
    assert 0.47 < hot_channels.mean() < 0.53
    # prices: log10(price / 100) uniform over [0, 6]
    exponent = np.log10(events.bid.column("price").to_numpy() / 100)
    assert exponent.min() >= 0 and exponent.max() <= 6
    assert np.allclose(np.quantile(exponent, [0.25, 0.5, 0.75]), [1.5, 3.0, 4.5], atol=0.1)
    # extra pads bids to about 100 bytes
    sizes = 32 + np.array([len(s) for s in events.bid.column("extra").to_pylist()])
    assert 95 < sizes.mean() < 105


@settings(max_examples=25, deadline=None)
@given(start=st.integers(0, 3000), cuts=st.lists(st.integers(1, 2000), min_size=1, max_size=6), seed=st.integers(0, 2**64 - 1))
def test_batch_boundaries_do_not_change_the_events(start, cuts, seed):
    g = NexmarkGenerator(NexmarkConfig(seed=seed))
    stop = start + sum(cuts)
    whole = g.generate(start, stop)
    bounds = np.cumsum([start] + cuts).tolist()
    parts = [g.generate(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
    for i, table in enumerate(whole):
        pieces = [p[i] for p in parts]
        joined = pa.Table.from_batches(pieces, schema=table.schema).combine_chunks()
        assert pa.Table.from_batches([table]).equals(joined)
    batches = list(g.batches(sum(cuts), batch_size=cuts[0], start=start))
    assert sum(b.num_events for b in batches) == sum(cuts)
    assert pa.Table.from_batches([b.bid for b in batches], schema=BID_SCHEMA).combine_chunks().equals(
        pa.Table.from_batches([whole.bid]))


def test_strings_follow_their_shapes(events):
    emails = events.person.column("email_address").to_pylist()
    assert all(e.endswith(".com") and e.count("@") == 1 for e in emails)
    cards = events.person.column("credit_card").to_pylist()
    assert all(len(c) == 19 and c.replace(" ", "").isdigit() for c in cards)
    names = events.auction.column("item_name").to_pylist()
    assert all(3 <= len(s) < 20 for s in names)
    urls = events.bid.column("url").to_pylist()
    assert all(u.startswith("https://www.nexmark.com/") for u in urls)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        NexmarkConfig(inter_event_delay_us=0)
    with pytest.raises(ValueError):
        NexmarkGenerator().generate(5, 4)
    with pytest.raises(ValueError):
        list(NexmarkGenerator().batches(10, batch_size=0))
