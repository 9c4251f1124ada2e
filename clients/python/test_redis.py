"""Lease.fail and Lease.keep_alive against a real Redis, two Pacers as two processes.

lua/python_test.go runs this with LLMPACER_REDIS_ADDR (host:port) and
LLMPACER_PY_BUDGET (a budget name unique to the run, whose keys it deletes
afterwards). Without them it skips, or fails under CI=true. Needs redis-py.
Run: LLMPACER_REDIS_ADDR=127.0.0.1:6379 LLMPACER_PY_BUDGET=t python3 -m unittest -v test_redis
"""

import os
import time
import unittest

import llmpacer

ADDR, BUDGET = os.environ.get("LLMPACER_REDIS_ADDR", ""), os.environ.get("LLMPACER_PY_BUDGET", "")


class FailAndKeepAlive(unittest.TestCase):
    def setUp(self):
        if not ADDR or not BUDGET:
            if os.environ.get("CI") == "true":
                self.fail("LLMPACER_REDIS_ADDR and LLMPACER_PY_BUDGET must be set under CI=true")
            self.skipTest("no Redis: set LLMPACER_REDIS_ADDR and LLMPACER_PY_BUDGET")
        import redis  # only here: test_vectors needs no redis-py

        host, port = ADDR.rsplit(":", 1)
        self.clients = [redis.Redis(host=host, port=int(port)) for _ in range(2)]
        for c in self.clients:
            self.addCleanup(c.close)

    def pacers(self, **kw):
        """Two Pacers (two clients: two processes) on one budget of this test."""
        cfg = llmpacer.Config(name=f"{BUDGET}-{self._testMethodName}", **kw)
        return [llmpacer.Pacer(c, cfg) for c in self.clients]

    def test_rate_limited_fail_pauses_every_process(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=60_000))
        lease = p1.try_acquire(1000)
        lease.fail(llmpacer.RATE_LIMITED, retry_after=30, limit="tokens")
        self.assertEqual(lease.info().state, "released")
        with self.assertRaises(llmpacer.WaitTimeoutError) as cm:
            p2.try_acquire(1)
        e = cm.exception
        self.assertEqual((e.bound_ms, e.limit), (0, "pause"))
        # Some of the 30 s the fail named, not the 1 s default.
        self.assertGreater(llmpacer.retry_after(e), 2)
        s = p2.snapshot()
        self.assertGreater(s.paused_ms, 2000)
        # The tpm bucket lowered to hold the call's 1000 tokens at most.
        self.assertLessEqual(s.buckets["tpm"].level, 1000)

    def test_rate_limited_fail_without_delay_pauses_a_second(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=60_000))
        p1.try_acquire(1000).fail(llmpacer.RATE_LIMITED)
        self.assertTrue(0 < p2.snapshot().paused_ms <= 1000)

    def test_quota_fail_stops_every_process(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=60_000), quota_probe_ms=600_000)
        lease = p1.try_acquire(1000)
        lease.fail(llmpacer.QUOTA_EXHAUSTED, retry_after=3600)
        self.assertEqual(lease.info().state, "rejected")
        with self.assertRaises(llmpacer.StoppedError) as cm:
            p2.try_acquire(1)
        self.assertEqual(cm.exception.limit, "quota")
        # Until the first probe, ten minutes away (quota_probe_ms).
        self.assertGreater(llmpacer.retry_after(cm.exception), 500)
        s = p2.snapshot()
        self.assertEqual(s.stopped_by, "quota")
        self.assertGreater(s.stopped_ms, 3_000_000)

    def test_refused_fail_gives_tokens_back(self):
        # 100 tokens a minute: what one call takes does not come back by
        # refill during the test.
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=100))
        lease = p1.try_acquire(100)
        with self.assertRaises(llmpacer.WaitTimeoutError):
            p2.try_acquire(100)
        lease.fail(llmpacer.PERMANENT, status=400)
        self.assertEqual(lease.info().state, "rejected")
        p2.try_acquire(100).cancel()

    def test_failed_call_keeps_its_tokens(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=100))
        lease = p1.try_acquire(100)
        lease.fail(llmpacer.PERMANENT, status=500)  # the provider may have counted it
        self.assertEqual(lease.info().state, "released")
        with self.assertRaises(llmpacer.WaitTimeoutError) as cm:
            p2.try_acquire(100)
        self.assertEqual(cm.exception.limit, "tpm")

    def test_second_fail_changes_nothing(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=100))
        lease = p1.try_acquire(100)
        lease.fail(llmpacer.PERMANENT, status=400)
        # Neither a pause, nor a stop, nor the reservation kept.
        lease.fail(llmpacer.RATE_LIMITED, retry_after=30)
        lease.fail(llmpacer.QUOTA_EXHAUSTED, retry_after=30)
        self.assertEqual(lease.info().state, "rejected")
        s = p2.snapshot()
        self.assertEqual((s.paused_ms, s.stopped_ms), (0, 0))
        p2.try_acquire(100).cancel()

    def test_keep_alive_renews_until_stopped(self):
        # A renewal every second (a third of the TTL).
        p1, _ = self.pacers(limits=llmpacer.Limits(rpm=100), lease_ttl_ms=3000)
        lease = p1.try_acquire(1)
        first = lease.info().expiry_ms
        stop = lease.keep_alive()
        deadline = time.monotonic() + 30
        while lease.info().expiry_ms == first and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertGreater(lease.info().expiry_ms, first, "no renewal within 30 s")
        stop()
        self.assertFalse(stop.thread.is_alive())
        lease.settle(1)
        self.assertEqual(lease.info().state, "settled")

    def test_keep_alive_ends_with_the_lease(self):
        # A renewal every 200 s: only the end's prompt stop ends the thread
        # within the test, not its next tick.
        p1, _ = self.pacers(limits=llmpacer.Limits(rpm=100), lease_ttl_ms=600_000)
        renewals, run = [], p1._scripts["keepalive"]
        p1._scripts["keepalive"] = lambda **kw: renewals.append(kw) or run(**kw)
        lease = p1.try_acquire(1)
        stop = lease.keep_alive()
        lease.cancel()
        stop.thread.join(0.5)
        self.assertFalse(stop.thread.is_alive(), "the keep-alive thread outlived its lease by 0.5 s")
        stop()
        self.assertEqual(renewals, [], "a renewal after the end")

    def test_huge_retry_after_stops_for_a_day(self):
        # Clamped to 24 hours (classify.MaxRetryAfter), not refused after
        # the lease ended.
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=60_000), quota_probe_ms=600_000)
        lease = p1.try_acquire(1000)
        lease.fail(llmpacer.QUOTA_EXHAUSTED, retry_after=1e12)
        self.assertEqual(lease.info().state, "rejected")
        s = p2.snapshot()
        self.assertEqual(s.stopped_by, "quota")
        self.assertTrue(86_000_000 < s.stopped_ms <= 86_400_000, s.stopped_ms)

    def test_huge_retry_after_pauses_for_a_day(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=60_000))
        p1.try_acquire(1000).fail(llmpacer.RATE_LIMITED, retry_after=1e12)
        self.assertTrue(86_000_000 < p2.snapshot().paused_ms <= 86_400_000)

    def test_tiny_retry_after_pauses_a_millisecond(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(tpm=60_000))
        lease = p1.try_acquire(1000)
        lease.fail(llmpacer.RATE_LIMITED, retry_after=1e-9)
        self.assertEqual(lease.info().state, "released")
        self.assertLessEqual(p2.snapshot().paused_ms, 1)

    def test_tiny_retry_after_stops_a_millisecond(self):
        p1, p2 = self.pacers(limits=llmpacer.Limits(rpm=100), quota_probe_ms=1)
        lease = p1.try_acquire(1)
        lease.fail(llmpacer.QUOTA_EXHAUSTED, retry_after=1e-9)
        self.assertEqual(lease.info().state, "rejected")
        self.assertLessEqual(p2.snapshot().stopped_ms, 1)

if __name__ == "__main__":
    unittest.main()
