"""The Python client against the conformance vectors the Go client records.

lua/testdata/conformance holds, for configurations and requests, the exact
script arguments the Go client sends, and for script replies what it makes
of them. Each test here drives llmpacer the same way, on a fake Redis that
logs every script call and answers from a queue, with a clock that stands
still unless the client sleeps (as the Go side records them: in a synctest
bubble). Run: python3 -m unittest -v (no Redis, no redis-py needed).
"""

import hashlib
import json
import threading
import time
import unittest
from pathlib import Path

import llmpacer

VECTORS = Path(__file__).resolve().parent.parent.parent / "lua" / "testdata" / "conformance"


def load(name):
    with open(VECTORS / name, encoding="utf-8") as f:
        return json.load(f)


CONFIGS = {c["name"]: c["config"] for c in load("config.json")["configs"]}
LOST = object()  # a queued "reply": the call fails as if the connection broke


class Lost(ConnectionError):
    pass


def rate(r):
    return llmpacer.Rate(**r)


def config(d):
    t = d.get("tenants", {})
    return llmpacer.Config(
        tenants=llmpacer.Tenants(tuple(rate(r) for r in t.get("rates", ())), t.get("share", 0.0)),
        weights=dict(d.get("weights", {})), version=d.get("version", 0),
        prices={m: llmpacer.Price(**p) for m, p in d.get("prices", {}).items()},
        name=d["budget"], limits=llmpacer.Limits(**d.get("limits", {})),
        headroom=d.get("headroom", 0.0),
        no_refund=d.get("no_refund", False), batch_floor=d.get("batch_floor", 0.0),
        lease_ttl_ms=d.get("lease_ttl_ms", 0), max_wait_ms=d.get("max_wait_ms", 0), key_prefix=d.get("key_prefix", ""),
        rates=tuple(rate(r) for r in d.get("rates", ())), hash_tag=d.get("hash_tag", ""))


def as_redis(v):
    """A reply as redis-py returns it: strings as bytes."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, list):
        return [as_redis(x) for x in v]
    return v


class FakeRedis:
    """Logs every script call (arguments as the strings Redis receives) and answers from a queue."""

    def __init__(self):
        self.calls, self.replies, self.ids = [], [], {}
        self.by_source = {llmpacer.source(n): n for n in llmpacer.SCRIPTS}
        self.scripts = {n: self._script(n) for n in llmpacer.SCRIPTS}

    def register_script(self, src):
        name = self.by_source[src]
        # Looked up at each call, so a test may swap in its own.
        return lambda keys=(), args=(): self.scripts[name](keys, args)

    def _script(self, name):

        def run(keys=(), args=()):
            args = [str(a) for a in args]
            # The lease id: route's is its first acquire's, in every one's.
            at = {"acquire": 0, "settle": 0, "keepalive": 0}.get(name)
            if name == "route":
                at = 2 + 2 * abs(int(args[0]))
            if at is not None:
                lid = args[at]
                if lid not in self.ids:
                    self.ids[lid] = "<id>" if not self.ids else f"<id{len(self.ids) + 1}>"
                args = [self.ids[lid] if a == lid else a for a in args]
            self.calls.append({"script": name, "keys": list(keys), "args": args})
            if not self.replies:
                raise AssertionError(f"no reply queued for {name} {args}")
            r = self.replies.pop(0)
            if r is LOST:
                raise Lost("fake: connection reset")
            return as_redis(r)

        return run

    def take(self):
        c, self.calls = self.calls, []
        return c


class Clock:
    """A monotonic clock in ns that moves only when the client sleeps."""

    def __init__(self):
        self.ns = 1_000_000_000_000

    def __call__(self):
        return self.ns

    def sleep(self, seconds):
        self.ns += round(seconds * 1e9)


def pacer(name):
    fake, clock = FakeRedis(), Clock()
    p = llmpacer.Pacer(fake, config(CONFIGS[name]), _clock=clock, _sleep=clock.sleep, _jitter=lambda n: n // 3)
    return p, fake


def err_name(e):
    # The vectors name try_acquire's refusal (a WaitTimeoutError with
    # bound_ms 0, Go's ErrWaitTimeout with Bound 0) "not_yet".
    if isinstance(e, llmpacer.WaitTimeoutError) and e.bound_ms == 0:
        return "not_yet"
    for cls, name in [(llmpacer.TooLargeError, "too_large"), (llmpacer.WaitTimeoutError, "wait_timeout"), (llmpacer.LeaseExpiredError, "expired"),
                      (llmpacer.InvalidError, "invalid"), (llmpacer.ReplyError, "bad_reply"), (Lost, "redis")]:
        if isinstance(e, cls):
            return name
    if isinstance(e, llmpacer.SupersededError):
        return "superseded"
    if isinstance(e, llmpacer.StoppedError):
        return "quota" if e.limit == "quota" else "stopped"
    raise e


def call(p, req):
    prio = llmpacer.BATCH if req["priority"] == "batch" else llmpacer.INTERACTIVE
    split = {"input": req.get("input", 0), "output": req.get("output", 0), "model": req.get("model", ""), "tenant": req.get("tenant", "")}
    if req["call"] == "try":
        return p.try_acquire(req["tokens"], prio, **split)
    return p.acquire(req["tokens"], prio, req.get("max_wait_ms", 0), **split)


def admitted(p, now_us):
    return [1, 0, now_us, "", now_us // 1000 + p.settings.lease_ttl_ms, 0, 0]


NOW_US = 1_767_225_600_000_000  # the clock the Go side's fake Redis reports


class TestScripts(unittest.TestCase):
    def test_source_is_go_source(self):
        for s in load("scripts.json")["scripts"]:
            src = llmpacer.source(s["name"]).encode()
            self.assertEqual((hashlib.sha1(src).hexdigest(), len(src)), (s["sha1"], s["bytes"]), s["name"])


class TestConfig(unittest.TestCase):
    def test_configs(self):
        for v in load("config.json")["configs"]:
            with self.subTest(v["name"]):
                if v.get("error"):
                    with self.assertRaises(llmpacer.InvalidError):
                        llmpacer.settings(config(v["config"]))
                    continue
                p, _ = pacer(v["name"])
                s = p.settings
                self.assertEqual(s.keys, v["keys"])
                self.assertEqual((s.lease_ttl_ms, s.max_wait_ms), (v["lease_ttl_ms"], v["max_wait_ms"]))
                self.assertEqual([b.field for b in s.buckets], v["fields"])
                slots = [p.acquire_args("x", 1, llmpacer.INTERACTIVE, 0)[4]]
                if v.get("batch_error"):
                    with self.assertRaises(llmpacer.TooLargeError):
                        p.check_request(1, llmpacer.BATCH)
                else:
                    slots.append(p.acquire_args("x", 1, llmpacer.BATCH, 0)[5])
                self.assertEqual(slots, v["slots"])
                args, n = p.acquire_args("x", 1, llmpacer.INTERACTIVE, 0), len(s.buckets)
                for k, (b, want) in enumerate(zip(s.buckets, v["buckets"])):
                    # The charge of a one-token call: for a spend rate, what it may cost.
                    got = {"field": b.field, "limit": b.limit, "capacity": b.capacity, "per_second": b.per_second,
                           "charge_1": args[8 + n + 2 * k], "allow": b.allowance(0)}
                    if "allow_batch" in want:
                        got["allow_batch"] = b.allowance(s.keep)
                    self.assertEqual(got, want)


class TestAcquire(unittest.TestCase):
    def test_args(self):
        for c in load("acquire.json")["cases"]:
            with self.subTest(f'{c["config"]} {c["request"]} holds {c.get("holds_us")}'):
                p, fake = pacer(c["config"])
                for h in c.get("holds_us", []):
                    p._ended(h)
                p.seen_xp = c.get("seen_ms", 0)
                fake.replies.append(admitted(p, NOW_US))
                try:
                    call(p, c["request"])
                except llmpacer.LlmpacerError as e:
                    self.assertEqual(err_name(e), c.get("error"))
                    self.assertEqual(fake.take(), [])
                    continue
                self.assertNotIn("error", c)
                calls = fake.take()
                self.assertEqual([x["args"] for x in calls], [c["args"]])
                if "keys" in c:
                    self.assertEqual(calls[0]["keys"], c["keys"])

    def test_replies(self):
        for c in load("acquire_reply.json")["cases"]:
            with self.subTest(c["name"]):
                p, fake = pacer(c["config"])
                fake.replies.extend(c["replies"])
                try:
                    lease = call(p, c["request"])
                except llmpacer.LlmpacerError as e:
                    got = {"error": err_name(e)}
                    if isinstance(e, llmpacer.WaitTimeoutError):
                        got.update(wait_ms=e.wait_ms, limit=e.limit)
                        self.assertEqual(llmpacer.retry_after(e), e.wait_ms / 1000)
                else:
                    fake.replies.append([1, NOW_US])
                    calls = fake.take()
                    lease.cancel()
                    got = {"lease": {"start_us": lease.start_us, "expiry_ms": lease.info().expiry_ms,
                                     "charged_us": int(fake.take()[0]["args"][1])}}
                    fake.calls = calls
                want = {k: c[k] for k in ("error", "wait_ms", "limit", "lease") if k in c}
                self.assertEqual(got, want)
                calls = fake.take()
                for x in calls[1:]:
                    if len(x["args"]) > 2:
                        x["args"][2] = "<remaining>"
                self.assertEqual([x["args"] for x in calls], [x["args"] for x in c["calls"]])


class TestLease(unittest.TestCase):
    def test_settle_args(self):
        for c in load("settle.json")["cases"]:
            with self.subTest(f'{c["config"]} {c["tokens"]} {c.get("input")} {c.get("output")} {c["end"]}'):
                p, fake = pacer(c["config"])
                fake.replies.append(admitted(p, NOW_US))
                lease = p.try_acquire(c["tokens"], input=c.get("input", 0), output=c.get("output", 0),
                                      model=c.get("model", ""), tenant=c.get("tenant", ""))
                fake.take()
                fake.replies.append([1, NOW_US + 1000])
                end(lease, c["end"])
                calls = fake.take()
                self.assertEqual([x["args"] for x in calls], [c["args"]])
                if "keys" in c:
                    self.assertEqual(calls[0]["keys"], c["keys"])

    def test_replies(self):
        for sq in load("lease_reply.json")["sequences"]:
            with self.subTest(sq["name"]):
                p, fake = pacer("basic")
                fake.replies.append(admitted(p, NOW_US))
                lease = p.try_acquire(1300)
                fake.take()
                for i, st in enumerate(sq["steps"]):
                    if st.get("fail"):
                        fake.replies.append(LOST)
                    elif "reply" in st:
                        fake.replies.append(st["reply"])
                    try:
                        end(lease, st)
                        e = ""
                    except Exception as x:  # noqa: BLE001: named below
                        e = err_name(x)
                    calls = fake.take()
                    info = lease.info()
                    got = {"called": bool(calls), "error": e, "state": info.state, "held_us": info.held_us,
                           "expiry_ms": info.expiry_ms}
                    if calls:
                        got["args"] = calls[0]["args"]
                    want = {k: st.get(k, "") for k in ("called", "error", "state", "held_us", "expiry_ms", "args") if k in st or k == "error"}
                    self.assertEqual(got, want, f"step {i}")


def end(lease, e):
    """End lease as the vector's "how" says: settle, settle_usage, cancel,
    keepalive (one renewal, as a tick of keep_alive), or by fail: "release"
    a failure that keeps the reservation (a transient one), "reject" a
    refusal (a 400)."""
    how = e["how"]
    if how == "settle":
        lease.settle(e.get("used", 0))
    elif how == "settle_usage":
        lease.settle_usage(e.get("input", 0), e.get("output", 0), e.get("cached_input", 0))
    elif how == "keepalive":
        lease._renew()
    elif how == "release":
        lease.fail(llmpacer.TRANSIENT)
    elif how == "reject":
        lease.fail(llmpacer.PERMANENT, status=400)
    else:
        getattr(lease, how)()


class TestPause(unittest.TestCase):
    def test_args(self):
        for c in load("pause.json")["cases"]:
            with self.subTest(f'{c["config"]} {c["call"]} {c["d_us"]} {c.get("limit")} {c.get("tokens")}'):
                p, fake = pacer(c["config"])
                fake.replies.append([max(c["d_us"] // 1000, 1), NOW_US])
                try:
                    if c["call"] == "sync":
                        r = c.get("remaining", {})
                        p.sync(r.get("requests"), r.get("tokens"))
                        if "args" not in c:
                            self.assertEqual(fake.take(), [])
                            continue
                    elif c["call"] == "pause":
                        p.pause(c["d_us"] / 1e6)
                    elif c["call"] == "stop":
                        p.stop(c["d_us"] / 1e6)
                    elif c["call"] == "stop_quota":
                        p._stop_quota(c["d_us"] / 1e6, c.get("probe_us", 0) / 1e6)
                    elif c["call"] == "resume":
                        p.resume()
                    else:
                        p._throttled_for(c["d_us"] / 1e6, c["limit"], c.get("tokens", 0), input=c.get("input", 0),
                                         output=c.get("output", 0), model=c.get("model", ""))
                except llmpacer.LlmpacerError as e:
                    self.assertEqual(err_name(e), c.get("error"))
                    continue
                self.assertEqual([x["args"] for x in fake.take()], [c["args"]])


class TestQuotaProbeConfig(unittest.TestCase):
    def test_checked_with_the_settings(self):
        # As Go's New: a bad probe interval fails the Pacer, not the fail
        # after a lease ended (which would never send the stop).
        base = {"name": "q", "limits": llmpacer.Limits(rpm=10)}
        for v in (-1, 0.5, 1.0, True, "1000", 7 * 24 * 3600 * 1000 + 1):
            with self.subTest(v), self.assertRaisesRegex(llmpacer.InvalidError, "quota_probe_ms"):
                llmpacer.settings(llmpacer.Config(**base, quota_probe_ms=v))
        for v in (0, 1, 7 * 24 * 3600 * 1000):
            llmpacer.settings(llmpacer.Config(**base, quota_probe_ms=v))


class TestFail(unittest.TestCase):
    """Lease.fail's script calls, as Go's Lease.Fail makes them: the end
    (settle.lua), then the pause or stop (pause.lua, stop.lua), once."""

    def lease(self, tokens=1300):
        p, fake = pacer("basic")
        fake.replies.append(admitted(p, NOW_US))
        lease = p.try_acquire(tokens)
        fake.take()
        return p, fake, lease

    def end_args(self, how):
        # The settle of a twin lease ended by _release or _reject.
        _, fake, twin = self.lease()
        fake.replies.append([1, NOW_US + 1000])
        getattr(twin, how)()
        return fake.take()[0]["args"]

    def test_rate_limited_releases_and_pauses(self):
        _, fake, lease = self.lease()
        fake.replies += [[1, NOW_US + 1000], [2000, NOW_US + 1000]]
        lease.fail(llmpacer.RATE_LIMITED, retry_after=2, limit="tokens")
        calls = fake.take()
        self.assertEqual([c["script"] for c in calls], ["settle", "pause"])
        self.assertEqual(calls[0]["args"], self.end_args("_release"))
        # The tpm bucket lowered to the lease's 1300 tokens (as pause.json's
        # throttled case for 1300 tokens and "tokens").
        self.assertEqual(calls[1]["args"], ["2000", "tpm", "59610000", "120000000"])
        self.assertEqual(lease.info().state, "released")

    def test_rate_limited_without_delay_pauses_a_second(self):
        _, fake, lease = self.lease()
        fake.replies += [[1, NOW_US + 1000], [1000, NOW_US + 1000]]
        lease.fail(llmpacer.RATE_LIMITED)
        calls = fake.take()
        self.assertEqual(calls[1]["args"], ["1000", "rpm", "59880000", "120000000", "tpm", "59610000", "120000000"])

    def test_quota_rejects_and_stops(self):
        _, fake, lease = self.lease()
        fake.replies += [[1, NOW_US + 1000], [86_400_000, NOW_US + 1000]]
        lease.fail(llmpacer.QUOTA_EXHAUSTED, status=429)
        calls = fake.take()
        self.assertEqual([c["script"] for c in calls], ["settle", "stop"])
        self.assertEqual(calls[0]["args"], self.end_args("_reject"))
        self.assertEqual(calls[1]["args"], ["86400000", "60000", "quota"])
        self.assertEqual(lease.info().state, "rejected")

    def test_quota_probe_and_retry_after(self):
        fake, clock = FakeRedis(), Clock()
        cfg = llmpacer.Config(name="q", limits=llmpacer.Limits(rpm=10), quota_probe_ms=5000)
        p = llmpacer.Pacer(fake, cfg, _clock=clock, _sleep=clock.sleep)
        fake.replies.append(admitted(p, NOW_US))
        lease = p.try_acquire(1)
        fake.take()
        fake.replies += [[1, NOW_US + 1000], [30_000, NOW_US + 1000]]
        lease.fail(llmpacer.QUOTA_EXHAUSTED, retry_after=30)
        self.assertEqual(fake.take()[1]["args"], ["30000", "5000", "quota"])

    def test_retry_after_is_clamped(self):
        # At most 24 hours (classify.MaxRetryAfter), at least 1 ms when not
        # 0: the pause or stop after the end never fails on its argument.
        for kind, ra, script, want in [(llmpacer.RATE_LIMITED, 1e12, "pause", "86400000"),
                                       (llmpacer.RATE_LIMITED, 1e-9, "pause", "1"),
                                       (llmpacer.QUOTA_EXHAUSTED, 1e12, "stop", "86400000"),
                                       (llmpacer.QUOTA_EXHAUSTED, 30 * 24 * 3600, "stop", "86400000"),
                                       (llmpacer.QUOTA_EXHAUSTED, 1e-9, "stop", "1")]:
            with self.subTest(f"{kind} {ra}"):
                _, fake, lease = self.lease()
                fake.replies += [[1, NOW_US + 1000], [int(want), NOW_US + 1000]]
                lease.fail(kind, retry_after=ra)
                calls = fake.take()
                self.assertEqual([c["script"] for c in calls], ["settle", script])
                self.assertEqual(calls[1]["args"][0], want)

    def test_refused_gives_tokens_back(self):
        for kind, status, how, state in [(llmpacer.PERMANENT, 400, "_reject", "rejected"),
                                         (llmpacer.OK, 302, "_reject", "rejected"),
                                         (llmpacer.PERMANENT, 500, "_release", "released"),
                                         (llmpacer.PERMANENT, 0, "_release", "released"),
                                         (llmpacer.TRANSIENT, 408, "_release", "released"),
                                         (llmpacer.OVERLOADED, 529, "_release", "released")]:
            with self.subTest(f"{kind} {status}"):
                _, fake, lease = self.lease()
                fake.replies.append([1, NOW_US + 1000])
                lease.fail(kind, status=status)
                calls = fake.take()
                self.assertEqual([c["args"] for c in calls], [self.end_args(how)])
                self.assertEqual(lease.info().state, state)
        self.assertNotEqual(self.end_args("_reject"), self.end_args("_release"))

    def test_second_fail_changes_nothing(self):
        _, fake, lease = self.lease()
        fake.replies += [[1, NOW_US + 1000], [2000, NOW_US + 1000]]
        lease.fail(llmpacer.RATE_LIMITED, retry_after=2)
        fake.take()
        for kind in (llmpacer.RATE_LIMITED, llmpacer.QUOTA_EXHAUSTED, llmpacer.PERMANENT):
            lease.fail(kind, status=400)  # no reply queued: any script call fails the test
        self.assertEqual(fake.take(), [])
        self.assertEqual(lease.info().state, "released")

    def test_fail_after_settle_still_tells(self):
        _, fake, lease = self.lease()
        fake.replies += [[1, NOW_US + 1000], [2000, NOW_US + 1000]]
        lease.settle(100)
        lease.fail(llmpacer.RATE_LIMITED, retry_after=2, limit="requests")
        self.assertEqual([c["script"] for c in fake.take()], ["settle", "pause"])
        self.assertEqual(lease.info().state, "settled")

    def test_lost_end_is_tried_again_but_tells_once(self):
        _, fake, lease = self.lease()
        fake.replies += [LOST, [2000, NOW_US + 1000]]
        with self.assertRaises(Lost):
            lease.fail(llmpacer.RATE_LIMITED, retry_after=2)
        self.assertEqual([c["script"] for c in fake.take()], ["settle", "pause"])
        fake.replies.append([1, NOW_US + 1000])
        lease.fail(llmpacer.RATE_LIMITED, retry_after=2)
        self.assertEqual([c["script"] for c in fake.take()], ["settle"])
        self.assertEqual(lease.info().state, "released")

    def test_invalid(self):
        _, fake, lease = self.lease()
        for kw in ({"kind": "throttled"}, {"kind": llmpacer.RATE_LIMITED, "limit": "tpm"},
                   {"kind": llmpacer.RATE_LIMITED, "retry_after": -1}):
            with self.assertRaises(llmpacer.InvalidError):
                lease.fail(kw.pop("kind"), **kw)
        self.assertEqual(fake.take(), [])
        self.assertEqual(lease.info().state, "active")

    def test_retry_after(self):
        self.assertEqual(llmpacer.retry_after(llmpacer.WaitTimeoutError(1500, 0, "tpm")), 1.5)
        self.assertEqual(llmpacer.retry_after(llmpacer.StoppedError(2000, "quota")), 2.0)
        self.assertIsNone(llmpacer.retry_after(llmpacer.TooLargeError("x")))
        self.assertIsNone(llmpacer.retry_after(ValueError("x")))


class TestKeepAlive(unittest.TestCase):
    def test_stop_ends_the_thread(self):
        p, fake = pacer("basic")
        fake.replies.append(admitted(p, NOW_US))
        lease = p.try_acquire(1)
        fake.take()
        stop = lease.keep_alive()
        self.assertTrue(stop.thread.is_alive())
        self.assertTrue(stop.thread.daemon)
        stop()
        self.assertFalse(stop.thread.is_alive())
        stop()  # a second stop is harmless
        self.assertEqual(fake.take(), [])  # the first renewal was due in 200 s

    def test_renews_until_the_lease_ends(self):
        fake, clock = FakeRedis(), Clock()
        cfg = llmpacer.Config(name="k", limits=llmpacer.Limits(rpm=10), lease_ttl_ms=30)  # a renewal every 10 ms
        p = llmpacer.Pacer(fake, cfg, _clock=clock, _sleep=clock.sleep)
        fake.replies.append(admitted(p, NOW_US))
        lease = p.try_acquire(1)
        fake.take()
        fake.replies += [[1, NOW_US, 1_767_225_700_000 + i] for i in range(1000)]
        stop = lease.keep_alive()
        for _ in range(500):  # up to 5 s
            if lease.info().expiry_ms >= 1_767_225_700_001:
                break
            stop.thread.join(0.01)
        self.assertGreaterEqual(lease.info().expiry_ms, 1_767_225_700_001, "two renewals within 5 s")
        stop()
        self.assertFalse(stop.thread.is_alive())

    def test_the_end_stops_the_thread_at_once(self):
        # A renewal every 200 s: the thread is asleep in its wait when the
        # lease ends, and must not wait for its tick to notice.
        for how in ("cancel", "settle", "fail"):
            with self.subTest(how):
                p, fake = pacer("basic")
                fake.replies.append(admitted(p, NOW_US))
                lease = p.try_acquire(1)
                fake.take()
                stop = lease.keep_alive()
                fake.replies.append([1, NOW_US + 1000])
                if how == "fail":
                    lease.fail(llmpacer.TRANSIENT)
                else:
                    getattr(lease, how)(*(() if how == "cancel" else (1,)))
                stop.thread.join(0.5)
                self.assertFalse(stop.thread.is_alive(), "the thread ends with the lease")
                self.assertEqual([c["script"] for c in fake.take()], ["settle"], "no renewal after the end")
                stop()
                self.assertEqual(fake.take(), [])

    def test_hung_renewal_blocks_neither_info_nor_stop(self):
        # A renewal every 100 ms, the first of which hangs on Redis.
        fake, clock = FakeRedis(), Clock()
        cfg = llmpacer.Config(name="k", limits=llmpacer.Limits(rpm=10), lease_ttl_ms=300)
        p = llmpacer.Pacer(fake, cfg, _clock=clock, _sleep=clock.sleep)
        fake.replies.append(admitted(p, NOW_US))
        lease = p.try_acquire(1)
        fake.take()
        run, entered, release = fake.scripts["keepalive"], threading.Event(), threading.Event()

        def hang(keys=(), args=()):
            entered.set()
            release.wait(30)
            return run(keys, args)

        fake.scripts["keepalive"] = hang
        fake.replies.append([1, NOW_US, 1_767_225_700_000])
        stop = lease.keep_alive()
        self.addCleanup(release.set)
        self.assertTrue(entered.wait(10), "no renewal within 10 s")
        t0 = time.monotonic()
        self.assertEqual(lease.info().state, "active")
        stop()  # waits one interval (0.1 s) for the hung renewal, then returns
        self.assertLess(time.monotonic() - t0, 5)
        self.assertTrue(stop.thread.is_alive(), "the renewal still hangs")
        release.set()
        stop.thread.join(5)
        self.assertFalse(stop.thread.is_alive())
        self.assertEqual(lease.info().expiry_ms, 1_767_225_700_000)
        self.assertEqual([c["script"] for c in fake.take()], ["keepalive"], "one renewal, none after stop")

    def test_ended_lease_starts_no_renewal(self):
        p, fake = pacer("basic")
        fake.replies += [admitted(p, NOW_US), [1, NOW_US + 1000]]
        lease = p.try_acquire(1)
        lease.cancel()
        stop = lease.keep_alive()
        stop.thread.join(5)
        self.assertFalse(stop.thread.is_alive())


class TestDefine(unittest.TestCase):
    def test_cases(self):
        for c in load("define.json")["cases"]:
            with self.subTest(c["name"]):
                cfg = dict(CONFIGS[c["config"]], version=c.get("version", 0))
                fake, clock = FakeRedis(), Clock()
                p = llmpacer.Pacer(fake, config(cfg), _clock=clock, _sleep=clock.sleep, _jitter=lambda n: n // 3)
                fake.replies.extend(c["replies"])
                e = ""
                try:
                    if c.get("define"):
                        p.define(config(c["define"]))
                    if c.get("request"):
                        call(p, c["request"])
                except llmpacer.LlmpacerError as x:
                    e = err_name(x)
                self.assertEqual(e, c.get("error", ""))
                self.assertEqual([(x["script"], x["args"]) for x in fake.take()], [(x["script"], x["args"]) for x in c["calls"]])


class TestGroup(unittest.TestCase):
    def test_cases(self):
        for c in load("group.json")["cases"]:
            with self.subTest(c["name"]):
                fake, clock = FakeRedis(), Clock()
                ps = [llmpacer.Pacer(fake, config(CONFIGS[n]), _clock=clock, _sleep=clock.sleep, _jitter=lambda n: n // 3)
                      for n in c["deployments"]]
                g = llmpacer.Group(ps, llmpacer.MOST_ROOM if c["policy"] == "most-room" else llmpacer.FILL_IN_ORDER)
                fake.replies.extend(c["replies"] or [])
                req, e, chosen = c["request"], "", 0
                prio = llmpacer.BATCH if req["priority"] == "batch" else llmpacer.INTERACTIVE
                kw = {"input": req.get("input", 0), "output": req.get("output", 0), "model": req.get("model", ""), "tenant": req.get("tenant", "")}
                try:
                    if req["call"] == "try":
                        _, p = g.try_acquire(req["tokens"], prio, **kw)
                    else:
                        _, p = g.acquire(req["tokens"], prio, req.get("max_wait_ms", 0), **kw)
                    chosen = ps.index(p)
                except llmpacer.LlmpacerError as x:
                    e = err_name(x)
                self.assertEqual((e, chosen), (c.get("error", ""), c.get("chosen", 0)))
                self.assertEqual([(x["script"], x["keys"], x["args"]) for x in fake.take()],
                                 [(x["script"], x.get("keys", []), x["args"]) for x in c["calls"]])


class TestSnapshot(unittest.TestCase):
    def test_replies(self):
        for c in load("snapshot.json")["cases"]:
            with self.subTest(c["name"]):
                p, fake = pacer(c["config"])
                fake.replies.append(c["reply"])
                try:
                    s = p.snapshot()
                except llmpacer.LlmpacerError as e:
                    self.assertEqual(err_name(e), c.get("error"))
                    continue
                self.assertEqual([x["args"] for x in fake.take()], [c.get("args", [])])
                got = {"time_us": s.time_us, "paused_ms": s.paused_ms, "in_flight": s.in_flight,
                       "concurrency": s.concurrency,
                       "buckets": [{"field": f, "limit": b.limit, "capacity": b.capacity, "level": b.level,
                                    "per_second": b.per_second} for f, b in s.buckets.items()]}
                if s.stopped_ms:
                    got["stopped_ms"], got["stopped_by"] = s.stopped_ms, s.stopped_by
                self.assertEqual(got, c["result"])


if __name__ == "__main__":
    unittest.main()
