import math

import pytest
from hypothesis import given, strategies as st

from gpuplan.errors import QuantityError
from gpuplan.units import (
    DAY_S,
    GB,
    HOUR_S,
    GiB,
    format_bytes,
    format_count,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_params,
    parse_tokens,
    parse_usd_per_hour,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("7B", 7e9),
        ("405B", 405e9),
        ("1.5e9", 1.5e9),
        ("7000000000", 7e9),
        ("2T", 2e12),
        ("15.6T", 15.6e12),
        ("300b", 300e9),
        ("125M", 125e6),
        ("7G", 7e9),
        ("1_000", 1000),
        (" 7 B ", 7e9),
        (".5B", 0.5e9),
    ],
)
def test_counts(text, expected):
    assert parse_count(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("80GB", 80 * GB),
        ("80GiB", 80 * GiB),
        ("80 gib", 80 * GiB),
        ("512MiB", 512 * 2**20),
        ("1.5TB", 1.5e12),
        ("1024", 1024),
        ("40gb", 40 * GB),
        ("0", 0),
    ],
)
def test_bytes(text, expected):
    assert parse_bytes(text) == expected


def test_gb_and_gib_differ():
    assert parse_bytes("80GiB") - parse_bytes("80GB") == 80 * (GiB - GB)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("30d", 30 * DAY_S),
        ("12h", 12 * HOUR_S),
        ("90min", 5400),
        ("45s", 45),
        ("1w", 7 * DAY_S),
        ("1d12h", 1.5 * DAY_S),
        ("3600", 3600),
        ("2.5h", 2.5 * HOUR_S),
        ("1 day", DAY_S),
        ("50ms", 0.05),
    ],
)
def test_durations(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("$2.5/h", 2.5),
        ("2.5", 2.5),
        ("$2.50/hr", 2.5),
        ("3/gpu-hour", 3.0),
        ("$ 4 / hour", 4.0),
        ("0", 0.0),
    ],
)
def test_prices(text, expected):
    assert parse_usd_per_hour(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "fn,text,fragment",
    [
        (parse_params, "7X", "like 7B"),
        (parse_params, "-7B", "more than zero"),
        (parse_params, "0", "more than zero"),
        (parse_tokens, "two trillion", "token count"),
        (parse_bytes, "80 gigs", "80GiB"),
        (parse_bytes, "-1GB", "zero or more"),
        (parse_duration, "30 fortnights", "like 30d, 12h or 50ms"),
        (parse_duration, "h", "like 30d, 12h or 50ms"),
        (parse_duration, "-3d", "more than zero"),
        (parse_usd_per_hour, "$2.5/day", "$2.5/h"),
        (parse_params, "nan", "like 7B"),
        (parse_params, "1e999", "finite"),
    ],
)
def test_bad_quantities_say_what_to_write(fn, text, fragment):
    with pytest.raises(QuantityError) as e:
        fn(text)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


@given(st.floats(min_value=1e-3, max_value=1e15, allow_nan=False), st.sampled_from(["", "K", "M", "B", "T"]))
def test_count_roundtrip(value, suffix):
    factor = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[suffix]
    assert math.isclose(parse_count(f"{value!r}{suffix}"), value * factor, rel_tol=1e-12)


def test_format_labels_units():
    assert format_bytes(80 * GB) == "80 GB"
    assert format_bytes(80 * GiB, binary=True) == "80 GiB"
    assert format_count(8_030_261_248) == "8.03B"


@pytest.mark.parametrize(
    "parse,text,what,example",
    [
        (parse_count, "0", "--qps", "like 20 or 0.5"),
        (parse_count, "nan", "--mtbf-per-gpu-hours", "like 50000"),
        (parse_duration, "0", "--interval", "like 1s or 500ms"),
        (parse_duration, "soon", "--max-tpot", "like 50ms"),
        (parse_count, "0", "token count", "like 7B or 1.5e9"),  # the parser's own example elsewhere
    ],
)
def test_the_error_example_fits_the_flag(parse, text, what, example):
    with pytest.raises(QuantityError) as e:
        parse(text, what)
    assert example in str(e.value)
