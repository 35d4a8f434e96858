/**
 * Leases and fencing, through the bucket's claim/heartbeat/complete RPCs and the real fire
 * consumer: invariant 2 (one live lease, growing seq), invariant 3 (a stale token never counts),
 * invariant 5 (stable idempotency key), invariant 7 (duplicate deliveries acked and dropped), and
 * the failure rows "worker crashes mid-handler", "zombie worker" and "queue delivers twice".
 *
 * The fire queue binding is replaced for the whole file (the bucket's sends are captured, never
 * delivered): the queue consumer runs only when a test calls fire(), so nothing is consumed in
 * the background. Time is moved by backdating columns or withClockAhead(), never by sleeping.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { CompletionResult } from "../../src/bucket/protocol";
import type { FireMessage } from "../../src/env";
import {
  api,
  bucketAttempts,
  bucketRow,
  bucketSql,
  bucketStub,
  counters,
  createJob,
  executionOf,
  fire,
  fireMessage,
  received,
  receiverUrl,
  uniquePath,
  withClockAhead,
  captureFiresForFile,
  newExecution,
  runAlarm,
  type Execution,
} from "./helpers";

const LEASE_MS = 10_000; // wrangler.toml LEASE_MS
const WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"; // vitest.config.ts

const sent = captureFiresForFile();



/** Makes a scheduled execution due and lets the alarm dispatch it. */
async function dispatchNow(e: Awaited<ReturnType<typeof newExecution>>): Promise<void> {
  await e.set("due_at = ?", Date.now() - 1);
  await runAlarm(e.stub);
  expect((await e.row()).status).toBe("dispatched");
}

function delta(before: Record<string, number>, after: Record<string, number>, name: string): number {
  return (after[name] ?? 0) - (before[name] ?? 0);
}

const OK_200 = { kind: "succeeded", httpStatus: 200, excerpt: "ok" } as const;
const FAILED_503 = { kind: "failed", failure: "retryable", httpStatus: 503, error: "HTTP 503" } as const;

describe("leases", () => {
  it("grants a lease (token, seq, deadline) only to a dispatched execution (invariant 2)", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "60s" });
    expect(await e.stub.claim([e.exe.id])).toEqual([{ ok: false, executionId: e.exe.id, code: "not_due" }]);
    const unknown = "exe_0000000000aaaaaaaaaaaaaaaa";
    expect(await e.stub.claim([unknown])).toEqual([{ ok: false, executionId: unknown, code: "unknown" }]);

    await dispatchNow(e);
    const before = Date.now();
    const [lease] = await e.stub.claim([e.exe.id]);
    if (!lease?.ok) throw new Error(`claim refused: ${JSON.stringify(lease)}`);
    expect(lease.token).toMatch(/^[0-9a-f-]{36}$/);
    expect(lease.seq).toBe(1);
    expect(lease.attempt).toBe(1);
    expect(lease.leaseDeadlineAt).toBeGreaterThanOrEqual(before + LEASE_MS);
    expect(lease.target.url).toBe(e.job.target.url);
    const row = await e.row();
    expect(row).toMatchObject({ status: "running", lease_token: lease.token, lease_seq: 1, lease_deadline_at: lease.leaseDeadlineAt });

    // at most one live lease: a second claim while the first is live is refused
    expect(await e.stub.claim([e.exe.id])).toEqual([{ ok: false, executionId: e.exe.id, code: "duplicate" }]);
    expect((await e.row()).lease_token).toBe(lease.token);
    await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
  });

  it("gives every new lease a greater fencing seq (invariant 2)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath()}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    const seqs: number[] = [];
    const tokens = new Set<string>();
    for (let i = 0; i < 3; i++) {
      await dispatchNow(e);
      const [lease] = await e.stub.claim([e.exe.id]);
      if (!lease?.ok) throw new Error(`claim ${i} refused: ${JSON.stringify(lease)}`);
      seqs.push(lease.seq);
      tokens.add(lease.token);
      if (i === 1) {
        // this attempt ends by lease expiry instead of a report: the next lease still grows
        await e.set("lease_deadline_at = ?", Date.now() - 1);
        await runAlarm(e.stub);
      } else {
        const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: FAILED_503 }]);
        expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "scheduled" });
      }
      expect((await e.row()).status).toBe("scheduled");
    }
    expect(seqs).toEqual([1, 2, 3]);
    expect(tokens.size).toBe(3);
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });

  it("retries an attempt whose lease expired: failed attempt 'lease_expired', backoff, counted (failure row: worker crashes mid-handler)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath()}` },
      retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 },
    });
    await dispatchNow(e);
    const [lease] = await e.stub.claim([e.exe.id]);
    if (!lease?.ok) throw new Error("claim refused");
    const before = await counters();

    await e.set("lease_deadline_at = ?", Date.now() - 1); // the worker died: nobody heartbeats
    await runAlarm(e.stub);

    const row = await e.row();
    expect(row).toMatchObject({ status: "scheduled", lease_token: null, lease_deadline_at: null, attempt: 1 });
    const [attempt] = await bucketAttempts(e.stub, e.exe.id);
    expect(attempt).toMatchObject({ attempt: 1, outcome: "lease_expired" });
    expect(row.due_at - (attempt!.finished_at as number)).toBe(1000);
    const after = await counters();
    expect(delta(before, after, "lease_expired_total")).toBe(1);
    expect(delta(before, after, "failed_attempts_total")).toBe(1);
    expect(delta(before, after, "retries_total")).toBe(1);
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });

  it("rejects a zombie completion after lease expiry; the newer attempt's result stands (invariant 3)", async () => {
    const url = `${receiverUrl()}${uniquePath()}`;
    const e = await newExecution({ target: { url }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } });
    await dispatchNow(e);
    const [zombie] = await e.stub.claim([e.exe.id]);
    if (!zombie?.ok) throw new Error("first claim refused");
    const start = await counters();

    // the first worker stalls past its deadline; the alarm expires the lease and backs off
    await e.set("lease_deadline_at = ?", Date.now() - 1);
    await runAlarm(e.stub);
    expect((await e.row()).status).toBe("scheduled");
    const expired = await counters();
    expect(delta(start, expired, "lease_expired_total")).toBe(1);

    // the retry is dispatched and taken by a second worker (the real consumer)
    await dispatchNow(e);
    const claim = vi.spyOn(Bucket.prototype, "claim"); // observes the consumer's claim, unchanged
    let result: Awaited<ReturnType<typeof fire>>;
    let second: Awaited<ReturnType<Bucket["claim"]>>;
    try {
      result = await fire([e.message]);
      second = await claim.mock.results[0]!.value;
    } finally {
      claim.mockRestore();
    }
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(second[0]).toMatchObject({ ok: true, attempt: 2 });
    const secondSeq = second[0]!.ok ? second[0]!.seq : -1;
    expect(secondSeq).toBeGreaterThan(zombie.seq);
    expect(await e.row()).toMatchObject({ status: "succeeded", attempt: 2, lease_seq: secondSeq, last_http_status: 200 });

    // now the zombie reports, and a heartbeat too: both rejected and counted
    const [late] = await e.stub.complete([
      { executionId: e.exe.id, token: zombie.token, outcome: { kind: "failed", failure: "permanent", httpStatus: 410, error: "HTTP 410: zombie" } },
    ]);
    expect(late).toEqual<CompletionResult>({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    const [beat] = await e.stub.heartbeat([{ executionId: e.exe.id, token: zombie.token }]);
    expect(beat).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
    const end = await counters();
    expect(delta(expired, end, "stale_lease_rejects_total")).toBe(2);

    expect(await e.row()).toMatchObject({ status: "succeeded", attempt: 2, last_http_status: 200, last_error: null, dead_reason: null });
    const attempts = await bucketAttempts(e.stub, e.exe.id);
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "lease_expired"],
      [2, "succeeded"],
    ]);
    expect((await received(new URL(url).pathname + new URL(url).search)).length).toBe(1);
  });

  it("keeps a heartbeating attempt alive past the base lease and rejects a wrong token (invariant 3)", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    await dispatchNow(e);
    const [lease] = await e.stub.claim([e.exe.id]);
    if (!lease?.ok) throw new Error("claim refused");
    const start = await counters();
    const claimedAt = lease.leaseDeadlineAt - LEASE_MS;

    // 9 s into the lease the worker heartbeats: the deadline moves a full lease ahead
    const beatAt = claimedAt + 9_000;
    const [beat] = await withClockAhead(beatAt - Date.now(), () => e.stub.heartbeat([{ executionId: e.exe.id, token: lease.token }]));
    if (!beat?.ok) throw new Error(`heartbeat refused: ${JSON.stringify(beat)}`);
    expect(beat.leaseDeadlineAt).toBeGreaterThanOrEqual(beatAt + LEASE_MS);
    expect((await e.row()).lease_deadline_at).toBe(beat.leaseDeadlineAt);

    // 15 s after the claim (past the base lease) the alarm runs: the lease is still live
    await withClockAhead(claimedAt + 15_000 - Date.now(), async () => {
      await runAlarm(e.stub);
      expect(await e.row()).toMatchObject({ status: "running", lease_token: lease.token, lease_seq: lease.seq });

      // a wrong token is rejected and counted, for a heartbeat and for a completion
      const [wrongBeat] = await e.stub.heartbeat([{ executionId: e.exe.id, token: "not-the-token" }]);
      expect(wrongBeat).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
      const [wrongDone] = await e.stub.complete([{ executionId: e.exe.id, token: "not-the-token", outcome: OK_200 }]);
      expect(wrongDone).toEqual({ ok: false, executionId: e.exe.id, code: "stale_lease" });
      expect(await e.row()).toMatchObject({ status: "running", lease_token: lease.token, lease_deadline_at: beat.leaseDeadlineAt });

      // the live token still completes the long attempt
      const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
      expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "succeeded" });
    });
    const end = await counters();
    expect(delta(start, end, "stale_lease_rejects_total")).toBe(2);
    expect(delta(start, end, "lease_expired_total")).toBe(0);
  });
});

describe("duplicate deliveries", () => {
  it("acks and drops a message delivered twice; the target is called once (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    await dispatchNow(e);
    const start = await counters();

    const first = await fire([e.message]);
    expect(first.explicitAcks).toEqual(["m0"]);
    expect(first.retryMessages).toEqual([]);
    expect((await e.row()).status).toBe("succeeded");
    const second = await fire([e.message]);
    expect(second.explicitAcks).toEqual(["m0"]);
    expect(second.retryMessages).toEqual([]);

    expect((await e.row()).status).toBe("succeeded");
    expect(await received(path)).toHaveLength(1);
    const end = await counters();
    expect(delta(start, end, "duplicates_suppressed_total")).toBe(1);
    expect(delta(start, end, "succeeded_total")).toBe(1);
  });

  it("acks and drops the second copy of a message in the same batch (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    await dispatchNow(e);
    const start = await counters();
    const result = await fire([e.message, e.message]);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect(await received(path)).toHaveLength(1);
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
  });

  it("acks and drops a delivery while another worker holds the live lease (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    await dispatchNow(e);
    const [lease] = await e.stub.claim([e.exe.id]);
    if (!lease?.ok) throw new Error("claim refused");
    const start = await counters();

    const result = await fire([e.message]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(await received(path)).toHaveLength(0);
    expect(await e.row()).toMatchObject({ status: "running", lease_token: lease.token });
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
    await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
  });

  it("acks and drops a delivery for a terminal (canceled) execution (invariant 7)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, delay: "60s" });
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBe(200);
    expect((await e.row()).status).toBe("canceled");
    const start = await counters();

    const result = await fire([e.message]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect((await e.row()).status).toBe("canceled");
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
      await dispatchNow(e);
      expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
      expect(await e.row()).toMatchObject({ status: "scheduled", attempt, last_http_status: 503 });
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
