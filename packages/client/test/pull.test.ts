/**
 * Pull workers from the client's side, against a fake fetch: the calls the client makes, and
 * runPullWorker's loop (lease with long polling, heartbeat while the work runs, complete or fail
 * as the work ended, a lost lease aborting the work, a stop that lets running work finish).
 */
import { describe, expect, it } from "vitest";
import { type PullLease, runPullWorker, SchedulerClient, SchedulerError } from "../src/index.ts";

interface Seen {
  method: string;
  path: string;
  body: unknown;
}

/** A fake server: `answer` gets each request and says what to send back. */
function server(answer: (seen: Seen, all: Seen[]) => { status?: number; body: unknown } | Promise<{ status?: number; body: unknown }>) {
  const seen: Seen[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const text = await request.text();
    const entry = { method: request.method, path: new URL(request.url).pathname, body: text ? JSON.parse(text) : undefined };
    seen.push(entry);
    const { status = 200, body } = await answer(entry, seen);
    return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  };
  const client = new SchedulerClient({ baseUrl: "http://sched.test", apiKey: "k", fetch, retry: { initialDelayMs: 1, maxDelayMs: 2 } });
  return { client, seen };
}

const stale = { status: 409, body: { error: { code: "stale_lease", message: "no longer yours", field: "token" } } };

function leaseOf(n: number): PullLease {
  return {
    token: `plt_0_exe_${String(n).padStart(26, "0")}_00000000-0000-0000-0000-000000000000`,
    executionId: `exe_${n}`,
    jobId: `job_${n}`,
    attempt: 1,
    dueAt: "2026-12-01T00:00:00.000Z",
    leaseDeadlineAt: "2026-12-01T00:00:30.000Z",
    payload: { n },
  };
}

describe("client.pull", () => {
  it("lease posts its options and is not repeated after a 5xx (leases granted to nobody expire); heartbeat is", async () => {
    const { client, seen } = server((s) => (s.path.endsWith("/lease") ? { status: 503, body: {} } : { body: { ok: 1 } }));
    await expect(client.pull.lease("video", { max: 3, leaseMs: 5_000, waitMs: 1_000 })).rejects.toBeInstanceOf(SchedulerError);
    expect(seen).toEqual([{ method: "POST", path: "/v1/pull/video/lease", body: { max: 3, leaseMs: 5_000, waitMs: 1_000 } }]);
  });

  it("a stale lease is a SchedulerError with code stale_lease", async () => {
    const { client } = server(() => stale);
    await expect(client.pull.complete("t")).rejects.toMatchObject({ status: 409, code: "stale_lease" });
  });
});

describe("runPullWorker", () => {
  it("runs each leased execution and completes it; a thrown error fails it, retryable unless it says otherwise", async () => {
    const leases = [leaseOf(1), leaseOf(2)];
    const stop = new AbortController();
    const { client, seen } = server((s) => {
      if (s.path.endsWith("/lease")) {
        const next = leases.shift();
        if (!next) stop.abort();
        return { body: { leases: next ? [next] : [] } };
      }
      return { body: { executionId: "x", status: "succeeded" } };
    });
    const handled: unknown[] = [];
    await runPullWorker({
      client,
      queue: "video",
      signal: stop.signal,
      waitMs: 100,
      handle: async (lease) => {
        handled.push(lease.payload);
        if ((lease.payload as { n: number }).n === 2) throw Object.assign(new Error("corrupt"), { retryable: false });
      },
    });
    expect(handled).toEqual([{ n: 1 }, { n: 2 }]);
    const reports = seen.filter((s) => !s.path.endsWith("/lease"));
    expect(reports).toEqual([
      { method: "POST", path: `/v1/pull/leases/${leaseOf(1).token}/complete`, body: undefined },
      { method: "POST", path: `/v1/pull/leases/${leaseOf(2).token}/fail`, body: { retryable: false, error: "corrupt" } },
    ]);
    expect(seen.find((s) => s.path.endsWith("/lease"))?.body).toEqual({ max: 1, leaseMs: 30_000, waitMs: 100 });
  });

  it("heartbeats while the work runs; a lost lease aborts the work's signal", async () => {
    const stop = new AbortController();
    let leased = false;
    const { client, seen } = server((s) => {
      if (s.path.endsWith("/lease")) {
        if (leased) return new Promise(() => {}); // a long poll that never answers: the stop ends it
        leased = true;
        return { body: { leases: [leaseOf(3)] } };
      }
      if (s.path.endsWith("/heartbeat")) return seen.filter((x) => x.path.endsWith("/heartbeat")).length > 1 ? stale : { body: {} };
      return stale;
    });
    let aborted: unknown = null;
    const errors: unknown[] = [];
    await runPullWorker({
      client,
      queue: "video",
      signal: stop.signal,
      leaseMs: 1_000, // heartbeats every 333 ms
      onError: (error) => errors.push(error),
      handle: (_lease, signal) =>
        new Promise<void>((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = signal.reason;
            stop.abort();
            resolve();
          });
        }),
    });
    expect(seen.filter((s) => s.path.endsWith("/heartbeat"))).toHaveLength(2);
    expect(aborted).toMatchObject({ code: "stale_lease" });
    // its report after the lease was lost is rejected too, and told to onError, never thrown
    expect(errors).toEqual([expect.objectContaining({ code: "stale_lease" })]);
  });

  it("a thrown error's report is always one the API accepts: a lone surrogate replaced, retryAfterMs at most 7 days", async () => {
    const stop = new AbortController();
    let served = false;
    const { client, seen } = server((s) => {
      if (s.path.endsWith("/lease")) {
        if (served) stop.abort();
        const leases = served ? [] : [leaseOf(4)];
        served = true;
        return { body: { leases } };
      }
      return { body: { executionId: "x", status: "scheduled" } };
    });
    await runPullWorker({
      client,
      queue: "video",
      signal: stop.signal,
      waitMs: 1_000,
      handle: async () => {
        throw Object.assign(new Error("broken \ud800 text"), { retryAfterMs: 1e12 });
      },
    });
    const fail = seen.find((s) => s.path.endsWith("/fail"));
    expect(fail?.body).toEqual({ retryable: true, error: "broken \ufffd text", retryAfterMs: 7 * 86_400_000 });
  });

  it("refuses a concurrency that is not a whole number from 1 to 100", async () => {
    const { client } = server(() => ({ body: { leases: [] } }));
    for (const concurrency of [0, 1.5, 101]) {
      await expect(runPullWorker({ client, queue: "q", concurrency, handle: async () => {} })).rejects.toBeInstanceOf(RangeError);
    }
  });

  it("a failed lease request is reported and asked again after a pause; stopping ends the loop", async () => {
    const stop = new AbortController();
    const { client } = server((_s, all) => {
      if (all.length >= 2) stop.abort();
      return { status: 400, body: { error: { code: "invalid_field", message: "queue", field: "queue" } } };
    });
    const errors: unknown[] = [];
    await runPullWorker({ client, queue: "video", signal: stop.signal, onError: (e) => errors.push(e), handle: async () => {} });
    expect(errors.length).toBeGreaterThanOrEqual(1);
    expect(errors[0]).toMatchObject({ code: "invalid_field" });
  });
});
