"""Units: the constants gpuplan computes with, and parsers for the quantities people type.

Internal units are bytes (int), FLOPs, seconds and US dollars. GB (1e9 bytes) and GiB (2**30 bytes)
are different constants and every display says which one it uses.

Parsers accept the forms people write on a command line: ``7B`` parameters, ``15.6T`` tokens,
``80GB`` / ``80GiB``, ``30d`` / ``12h``, ``$2.5/h``; plain numbers and scientific notation too. A value
that cannot be read, or that is negative, raises :class:`~gpuplan.errors.QuantityError` with a line
that shows an accepted form.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeVar

from .errors import QuantityError

T = TypeVar("T")

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
PB = 10**15
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

MINUTE_S = 60.0
HOUR_S = 3600.0
DAY_S = 86400.0
WEEK_S = 7 * DAY_S
YEAR_S = 365.0 * DAY_S

# ---------------------------------------------------------------------------------------------
# Ranges: the largest (and smallest) values gpuplan plans with. Beyond them an estimate is not
# meaningful and the arithmetic could overflow or take long, so inputs outside are refused (exit 2).

#: Accelerators in one job or fleet: 2**20, about ten times the largest clusters announced (2024-25).
MAX_GPUS = 2**20
#: Tokens of one training run: 1e18, about 30 000 times Llama 3's 15.6T.
MAX_TOKENS = 1e18
#: Training epochs.
MAX_EPOCHS = 1e6
#: Tokens per sequence (sequence length, prompt, output, context): 2**24, above every published context.
MAX_SEQ_TOKENS = 2**24
#: Sequences per (micro-)batch, and concurrent sequences.
MAX_BATCH = 2**40
#: LoRA adapter rank (ranks in use are 4-256; the hidden size bounds a useful one).
MAX_LORA_RANK = 2**16
#: The smallest MFU worth planning with: 0.1 % (measured MFUs are 20-60 %; below 0.1 % the GPUs idle).
MIN_MFU = 1e-3
#: Durations (deadlines, latency targets, periods): 1 microsecond to 1000 years.
MIN_DURATION_S = 1e-6
MAX_DURATION_S = 1000 * 365.0 * 86400.0
#: Requests per second to serve: from one a million seconds (11.6 days) to 1e9.
MIN_QPS = 1e-6
MAX_QPS = 1e9
#: Dollar amounts (a purchase price) and prices per GPU-hour.
MAX_USD = 1e12
MAX_USD_PER_HOUR = 1e6


def check_range(value: float, what: str, low: float, high: float, *, low_open: bool = False, why: str = "") -> float:
    """``value`` if it is finite and within [low, high] ((low, high] with ``low_open``), else a
    :class:`~gpuplan.errors.QuantityError` that names the range (and ``why``, when given). -0 becomes 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise QuantityError(f"{what} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(f"{what} must be a finite number, got {value!r}")
    if value > high or value < low or (low_open and value == low):

        def show(x: float) -> str:
            return f"{x:,}" if isinstance(x, int) else f"{x:g}"

        lower = f"more than {show(low)}" if low_open else f"at least {show(low)}"
        raise QuantityError(
            f"{what} must be {lower} and at most {show(high)}, got {show(value)}" + (f" ({why})" if why else "")
        )
    return value + 0 if isinstance(value, int) else value + 0.0


class LazyPattern:
    """A regular expression compiled on first use, with the ``re.Pattern`` methods (``match``, ``finditer``...).

    Compiling the parsers' patterns at import took a few milliseconds of every command's start-up (issue
    #12), while most commands parse one quantity or none."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


_NUMBER = r"[+-]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"

_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_COUNT_RE = LazyPattern(rf"^\s*({_NUMBER})\s*([kmbgtp]?)\s*$", re.IGNORECASE)

_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "pb": PB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
}
_BYTES_RE = LazyPattern(rf"^\s*({_NUMBER})\s*([a-z]*)\s*$", re.IGNORECASE)

_DURATION_UNITS = {
    "ms": 1e-3,
    "msec": 1e-3,
    "us": 1e-6,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": MINUTE_S,
    "min": MINUTE_S,
    "mins": MINUTE_S,
    "minute": MINUTE_S,
    "minutes": MINUTE_S,
    "h": HOUR_S,
    "hr": HOUR_S,
    "hrs": HOUR_S,
    "hour": HOUR_S,
    "hours": HOUR_S,
    "d": DAY_S,
    "day": DAY_S,
    "days": DAY_S,
    "w": WEEK_S,
    "wk": WEEK_S,
    "week": WEEK_S,
    "weeks": WEEK_S,
    "y": YEAR_S,
    "yr": YEAR_S,
    "year": YEAR_S,
    "years": YEAR_S,
}
_DURATION_PART_RE = LazyPattern(rf"({_NUMBER})\s*([a-z]*)", re.IGNORECASE)

_PRICE_RE = LazyPattern(
    rf"^\s*\$?\s*({_NUMBER})\s*(?:(?:usd)?\s*/\s*(h|hr|hour|gpu-?h|gpu-?hr|gpu-?hour))?\s*$",
    re.IGNORECASE,
)


def _number(text: str) -> float:
    """The float of a matched number; too many digits (or an exponent past 1e308) read as inf, refused later."""
    digits = text.replace("_", "")
    if len(digits) > 400:
        return math.inf
    return float(digits)


def _as_float(value: int | float) -> float:
    """A Python number as a float; an int too large for one reads as inf (refused by ``_check``)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


#: Examples for the flags a generic parser reads whose usual values look nothing like the parser's own example
#: (a count parser's "7B", a duration parser's "30d"): the error line shows one the user would write.
_FLAG_EXAMPLES = {
    "--qps": "20 or 0.5",
    "--qpm": "600",
    "--interval": "1s or 500ms",
    "--max-ttft": "2s or 500ms",
    "--max-tpot": "50ms",
    "--mtbf-per-gpu-hours": "50000",
}


def _example(what: str, default: str) -> str:
    return _FLAG_EXAMPLES.get(what, default)


def _check(value: float, what: str, raw: str, example: str, allow_zero: bool) -> float:
    """Finite (no nan, no inf, no overflow) and not negative; -0 reads as 0."""
    if not math.isfinite(value):
        raise QuantityError(f"{what} '{raw}' is not a finite number; write it like {example}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "more than zero"
        raise QuantityError(f"{what} '{raw}' must be {bound}; write it like {example}")
    return value + 0.0


def parse_count(text: str | int | float, what: str = "count", allow_zero: bool = False) -> float:
    """Read a count with an optional K/M/B/T suffix: ``7B`` -> 7e9, ``15.6T`` -> 1.56e13, ``1.5e9``.

    ``G`` is read as 1e9 too (``7G``). Used for parameters and tokens.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _check(_as_float(text), what, str(text), _example(what, "7B or 1.5e9"), allow_zero)
    m = _COUNT_RE.match(str(text))
    if not m:
        raise QuantityError(
            f"can't read {what} '{text}': use a number with an optional K/M/B/T suffix, like "
            f"{_example(what, '7B or 1.5e9')}"
        )
    value = _number(m.group(1)) * _COUNT_SUFFIX[m.group(2).lower()]
    return _check(value, what, str(text), _example(what, "7B or 1.5e9"), allow_zero)


def parse_params(text: str | int | float) -> float:
    """A parameter count: ``7B``, ``405B``, ``1.5e9``."""
    return parse_count(text, "parameter count")


def parse_tokens(text: str | int | float) -> float:
    """A token count: ``2T``, ``15.6T``, ``300B``."""
    return parse_count(text, "token count")


def parse_bytes(text: str | int | float, what: str = "size") -> int:
    """A size in bytes: ``80GB`` (1e9), ``80GiB`` (2**30), ``512MiB``, ``1.5TB``; a plain number is bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(_check(_as_float(text), what, str(text), "80GB or 80GiB", True))
    m = _BYTES_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _BYTE_UNITS:
        raise QuantityError(
            f"can't read {what} '{text}': use a number with a unit like 80GB (1e9 bytes) or 80GiB (2**30 bytes)"
        )
    value = _number(m.group(1)) * _BYTE_UNITS[unit]
    return round(_check(value, what, str(text), "80GB or 80GiB", True))


def parse_duration(text: str | int | float, what: str = "duration") -> float:
    """A duration in seconds: ``30d``, ``12h``, ``90min``, ``1w``, ``1d12h``; a plain number is seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _check(_as_float(text), what, str(text), _example(what, "30d or 12h"), False)
    raw = str(text).strip()
    pos, total, parts = 0, 0.0, 0
    for m in _DURATION_PART_RE.finditer(raw):
        if raw[pos : m.start()].strip():
            break
        unit = m.group(2).lower()
        if unit not in _DURATION_UNITS and not (unit == "" and parts == 0 and m.end() == len(raw)):
            break
        total += _number(m.group(1)) * _DURATION_UNITS.get(unit, 1.0)
        pos, parts = m.end(), parts + 1
    if parts == 0 or raw[pos:].strip():
        raise QuantityError(
            f"can't read {what} '{text}': use a number with a unit (ms, s, min, h, d, w, y), like "
            f"{_example(what, '30d, 12h or 50ms')}"
        )
    return _check(total, what, str(text), _example(what, "30d or 12h"), False)


def parse_usd_per_hour(text: str | int | float, what: str = "price") -> float:
    """A price per hour in US dollars: ``$2.5/h``, ``2.5``, ``$2.50/hr``, ``3/gpu-hour``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _check(_as_float(text), what, str(text), "$2.5/h", True)
    m = _PRICE_RE.match(str(text))
    if not m:
        raise QuantityError(f"can't read {what} '{text}': write dollars per hour, like $2.5/h or 2.5")
    return _check(_number(m.group(1)), what, str(text), "$2.5/h", True)


_USD_RE = LazyPattern(rf"^\s*\$?\s*({_NUMBER})\s*([kmb]?)\s*$", re.IGNORECASE)


def parse_usd(text: str | int | float, what: str = "amount") -> float:
    """A dollar amount: ``30000``, ``$30,000``, ``$30k``, ``1.2M``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _check(_as_float(text), what, str(text), "$30000 or $30k", True)
    m = _USD_RE.match(str(text).replace(",", ""))
    if not m:
        raise QuantityError(f"can't read {what} '{text}': write dollars, like 30000, $30,000 or $30k")
    value = _number(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "b": 1e9}[m.group(2).lower()]
    return _check(value, what, str(text), "$30000 or $30k", True)


# ---------------------------------------------------------------------------------------------
# Display helpers (pure: they return strings; printing happens in the CLI).


def format_count(value: float, digits: int = 3) -> str:
    """``8030261248`` -> ``8.03B``; keeps ``digits`` significant figures."""
    value = float(f"{value:.{digits}g}")  # round first, so 999.96e9 shows as 1T, not 1e+03B
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g}{suffix}"
    return f"{value:.{digits}g}"


def format_bytes(value: float, binary: bool = False, digits: int = 3) -> str:
    """A byte count in GB (1e9) by default or GiB (2**30) when ``binary``; the unit is always shown."""
    if binary:
        steps = ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"))
    else:
        steps = ((TB, "TB"), (GB, "GB"), (MB, "MB"), (KB, "KB"))
    for factor, suffix in steps:  # round in the unit below first, so 999.96 MB shows as 1 GB
        if abs(float(f"{value / factor:.{digits}g}")) >= 1:
            return f"{float(f'{value / factor:.{digits}g}'):g} {suffix}"
    return f"{value:.0f} B"


def format_flops(value: float, digits: int = 4) -> str:
    """FLOP counts or rates: ``989.5e12`` -> ``989.5 T``."""
    for factor, suffix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {suffix}"
    return f"{value:.{digits}g} "


def nonblank(value: T, flag: str) -> T:
    """``value``, unless it is text that is empty or blank: a quantity flag given no value is an error (one
    line naming ``flag``), not the flag left out. The CLI's flags and the API's keywords share it."""
    if isinstance(value, str) and not value.strip():
        raise QuantityError(f"{flag} is empty; give a value (see --help)")
    return value


class Bound:
    """The accepted range of one numeric option: a whole number (``integer``) or a finite float within
    [low, high] ((low, high] with ``low_open``); ``why`` explains the range in the error line. The CLI's
    numeric flags and the Python API's keywords read their values through the same bound."""

    __slots__ = ("low", "high", "integer", "low_open", "why")

    def __init__(self, low: float, high: float, *, integer: bool = False, low_open: bool = False, why: str = ""):
        self.low, self.high, self.integer, self.low_open, self.why = low, high, integer, low_open, why

    def read(self, value: object, flag: str) -> float:
        """``value`` (a number or its text) as a number in range, else one QuantityError line naming ``flag``
        and the range. nan, inf, overflow and huge integers are refused before any arithmetic; -0 is 0."""
        kind = "a whole number" if self.integer else "a finite number"
        low, high = (f"{self.low:,}", f"{self.high:,}") if self.integer else (f"{self.low:g}", f"{self.high:g}")
        lower = f"> {low}" if self.low_open else f">= {low}"
        expected = f"{flag} must be {kind} {lower} and <= {high}" + (f" ({self.why})" if self.why else "")
        if isinstance(value, bool):
            raise QuantityError(f"{expected}, got {value!r}")
        number: float | int
        if isinstance(value, (int, float)):
            number = value
        else:
            text = str(value).strip().replace("_", "")
            if self.integer:
                if len(text) > 30 or not re.fullmatch(r"[+-]?[0-9]+", text):
                    raise QuantityError(f"{expected}, got {value!r}")
                number = int(text)
            else:
                try:
                    number = float(text) if len(text) <= 400 else math.inf
                except ValueError:
                    raise QuantityError(f"{expected}, got {value!r}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise QuantityError(f"{expected}, got {value!r} (not a finite number)")
        if self.integer and isinstance(number, float):
            if not number.is_integer():
                raise QuantityError(f"{expected}, got {value!r}")
            number = int(number)
        if number > self.high or number < self.low or (self.low_open and number == self.low):
            raise QuantityError(f"{expected}, got {value}")
        return number + 0 if isinstance(number, int) else number + 0.0


def whole(low: int, high: int, why: str = "") -> Bound:
    return Bound(low, high, integer=True, why=why)


def real(low: float, high: float, *, low_open: bool = False, why: str = "") -> Bound:
    return Bound(low, high, low_open=low_open, why=why)


#: The range of every numeric option, by its keyword name (``--micro-batch`` is ``micro_batch``). The
#: limits are the MAX_* constants above; ``why`` says what the range means.
BOUNDS: dict[str, Bound] = {
    "gpus": whole(1, MAX_GPUS),
    "tp": whole(1, MAX_GPUS),
    "pp": whole(1, MAX_GPUS),
    "cp": whole(1, MAX_GPUS),
    "ep": whole(1, MAX_GPUS),
    "etp": whole(1, MAX_GPUS),
    "replicas": whole(1, MAX_GPUS),
    "zero": whole(0, 3),
    "micro_batch": whole(1, MAX_BATCH),
    "global_batch": whole(1, MAX_BATCH),
    "batch": whole(1, MAX_BATCH),
    "concurrency": whole(1, MAX_BATCH),
    "seq_len": whole(1, MAX_SEQ_TOKENS),
    "prompt_tokens": whole(1, MAX_SEQ_TOKENS),
    "output_tokens": whole(1, MAX_SEQ_TOKENS),
    "context": whole(1, MAX_SEQ_TOKENS),
    "lora_rank": whole(1, MAX_LORA_RANK),
    "virtual_stages": whole(1, 1024),
    "recompute_layers": whole(0, MAX_GPUS),
    "offload_layers": whole(0, MAX_GPUS),
    "epochs": real(0, MAX_EPOCHS, low_open=True),
    "mfu": real(
        MIN_MFU,
        1,
        why="a fraction of the dense peak; below 0.001 (0.1 %) the GPUs would idle, measured MFUs are 0.2-0.6",
    ),
    "years": real(0, 1000, low_open=True),
    "life_years": real(0.01, 100),
    "utilization": real(
        0.001, 1, why="a fraction of the hours; below 0.001 (9 hours a year) the cost per used hour is meaningless"
    ),
    "pue": real(1, 10, why="facility power over IT power; 1.1-1.6 in practice"),
    "usd_per_kwh": real(0, 100),
    "hosting_usd_per_kw_month": real(0, 1e6),
    "staff_usd_per_gpu_year": real(0, 1e12),
    "cost_of_capital": real(0, 1, why="an annual rate: 0.08 is 8 %"),
    "writers": whole(1, 256),
    "top": whole(1, 10_000, why="options listed by gpuplan plan"),
}
