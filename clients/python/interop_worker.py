"""The Python side of lua/interop_test.go, which shares budgets with Go pacers.

The Go test starts this worker with a JSON argument, {"addr": "host:port",
"budgets": {key: config as in lua/testdata/conformance/config.json}} ("addr"
is a comma-separated list of seed nodes with "cluster": true), then
sends one JSON command a line on stdin and reads one JSON answer a line on
stdout. Commands run one at a time, in order:

  {"op": "try" | "acquire", "budget", "tokens", "input", "output", "priority", "max_wait_ms"}
      -> {"lease": handle, "start_us", "charged_us", "expiry_ms", "waited_ms"}
  {"op": "end", "lease", "how": settle|settle_usage|release|reject|cancel, "used", "input", "output"}
      -> {"state", "end_us"}  (end_us: the end on the Redis clock; 0 for cancel;
      release and reject are Lease.fail's two ends: a transient failure, a 400)
  {"op": "fail", "lease", "kind", "retry_after", "limit", "status"} -> {"state", "end_us"}
  {"op": "keepalive", "lease"} -> {"expiry_ms"}  (one renewal, as a tick of keep_alive)
  {"op": "pause", "budget", "seconds"} -> {"remaining_ms"}
  {"op": "snapshot", "budget"} -> {"time_us", "in_flight", "paused_ms", "levels": {field: level}}
  {"op": "load", "budget", "seconds", "threads", "seed", "ends"} -> {"calls": [...]}
  {"op": "tenant_load", "budget", "tenants", "threads", "seed", "model", "seconds", "start_unix_ms"} -> {"tenant_calls": [...]}
  {"op": "group_try", "budgets": [key, ...], "policy", "tokens", "tenant"} -> {"lease", "chosen": key}
  {"op": "quit"}

A refusal answers {"error": "not_yet" | "wait_timeout" | ..., "wait_ms", "limit"}: "not_yet"
for try_acquire's (a WaitTimeoutError with bound_ms 0).
"""

import json
import random
import sys
import threading
import time

import redis

import llmpacer


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


def end(lease, how, used, input=0, output=0):
    if how == "settle":
        lease.settle(used)
    elif how == "settle_usage":
        lease.settle_usage(input, output)
    elif how == "release":
        lease.fail(llmpacer.TRANSIENT)  # keeps the reservation
    elif how == "reject":
        lease.fail(llmpacer.PERMANENT, status=400)  # refused: the tokens go back
    else:
        getattr(lease, how)()
    return ended_at(lease)


def ended_at(lease):
    held = lease.info().held_us
    return lease.start_us + held if held else 0


def resend(p):
    """Make p's next script call run twice and return the second reply, as
    a client that resends a call whose reply timed out does (redis-py with
    a Retry that retries on timeouts, go-redis by default)."""
    run = p._run

    def twice(name, args, keys=None):
        del p._run  # back to the class's method after this call
        run(name, args, keys)
        return run(name, args, keys)

    p._run = twice


def load(p, seconds, threads, seed, ends):
    """Callers on threads (thread 0 sends batch calls) until seconds pass.

    Each acquires 100 to 300 tokens, holds 20 to 80 ms, and ends its lease
    as one of ends picked at random (a settle uses 30 to 100% of the
    reservation). Returns one record a call.
    """
    stop = time.monotonic() + seconds
    calls, mu = [], threading.Lock()

    def run(i):
        rng = random.Random(seed * 100 + i)
        prio = llmpacer.BATCH if i == 0 else llmpacer.INTERACTIVE
        while True:
            left_ms = int((stop - time.monotonic()) * 1000)
            if left_ms <= 0:
                return
            tokens = rng.randint(100, 300)
            t0 = time.monotonic()
            try:
                lease = p.acquire(tokens, prio, max_wait_ms=left_ms)
            except llmpacer.WaitTimeoutError:
                continue
            waited_ms = (time.monotonic() - t0) * 1000
            time.sleep(rng.uniform(0.02, 0.08))
            how = rng.choice(ends)
            used = rng.randint(tokens * 3 // 10, tokens)
            end_us = end(lease, how, used)
            with mu:
                calls.append({"start_us": lease.start_us, "slot_us": lease.slot_us, "end_us": end_us, "how": how, "reserved": tokens,
                              "used": used if how == "settle" else 0, "waited_ms": waited_ms, "priority": prio})

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"calls": calls}


def tenant_load(p, tenants, threads, seed, model, seconds, start_unix_ms):
    """threads callers per tenant, each calling try_acquire for its tenant
    (input 100 to 300 tokens, output 50 to 150) and settling at once with
    all of the input and part of the output, then pausing 1 to 4 ms, until
    its first refusal (or seconds pass). They start at start_unix_ms (wall
    clock), when the Go side's callers do. Returns one record a call: the
    tokens reserved and used."""
    stop = time.monotonic() + seconds
    calls, mu = [], threading.Lock()

    def run(tenant, i):
        rng = random.Random(f"{seed}:{tenant}:{i}")
        time.sleep(max(0.0, start_unix_ms / 1000 - time.time()))
        while time.monotonic() < stop:
            time.sleep(rng.uniform(0.001, 0.004))
            inp, out = rng.randint(100, 300), rng.randint(50, 150)
            try:
                lease = p.try_acquire(input=inp, output=out, model=model, tenant=tenant)
            except llmpacer.WaitTimeoutError:
                return
            used = rng.randint(0, out)
            lease.settle_usage(inp, used)
            with mu:
                calls.append({"side": "python", "tenant": tenant, "input": inp, "output": out, "output_used": used,
                              "start_us": lease.start_us})

    ts = [threading.Thread(target=run, args=(t, i)) for t in tenants for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"tenant_calls": calls}


def client(spec):
    nodes = [a.rsplit(":", 1) for a in spec["addr"].split(",")]
    if spec.get("cluster"):
        return redis.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(h, int(p)) for h, p in nodes])
    return redis.Redis(host=nodes[0][0], port=int(nodes[0][1]))


def main():
    spec = json.loads(sys.argv[1])
    r = client(spec)
    pacers = {k: llmpacer.Pacer(r, config(v)) for k, v in spec["budgets"].items()}
    leases = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "quit":
            break
        try:
            if op in ("try", "acquire"):
                p, t0 = pacers[cmd["budget"]], time.monotonic()
                prio = cmd.get("priority", llmpacer.INTERACTIVE)
                split = {"input": cmd.get("input", 0), "output": cmd.get("output", 0)}
                if op == "try":
                    lease = p.try_acquire(cmd.get("tokens", 0), prio, **split)
                else:
                    lease = p.acquire(cmd.get("tokens", 0), prio, cmd.get("max_wait_ms", 0), **split)
                h = f"py{len(leases) + 1}"
                leases[h] = lease
                out = {"lease": h, "start_us": lease.start_us, "charged_us": lease.charged_us, "slot_us": lease.slot_us,
                       "expiry_ms": lease.info().expiry_ms, "waited_ms": (time.monotonic() - t0) * 1000}
            elif op == "end":
                lease = leases[cmd["lease"]]
                if cmd.get("resent"):
                    resend(lease._pacer)
                out = {"end_us": end(lease, cmd["how"], cmd.get("used", 0), cmd.get("input", 0), cmd.get("output", 0)),
                       "state": lease.info().state}
            elif op == "fail":
                lease = leases[cmd["lease"]]
                lease.fail(cmd["kind"], retry_after=cmd.get("retry_after", 0), limit=cmd.get("limit", "unknown"),
                           status=cmd.get("status", 0))
                out = {"end_us": ended_at(lease), "state": lease.info().state}
            elif op == "keepalive":
                lease = leases[cmd["lease"]]
                lease._renew()
                out = {"expiry_ms": lease.info().expiry_ms}
            elif op == "pause":
                out = {"remaining_ms": pacers[cmd["budget"]].pause(cmd["seconds"])}
            elif op == "snapshot":
                s = pacers[cmd["budget"]].snapshot()
                out = {"time_us": s.time_us, "in_flight": s.in_flight, "paused_ms": s.paused_ms,
                       "levels": {f: b.level for f, b in s.buckets.items()}}
            elif op == "load":
                out = load(pacers[cmd["budget"]], cmd["seconds"], cmd["threads"], cmd["seed"], cmd["ends"])
            elif op == "group_try":
                keys = cmd["budgets"]
                g = llmpacer.Group([pacers[k] for k in keys], cmd.get("policy", llmpacer.FILL_IN_ORDER))
                lease, p = g.try_acquire(cmd.get("tokens", 0), tenant=cmd.get("tenant", ""))
                h = f"py{len(leases) + 1}"
                leases[h] = lease
                out = {"lease": h, "chosen": keys[[pacers[k] for k in keys].index(p)]}
            elif op == "tenant_load":
                out = tenant_load(pacers[cmd["budget"]], cmd["tenants"], cmd["threads"], cmd["seed"], cmd.get("model", ""), cmd["seconds"], cmd["start_unix_ms"])
            else:
                out = {"error": "unknown op " + op}
        except llmpacer.WaitTimeoutError as e:
            out = {"error": "not_yet" if e.bound_ms == 0 else "wait_timeout", "wait_ms": e.wait_ms, "limit": e.limit}
        except Exception as e:  # noqa: BLE001: reported to the Go test, which fails on it
            out = {"error": type(e).__name__, "message": str(e)}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
