"""Share an llmpacer budget from Python.

llmpacer keeps one LLM provider budget (requests and tokens per minute and
per day, or over any window, input and output tokens apart, money, calls
in flight; divided among tenants; routed over deployments by a Group) in
Redis, checked and charged by Lua scripts. This
module runs the same scripts on the same keys as the Go package
(github.com/llmpacer/llmpacer/pacer), so a notebook, a batch job or a worker
in Python draws from the budget that Go processes use, instead of going
around it. It follows docs/lua-contract.md and passes the conformance
vectors in lua/testdata/conformance: for the same configuration and request
it sends the Go client's arguments, byte for byte.

It needs only a Redis client with ``register_script`` (redis-py's
``redis.Redis`` or ``redis.RedisCluster``) and the scripts: by default the
``lua`` folder of the llmpacer checkout this file lives in, or
``$LLMPACER_LUA_DIR``, or the ``lua_dir`` given to Pacer.

    import redis, llmpacer
    p = llmpacer.Pacer(redis.Redis(), llmpacer.Config(
        name="openai:gpt-4o-mini", limits=llmpacer.Limits(rpm=500, tpm=200_000)))
    lease = p.acquire(tokens=1300)      # waits until every limit has room
    try:
        reply = call_model()
    except ProviderRateLimit as e:      # a 429: pause every process
        # (insufficient_quota is QUOTA_EXHAUSTED, a stop; see the README
        # for a full mapping of statuses and the retry-after headers)
        lease.fail(llmpacer.RATE_LIMITED, retry_after=e.retry_after_seconds, status=429)
        raise
    except BaseException:
        lease.fail(llmpacer.TRANSIENT)  # the provider may have counted it
        raise
    lease.settle(reply.usage.total_tokens)

Every process sharing a budget must use the same Config (limits, rates,
headroom, batch floor, tenants, weights, prices), or
follow one definition stored in Redis (Config.version, Pacer.define). A
Pacer and its leases are safe to use from several threads. What the Go
client does and this one does not: a process that pauses the budget does
not make its own reserved turns wait the pause out, a Group's call waiting
for its turn is not routed again when a pause or stop takes it back, and
there are no events, Run helper, tenant snapshots, shadow or outage modes.
The names follow the Go package's, in snake case: Lease.fail (Fail),
Lease.keep_alive (KeepAlive), Lease.info (Info), retry_after (RetryAfter);
the failure kinds (RATE_LIMITED and the rest) are classify.Kind's names,
as Go's Verdict would carry them.

Slots (a concurrency limit) are shared first come, first served with every
process, through the slot queue the scripts keep in Redis. A waiter's
request is kept with its queue entry, and the script that frees a slot
admits the queue's head with it (charging its limits as acquire would).
A Python waiter does not subscribe to the messages that announce it: it
asks again at the script's estimate, at most every _POLL_MS, and finds
itself admitted (code 2). A lease ending in this process also wakes its
waiters. A waiter that gives up ends the lease it may have been given
meanwhile (a cancel); one whose process dies holds the slot it was given
until its lease TTL ends.
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
import hashlib
import json
import logging
import math
import os
import random
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Callable

_log = logging.getLogger("llmpacer")

DEFAULT_BATCH_FLOOR = 0.2
DEFAULT_LEASE_TTL_MS = 10 * 60 * 1000
DEFAULT_MAX_WAIT_MS = 60 * 1000
DEFAULT_KEY_PREFIX = "llmpacer"

INTERACTIVE, BATCH = "interactive", "batch"
# What a Rate counts: requests (one a call), tokens (input and output
# together), input or output tokens alone, or money (SPEND, in the unit of
# Config.prices).
REQUESTS, TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, SPEND = "requests", "tokens", "input_tokens", "output_tokens", "spend"
UNITS = (REQUESTS, TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, SPEND)
DEFAULT_PROBE_MS = 60_000  # a quota stop's probe interval when Config.quota_probe_ms is 0 (as Go's Config.QuotaProbe)
# What a failed call's verdict says, as classify.Kind's String() names it:
# Lease.fail's kind.
OK, RATE_LIMITED, QUOTA_EXHAUSTED, OVERLOADED, TRANSIENT, PERMANENT, CANCELED = (
    "ok", "rate_limited", "quota_exhausted", "overloaded", "transient", "permanent", "canceled")
KINDS = (OK, RATE_LIMITED, QUOTA_EXHAUSTED, OVERLOADED, TRANSIENT, PERMANENT, CANCELED)
# Which provider limit a 429 named, as classify.Limit's String() names it:
# Lease.fail's limit.
LIMITS = ("unknown", REQUESTS, TOKENS, INPUT_TOKENS, OUTPUT_TOKENS)
_THROTTLE_DEFAULT_S = 1.0  # a 429's pause when it names no delay (Go's throttleDefault)
_MAX_RETRY_AFTER_S = 24 * 3600.0  # a quota stop's length when it names none (classify.MaxRetryAfter)
SCRIPTS = ("acquire", "acquires", "settle", "settles", "keepalive", "pause", "stop", "snapshot", "define", "route")
# settles.lua's text holds settle.lua's main block, from this line on, as
# a function (see source). This client sends one call a script call.
_SETTLE_MAIN = "-- The main block (settles.lua runs it as the function settle1"
# A Group's policies (pacer.Policy): the order a call is offered to its
# deployments in.
FILL_IN_ORDER, SPREAD, MOST_ROOM = "fill-in-order", "spread", "most-room"
_MAX_DEPLOYMENTS = 16

_MAX_LIMIT = _MAX_TOKENS = _MAX_SPAN_US = 1 << 50
_MAX_DURATION_MS = 7 * 24 * 3600 * 1000
_MAX_RATES = 16  # Config.rates
_MAX_WINDOW_MS = 366 * 24 * 3600 * 1000  # a Rate's window
_SLIDING_PARTS = 64  # sub-windows of a sliding window (wire.SlidingParts)
_REAP_AFTER_MS = 60_000  # acquire.lua keeps an expired lease this long
_ROUND_TRIP_S = 0.005  # kept before a wait bound for the call after a sleep
_FIRST_HOLD_MS = 100.0  # the mean hold time assumed before a lease ends
_POLL_MS = 250  # the longest a slot waiter sleeps before asking again
_MAX_TENANT_LEN = 64 << 10  # bytes of a tenant id
_SHARE_CALLS = 8  # calls a tenant's share has room for (wire.ShareCalls)
_MAX_INPUT_MARGIN = 10  # Price.input_margin
# Model families whose prompts package estimate counts exactly: a Spend
# rate's default input margin is 5% for them, 25% for the others (see
# estimate.InputMargin, whose table this is).
_EXACT_FAMILIES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "o1", "o3", "o4",
                   "gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002")
_INT = re.compile(r"[+-]?[0-9]+")
_STOP = re.compile(r"([0-9]+) ([0-9]+) ([0-9]+) ([A-Za-z]+)")


class LlmpacerError(Exception):
    """Base of this module's errors."""


class InvalidError(LlmpacerError, ValueError):
    """A configuration, request or argument that can never be right."""


class TooLargeError(LlmpacerError):
    """A request that can never fit a bucket: never retry it."""


class ReplyError(LlmpacerError):
    """A script reply of an unexpected shape (another version of the scripts?)."""


class LeaseExpiredError(LlmpacerError):
    """The lease expired before it ended: its reservation stays charged."""


class StoppedError(LlmpacerError):
    """The budget is stopped: its quota is exhausted (limit "quota") or an
    operator stopped it (limit "stop"). Nothing was sent or charged; ask
    again after retry_after_ms, when the next probe is due or the stop ends."""

    def __init__(self, retry_after_ms: int, limit: str):
        why = "the provider's quota is exhausted" if limit == "quota" else "stopped by an operator"
        super().__init__(f"llmpacer: budget stopped: {why}; ask again in {retry_after_ms} ms")
        self.retry_after_ms, self.limit = retry_after_ms, limit


# acquire's reasons while the budget is stopped (see stop.lua).
_STOPS = ("quota", "stop")


class SupersededError(LlmpacerError):
    """define: a newer version of the definition is stored."""


class WaitTimeoutError(LlmpacerError):
    """No room within the wait bound: acquire would find room only after
    bound_ms, or try_acquire, whose bound_ms is 0, found none now (Go's
    ErrWaitTimeout; a job queue's normal answer: hand the job back and try
    again after retry_after(err)). limit held the call back; wait_ms is
    how long until it has room. Nothing was sent or charged."""

    def __init__(self, wait_ms: int, bound_ms: int, limit: str):
        if bound_ms == 0:
            msg = f"llmpacer: no room yet in {limit}; retry after {wait_ms} ms"
        else:
            msg = f"llmpacer: no room within the wait bound {bound_ms} ms: {limit} needs {wait_ms} ms more; raise max_wait_ms or lower the load"
        super().__init__(msg)
        self.wait_ms, self.bound_ms, self.limit = wait_ms, bound_ms, limit


def retry_after(err: BaseException) -> float | None:
    """How long err says to wait before trying again, in seconds; None if it says nothing.

    As Go's pacer.RetryAfter: the wait of a WaitTimeoutError (for a
    try_acquire's refusal, until the limit has room) and of a StoppedError
    (until the next probe is due or the stop ends). Any other error has
    no wait.
    """
    if isinstance(err, WaitTimeoutError):
        return err.wait_ms / 1000
    if isinstance(err, StoppedError):
        return err.retry_after_ms / 1000
    return None


@dataclasses.dataclass(frozen=True)
class Limits:
    """A provider's limits for one key; 0 means no such limit."""

    rpm: int = 0
    tpm: int = 0
    rpd: int = 0
    tpd: int = 0
    concurrency: int = 0


@dataclasses.dataclass(frozen=True)
class Rate:
    """One limit over any window: limit units of unit per window_ms, as pacer.Rate.

    unit is REQUESTS, TOKENS, INPUT_TOKENS, OUTPUT_TOKENS or SPEND; window_ms runs
    from 1 second to 366 days; burst optionally lowers the bucket's
    capacity below the limit (0: the limit); a rate of requests or tokens
    per minute or per day with a burst is the bucket of limits' field for
    it, as in Go.
    sliding makes the rate a strict sliding window, as pacer.Rate.Sliding:
    what is admitted in any window_ms never exceeds limit, counted per
    sub-window of window_ms / 64 (no burst).
    """

    unit: str
    limit: int
    window_ms: int
    burst: int = 0
    sliding: bool = False

    @property
    def name(self) -> str:
        """The limit's name, as acquire's reason and errors report it.

        "rpm", "tpm", "rpd" or "tpd" for a rate Limits can state; otherwise
        the unit and the window, such as "tokens/3600s", or in ms when it is
        not whole seconds ("requests/1500ms").
        """
        four = {(REQUESTS, 60_000): "rpm", (TOKENS, 60_000): "tpm",
                (REQUESTS, 86_400_000): "rpd", (TOKENS, 86_400_000): "tpd"}
        if (self.unit, self.window_ms) in four and not self.sliding:
            return four[self.unit, self.window_ms]
        if self.window_ms % 1000 == 0:
            return f"{self.unit}/{self.window_ms // 1000}s"
        return f"{self.unit}/{self.window_ms}ms"


@dataclasses.dataclass(frozen=True)
class Price:
    """What a model's tokens cost per million, in the unit of SPEND rates, as pacer.Price.

    input_margin is the share of the prompt's estimate a SPEND rate
    reserves beyond it: 0 takes the model family's default
    (default_input_margin), a negative value none, at most 10.
    """

    input: float = 0.0
    cached_input: float = 0.0
    output: float = 0.0
    input_margin: float = 0.0

    def reserve(self, r: "_Use") -> int:
        """What a reservation may cost at most (wire.Price.Reserve)."""
        m = 1 + max(self.input_margin, 0)
        if r.split:
            return _per_million(float(r.input) * m * self.input + float(r.output) * self.output)
        return _per_million(float(r.tokens) * max(m * self.input, m * self.cached_input, self.output))

    def bound(self, tokens: int) -> int:
        """What tokens cost at most, each at the dearest price."""
        return _per_million(float(tokens) * max(self.input, self.cached_input, self.output))

    def spent(self, input: int, cached: int, output: int) -> int:
        """What a call cost: its input, of which cached came from the provider's cache, and its output."""
        cached = min(max(cached, 0), input)
        return _per_million(float(input - cached) * self.input + float(cached) * self.cached_input + float(output) * self.output)


def _per_million(x: float) -> int:
    # Money is charged against the caller, as tokens are: rounded up.
    return math.ceil(x / 1e6)


def default_input_margin(model: str) -> float:
    """The input margin a SPEND rate reserves for model when its Price leaves it 0.

    5% for OpenAI's models, 25% for the others, as estimate.InputMargin.
    """
    m = model.strip().lower()
    for seg in (x for x in re.split(r"[/:]", m) if x):
        for f in _EXACT_FAMILIES:
            if seg.startswith(f) and (len(seg) == len(f) or not _ascii_alnum(seg[len(f)])):
                return 0.05
    return 0.25


def _ascii_alnum(c: str) -> bool:
    return "a" <= c <= "z" or "0" <= c <= "9"


@dataclasses.dataclass(frozen=True)
class Tenants:
    """A budget divided among its tenants, as pacer.Tenants.

    rates are every tenant's own limits (at most 16, Rate as in
    Config.rates); share is the fraction of each budget rate a tenant may
    use before it yields to tenants within theirs (0: none, up to 1).
    A call names its tenant (acquire's tenant=).
    """

    rates: tuple = ()
    share: float = 0.0


@dataclasses.dataclass(frozen=True)
class Config:
    """One shared budget, as pacer.Config describes it (durations in ms).

    A zero field takes the Go default: batch_floor 0.2 (negative: none),
    lease_ttl_ms 10 minutes, max_wait_ms 1 minute, key_prefix "llmpacer".
    hash_tag, as Config.HashTag: the keys become "{<hash_tag>}<key_prefix>:
    <name>:s" and so on, so that a Go pacer.Group's deployments, which share
    one hash tag, can be used from Python too (empty: "{<key_prefix>:<name>}:s").
    rates are limits over any window, and of input or output tokens apart
    (at most 16); a rate of requests or tokens per minute or per day is
    the bucket of limits' field for it, so set it in one place only.
    """

    name: str
    limits: Limits
    headroom: float = 0.0
    no_refund: bool = False
    batch_floor: float = 0.0
    lease_ttl_ms: int = 0
    max_wait_ms: int = 0
    key_prefix: str = ""
    rates: tuple = ()
    hash_tag: str = ""
    # As pacer.Config.Tenants, Weights (model -> weight on token rates,
    # above 0, at most 1000) and Prices (model -> Price, "" for models not
    # listed; needed by SPEND rates).
    tenants: Tenants = Tenants()
    weights: dict = dataclasses.field(default_factory=dict)
    prices: dict = dataclasses.field(default_factory=dict)
    # As pacer.Config.Version: a positive version is stored in Redis at
    # the first call if none newer is; 0 follows what is stored.
    version: int = 0
    # As pacer.Config.QuotaProbe: how often a budget that Lease.fail stopped
    # for an exhausted quota lets one call through (0: a minute). Each
    # process's own, not part of a stored definition.
    quota_probe_ms: int = 0


@dataclasses.dataclass(frozen=True)
class Bucket:
    """One rate limit as the scripts see it: a GCRA bucket kept as a time.

    interval is the µs of refill per unit, span the µs a full bucket holds,
    slack the µs added to every allowance (see docs/lua-contract.md).
    unit is what it counts (one of UNITS). sub is, for a strict sliding
    window, the width of its sub-windows in µs (0 for a GCRA bucket); its
    charges, refunds and allowances are then in units, not µs.
    """

    field: str
    limit: int
    capacity: int
    refill: int
    window_ms: int
    unit: str
    interval: float
    span: int
    slack: int
    sub: int = 0
    room: int = 0  # a tenant's share ('%'): the units it may hold for 8 calls

    @classmethod
    def new(cls, field, limit, capacity, refill, window_ms, unit):
        iv = float(window_ms * 1000) / float(refill)
        return cls(field, limit, capacity, refill, window_ms, unit, iv,
                   math.ceil(float(capacity) * iv), max(0, min(999, math.ceil(iv / 2) - 1)))

    @classmethod
    def sliding(cls, name, limit, window_ms, unit):
        """A strict sliding window, as wire.NewSliding: its field is name
        marked "~<sub-window µs>:" for the scripts."""
        g = -(-window_ms * 1000 // _SLIDING_PARTS)
        return cls(f"~{g}:{name}", limit, limit, limit, window_ms, unit, 1.0, limit, 0, g)

    @property
    def tokens(self) -> bool:
        """The bucket counts tokens of some kind, not requests."""
        return self.unit != REQUESTS

    def units(self, tokens: int, input: int = 0, output: int = 0) -> int:
        """What a call takes from the bucket: one request, or its tokens.

        A bucket of input or output tokens takes the call's input or
        output when it gives them (tokens is then their sum), else all of
        tokens: it cannot tell the two apart.
        """
        return _Use(tokens, input, output).of(self.unit)

    def charge(self, units: int) -> int:
        if self.sub:
            return units
        return math.ceil(float(units) * self.interval)

    def refund(self, units: int) -> int:
        if self.sub:
            return units
        return math.floor(float(units) * self.interval)

    def allowance(self, keep: float) -> int:
        if self.sub:
            # The units of the window the call may see used, its own included.
            return self.capacity - math.floor(float(self.capacity) * keep)
        if keep == 0:
            return self.span + self.slack
        c = float(self.capacity)
        return math.ceil((c - c * keep) * self.interval) + self.slack

    def allow(self, charge: int, keep: float) -> int:
        """A call's allowance for a charge of charge: allowance(keep); for a
        tenant's share at least 8 such charges, up to room units (plus slack)."""
        a = self.allowance(keep)
        if self.field.startswith("%"):
            room = math.ceil(float(self.room) * self.interval)
            a = max(a, min(_SHARE_CALLS * charge, room) + self.slack)
        return a

    @property
    def per_ms(self) -> float:
        return float(self.refill) / float(self.window_ms)

    def sliding_level(self, now_us: int, counts: str) -> float:
        """The room a sliding window has at now_us, from its field as stored
        (wire.SlidingState.Header: "<head>:<last>:<total>:<current>", and
        ":<folded>:<folded last>" while some are folded): the capacity less at most what the window ending
        now counts, turns reserved ahead included, as wire.SlidingLevel. A
        value of the format before ("<base> <count> ...", -n for n
        sub-windows without a count) counts every count not rolled out, as
        the scripts read it."""
        cur = now_us // 1000 * 1000 // self.sub
        if not counts:
            return float(self.capacity)
        if ":" in counts:
            f = counts.split(":")
            if len(f) not in (4, 6) or not all(x.isdigit() for x in f):
                raise ReplyError(f"llmpacer: {self.field} counts {counts!r}")
            head, _, total, current, folded, folded_last = (list(map(int, f)) + [0, 0])[:6]
            used = 0
            if head >= cur - _SLIDING_PARTS:
                used += current
            if head - 1 >= cur - _SLIDING_PARTS:
                used += total
            if folded > 0 and folded_last >= cur - _SLIDING_PARTS:
                used += folded
            return float(self.capacity - used)
        f = counts.split()
        if not all(_INT.fullmatch(x) for x in f):
            raise ReplyError(f"llmpacer: {self.field} counts {counts!r}")
        j, total = int(f[0]), 0
        for x in f[1:]:
            c = int(x)
            if c < 0:
                j -= c
                continue
            if j >= cur - _SLIDING_PARTS:
                total += c
            j += 1
        return float(self.capacity - total)

    def level(self, now_us: int, tat: int | None) -> float:
        if tat is None or tat <= now_us:
            return float(self.capacity)
        return min(float(self.capacity), (now_us + self.span - tat) / self.interval)

    @property
    def per_second(self) -> float:
        return float(self.refill) / float(self.window_ms) * 1000


class _Use:
    """A call's tokens, reserved or used: split into input and output when
    either is given (tokens is then their sum), else only the total."""

    __slots__ = ("tokens", "input", "output", "split", "spend")

    def __init__(self, tokens: int, input: int = 0, output: int = 0, split: bool | None = None, spend: int = 0):
        self.split = bool(input or output) if split is None else split
        self.tokens = input + output if self.split and not tokens else tokens
        self.input, self.output = input, output
        self.spend = spend  # money, reserved at the worst case or spent

    def of(self, unit: str) -> int:
        if unit == REQUESTS:
            return 1
        if unit == SPEND:
            return self.spend
        if unit == INPUT_TOKENS and self.split:
            return self.input
        if unit == OUTPUT_TOKENS and self.split:
            return self.output
        return self.tokens


def _weigh(tokens: int, w: float) -> int:
    # tokens times a model's weight, rounded up (wire.Weigh).
    if w == 1 or w == 0:
        return tokens
    return math.ceil(float(tokens) * w)


def _reserved(tokens: int, input: int, output: int, w: float, price: "Price | None") -> _Use:
    """What a call reserves in the buckets' units, weighed, and priced
    from its unweighed tokens (wire.Reserved)."""
    def use(w):
        if input == 0 and output == 0:
            return _Use(_weigh(tokens, w))
        i, o = _weigh(input, w), _weigh(output, w)
        return _Use(i + o, i, o, True)
    u = use(w)
    if price is not None:
        u.spend = price.reserve(use(1))
    return u


def _batch_slots(s: "Settings") -> int:
    # The slots a batch call may use under s's concurrency limit (0: none).
    conc = s.concurrency
    return conc - math.floor(float(conc) * s.keep) if conc else 0


_UNIT_CODES = {REQUESTS: 1, TOKENS: 2, INPUT_TOKENS: 3, OUTPUT_TOKENS: 4, SPEND: 5}  # pacer.Unit


def _define_reply(v: Any) -> tuple:
    # define.lua's {stored, version, definition}.
    if not isinstance(v, (list, tuple)) or len(v) != 3:
        raise ReplyError(f"llmpacer: unexpected define reply {v!r}")
    return _int(v[0]) == 1, _int(v[1]), _str(v[2])


def _go_float(f: float) -> str:
    """f as Go's encoding/json writes a float64: the shortest digits that
    read back as f, in fixed notation from 1e-6 to 1e21, else e-notation
    with the exponent unpadded."""
    f = float(f)
    if f == 0:
        return "0"
    if 1e-6 <= abs(f) < 1e21:
        return format(decimal.Decimal(repr(f)).normalize(), "f")
    mant, exp = repr(f).split("e")
    return f"{mant}e{'-' if int(exp) < 0 else '+'}{abs(int(exp))}"


def _go_json(v: Any) -> str:
    # v as Go's encoding/json writes it: maps sorted by key, no spaces,
    # HTML characters and U+2028/2029 escaped.
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, str):
        s = json.dumps(v, ensure_ascii=False)
        for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
            s = s.replace(a, b)
        return s
    if isinstance(v, dict):
        return "{" + ",".join(_go_json(k) + ":" + _go_json(x) for k, x in v.items()) + "}"
    return "[" + ",".join(_go_json(x) for x in v) + "]"


def _rate_json(r: "Rate") -> dict:
    return {"Unit": _UNIT_CODES.get(r.unit, 0), "Limit": r.limit, "Window": r.window_ms * 1_000_000, "Burst": r.burst, "Sliding": r.sliding}


def definition_json(c: Config) -> str:
    """c's definition of the budget, as pacer.Define stores it (Go's JSON, byte for byte)."""
    lim = c.limits
    # "burst" is what versions before Go's issue 24 stored beside limits:
    # always written zero, as Go writes it.
    d = {"limits": {"RPM": lim.rpm, "TPM": lim.tpm, "RPD": lim.rpd, "TPD": lim.tpd, "Concurrency": lim.concurrency},
         "burst": {"RPM": 0, "TPM": 0, "RPD": 0, "TPD": 0}}
    if c.rates:
        d["rates"] = [_rate_json(r) for r in c.rates]
    d["tenants"] = {"Rates": [_rate_json(r) for r in c.tenants.rates] or None, "Share": float(c.tenants.share)}
    if c.weights:
        d["weights"] = {m: float(c.weights[m]) for m in sorted(c.weights)}
    if c.prices:
        d["prices"] = {m: {"Input": float(p.input), "CachedInput": float(p.cached_input), "Output": float(p.output),
                           "InputMargin": float(p.input_margin)} for m, p in sorted(c.prices.items())}
    for k, v in (("headroom", float(c.headroom)), ("no_refund", c.no_refund),
                 ("batch_floor", float(c.batch_floor)), ("lease_ttl", c.lease_ttl_ms * 1_000_000)):
        if v:
            d[k] = v
    return _go_json(d)


def _ms(ns: Any, what: str) -> int:
    if type(ns) is not int or ns % 1_000_000:
        raise ValueError(f"{what} = {ns!r} ns: want whole milliseconds")
    return ns // 1_000_000


def _with_definition(c: Config, d: dict, version: int | None = None) -> Config:
    """c with a stored definition's fields in place of its own (Go's Config.with)."""
    units = {n: u for u, n in _UNIT_CODES.items()}

    def rate(r):
        return Rate(units[r["Unit"]], r["Limit"], _ms(r["Window"], "Window"), r.get("Burst", 0), r.get("Sliding", False))
    lim, bur, t = dict(d.get("limits") or {}), d.get("burst") or {}, d.get("tenants") or {}
    # An older version's sliding_window has no Rate that states it: refused,
    # as Go's decodeDefinition does. Its burst for one of limits' rates is a
    # Rate with that burst, the same bucket.
    if d.get("sliding_window"):
        raise InvalidError("llmpacer: the stored definition sets sliding_window, which this version no longer runs; "
                           "define it again with Rate(..., sliding=True), or as rates with a burst of half the limit")
    rates = [rate(r) for r in d.get("rates") or ()]
    for f, unit, window_ms in (("RPM", REQUESTS, 60_000), ("TPM", TOKENS, 60_000), ("RPD", REQUESTS, 86_400_000), ("TPD", TOKENS, 86_400_000)):
        if bur.get(f, 0):
            if not lim.get(f, 0):
                raise InvalidError(f"llmpacer: the stored definition's burst.{f} = {bur[f]} has no limit")
            rates.append(Rate(unit, lim[f], window_ms, bur[f]))
            lim[f] = 0
    return dataclasses.replace(
        c, rates=tuple(rates),
        limits=Limits(lim.get("RPM", 0), lim.get("TPM", 0), lim.get("RPD", 0), lim.get("TPD", 0), lim.get("Concurrency", 0)),
        tenants=Tenants(tuple(rate(r) for r in t.get("Rates") or ()), t.get("Share", 0.0)),
        weights=dict(d.get("weights") or {}),
        prices={m: Price(p.get("Input", 0.0), p.get("CachedInput", 0.0), p.get("Output", 0.0), p.get("InputMargin", 0.0))
                for m, p in (d.get("prices") or {}).items()},
        headroom=d.get("headroom", 0.0), no_refund=d.get("no_refund", False),
        batch_floor=d.get("batch_floor", 0.0), lease_ttl_ms=_ms(d.get("lease_ttl", 0), "lease_ttl"),
        version=c.version if version is None else version)


class _Call:
    """One request worked out once, under one definition: its priority,
    what it reserves, the keys and buckets it runs on, its model's weight
    and price (None: not priced), its tenant. A lease ends against it."""

    __slots__ = ("priority", "use", "keys", "buckets", "weight", "price", "tenant", "settings", "asked")

    def __init__(self, priority, use, keys, buckets, weight, price, tenant, settings, asked=(0, 0, 0)):
        self.priority, self.use, self.keys, self.buckets = priority, use, keys, buckets
        self.weight, self.price, self.tenant, self.settings = weight, price, tenant, settings
        self.asked = asked  # tokens (their sum, if split), input, output as asked, unweighed


def share_keep(charges: list, floor: float) -> float:
    """The fraction of every budget bucket a tenant's call past its share
    leaves to tenants within theirs (wire.ShareKeep): room for 8 calls like
    it, up to half the bucket, at least floor, never more than lets the
    call fit. charges are (field, charge, allowance) triples."""
    keep, fit = floor, 1.0
    for field, c, allow in charges:
        if field[0] in "@%" or allow <= 0:
            continue
        a = float(allow)
        keep = max(keep, min(_SHARE_CALLS * float(c), a / 2) / a)
        fit = min(fit, float(allow - c) / a)
    return max(0.0, min(keep, fit))


_SPECS = (("rpm", 60_000, REQUESTS), ("tpm", 60_000, TOKENS), ("rpd", 86_400_000, REQUESTS), ("tpd", 86_400_000, TOKENS))


@dataclasses.dataclass(frozen=True)
class Settings:
    """A validated Config with its defaults applied."""

    keys: list
    buckets: list
    concurrency: int
    keep: float  # the batch floor, 0 for none
    lease_ttl_ms: int
    max_wait_ms: int
    no_refund: bool
    tag: str = ""  # what begins every key: a tenant's hash is <tag>:t:<digest>
    # Every tenant's buckets: its own rates ('@' fields), then its share of
    # each budget bucket ('%' fields); empty for a budget without tenants.
    tenants: list = dataclasses.field(default_factory=list)
    share: float = 0.0
    has_tenants: bool = False
    spend: bool = False  # a SPEND rate prices calls
    weights: dict = dataclasses.field(default_factory=dict)
    prices: dict = dataclasses.field(default_factory=dict)

    def price(self, model: str) -> "Price | None":
        """The price a call to model is reserved and settled at (its
        margin resolved), None without SPEND rates; KeyError if none is set."""
        if not self.spend:
            return None
        pr = self.prices[model] if model in self.prices else self.prices[""]
        m = pr.input_margin
        m = m if m > 0 else 0.0 if m < 0 else default_input_margin(model)
        return dataclasses.replace(pr, input_margin=m)

    def weight(self, model: str) -> float:
        return self.weights.get(model, 1.0)


def settings(c: Config) -> Settings:
    """Validate c as the Go client does and apply the defaults."""
    prefix = c.key_prefix or DEFAULT_KEY_PREFIX
    _check_name("name", c.name)
    _check_name("key_prefix", prefix)
    if c.hash_tag:
        _check_name("hash_tag", c.hash_tag)
    lim = c.limits
    rates = tuple(c.rates)
    if lim == Limits() and not rates:
        raise InvalidError("llmpacer: no limit is set; set at least one of limits or a rate")
    _check_money(c)
    if type(c.version) is not int or c.version < 0:
        raise InvalidError(f"llmpacer: version = {c.version!r}: must be 0 (follow what is stored) or a positive int")
    if len(rates) > _MAX_RATES:
        raise InvalidError(f"llmpacer: {len(rates)} rates: at most {_MAX_RATES}")
    seen = {}
    for i, r in enumerate(rates):
        _check_rate(i, r)
        if r.name in seen:
            raise InvalidError(f"llmpacer: rates[{seen[r.name]}] and rates[{i}] are both {r.name}: state each rate once")
        seen[r.name] = i
        if r.unit == SPEND and not c.prices:
            raise InvalidError(f"llmpacer: rates[{i}] is a spend rate but prices is empty: give the models' prices per million tokens")
    for what, v in (("limits." + f, getattr(lim, f)) for f in ("rpm", "tpm", "rpd", "tpd", "concurrency")):
        if not 0 <= v <= _MAX_LIMIT:
            raise InvalidError(f"llmpacer: {what} = {v}: must be between 0 and {_MAX_LIMIT}")
    if math.isnan(c.headroom) or not 0 <= c.headroom < 1:
        raise InvalidError(f"llmpacer: headroom = {c.headroom}: must be in [0, 1)")
    if math.isnan(c.batch_floor) or c.batch_floor >= 1:
        raise InvalidError(f"llmpacer: batch_floor = {c.batch_floor}: must be below 1")
    if c.lease_ttl_ms != 0 and not 1 <= c.lease_ttl_ms <= _MAX_DURATION_MS:
        raise InvalidError(f"llmpacer: lease_ttl_ms = {c.lease_ttl_ms}: must be between 1 and {_MAX_DURATION_MS}")
    if not 0 <= c.max_wait_ms <= _MAX_DURATION_MS:
        raise InvalidError(f"llmpacer: max_wait_ms = {c.max_wait_ms}: must be between 0 and {_MAX_DURATION_MS}")
    # Checked here, as Go's New does, not first in a fail after the lease
    # ended, where it would keep the quota stop from being sent.
    if type(c.quota_probe_ms) is not int or c.quota_probe_ms != 0 and not 1 <= c.quota_probe_ms <= _MAX_DURATION_MS:
        raise InvalidError(f"llmpacer: quota_probe_ms = {c.quota_probe_ms!r}: must be an int between 1 and {_MAX_DURATION_MS} (0 for the default {DEFAULT_PROBE_MS})")
    # The four of limits in the scripts' order, a rate that is one of them
    # in its place; then the other rates, in the order given.
    four = [("limits." + f, f, getattr(lim, f), 0, w, u, False) for f, w, u in _SPECS]
    more = []
    for i, r in enumerate(rates):
        spec = (f"rates[{i}]", r.name, r.limit, r.burst, r.window_ms, r.unit, r.sliding)
        k = next((k for k, sp in enumerate(four) if sp[1] == r.name), None)
        if k is None or r.sliding:
            more.append(spec)
            continue
        if four[k][2] != 0:
            raise InvalidError(f"llmpacer: rates[{i}] is {r.name}, which limits.{r.name} already sets: state it in one place (in rates to give it a burst)")
        four[k] = spec
    buckets = []
    for what, field, limit, burst, window_ms, unit, sliding in four:
        if limit == 0:
            continue
        buckets.append(_bucket(c, what, field, limit, burst, window_ms, unit, sliding))
    for what, field, limit, burst, window_ms, unit, sliding in more:
        buckets.append(_bucket(c, what, field, limit, burst, window_ms, unit, sliding))
    keep = DEFAULT_BATCH_FLOOR if c.batch_floor == 0 else max(c.batch_floor, 0.0)
    tag = "{" + prefix + ":" + c.name + "}"
    if c.hash_tag:
        tag = "{" + c.hash_tag + "}" + prefix + ":" + c.name
    t = c.tenants
    has = bool(t.rates) or t.share != 0
    # A tenant's SPEND rate prices calls too, with none on the budget.
    spend = any(r.unit == SPEND for r in (*rates, *t.rates))
    return Settings([tag + ":s", tag + ":l", tag + ":q", tag + ":d"], buckets, lim.concurrency, keep,
                    c.lease_ttl_ms or DEFAULT_LEASE_TTL_MS, c.max_wait_ms or DEFAULT_MAX_WAIT_MS, c.no_refund,
                    tag, _tenant_buckets(c, buckets) if has else [], float(t.share), has, spend,
                    dict(c.weights), dict(c.prices))


def _check_money(c: Config) -> None:
    # Config.prices, weights and tenants, each on its own.
    if not isinstance(c.prices, dict) or not isinstance(c.weights, dict):
        raise InvalidError("llmpacer: prices and weights are dicts keyed by model name")
    for m, pr in c.prices.items():
        if not isinstance(pr, Price):
            raise InvalidError(f"llmpacer: prices[{m!r}] = {pr!r}: use llmpacer.Price")
        for v in (pr.input, pr.cached_input, pr.output):
            if not (isinstance(v, (int, float)) and 0 <= v <= 1e12):
                raise InvalidError(f"llmpacer: prices[{m!r}] = {pr}: prices are per million tokens, from 0 to 1e12")
        if not (pr.input_margin <= _MAX_INPUT_MARGIN) or pr.input_margin == -math.inf:
            raise InvalidError(f"llmpacer: prices[{m!r}].input_margin = {pr.input_margin}: a share of the prompt's estimate, at most {_MAX_INPUT_MARGIN}; 0 takes the model family's default, a negative value none")
    for m, w in c.weights.items():
        if not (isinstance(w, (int, float)) and 0 < w <= 1000):
            raise InvalidError(f"llmpacer: weights[{m!r}] = {w!r}: a weight must be above 0 and at most 1000 (1 is the default)")
    t = c.tenants
    if not isinstance(t, Tenants):
        raise InvalidError(f"llmpacer: tenants = {t!r}: use llmpacer.Tenants")
    if not (isinstance(t.share, (int, float)) and 0 <= t.share <= 1):
        raise InvalidError(f"llmpacer: tenants.share = {t.share!r}: must be a fraction from 0 (no share) to 1, e.g. 0.1 for ten tenants of equal standing")
    if len(t.rates) > _MAX_RATES:
        raise InvalidError(f"llmpacer: tenants.rates has {len(t.rates)} rates: at most {_MAX_RATES}")
    seen = {}
    for i, r in enumerate(t.rates):
        _check_rate(i, r, "tenants.rates")
        if r.name in seen:
            raise InvalidError(f"llmpacer: tenants.rates[{seen[r.name]}] and [{i}] are both {r.name}: state each rate once")
        seen[r.name] = i


def _tenant_buckets(c: Config, budget: list) -> list:
    """Every tenant's buckets, as each tenant's hash holds them: its own
    rates ('@<name>'), then its share of each budget bucket ('%<name>'),
    as pacer's Config.tenantBuckets."""
    out = []
    for i, r in enumerate(c.tenants.rates):
        if r.unit == SPEND and not c.prices:
            raise InvalidError(f"llmpacer: tenants.rates[{i}] is a spend rate but prices is empty: give the models' prices per million tokens")
        b = _bucket(c, f"tenants.rates[{i}]", r.name, r.limit, r.burst, r.window_ms, r.unit, r.sliding)
        out.append(dataclasses.replace(b, field="@" + b.field))
    share = float(c.tenants.share)
    if share == 0:
        return out
    for pb in budget:
        name = pb.field.split(":", 1)[1] if pb.sub else pb.field
        # Share of the refill and of the burst, with room for 8 calls up
        # to Share of the limit; never less than one unit.
        refill = pb.per_ms * float(pb.window_ms) * share
        capacity = float(pb.capacity) * share
        b = Bucket.new("%" + name, max(1, int(capacity)), max(1, int(capacity)), max(1, int(refill)), pb.window_ms, pb.unit)
        out.append(dataclasses.replace(b, room=max(1, int(float(pb.limit) * share))))
    return out


def _check_rate(i: int, r: Any, where: str = "rates") -> None:
    at = f"llmpacer: {where}[{i}]"
    if not isinstance(r, Rate):
        raise InvalidError(f"{at} = {r!r}: use llmpacer.Rate")
    if r.unit not in UNITS:
        raise InvalidError(f"{at}.unit = {r.unit!r}: use one of {', '.join(UNITS)}")
    if type(r.limit) is not int or not 1 <= r.limit <= _MAX_LIMIT:
        raise InvalidError(f"{at}.limit = {r.limit!r}: must be an int between 1 and {_MAX_LIMIT}")
    if type(r.window_ms) is not int or not 1000 <= r.window_ms <= _MAX_WINDOW_MS:
        raise InvalidError(f"{at}.window_ms = {r.window_ms!r}: must be an int from 1000 (1 s) to {_MAX_WINDOW_MS} (366 days)")
    if type(r.burst) is not int or not 0 <= r.burst <= r.limit:
        raise InvalidError(f"{at}.burst = {r.burst!r}: must be between 0 (the limit) and the limit {r.limit}")
    if type(r.sliding) is not bool:
        raise InvalidError(f"{at}.sliding = {r.sliding!r}: must be a bool")
    if r.sliding and r.burst:
        raise InvalidError(f"{at}.burst = {r.burst}: a sliding rate has no burst (it counts the window exactly); set 0")


def _bucket(c: Config, what: str, field: str, limit: int, burst: int, window_ms: int, unit: str, sliding: bool = False) -> Bucket:
    # what names the setting in errors: limits.rpm, rates[2].
    # Headroom scales the limit and the burst alike.
    limit = math.floor(float(limit) * (1 - c.headroom))
    if limit < 1:
        raise InvalidError(f"llmpacer: {what} leaves nothing after headroom {c.headroom}")
    if sliding:
        # Counted, not refilled.
        return Bucket.sliding(field, limit, window_ms, unit)
    burst = math.floor(float(burst) * (1 - c.headroom))
    if burst > limit:
        raise InvalidError(f"llmpacer: the burst of {what} = {burst} exceeds the limit {limit} (after headroom)")
    refill = limit
    if burst == 0:
        burst = limit
    b = Bucket.new(field, limit, burst, refill, window_ms, unit)
    if float(burst) * b.interval > _MAX_SPAN_US:
        raise InvalidError(f"llmpacer: the burst of {what} = {burst} would take years to refill")
    return b


def _check_name(what: str, v: str) -> None:
    if not v:
        raise InvalidError(f"llmpacer: {what} is empty")
    try:
        n = len(v.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidError(f"llmpacer: {what} {v!r} is not valid UTF-8") from None
    if n > 200:
        raise InvalidError(f"llmpacer: {what} is {n} bytes long: use at most 200")
    for i, ch in enumerate(v):
        if ch in " {}" or not ch.isprintable():
            raise InvalidError(f"llmpacer: {what} {v!r}: {ch!r} at {i} is not allowed")


def lua_dir() -> Path:
    """Where the scripts are read from by default."""
    env = os.environ.get("LLMPACER_LUA_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent.parent / "lua"


def source(name: str, directory: str | os.PathLike | None = None) -> str:
    """The full text sent for a script: the prelude, a newline, <name>.lua
    (for "route", acquire as a function, then route.lua; for "acquires",
    the prelude, then acquire as a function, then batch.lua and
    acquires.lua; for "settles", settle.lua's main block as a function,
    then batch.lua and settles.lua: lua.Source's).
    The prelude is prelude.lua, then sliding.lua as the body of slib and
    slots.lua as the body of glib (see lua.go).

    The files are used byte for byte, each with its final newline, so the
    text (and its SHA-1, which EVALSHA names it by) is lua.Source(name)'s.
    """
    if name not in SCRIPTS:
        raise ValueError(f"llmpacer: no script {name!r}")
    d = Path(directory) if directory else lua_dir()

    def read(n):
        return (d / f"{n}.lua").read_bytes().decode("utf-8")
    prelude = (read("prelude")
               + "local function slib()\n" + read("sliding") + "end\n"
               + "local function glib(cover, push, slib, PENDING, LIVE, BATCH, SK)\n" + read("slots") + "end\n")
    if name == "route":
        # acquire, with the prelude, as a function of its keys and
        # arguments, which route.lua calls once per deployment.
        return "local function acq(KEYS, ARGV)\n" + prelude + "\n" + read("acquire") + "\nend\n" + read("route")
    if name == "acquires":
        return (prelude + "\n" + "local function acquire1(KEYS, ARGV)\n" + prelude + "\n" + read("acquire")
                + "\nend\n" + read("batch") + read("acquires"))
    if name == "settles":
        head, main = read("settle").split(_SETTLE_MAIN, 1)
        return (prelude + "\n" + head + "local function settle1(KEYS, ARGV)\n" + _SETTLE_MAIN + main
                + "\nend\n" + read("batch") + read("settles"))
    return prelude + "\n" + read(name)


def new_id() -> str:
    """A lease id: 96 random bits, as the Go client makes them."""
    return base64.urlsafe_b64encode(secrets.token_bytes(12)).decode().rstrip("=")


# acquire's reply codes.
TOO_LARGE, DENIED, ADMITTED, ALREADY, STALE = -1, 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class AcquireReply:
    code: int
    wait_ms: int
    now_us: int
    reason: str
    expiry_ms: int
    ticket: int = 0  # not 0: a pending admission, or a place in the slot queue
    xp: int = 0  # the state's expiry as read (ms; 0: none), or LOST


def _int(v: Any) -> int:
    if type(v) is not int:
        raise ReplyError(f"llmpacer: unexpected script reply element {v!r}")
    return v


def _str(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, str):
        return v
    raise ReplyError(f"llmpacer: unexpected script reply element {v!r}")


# AcquireReply.xp of a call that found the budget's state lost: Redis no
# longer held it (a restart, a failover, an eviction), and its buckets
# restarted empty.
LOST = -1


def decode_acquire(v: Any) -> AcquireReply:
    """Check acquire's reply {code, wait_ms, now_us, reason, expiry_ms, ticket, xp}."""
    if not isinstance(v, (list, tuple)) or len(v) != 7:
        raise ReplyError(f"llmpacer: unexpected acquire reply {v!r}")
    r = AcquireReply(_int(v[0]), _int(v[1]), _int(v[2]), _str(v[3]), _int(v[4]), _int(v[5]), _int(v[6]))
    if not TOO_LARGE <= r.code <= STALE or r.wait_ms < 0 or r.ticket < 0 or r.xp < LOST:
        raise ReplyError(f"llmpacer: unexpected acquire reply {v!r}")
    return r


def _ints(v: Any, n: int) -> list:
    if not isinstance(v, (list, tuple)) or len(v) < n:
        raise ReplyError(f"llmpacer: unexpected script reply {v!r}")
    return [_int(x) for x in v]


def _as_use(v: "int | tuple | _Use") -> "_Use":
    if isinstance(v, _Use):
        return v
    if isinstance(v, tuple):
        return _Use(0, v[0], v[1], True)
    return _Use(v)


def corrections(buckets: list, reserved: "int | tuple", used: "int | tuple", request: bool, turn_ms: int = 0) -> list:
    """What ending a lease sends settle: (field, µs) for each bucket it changes.

    A sliding window's value is "<units>@<sub-window>" instead, the
    sub-window the call was counted in, from turn_ms (the call's turn in
    ms on the Redis clock; 0 when not known, and then nothing is given
    back to a sliding window).

    reserved and used are tokens, or (input, output) pairs when known
    apart. Negative gives back; positive is a debt, at most one full
    bucket. request says whether the request itself goes back (a call
    never sent). A used total without its split bounds the input and the
    output used: an input or output bucket gets back what its part of the
    reservation exceeds the total by, and owes nothing.
    """
    r, u = _as_use(reserved), _as_use(used)
    out = []
    for b in buckets:
        if b.unit == REQUESTS:
            back = 1 if request else 0
        elif b.unit == SPEND and not u.split:
            back = max(r.spend - u.spend, 0)  # u.spend is only a bound
        elif b.unit != TOKENS and not u.split:
            back = max(r.of(b.unit) - u.tokens, 0)
        else:
            back = r.of(b.unit) - u.of(b.unit)
        d = -b.refund(back) if back > 0 else b.charge(min(-back, b.capacity)) if back < 0 else 0
        if d and b.sub:
            if d > 0 or turn_ms > 0:
                out.append((b.field, d, f"{d}@{turn_ms * 1000 // b.sub}"))
        elif d and b.field.startswith("%"):
            # A tenant's share: settle keeps a debt within 2 x the allowance
            # an interactive call's acquire sends.
            out.append((b.field, d, f"{d}:{b.allow(b.charge(r.of(b.unit)), 0)}"))
        elif d:
            out.append((b.field, d, d))
    # Each bucket's correction has its own sign: settle.lua applies a
    # give-back and a debt of one settle each by its own rule.
    return [(f, v) for f, _, v in out]


@dataclasses.dataclass(frozen=True)
class BucketState:
    limit: int
    capacity: int
    level: float
    per_second: float


@dataclasses.dataclass(frozen=True)
class Snapshot:
    time_us: int
    paused_ms: int
    in_flight: int
    concurrency: int
    buckets: dict  # field -> BucketState, for the configured buckets in order; a rate by its name (tokens/3600s)
    stopped_ms: int = 0  # how long the budget stays stopped; 0 if not
    stopped_by: str = ""  # "quota" or "stop" while stopped



class Pacer:
    """One process's handle on a shared budget, like the Go pacer.Pacer.

    Every Pacer, in any process and in Go or Python, with the same name (and
    key prefix) on the same Redis draws from one budget. Most callers use
    acquire before a call and Lease.settle (or release) after it.
    """

    def __init__(self, client: Any, config: Config, *, lua_dir: str | os.PathLike | None = None,
                 _clock: Callable[[], int] = time.monotonic_ns, _sleep: Callable[[float], None] = time.sleep,
                 _jitter: Callable[[int], int] = lambda n: random.randint(0, n)):
        self.config = config
        self.settings = settings(config)
        self.version = 0  # of the stored definition followed (0: none, this config)
        self.keys = list(self.settings.keys)
        self._client = client
        self._scripts = {n: client.register_script(source(n, lua_dir)) for n in SCRIPTS}
        # Seams for tests: a monotonic clock in ns, a sleep in seconds, and
        # the jitter added to a retry's sleep, in ns.
        self._clock, self._sleep, self._jitter = _clock, _sleep, _jitter
        self._mu = threading.Lock()
        self._hold_ms = 0.0  # the mean hold time; 0 until a lease ends
        self._freed = threading.Condition()  # a lease of this process ended
        # The latest expiry (ms, Redis clock) this process saw the budget's
        # keys kept until: a state missing before then was lost, not
        # expired (see acquire.lua). states_lost counts the losses found.
        self.seen_xp = 0
        self.states_lost = 0
        # Whether the definition in force was settled before the first call
        # (see _settle_definition).
        self._defined = False
        self._defining = threading.Lock()

    @property
    def mean_hold_ms(self) -> float:
        """The moving mean time this process's leases were held; 0 until one ends."""
        with self._mu:
            return self._hold_ms

    def _run(self, name: str, args: list, keys: list | None = None) -> Any:
        return self._scripts[name](keys=keys or self.keys, args=args)

    def tenant_key(self, tenant: str) -> str:
        """The Redis key of tenant's hash in this budget: in its hash tag,
        named by the first 32 hex digits of the id's SHA-256, as Go's."""
        return self.settings.tag + ":t:" + hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:32]

    def check_request(self, tokens: int = 0, priority: str = INTERACTIVE, max_wait_ms: int = 0, *,
                      input: int = 0, output: int = 0, model: str = "", tenant: str = "") -> None:
        """Raise InvalidError or TooLargeError for a request the Go client would refuse."""
        self._call(tokens, priority, max_wait_ms, input, output, model, tenant)

    def _call(self, tokens: int, priority: str, max_wait_ms: int, input: int, output: int,
              model: str, tenant: str) -> "_Call":
        # check_request's checks; returns the call worked out once: what it
        # reserves, on which keys and buckets, at which weight and price.
        s = self.settings
        if type(model) is not str or type(tenant) is not str:
            raise InvalidError(f"llmpacer: model = {model!r}, tenant = {tenant!r}: each must be a str")
        if tenant and not s.has_tenants:
            raise InvalidError("llmpacer: tenant is set but Config.tenants is empty: give tenants their rates or a share, or leave tenant empty")
        try:
            if len(tenant.encode("utf-8")) > _MAX_TENANT_LEN:
                raise InvalidError(f"llmpacer: tenant is {len(tenant.encode())} bytes long: use at most {_MAX_TENANT_LEN} (an id, not a payload)")
        except UnicodeEncodeError:
            raise InvalidError(f"llmpacer: tenant {tenant!r} is not valid UTF-8") from None
        try:
            price = s.price(model)
        except KeyError:
            raise InvalidError(f"llmpacer: model = {model!r} has no price in Config.prices: a spend rate needs one; add it, or a \"\" entry for models not listed") from None
        w = s.weight(model)
        use = self._use(tokens, priority, max_wait_ms, input, output, w, price, s.buckets + s.tenants if tenant else s.buckets)
        keys = s.keys + [self.tenant_key(tenant)] if tenant else s.keys
        return _Call(priority, use, keys, s.buckets + s.tenants if tenant else s.buckets, w, price, tenant, s,
                     (tokens or input + output, input, output))

    def _use(self, tokens: int, priority: str, max_wait_ms: int, input: int, output: int,
             w: float = 1.0, price: "Price | None" = None, buckets: list | None = None) -> _Use:
        if type(tokens) is not int or not 0 <= tokens <= _MAX_TOKENS:
            raise InvalidError(f"llmpacer: tokens = {tokens!r}: must be an int between 0 and {_MAX_TOKENS}")
        if type(input) is not int or type(output) is not int or not 0 <= input <= _MAX_TOKENS \
                or not 0 <= output <= _MAX_TOKENS or input + output > _MAX_TOKENS:
            raise InvalidError(f"llmpacer: input = {input!r}, output = {output!r}: each must be an int between 0 and {_MAX_TOKENS}, and their sum too")
        if (input or output) and tokens and tokens != input + output:
            raise InvalidError(f"llmpacer: tokens = {tokens} but input + output = {input + output}: pass their sum, or 0")
        if priority not in (INTERACTIVE, BATCH):
            raise InvalidError(f"llmpacer: priority = {priority!r}: use INTERACTIVE or BATCH")
        if type(max_wait_ms) is not int or not 0 <= max_wait_ms <= _MAX_DURATION_MS:
            raise InvalidError(f"llmpacer: max_wait_ms = {max_wait_ms!r}: must be between 0 and {_MAX_DURATION_MS}")
        use = _reserved(tokens, input, output, w, price)
        for b in self.settings.buckets if buckets is None else buckets:
            if b.field.startswith("%"):
                continue  # a share never holds a call back
            need = use.of(b.unit)
            if need > b.capacity or b.charge(need) > b.allowance(0):
                raise TooLargeError(f"llmpacer: {need} {b.unit} exceed the {b.field} bucket's capacity of {b.capacity}")
            if priority == BATCH and b.charge(need) > b.allowance(self.settings.keep):
                raise TooLargeError(f"llmpacer: a batch call of {need} {b.unit} can never fit the {b.field} bucket's share for batch")
        return use

    @property
    def batch_slots(self) -> int:
        """The slots a batch call may use under the concurrency limit (0: no limit)."""
        return _batch_slots(self.settings)

    def acquire_args(self, lease_id: str, tokens: int, priority: str, max_wait_ms: int, ticket: int = 0, *,
                     input: int = 0, output: int = 0, model: str = "", tenant: str = "") -> list:
        """acquire.lua's ARGV for a call (see docs/lua-contract.md).

        ticket is 0 on a call's first attempt, then the ticket a reply gave.
        """
        call = self._call(tokens, priority, 0, input, output, model, tenant)
        return self._acquire_args(lease_id, call, max_wait_ms, ticket)

    def _acquire_args(self, lease_id: str, call: _Call, max_wait_ms: int, ticket: int) -> list:
        s, use = call.settings, call.use
        keep = s.keep if call.priority == BATCH else 0.0
        conc = s.concurrency
        spacing = 1
        if conc:
            # Slots free up one every mean hold time / limit.
            spacing = max(1, math.ceil((self.mean_hold_ms or _FIRST_HOLD_MS) / float(conc)))
        charges = []
        for b in call.buckets:
            c = b.charge(use.of(b.unit))
            charges.append((b.field, c, b.allow(c, keep)))
        priority: Any = 1 if call.priority == BATCH else 0
        if call.tenant and call.priority == INTERACTIVE and s.share > 0:
            # Over its share, the call leaves room for tenants within theirs.
            priority = f"0:{math.floor(share_keep(charges, s.keep) * 1e6)}"
        args = [lease_id, priority, max_wait_ms, s.lease_ttl_ms, conc, self.batch_slots, spacing, ticket]
        args += [f for f, _, _ in charges]
        for _, c, a in charges:
            args += [c, a]
        args.append(self.version)  # acquire answers STALE if another is stored
        with self._mu:
            seen = self.seen_xp
        if seen > 0:
            # A state found missing before seen was lost: its buckets
            # restart empty (each one's span), a tenant's full (0).
            args.append(" ".join([str(seen)] + [str(0 if b.field[0] in "@%" else b.span) for b in call.buckets]))
        return args

    def _acquire(self, args: list, keys: list | None = None) -> AcquireReply:
        """Run acquire and record what its reply says of the budget's state."""
        return self._saw(decode_acquire(self._run("acquire", args, keys)))

    def _saw(self, rep: AcquireReply) -> AcquireReply:
        # Record what an acquire reply says of the budget's state.
        x = rep.xp
        if rep.code in (ADMITTED, ALREADY):
            x = max(x, rep.expiry_ms)
        with self._mu:
            self.seen_xp = max(self.seen_xp, x)
            if rep.xp == LOST:
                self.states_lost += 1
        if rep.xp == LOST:
            _log.warning("llmpacer: Redis lost the state of budget %s while it was in use; its buckets restart empty", self.config.name)
        return rep

    def _follow(self, n: int) -> None:
        """Follow the definition stored in Redis (see define.lua), which acquire said differs.

        The stored definition is the Go pacer's JSON (limits, rates,
        tenants, weights, prices and the rest, as pacer.Define stores it).
        One that this client cannot read, or that is invalid, raises
        InvalidError rather than run a different budget.
        """
        if n > 3:
            raise LlmpacerError("llmpacer: the budget's definition changed 3 times during one call; retry")
        _, v, body = _define_reply(self._run("define", [0, ""]))
        if v == self.version:
            return  # another thread followed it already
        if v == 0:
            # The definition was deleted: back to this process's own.
            self.settings, self.version = settings(self.config), 0
            return
        self._adopt(v, body)

    def _adopt(self, v: int, body: str) -> None:
        # Make the stored definition body, of version v, the one in force.
        try:
            cfg = _with_definition(self.config, json.loads(body))
            st = settings(cfg)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise InvalidError(f"llmpacer: the definition of {self.config.name!r} stored in Redis (version {v}) cannot be used: {e}; store a valid one with define") from None
        self.settings, self.version = st, v

    def _settle_definition(self) -> None:
        """Before the first call, store this Config's definition if it has
        a version and none newer is stored, or follow the one stored (as
        the Go pacer's settleDefinition)."""
        if self._defined:
            return
        with self._defining:
            if self._defined:
                return
            if self.config.version > 0:
                stored, v, body = _define_reply(self._run("define", [self.config.version, definition_json(self.config)]))
                if stored or v == self.config.version:
                    self.version = v
                else:
                    self._adopt(v, body)
            self._defined = True

    def define(self, config: Config) -> int:
        """Store config's definition of the budget in Redis, for every process to follow.

        As pacer.Define: the definition is config's limits, rates,
        tenants, weights, prices, headroom, no_refund,
        batch_floor and lease_ttl_ms; its name and key_prefix must be this
        budget's or empty. With config.version 0 it is stored as the next
        version after the one stored; with a positive version only if that
        is higher, else SupersededError. Returns the version stored. An
        invalid definition raises InvalidError before anything is stored.
        """
        if config.name not in ("", self.config.name) or config.key_prefix not in ("", self.config.key_prefix):
            raise InvalidError(f"llmpacer: define: config names budget {config.name!r} (prefix {config.key_prefix!r}), not this Pacer's {self.config.name!r}: leave name and key_prefix empty or the same")
        body = definition_json(config)
        st = settings(_with_definition(self.config, json.loads(body), config.version))
        with self._defining:
            stored, v, _ = _define_reply(self._run("define", [config.version or "next", body]))
            if not stored:
                raise SupersededError(f"llmpacer: define: version {v} is stored, {config.version} was asked")
            self.settings, self.version = st, v
        return v

    def acquire(self, tokens: int = 0, priority: str = INTERACTIVE, max_wait_ms: int = 0, *,
                input: int = 0, output: int = 0, model: str = "", tenant: str = "") -> "Lease":
        """Wait until every limit has room for the call, charge them all, return the lease.

        tokens is the reservation: prompt tokens plus the output cap. input
        and output optionally split it (tokens is then 0 or their sum): an
        input_tokens or output_tokens rate is charged its own part, and
        Lease.settle_usage gives each part back exactly; without them such
        a rate is charged all of tokens. model picks the call's weight and
        price (Config.weights, Config.prices); tenant charges the call to
        that tenant's rates and share too (Config.tenants): take it from
        the caller's authenticated session; any str up to 64 KiB is safe.

        The wait is bounded by max_wait_ms (0: the config's). A call that
        can never fit raises TooLargeError at once; one whose wait would pass
        the bound raises WaitTimeoutError as soon as the script says so.
        An interactive call that must wait for tokens reserves its turn and
        sleeps until then; with a concurrency limit it holds no slot until
        its turn, and claims one then with its ticket. A call that finds no
        free slot queues for one, first come, first served across every
        process, and asks again (see the module's doc); one waiting for a
        pause asks again when the pause ends. A call that gives up (an
        error, or an exception such as KeyboardInterrupt while it waits)
        cancels a pending lease, or leaves the slot queue.
        """
        self._settle_definition()
        call = self._call(tokens, priority, max_wait_ms, input, output, model, tenant)
        bound_ms = max_wait_ms or self.settings.max_wait_ms
        began = self._clock()
        return self._acquire_loop(call, new_id(), bound_ms, began, began + bound_ms * 1_000_000,
                                  lambda: self._call(tokens, priority, max_wait_ms, input, output, model, tenant))

    def _acquire_loop(self, call: _Call, lease_id: str, bound_ms: int, began: int, deadline: int,
                      again: Callable[[], _Call], first: "AcquireReply | None" = None) -> "Lease":
        # acquire's loop for call under lease_id (reused by every retry),
        # again rebuilding the call after a definition changed; first, if
        # set, is a reply already had (a Group's route), the loop's first.
        ticket, pending, stale = 0, None, 0
        try:
            while True:
                now = self._clock()
                remain_ms = max(0, (deadline - now) // 1_000_000)
                if first is not None:
                    rep, first = first, None
                else:
                    rep = self._acquire(self._acquire_args(lease_id, call, remain_ms, ticket), call.keys)
                if rep.code == STALE:
                    stale += 1
                    self._follow(stale)
                    call = again()
                    continue
                if rep.code == DENIED and rep.reason in _STOPS:
                    raise StoppedError(rep.wait_ms, rep.reason)
                if rep.code in (ADMITTED, ALREADY) and rep.ticket == 0:
                    if pending is not None:
                        # The pending lease claimed its slot at its turn.
                        pending._claimed(rep.expiry_ms, rep.now_us)
                        lease, pending = pending, None
                        lease._waited_ms = (self._clock() - began) / 1e6
                        return lease
                    lease = self._lease(lease_id, call, rep, rep.now_us + rep.wait_ms * 1000, began)
                    if rep.wait_ms > 0:
                        try:
                            self._sleep(rep.wait_ms / 1000)
                        except BaseException:
                            _cancel_quietly(lease)  # nobody will make the call
                            raise
                    lease._waited_ms = (self._clock() - began) / 1e6
                    return lease
                if rep.code in (ADMITTED, ALREADY):
                    # Admitted with a later turn but no slot: sleep until the
                    # turn, then claim a slot with the ticket.
                    if pending is None:
                        pending = self._lease(lease_id, call, rep, rep.now_us + rep.wait_ms * 1000, began)
                    ticket = rep.ticket
                    if rep.wait_ms > 0:
                        self._sleep(rep.wait_ms / 1000)
                    continue
                if rep.code == TOO_LARGE:
                    raise TooLargeError(f"llmpacer: {call.use.tokens} tokens exceed the {rep.reason} bucket's capacity")
                if rep.ticket != 0:
                    # Queued for a slot: ask again at the estimate; a freed
                    # slot may have admitted it meanwhile (code 2).
                    ticket = rep.ticket
                    self._wait_slot(rep, deadline)
                    continue
                if rep.wait_ms > remain_ms:
                    # Not queued (a waiter the script took out of the queue
                    # has left it already).
                    ticket = 0
                    raise WaitTimeoutError(rep.wait_ms, bound_ms, rep.reason)
                self._wait(rep, deadline)
        except BaseException:
            if pending is not None:
                _cancel_quietly(pending)  # its tokens go back, and its place
            elif ticket:
                # Its ticket (its first denial) is a lower bound of when a
                # freed slot may have admitted it.
                self._leave(lease_id, call, ticket)
            raise

    def try_acquire(self, tokens: int = 0, priority: str = INTERACTIVE, *, input: int = 0, output: int = 0,
                    model: str = "", tenant: str = "") -> "Lease":
        """Admit the call only if every limit has room now; else raise WaitTimeoutError with bound_ms 0.

        tokens, input, output, model and tenant as for acquire.
        """
        self._settle_definition()
        call = self._call(tokens, priority, 0, input, output, model, tenant)
        lease_id, sent = new_id(), self._clock()
        rep = self._acquire(self._acquire_args(lease_id, call, 0, 0), call.keys)
        stale = 0
        while rep.code == STALE:
            stale += 1
            self._follow(stale)
            call = self._call(tokens, priority, 0, input, output, model, tenant)
            rep = self._acquire(self._acquire_args(lease_id, call, 0, 0), call.keys)
        if rep.code in (ADMITTED, ALREADY):
            return self._lease(lease_id, call, rep, rep.now_us, sent)
        if rep.code == TOO_LARGE:
            raise TooLargeError(f"llmpacer: {call.use.tokens} tokens exceed the {rep.reason} bucket's capacity")
        if rep.reason in _STOPS:
            raise StoppedError(rep.wait_ms, rep.reason)
        raise WaitTimeoutError(rep.wait_ms, 0, rep.reason)

    def _lease(self, lease_id: str, call: _Call, rep: AcquireReply, start_us: int, first_sent: int) -> "Lease":
        charged = rep.now_us
        if rep.code == ALREADY:
            # Charged by an earlier attempt with this id, whose reply was
            # lost: at the latest now_us less the time since the id was
            # first sent. A settle is sent a lower bound (it then gives back
            # only less).
            charged = rep.now_us - (self._clock() - first_sent) // 1000 - 1000
        lease = Lease(self, lease_id, call, start_us, rep.expiry_ms, charged)
        lease.slot_us = rep.now_us
        lease.probe = rep.reason == "probe"
        # The turn, as acquire.lua counted it (wire.AcquireReply.TurnMs).
        lease.turn_ms = rep.now_us // 1000 + rep.wait_ms if rep.code == ADMITTED else 0
        return lease

    def _wait(self, rep: AcquireReply, deadline: int) -> None:
        # The script's hint plus up to 10% jitter, so that callers told the
        # same time do not return together; never past the bound less a
        # round trip.
        w = rep.wait_ms * 1_000_000
        d = w + self._jitter(w // 10)
        limit = deadline - self._clock() - int(_ROUND_TRIP_S * 1e9)
        if d > limit:
            d = max(w, limit)
        self._sleep(d / 1e9)

    def _wait_slot(self, rep: AcquireReply, deadline: int) -> None:
        # A queued slot waiter sleeps the script's estimate, at most
        # _POLL_MS (a slot that admitted it is held meanwhile), never past
        # the bound less a round trip, and wakes early when a lease of this
        # process ends: its slot may have admitted a waiter here.
        w = min(rep.wait_ms, _POLL_MS) * 1_000_000
        d = w + self._jitter(w // 10)
        d = min(d, max(0, deadline - self._clock() - int(_ROUND_TRIP_S * 1e9)))
        with self._freed:
            self._freed.wait(d / 1e9)

    def _leave(self, lease_id: str, call: _Call, charged_us: int) -> None:
        # A waiter that gives up leaves the slot queue: settle with its id
        # and a cancel's corrections, since a freed slot may have admitted
        # it meanwhile (then its lease ends, its tokens go back and its slot
        # goes to the next waiter). charged_us is a lower bound of when that
        # charged it. A few attempts; if all fail, a slot it was given is
        # held until its lease TTL ends.
        args = [lease_id, charged_us, call.settings.concurrency, _batch_slots(call.settings)]
        for field, us in corrections(call.buckets, call.use, _Use(0), True):
            args += [field, us]
        for attempt in range(3):
            try:
                self._run("settle", args, call.keys)
                return
            except Exception:
                time.sleep(0.05 * (attempt + 1))

    def _ended(self, held_us: int) -> None:
        if self.settings.concurrency:
            with self._freed:
                self._freed.notify_all()
        if held_us > 0:
            ms = held_us / 1000
            with self._mu:
                self._hold_ms = ms if self._hold_ms == 0 else self._hold_ms * 0.8 + ms * 0.2

    def pause(self, seconds: float) -> int:
        """Make every process wait at least seconds before its next admission.

        A pause only grows. Returns the pause in force afterwards, in ms.
        """
        return self._pause(seconds, [])

    def _throttled_for(self, seconds: float, limit: str = "unknown", tokens: int = 0, *, input: int = 0, output: int = 0,
                       model: str = "") -> int:
        """_throttled for a call of tokens (input, output and model as for
        acquire) rather than a lease's reservation: the conformance
        vectors' "throttled" case, which Go records through Lease.Fail."""
        if type(tokens) is not int or not 0 <= tokens <= _MAX_TOKENS:
            raise InvalidError(f"llmpacer: tokens = {tokens!r}: must be an int between 0 and {_MAX_TOKENS}")
        if type(input) is not int or type(output) is not int or not 0 <= input <= _MAX_TOKENS \
                or not 0 <= output <= _MAX_TOKENS or input + output > _MAX_TOKENS:
            raise InvalidError(f"llmpacer: input = {input!r}, output = {output!r}: each must be an int between 0 and {_MAX_TOKENS}, and their sum too")
        return self._throttled(seconds, limit, _reserved(tokens, input, output, self.settings.weight(model), None))

    def _throttled(self, seconds: float, limit: str, use: "_Use") -> int:
        """A provider's 429 for a call that reserved use (weighed, priced):
        pause every process, and lower the buckets the 429 names (see
        Lease.fail). Returns the pause in force, in ms.

        limit is what the provider says ran out: "requests", "tokens",
        "input_tokens" or "output_tokens", or "unknown" (all). The buckets
        lowered are those of a minute or shorter counting it: requests;
        tokens, input and output tokens for "tokens"; tokens and input (or
        output) tokens for "input_tokens" ("output_tokens"). Day buckets and
        other long ones never are, nor spend rates.
        """
        lower = {REQUESTS: (REQUESTS,), TOKENS: (TOKENS, INPUT_TOKENS, OUTPUT_TOKENS),
                 INPUT_TOKENS: (TOKENS, INPUT_TOKENS), OUTPUT_TOKENS: (TOKENS, OUTPUT_TOKENS)}.get(
            limit, (REQUESTS, TOKENS, INPUT_TOKENS, OUTPUT_TOKENS))
        args = []
        for b in self.settings.buckets:
            # A sliding window has no TAT to lower: the pause holds it back.
            if b.unit in lower and b.window_ms <= 60_000 and not b.sub:
                units = min(use.of(b.unit), b.capacity)
                args += [b.field, b.span - b.charge(units), 2 * b.span]
        return self._pause(seconds, args)

    def sync(self, requests_remaining: int | None = None, tokens_remaining: int | None = None) -> None:
        """Lower the rpm and tpm buckets to the room a provider's rate-limit headers report.

        Each remaining figure (None: not reported) less the units Headroom
        keeps, clamped to 0 .. capacity, becomes the bucket's level if it is
        lower: a sync never raises the budget. Sends nothing if no
        configured bucket is reported.
        """
        args = []
        for b in self.settings.buckets:
            left = {"rpm": requests_remaining, "tpm": tokens_remaining}.get(b.field)
            if left is None:
                continue
            if type(left) is not int:
                raise InvalidError(f"llmpacer: sync: remaining {left!r} must be an int")
            # The limit as stated, in limits or as a rate, less after Headroom.
            stated = getattr(self.config.limits, b.field) or next(r.limit for r in self.config.rates if r.name == b.field)
            units = max(min(left - (stated - b.limit), b.capacity), 0)
            args += [b.field, b.span - b.charge(units), 2 * b.span]
        if args:
            _ints(self._run("pause", [0, *args]), 2)

    def _pause(self, seconds: float, lower: list) -> int:
        us = round(seconds * 1_000_000)
        if not 0 < us <= _MAX_DURATION_MS * 1000:
            raise InvalidError(f"llmpacer: pause of {seconds!r} s: must be above 0 and at most 7 days")
        return _ints(self._run("pause", [max(us // 1000, 1), *lower]), 2)[0]

    def snapshot(self) -> Snapshot:
        """Read the budget without changing it: each bucket's level, slots held, any pause.

        in_flight counts the slots held, not pending leases waiting for
        their turn.
        """
        bs = self.settings.buckets
        # The stop (see stop.lua) is read as one more field.
        v = self._run("snapshot", [b.field for b in bs] + ["qs"])
        if not isinstance(v, (list, tuple)) or len(v) != 4 + len(bs):
            raise ReplyError(f"llmpacer: unexpected snapshot reply {v!r}")
        now_us, paused_ms, in_flight = _ints(v[:3], 3)
        levels = {}
        for b, raw in zip(bs, v[3:]):
            s = _str(raw)
            if b.sub:
                # Named by the rate, without the scripts' mark.
                levels[b.field.split(":", 1)[1]] = BucketState(b.limit, b.capacity, b.sliding_level(now_us, s), b.per_second)
                continue
            if s and not _INT.fullmatch(s):
                raise ReplyError(f"llmpacer: {b.field} TAT {s!r}")
            levels[b.field] = BucketState(b.limit, b.capacity, b.level(now_us, int(s) if s else None), b.per_second)
        stopped_ms, stopped_by = 0, ""
        stop = _str(v[3 + len(bs)])
        if stop:
            m = _STOP.fullmatch(stop)
            if not m:
                raise ReplyError(f"llmpacer: stop {stop!r}")
            left = int(m[1]) - now_us // 1000
            if left > 0:
                stopped_ms, stopped_by = left, m[4]
        return Snapshot(now_us, paused_ms, in_flight, self.settings.concurrency, levels, stopped_ms, stopped_by)

    def _stop_quota(self, seconds: float, probe_seconds: float = 0) -> int:
        """Stop the budget because the provider's quota is exhausted (see Lease.fail).

        Every process's calls are refused with StoppedError (limit "quota"),
        sending nothing, for seconds or until a probe succeeds: every
        probe_seconds (0: a minute) one call that fits goes through, and
        settling it resumes the budget. Returns the stop in force, in ms.
        """
        return self._stop(seconds, probe_seconds, "quota")

    def stop(self, seconds: float) -> int:
        """An operator's stop: every call refused (limit "stop"), no probes."""
        return self._stop(seconds, 0, "stop")

    def resume(self) -> None:
        """End a stop now, for every process."""
        _ints(self._run("stop", [0, 0, "stop"]), 2)

    def _stop(self, seconds: float, probe_seconds: float, kind: str) -> int:
        # In µs first, then whole ms truncated, as Go's Duration.Milliseconds.
        us, every = round(seconds * 1e6), round(probe_seconds * 1e6)
        if kind == "quota" and every == 0:
            every = DEFAULT_PROBE_MS * 1000
        if not 1000 <= us <= _MAX_DURATION_MS * 1000 or (kind == "quota" and not 1000 <= every <= _MAX_DURATION_MS * 1000):
            raise InvalidError(f"llmpacer: stop of {seconds!r} s probing every {probe_seconds!r} s: the stop must be 1 ms to 7 days, the probe interval 1 ms to 7 days (0: a minute); resume ends a stop")
        return _ints(self._run("stop", [us // 1000, every // 1000, kind]), 2)[0]


def _refused(kind: str, status: int) -> bool:
    # The provider turned the call away before any work (Go's refused): out
    # of quota, or a 3xx or 4xx that is no rate limit and no passing
    # failure (a kind OK comes from a client that saw a redirect).
    if kind == QUOTA_EXHAUSTED:
        return True
    return kind in (PERMANENT, OK) and 300 <= status < 500


def _cancel_quietly(lease: "Lease") -> None:
    try:
        lease.cancel()
    except Exception:  # the lease expires; its reservation stays charged, the safe side
        pass


@dataclasses.dataclass(frozen=True)
class LeaseInfo:
    """A lease as Lease.info reads it, as Go's pacer.LeaseInfo."""

    id: str  # the member of the budget's lease set in Redis
    # "active" until the lease ends, then "settled", "released",
    # "rejected", "canceled" or "expired" (Go's LeaseState names).
    state: str
    tokens: int  # reserved, unweighed (input and output together when split)
    start_us: int  # when the call's turn began, on the Redis clock
    # When its slot expires unless kept alive or ended, as of the last
    # admission or renewal, on the Redis clock.
    expiry_ms: int
    waited_ms: float  # how long acquire waited for it
    # From the turn to the end on the Redis clock: 0 until the lease is
    # settled or failed, and 0 for one canceled or expired.
    held_us: int


class Lease:
    """One admitted call's claim on the budget. End it exactly once.

    settle (the call's real usage), fail (the call failed: see fail) or
    cancel (never sent). Ending is idempotent: once ended, further calls
    change nothing. If Redis fails, the error is raised and the lease stays
    held, so it may be ended again; unended, it expires after the lease TTL
    and keeps its reservation. keep_alive keeps a long call's lease from
    expiring.
    """

    def __init__(self, pacer: Pacer, lease_id: str, call: _Call, start_us: int, expiry_ms: int, charged_us: int):
        self.id = lease_id
        # What it reserved, in the buckets' units (weighed, priced), and
        # the call it was charged for: it ends against that call's buckets
        # and keys, whatever definition is in force by then.
        self._call = call
        self._reserved = call.use
        # The tokens asked for, unweighed (input and output 0 if not split).
        self.tokens, self.input, self.output = call.asked
        self.tenant = call.tenant
        self.start_us = start_us  # the call's turn, Redis clock
        self.charged_us = charged_us  # when acquire charged it (or a lower bound)
        # When it took its slot, with a concurrency limit (Redis clock): its
        # admission, or for a lease pending until its turn, its claim.
        self.slot_us = charged_us
        # The call's turn in ms on the Redis clock, as acquire.lua counted
        # it in a sliding window's sub-window (0: not known).
        self.turn_ms = 0
        self._pacer = pacer
        self._expiry_ms = expiry_ms
        # _mu guards the fields below and is never held across a Redis
        # call, so info never waits on Redis. _op orders this lease's
        # script calls (a renewal, an end) and is held across them: an end
        # and a renewal never cross, and each reads the state the other
        # left.
        self._mu = threading.Lock()
        self._op = threading.Lock()
        self._state = "active"
        self._tried = None  # how an attempt to end it whose reply was lost tried
        self._held_us = 0
        self._waited_ms = 0.0  # set by acquire once it returns the lease
        self._failed = False  # fail told the budget (once)
        self._keepers: list = []  # the stop events of its keep_alive threads
        # The one call a stopped budget let through: settled, it resumes the
        # budget for every process.
        self.probe = False

    def _claimed(self, expiry_ms: int, now_us: int) -> None:
        # A pending lease took its slot: the expiry is the claim's.
        with self._mu:
            self._expiry_ms, self.slot_us = expiry_ms, now_us

    def info(self) -> LeaseInfo:
        """The lease as it stands: its state, reservation, times (see LeaseInfo)."""
        with self._mu:
            return LeaseInfo(self.id, self._state, self.tokens or self.input + self.output, self.start_us,
                             self._expiry_ms, self._waited_ms, self._held_us)

    def settle(self, used: int) -> None:
        """End the lease with the tokens the call used: the rest goes back, an overrun is debt.

        With Config.no_refund nothing goes back; overruns are still charged.
        The total alone bounds the input and the output used: an input or
        output rate gets back only what its part of the reservation exceeds
        used by; settle_usage gives each part back exactly.
        """
        if type(used) is not int or not 0 <= used <= _MAX_TOKENS:
            raise InvalidError(f"llmpacer: settle({used!r}): used must be an int between 0 and {_MAX_TOKENS}")
        c, r = self._call, self._reserved
        # Weighed as the reservation was; priced at most every token at
        # the dearest price.
        u = _Use(_weigh(used, c.weight), spend=c.price.bound(used) if c.price else 0)
        if c.settings.no_refund:
            u = _Use(max(u.tokens, r.tokens), r.input, r.output, r.split, max(u.spend, r.spend))
        self._finish("settled", u)

    def settle_usage(self, input: int, output: int, cached_input: int = 0) -> None:
        """End the lease with the input and output tokens the call used, apart.

        Each input_tokens and output_tokens rate gets back (or is charged)
        its own difference, token rates their sum's, even when they differ
        in sign (less input and more output than reserved: a debt for one
        rate, a give-back for the other). With Config.no_refund nothing
        goes back; overruns are still charged. cached_input is the part of
        input read from the provider's prompt cache, which spend rates price
        at Price.cached_input.
        """
        if type(input) is not int or type(output) is not int or type(cached_input) is not int \
                or not 0 <= input <= _MAX_TOKENS or not 0 <= output <= _MAX_TOKENS or not 0 <= cached_input <= input:
            raise InvalidError(f"llmpacer: settle_usage({input!r}, {output!r}, {cached_input!r}): input and output must be ints between 0 and {_MAX_TOKENS}, cached_input at most input")
        c, r = self._call, self._reserved
        i, o = _weigh(input, c.weight), _weigh(output, c.weight)
        u = _Use(i + o, i, o, True, c.price.spent(input, cached_input, output) if c.price else 0)
        if c.settings.no_refund:
            u = _Use(max(u.tokens, r.tokens), max(u.input, r.of(INPUT_TOKENS)), max(u.output, r.of(OUTPUT_TOKENS)), True,
                     max(u.spend, r.spend))
        self._finish("settled", u)

    def fail(self, kind: str, *, retry_after: float = 0.0, limit: str = "unknown", status: int = 0) -> None:
        """The one thing to do after a failed call, as Go's Lease.Fail: end
        the lease and tell every process of the budget what the provider said.

        kind is the failure's verdict, one of KINDS (RATE_LIMITED,
        QUOTA_EXHAUSTED, OVERLOADED, TRANSIENT, PERMANENT, CANCELED, or OK
        for an answer that is no failure, such as a redirect); retry_after
        the seconds the provider asked to wait (0: it named none); limit
        the limit a 429 named, one of LIMITS; status the HTTP status (0:
        none). retry_after is clamped to 24 hours (classify.MaxRetryAfter)
        and, when not 0, raised to at least a millisecond.

        The lease ends by the failure: a call refused as it stood (kind
        QUOTA_EXHAUSTED, or a 3xx or 4xx status of kind PERMANENT or OK)
        generated nothing, so its tokens go back and its request stays
        counted ("rejected"); any other keeps the whole reservation
        ("released"): the provider may have counted it.

        And the budget hears of it, in every process, once however often
        fail is called: RATE_LIMITED pauses it for retry_after (a second
        if 0) and lowers the buckets of the limit named (all per-minute
        ones for "unknown") to this call's reservation; QUOTA_EXHAUSTED
        stops it for retry_after (24 hours if 0): every call is refused
        with StoppedError, but one every Config.quota_probe_ms, whose
        settle resumes the budget. A fail after the lease ended otherwise
        still tells the budget. The end is tried again on every call, as
        settle's is; an error ending it is raised after the budget is
        told.
        """
        if kind not in KINDS:
            raise InvalidError(f"llmpacer: fail({kind!r}): kind must be one of {', '.join(KINDS)}")
        if limit not in LIMITS:
            raise InvalidError(f"llmpacer: fail(limit={limit!r}): limit must be one of {', '.join(LIMITS)}")
        if not (isinstance(retry_after, (int, float)) and 0 <= retry_after < math.inf) or type(status) is not int:
            raise InvalidError(f"llmpacer: fail(retry_after={retry_after!r}, status={status!r}): retry_after must be seconds, 0 or more; status an int")
        # As classify caps a verdict's RetryAfter, and a pause or stop is at
        # least a millisecond: checked before the end, so the tell after it
        # cannot fail on its argument.
        if retry_after:
            retry_after = min(max(float(retry_after), 0.001), _MAX_RETRY_AFTER_S)
        with self._mu:
            first, self._failed = not self._failed, True
        err = None
        try:
            if _refused(kind, status):
                self._reject()
            else:
                self._release()
        except Exception as e:  # raised once the budget is told
            err = e
        if first:
            try:
                self._tell(kind, retry_after, limit)
            except Exception as e:
                if err is None:
                    err = e
        if err is not None:
            raise err

    def _tell(self, kind: str, retry_after: float, limit: str) -> None:
        # Pass a failed call's verdict on to the budget (see fail).
        p = self._pacer
        if kind == RATE_LIMITED:
            p._throttled(retry_after or _THROTTLE_DEFAULT_S, limit, self._reserved)
        elif kind == QUOTA_EXHAUSTED:
            p._stop_quota(retry_after or _MAX_RETRY_AFTER_S, p.config.quota_probe_ms / 1000)

    def _release(self) -> None:
        """End the lease of a call that failed, keeping its whole reservation charged."""
        self._finish("released", self._reserved)

    def _reject(self) -> None:
        """End the lease of a call refused before any work: its tokens go back, its request stays."""
        self._finish("rejected", _Use(0))

    def cancel(self) -> None:
        """End the lease of a call never sent: its tokens and its request go back."""
        self._finish("canceled", _Use(0))

    def _finish(self, how: str, used: _Use) -> None:
        with self._op:
            end, err = self._end(how, used)
        with self._mu:
            held = self._held_us
        if end is not None:
            self._stop_keepers()
            self._pacer._ended(held)
            if end == "settled" and self.probe:
                try:
                    self._pacer._run("stop", [0, 0, "quota"])  # a quota stop only
                except Exception:  # the next probe resumes it
                    pass
        if err is not None:
            raise err

    def _set(self, **fields) -> None:
        # Write fields under _mu, for info's readers; the writer holds _op.
        with self._mu:
            for k, v in fields.items():
                setattr(self, k, v)

    def _end(self, how: str, used: _Use):
        # Under _op: no other end or renewal changes the state meanwhile.
        with self._mu:
            state, tried, expiry_ms = self._state, self._tried, self._expiry_ms
        if state == "expired":
            return None, LeaseExpiredError(f"llmpacer: lease {self.id} expired")
        if state != "active":
            return None, None
        c = self._call
        args = [self.id, self.charged_us, c.settings.concurrency, _batch_slots(c.settings)]
        for field, us in corrections(c.buckets, self._reserved, used, how == "canceled", self.turn_ms):
            args += [field, us]
        try:
            code, now_us = _ints(self._pacer._run("settle", args, c.keys), 2)[:2]
        except Exception as e:
            # The script may have run: a later attempt that finds the lease
            # gone knows this one ended it.
            self._set(_tried=tried or how)
            return None, e
        if code == 1:
            held = now_us - self.start_us if how != "canceled" and now_us > self.start_us else 0
            self._set(_state=how, _held_us=held)
            return how, None
        if code == 2 or code == 0:
            # Not found within a minute of the expiry: an attempt whose reply
            # was lost ended it (an expired lease would still be in the set,
            # and answer 2). That may be this very call, resent by redis-py
            # after a timeout (its Retry), when only the last reply arrives.
            # Past the expiry with no attempt lost, the keys may have expired
            # with the lease: that is an expiry.
            if code == 0 and now_us < (expiry_ms + _REAP_AFTER_MS) * 1000 and (
                    tried or now_us < expiry_ms * 1000):
                self._set(_state=tried or how)
                return tried or how, None
            self._set(_state="expired")
            return "expired", LeaseExpiredError(f"llmpacer: lease {self.id} expired before it ended")
        self._set(_tried=tried or how)
        return None, ReplyError(f"llmpacer: settle {self.id}: unexpected code {code}")

    def keep_alive(self) -> Callable[[], None]:
        """Keep a long call's lease, and its slot, from expiring, as Go's Lease.KeepAlive.

        A daemon thread pushes the lease's expiry to one lease TTL from now
        every third of the TTL, until the returned stop is called or the
        lease ends or expires. A renewal that fails because Redis is
        briefly unreachable is tried again at the next tick. The Redis
        client's socket timeout (redis-py's socket_timeout) bounds a
        renewal: set one, or a renewal on a hung connection hangs its
        thread, and an end of the lease waits for it. Call stop when the
        call returns; it waits for the thread, at most one renewal interval,
        so no renewal runs after it returns unless one hangs that long
        (stop returns anyway, and the hung renewal is the last):

            stop = lease.keep_alive()
            try:
                reply = call_model()
            finally:
                stop()
        """
        interval = self._call.settings.lease_ttl_ms / 3000
        done = threading.Event()
        with self._mu:
            if self._state != "active":
                done.set()
            self._keepers.append(done)

        def run():
            while not done.wait(interval):
                try:
                    self._renew(done)
                except LeaseExpiredError:
                    return
                except Exception:  # Redis briefly unreachable: the next tick tries again
                    continue
                if self.info().state != "active":
                    return

        t = threading.Thread(target=run, name=f"llmpacer-keep-alive-{self.id}", daemon=True)
        t.start()

        def stop() -> None:
            done.set()
            if t is not threading.current_thread():
                t.join(interval)  # not for ever: a renewal may hang on Redis
            with self._mu:
                if done in self._keepers:
                    self._keepers.remove(done)

        stop.thread = t  # for tests: the thread stop ends
        return stop

    def _stop_keepers(self) -> None:
        # The lease ended: its keep-alive threads stop at once rather than
        # at their next tick.
        with self._mu:
            ks, self._keepers = self._keepers, []
        for k in ks:
            k.set()

    def _renew(self, done: threading.Event | None = None) -> None:
        """Push the expiry to one lease TTL from now, once (keep_alive's tick).

        Skipped once done (its keep_alive's stop) is set, or the lease ended.
        """
        with self._op:
            with self._mu:
                state, tried = self._state, self._tried
            if state == "expired":
                raise LeaseExpiredError(f"llmpacer: lease {self.id} expired")
            if state != "active" or done is not None and done.is_set():
                return
            # The definition the lease was charged under (Go's lease
            # Budget), on the budget's keys.
            s = self._call.settings
            args = [self.id, s.lease_ttl_ms]
            if s.concurrency:
                # A slot an expired lease freed goes to the next waiter.
                args += [s.concurrency, _batch_slots(s)]
            res = _ints(self._pacer._run("keepalive", args, s.keys), 3)
            if res[0] != 0:
                self._set(_expiry_ms=res[2])
                return
            if tried:
                # An end whose reply was lost may have removed it: the next
                # end attempt finds out which.
                raise LeaseExpiredError(f"llmpacer: lease {self.id} not found")
            self._set(_state="expired")
        self._stop_keepers()
        self._pacer._ended(0)
        raise LeaseExpiredError(f"llmpacer: lease {self.id} expired")


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One budget of a Group, as pacer.Deployment: its Pacer, and its share
    of the calls under SPREAD (0 means 1)."""

    pacer: Pacer
    weight: float = 0.0


class Group:
    """Route each call to one of several budgets (deployments of one model), as pacer.Group.

    A call is admitted on the first deployment, in the policy's order
    (FILL_IN_ORDER, SPREAD by weight, or MOST_ROOM), that has room now, in
    one script call (route.lua) over every deployment; when none has, it
    waits on the one whose room comes first, as Pacer.acquire would. Every
    deployment's Pacer must use one Redis client, and on a Redis Cluster
    their budgets one hash tag (Config.hash_tag), so that one script
    reaches them all. A deployment paused, stopped or too small for the
    call is passed over, by Go and Python processes alike.
    """

    def __init__(self, deployments, policy: str = FILL_IN_ORDER, *, _random: Callable[[], float] = random.random):
        ds = [d if isinstance(d, Deployment) else Deployment(d) for d in deployments]
        if not 1 <= len(ds) <= _MAX_DEPLOYMENTS:
            raise InvalidError(f"llmpacer: a Group has {len(ds)} deployments: give 1 to {_MAX_DEPLOYMENTS}")
        if policy not in (FILL_IN_ORDER, SPREAD, MOST_ROOM):
            raise InvalidError(f"llmpacer: Group policy {policy!r}: use FILL_IN_ORDER, SPREAD or MOST_ROOM")
        seen, tags = {}, set()
        for i, d in enumerate(ds):
            if not isinstance(d.pacer, Pacer):
                raise InvalidError(f"llmpacer: deployments[{i}] = {d.pacer!r}: use a llmpacer.Pacer")
            if not (isinstance(d.weight, (int, float)) and 0 <= d.weight < math.inf):
                raise InvalidError(f"llmpacer: deployments[{i}].weight = {d.weight!r}: use a positive number, or 0 for 1")
            k = d.pacer.keys[0]
            if k in seen:
                raise InvalidError(f"llmpacer: deployments[{seen[k]}] and [{i}] are the same budget {d.pacer.config.name!r}: list each deployment once")
            seen[k] = i
            if d.pacer._client is not ds[0].pacer._client:
                raise InvalidError(f"llmpacer: deployments[{i}] uses another Redis client: a Python Group routes in one script call, so give every deployment's Pacer one client")
            tags.add(k[k.index("{") + 1:k.index("}")])
        if len(tags) > 1 and type(ds[0].pacer._client).__name__ == "RedisCluster":
            raise InvalidError("llmpacer: on a Redis Cluster a Group's budgets need one hash tag (Config.hash_tag), so that one script reaches them all")
        self.deployments, self.policy = ds, policy
        self._weights = [d.weight or 1.0 for d in ds]
        self._random = _random

    def _order(self) -> list:
        # As given, or for SPREAD a weighted random order: each next
        # deployment drawn among those left in proportion to its weight.
        o = list(range(len(self.deployments)))
        if self.policy != SPREAD or len(o) == 1:
            return o
        total = sum(self._weights)
        for k in range(len(o) - 1):
            x, j = self._random() * total, k
            while j < len(o) - 1:
                x -= self._weights[o[j]]
                if x < 0:
                    break
                j += 1
            total -= self._weights[o[j]]
            o[k], o[j] = o[j], o[k]
        return o

    def _route(self, req: tuple, bound_ms: int):
        """Offer the call to every deployment that can take it, in one
        route.lua call; returns the Pacer chosen, its _Call, the lease id
        and acquire's reply there."""
        use, first = [], None
        for i in self._order():
            p = self.deployments[i].pacer
            p._settle_definition()
            try:
                use.append((p, p._call(*req)))
            except (InvalidError, TooLargeError) as e:
                if first is None or i == 0:
                    first = e
        if not use:
            raise first
        lease_id = new_id()
        n = len(use)
        args, keys, more = [-n if self.policy == MOST_ROOM else n, bound_ms], [], []
        for p, call in use:
            a = p._acquire_args(lease_id, call, bound_ms, 0)
            args += [len(call.keys), len(a)]
            keys += call.keys
            more += a
        v = use[0][0]._run("route", args + more, keys)
        if not isinstance(v, (list, tuple)) or len(v) != 8 or type(v[0]) is not int or not 1 <= v[0] <= n:
            raise ReplyError(f"llmpacer: unexpected route reply {v!r}")
        p, call = use[v[0] - 1]
        return p, call, lease_id, p._saw(decode_acquire(v[1:]))

    def try_acquire(self, tokens: int = 0, priority: str = INTERACTIVE, *, input: int = 0, output: int = 0,
                    model: str = "", tenant: str = "") -> "tuple[Lease, Pacer]":
        """Admit the call on the first deployment, in the policy's order, with
        room now; returns its lease and that deployment's Pacer. Raises
        WaitTimeoutError with bound_ms 0 (the shortest wait) or StoppedError (every deployment
        stopped) without charging anything."""
        req = (tokens, priority, 0, input, output, model, tenant)
        stale, sent = 0, self.deployments[0].pacer._clock()
        while True:
            p, call, lease_id, rep = self._route(req, 0)
            if rep.code != STALE:
                break
            stale += 1
            p._follow(stale)
        if rep.code in (ADMITTED, ALREADY):
            return p._lease(lease_id, call, rep, rep.now_us, sent), p
        if rep.code == TOO_LARGE:
            raise TooLargeError(f"llmpacer: {call.use.tokens} tokens exceed the {rep.reason} bucket's capacity on every deployment")
        if rep.reason in _STOPS:
            raise StoppedError(rep.wait_ms, rep.reason)
        raise WaitTimeoutError(rep.wait_ms, 0, rep.reason)

    def acquire(self, tokens: int = 0, priority: str = INTERACTIVE, max_wait_ms: int = 0, *, input: int = 0,
                output: int = 0, model: str = "", tenant: str = "") -> "tuple[Lease, Pacer]":
        """Wait until a deployment has room, as Pacer.acquire; returns the lease and its Pacer.

        The call goes to the first deployment, in the policy's order, with
        room now; when none has, to the one whose room comes first, where
        it reserves its turn or queues for a slot, and stays (unlike Go's,
        it is not routed again if a pause or stop takes its turn back).
        The bound is max_wait_ms, or the first deployment's max_wait_ms.
        """
        p0 = self.deployments[0].pacer
        req = (tokens, priority, max_wait_ms, input, output, model, tenant)
        bound_ms = max_wait_ms or p0.settings.max_wait_ms
        began = p0._clock()
        deadline = began + bound_ms * 1_000_000
        stale = 0
        while True:
            remain_ms = max(0, (deadline - p0._clock()) // 1_000_000)
            p, call, lease_id, rep = self._route(req, remain_ms)
            if rep.code == STALE:
                stale += 1
                p._follow(stale)
                continue
            if rep.code == TOO_LARGE:
                raise TooLargeError(f"llmpacer: {call.use.tokens} tokens exceed the {rep.reason} bucket's capacity on every deployment")
            if rep.code in (ADMITTED, ALREADY) or rep.ticket != 0:
                # Admitted, or holding a place in a slot queue: the call goes
                # on as an acquire of that deployment.
                return p._acquire_loop(call, lease_id, bound_ms, began, deadline, lambda: p._call(*req), rep), p
            if rep.reason in _STOPS:
                raise StoppedError(rep.wait_ms, rep.reason)
            if rep.wait_ms > remain_ms:
                raise WaitTimeoutError(rep.wait_ms, bound_ms, rep.reason)
            p._wait(rep, deadline)


__all__ = [
    "Config", "Limits", "Rate", "Pacer", "Group", "Deployment", "Tenants", "Price", "SPEND",
    "FILL_IN_ORDER", "SPREAD", "MOST_ROOM", "SupersededError", "StoppedError", "default_input_margin", "definition_json", "Lease", "Snapshot", "BucketState", "Bucket", "Settings", "AcquireReply",
    "INTERACTIVE", "BATCH", "REQUESTS", "TOKENS", "INPUT_TOKENS", "OUTPUT_TOKENS", "UNITS", "DEFAULT_BATCH_FLOOR", "DEFAULT_LEASE_TTL_MS", "DEFAULT_MAX_WAIT_MS", "DEFAULT_KEY_PREFIX",
    "LlmpacerError", "InvalidError", "TooLargeError", "WaitTimeoutError", "LeaseExpiredError", "ReplyError",
    "settings", "source", "lua_dir", "new_id", "corrections", "decode_acquire",
    "retry_after", "LeaseInfo", "OK", "RATE_LIMITED", "QUOTA_EXHAUSTED", "OVERLOADED", "TRANSIENT", "PERMANENT",
    "CANCELED", "KINDS", "LIMITS",
]
