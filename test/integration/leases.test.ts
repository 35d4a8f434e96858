/**
 * Leases and fencing, through the bucket's claim/heartbeat/complete RPCs and the real fire
 * consumer: invariant 2 (one live lease, growing fencing seq), invariant 3 (a stale token never
 * counts), invariant 5 (stable idempotency key, also across a bucket restart), invariant 7
 * (duplicate deliveries acked and dropped), and the failure rows "worker crashes mid-handler
 * (lease expires)", "zombie finishes after its lease expired", "queue delivers a message twice"
 * and "process restart" (a lease granted before a bucket restart is stale after it).
 *
 * Leases live in the bucket's memory (token, seq = epoch * 2^32 + n, deadline); the alarm expires
 * them. Time: one file-wide virtual clock, HEAD_START_MS ahead of the real one, moved only by
 * tests (a lease expires because the clock travels past its deadline, never by editing a row or
 * sleeping). Every alarm a bucket arms lies ahead of the real clock, so none fires on its own:
 * tests run them (runAlarm). The fire queue is captured for the whole file, so the consumer runs
 * only when a test calls fire(). Storage is shared by the file: every test uses its own jobs.
 */
import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { ClaimResult, CompletionReport, CompletionResult, FireMessage } from "../../src/bucket/protocol";
import {
  alarmOf,
  api,
  CONFIG,
  captureFiresForFile,
  counters,
  dispatchOf,
  type Execution,
  fileClock,
  fire,
  jobRow,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const HEAD_START_MS = 10 * 60_000;
const LEASE_MS = CONFIG.LEASE_MS;
const EPOCH_UNIT = 2 ** 32;
const WEBHOOK_SECRET = env.WEBHOOK_SECRET!; // vitest.config.ts

const clock = fileClock(HEAD_START_MS);
const sent = captureFiresForFile();

const OK_200 = { kind: "succeeded", httpStatus: 200, excerpt: "ok" } as const;
const FAILED_503 = { kind: "failed", failure: "retryable", httpStatus: 503, error: "HTTP 503" } as const;

type Lease = Extract<ClaimResult, { ok: true }>;

const dispatch = dispatchOf(clock, sent);

async function claim(e: Execution, message: FireMessage): Promise<Lease> {
  const [lease] = await e.stub.claim([{ executionId: message.executionId, dueAt: message.dueAt }]);
  if (!lease?.ok) throw new Error(`claim refused: ${JSON.stringify(lease)}`);
  return lease;
}

/** Runs the consumer on `messages` and returns its result and the leases it was granted (the claim RPC observed, unchanged). */
async function fireObserved(messages: FireMessage[]) {
  const spy = vi.spyOn(Bucket.prototype, "claim");
  try {
    const result = await fire(messages);
    const claims = (await Promise.all(spy.mock.results.map((r) => r.value as Promise<ClaimResult[]>))).flat();
    return { result, leases: claims.filter((c): c is Lease => c.ok) };
  } finally {
    spy.mockRestore();
  }
}

/** GET /v1/jobs/:id/executions: a one-off job's execution as the user sees it (live while held, then D1). */
async function shown(jobId: string) {
  const res = await api(`/v1/jobs/${jobId}/executions`);
  expect(res.status).toBe(200);
  const body = (await res.json()) as {
    executions: {
      id: string;
      status: string;
      attempts: { attempt: number; outcome: string; httpStatus: number | null }[];
      lastHttpStatus: number | null;
      deadReason: string | null;
    }[];
  };
  return body.executions[0]!;
}

const pathOf = (url: string) => new URL(url).pathname + new URL(url).search;

function delta(before: Record<string, number>, after: Record<string, number>, name: string): number {
  return (after[name] ?? 0) - (before[name] ?? 0);
}

describe("leases", () => {
  it("grants a lease (token, seq, deadline) only to a due execution of the message's due time, one at a time (invariant 2)", async () => {
    const url = `${receiverUrl()}${uniquePath()}`;
    const e = await newExecution({ target: { url }, delay: "60s" });
    const dueAt = (await e.view())!.dueAt;
    expect(await e.stub.claim([{ executionId: e.exe.id, dueAt }])).toEqual([{ ok: false, executionId: e.exe.id, code: "not_due" }]);
    const unknown = "exe_0000000000aaaaaaaaaaaaaaaa";
    expect(await e.stub.claim([{ executionId: unknown, dueAt }])).toEqual([{ ok: false, executionId: unknown, code: "unknown" }]);
    expect((await e.view())?.status).toBe("scheduled");

    const message = await dispatch(e);
    expect(message.dueAt).toBe(dueAt);
    // a message naming another due time (a dispatch of an earlier attempt) is a duplicate
    expect(await e.stub.claim([{ executionId: e.exe.id, dueAt: dueAt - 1_000 }])).toEqual([
      { ok: false, executionId: e.exe.id, code: "duplicate" },
    ]);
    expect((await e.view())?.status).toBe("dispatched");

    const lease = await claim(e, message);
    expect(lease.token).toMatch(/^[0-9a-f-]{36}$/);
    expect(Math.floor(lease.seq / EPOCH_UNIT)).toBeGreaterThanOrEqual(1); // the bucket's epoch
    expect(lease.seq % EPOCH_UNIT).toBeGreaterThanOrEqual(1);
    expect(lease).toMatchObject({ executionId: e.exe.id, jobId: e.job.id, attempt: 1, dueAt, leaseDeadlineAt: clock.at + LEASE_MS });
    expect(lease.target).toMatchObject({ url });
    expect((await e.view())?.status).toBe("running");

    // at most one live lease: a second claim while the first is live is refused, the lease stands
    expect(await e.stub.claim([{ executionId: e.exe.id, dueAt }])).toEqual([{ ok: false, executionId: e.exe.id, code: "duplicate" }]);
    const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
    expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "succeeded" });
  });

  it("gives every new lease a greater fencing seq and a new token (invariant 2)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath()}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    const seqs: number[] = [];
    const tokens = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const lease = await claim(e, await dispatch(e));
      expect(lease.attempt).toBe(i + 1);
      seqs.push(lease.seq);
      tokens.add(lease.token);
      if (i === 1) {
        // this attempt ends by lease expiry instead of a report: the next lease still grows
        clock.travelTo(lease.leaseDeadlineAt);
        await runAlarm(e.stub);
      } else {
        const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: FAILED_503 }]);
        expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "scheduled" });
      }
      expect((await e.view())?.status).toBe("scheduled");
    }
    expect(seqs[1]).toBeGreaterThan(seqs[0]!);
    expect(seqs[2]).toBeGreaterThan(seqs[1]!);
    expect(tokens.size).toBe(3);
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });

  it("retries an attempt whose lease expired: failed attempt 'lease_expired', backoff, counted; the retry delivers (failure row: worker crashes mid-handler)", async () => {
    const url = `${receiverUrl()}${uniquePath()}`;
    const e = await newExecution({ target: { url }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } });
    const lease = await claim(e, await dispatch(e)); // the worker takes it, then dies: nobody heartbeats
    const before = await counters();

    // one moment before the deadline the lease still stands
    clock.travelTo(lease.leaseDeadlineAt - 1);
    await runAlarm(e.stub);
    expect((await e.view())?.status).toBe("running");

    clock.travelTo(lease.leaseDeadlineAt);
    await runAlarm(e.stub);
    const view = (await e.view())!;
    expect(view).toMatchObject({ status: "scheduled", attempts: 1, dueAt: lease.leaseDeadlineAt + 1000 });
    expect(view.attemptLog).toHaveLength(1);
    expect(view.attemptLog[0]).toMatchObject({ attempt: 1, outcome: "lease_expired", finishedAt: lease.leaseDeadlineAt });
    const after = await counters();
    expect(delta(before, after, "lease_expired_total")).toBe(1);
    expect(delta(before, after, "failed_attempts_total")).toBe(1);
    expect(delta(before, after, "retries_total")).toBe(1);

    // the retry goes through the real consumer and succeeds; D1 gets the whole story once
    const { result } = await fireObserved([await dispatch(e)]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(await received(pathOf(url))).toHaveLength(1);
    await clock.flush(e.stub);
    const row = (await jobRow(e.job.id))!;
    expect(row).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2, last_http_status: 200 });
    expect((JSON.parse(row.attempt_log!) as { attempt: number; outcome: string }[]).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "lease_expired"],
      [2, "succeeded"],
    ]);
  });

  it("rejects a zombie completion and heartbeat after lease expiry; the newer attempt's result stands (invariant 3, failure row: zombie)", async () => {
    const url = `${receiverUrl()}${uniquePath()}`;
    const e = await newExecution({ target: { url }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } });
    const zombie = await claim(e, await dispatch(e));
    const start = await counters();

    // the first worker stalls past its deadline; the alarm expires the lease and backs off
    clock.travelTo(zombie.leaseDeadlineAt);
    await runAlarm(e.stub);
    expect((await e.view())?.status).toBe("scheduled");
    const expired = await counters();
    expect(delta(start, expired, "lease_expired_total")).toBe(1);

    // the retry is dispatched and taken by a second worker (the real consumer)
    const { result, leases } = await fireObserved([await dispatch(e)]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(leases).toHaveLength(1);
    expect(leases[0]).toMatchObject({ attempt: 2 });
    expect(leases[0]!.seq).toBeGreaterThan(zombie.seq);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 2, lastHttpStatus: 200 });

    // now the zombie reports, and heartbeats: both rejected and counted, nothing changes
    const [late] = await e.stub.complete([
      {
        executionId: e.exe.id,
        token: zombie.token,
        outcome: { kind: "failed", failure: "permanent", httpStatus: 410, error: "HTTP 410: zombie" },
      },
    ]);
    expect(late).toEqual<CompletionResult>({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    const [beat] = await e.stub.heartbeat([{ executionId: e.exe.id, token: zombie.token }]);
    expect(beat).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    expect(delta(expired, await counters(), "stale_lease_rejects_total")).toBe(2);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 2, lastHttpStatus: 200 });

    // once the outcome is in D1 the zombie is still refused, and D1 shows the newer attempt
    await clock.flush(e.stub);
    const [later] = await e.stub.complete([{ executionId: e.exe.id, token: zombie.token, outcome: OK_200 }]);
    expect(later).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    expect(await jobRow(e.job.id)).toMatchObject({
      status: "completed",
      run_status: "succeeded",
      attempts: 2,
      last_http_status: 200,
      last_error: null,
      dead_reason: null,
    });
    const view = await shown(e.job.id);
    expect(view.status).toBe("succeeded");
    expect(view.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "lease_expired"],
      [2, "succeeded"],
    ]);
    expect(await received(pathOf(url))).toHaveLength(1);
  });

  it("keeps a heartbeating attempt alive past the base lease and rejects a wrong token (invariant 3)", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    const lease = await claim(e, await dispatch(e));
    const start = await counters();
    const claimedAt = clock.at;
    expect(lease.leaseDeadlineAt).toBe(claimedAt + LEASE_MS);

    // 9 s into the lease the worker heartbeats: the deadline moves a full lease ahead
    clock.travelTo(claimedAt + 9_000);
    const [beat] = await e.stub.heartbeat([{ executionId: e.exe.id, token: lease.token }]);
    expect(beat).toEqual({ ok: true, executionId: e.exe.id, leaseDeadlineAt: claimedAt + 9_000 + LEASE_MS });

    // 15 s after the claim (past the base lease) the alarm runs: the lease is still live
    clock.travelTo(claimedAt + 15_000);
    await runAlarm(e.stub);
    expect((await e.view())?.status).toBe("running");

    // a wrong token is rejected and counted, for a heartbeat and for a completion
    const [wrongBeat] = await e.stub.heartbeat([{ executionId: e.exe.id, token: "not-the-token" }]);
    expect(wrongBeat).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    const [wrongDone] = await e.stub.complete([{ executionId: e.exe.id, token: "not-the-token", outcome: OK_200 }]);
    expect(wrongDone).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    expect((await e.view())?.status).toBe("running");

    // the live token still completes the long attempt
    const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
    expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "succeeded" });
    const end = await counters();
    expect(delta(start, end, "stale_lease_rejects_total")).toBe(2);
    expect(delta(start, end, "lease_expired_total")).toBe(0);
  });

  it("rejects a lease granted before a bucket restart as stale after it; the execution is delivered again with the same id and key (invariants 3, 5; failure row: process restart)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    const message = await dispatch(e);

    // a worker claims and delivers, but its report never reaches the bucket, which restarts
    const lost: CompletionReport[] = [];
    const complete = vi.spyOn(Bucket.prototype, "complete").mockImplementationOnce(async (reports) => {
      lost.push(...reports); // never applied: the bucket goes before it takes the report
      return [];
    });
    let first: Awaited<ReturnType<typeof fireObserved>>;
    try {
      first = await fireObserved([message]);
    } finally {
      complete.mockRestore();
    }
    expect(first.result.explicitAcks).toEqual(["m0"]); // claimed: an unreported attempt belongs to its lease
    expect(first.leases).toHaveLength(1);
    const before = first.leases[0]!;
    expect(lost).toEqual([expect.objectContaining({ executionId: e.exe.id, token: before.token })]);
    expect(await received(path)).toHaveLength(1);
    expect((await e.view())?.status).toBe("running");

    await evictDurableObject(e.stub); // the instance goes; its storage stays; the next call starts a new epoch
    // counters not yet written (at most COUNTER_WRITE_MS of them) went with the instance: count from here
    const start = await counters();

    // the late report and a heartbeat of the old lease are stale after the restart
    expect(await e.stub.complete(lost)).toEqual([{ ok: false, executionId: e.exe.id, code: "stale_lease" }]);
    expect(await e.stub.heartbeat([{ executionId: e.exe.id, token: before.token }])).toEqual([
      { ok: false, executionId: e.exe.id, code: "stale_lease" },
    ]);
    expect(delta(start, await counters(), "stale_lease_rejects_total")).toBe(2);

    // what was running is scheduled again, the restarted bucket armed its alarm, and it dispatches again
    expect(await e.view()).toMatchObject({ status: "scheduled", dueAt: message.dueAt });
    expect(await alarmOf(e.stub)).not.toBeNull();
    const again = await dispatch(e);
    expect(again).toEqual(message); // the same execution and due time: a duplicate delivery, never a new execution
    const second = await fireObserved([again]);
    expect(second.result.explicitAcks).toEqual(["m0"]);
    expect(second.leases).toHaveLength(1);
    const after = second.leases[0]!;
    expect(after.token).not.toBe(before.token);
    expect(after.seq).toBeGreaterThan(before.seq);
    expect(Math.floor(after.seq / EPOCH_UNIT)).toBeGreaterThan(Math.floor(before.seq / EPOCH_UNIT)); // a new epoch

    // the target got it twice, both times with the same webhook-id and idempotency key (invariant 5)
    const requests = await received(path);
    expect(requests).toHaveLength(2);
    for (const r of requests) {
      expect(r.headers["webhook-id"]).toBe(e.exe.id);
      expect(r.headers["idempotency-key"]).toBe(e.exe.id);
      expect(r.headers["x-scheduler-job-id"]).toBe(e.job.id);
    }
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({
      status: "completed",
      run_status: "succeeded",
      last_http_status: 200,
      dead_reason: null,
    });
    // the pre-restart report arriving now changes nothing
    expect(await e.stub.complete(lost)).toEqual([{ ok: false, executionId: e.exe.id, code: "stale_lease" }]);
    expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
  });
});

describe("duplicate deliveries", () => {
  it("acks and drops a message delivered twice, before and after the outcome reached D1; the target is called once (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    const message = await dispatch(e);
    const start = await counters();

    const first = await fire([message]);
    expect(first.explicitAcks).toEqual(["m0"]);
    expect(first.retryMessages).toEqual([]);
    expect((await e.view())?.status).toBe("succeeded");
    const second = await fire([message]);
    expect(second.explicitAcks).toEqual(["m0"]);
    expect(second.retryMessages).toEqual([]);
    expect((await e.view())?.status).toBe("succeeded");

    // the outcome goes to D1 and the bucket lets the row go; a third copy is still a duplicate
    await clock.flush(e.stub);
    expect(await e.view()).toBeUndefined();
    const third = await fire([message]);
    expect(third.explicitAcks).toEqual(["m0"]);
    expect(third.retryMessages).toEqual([]);

    expect(await received(path)).toHaveLength(1);
    expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
    const end = await counters();
    expect(delta(start, end, "duplicates_suppressed_total")).toBe(2);
    expect(delta(start, end, "succeeded_total")).toBe(1);
  });

  it("acks and drops the second copy of a message in the same batch (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    const message = await dispatch(e);
    const start = await counters();
    const result = await fire([message, message]);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect(await received(path)).toHaveLength(1);
    expect((await e.view())?.status).toBe("succeeded");
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
  });

  it("acks and drops a delivery while another worker holds the live lease (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    const message = await dispatch(e);
    const lease = await claim(e, message);
    const start = await counters();

    const result = await fire([message]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect(await received(path)).toHaveLength(0);
    expect((await e.view())?.status).toBe("running");
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
    // the lease the copy met is untouched: its holder completes
    const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
    expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "succeeded" });
  });

  it("acks and drops a delivery for a terminal (canceled) execution (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, delay: "60s" });
    const dueAt = (await e.view())!.dueAt;
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBe(200);
    expect((await e.view())?.status).toBe("canceled");
    const start = await counters();

    clock.travelTo(Math.max(clock.at, dueAt)); // a copy of its message arrives when it would have been due
    const result = await fire([{ ...e.message, dueAt }]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect((await e.view())?.status).toBe("canceled");
    expect(await received(path)).toHaveLength(0);
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
  });
});

describe("idempotency key on delivery", () => {
  it("sends the same webhook-id and idempotency-key on every attempt, with attempt numbers 1, 2 (invariant 5)", async () => {
    const path = uniquePath("fail/503");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${path}`, body: { hello: "world" } },
      retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 },
    });
    for (let attempt = 1; attempt <= 2; attempt++) {
      expect((await fire([await dispatch(e)])).explicitAcks).toEqual(["m0"]);
      expect(await e.view()).toMatchObject({ status: "scheduled", attempts: attempt, lastHttpStatus: 503 });
    }

    const requests = await received(path);
    expect(requests).toHaveLength(2);
    expect(requests.map((r) => r.headers["x-scheduler-attempt"])).toEqual(["1", "2"]);
    const verifier = new Webhook(WEBHOOK_SECRET);
    for (const r of requests) {
      expect(r.headers["webhook-id"]).toBe(e.exe.id);
      expect(r.headers["idempotency-key"]).toBe(e.exe.id);
      expect(r.headers["x-scheduler-job-id"]).toBe(e.job.id);
      expect(r.body).toBe(JSON.stringify({ hello: "world" }));
      expect(() => verifier.verify(r.body, r.headers)).not.toThrow();
    }
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });
});
