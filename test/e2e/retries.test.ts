/**
 * Retries over real HTTP (issue 3): failing, hanging and dead targets on loopback.
 * Proves invariant 5 (the same webhook-id / Idempotency-Key on every attempt), invariant 6
 * (delay = initialDelay * factor^(attempt-1); dead after maxAttempts, kept for redrive) and the
 * failure row "target keeps failing" (dead, visible in GET /v1/dlq, redrivable).
 */
import { describe, expect, it, onTestFailed } from "vitest";
import {
  type AttemptView,
  CLOCK_TOLERANCE_MS,
  type ExecutionView,
  eventually,
  type Received,
  report,
  settledExecution,
  stackForFile,
} from "./harness.js";

const PORT = 18820;
/**
 * Slack on a retry gap, measured between two arrivals at the receiver. The gap is the backoff plus
 * the failed response and its complete RPC (a few ms), the alarm quantum (ALARM_QUANTUM_MS = 50:
 * the alarm is rounded up to it) and one queue hop with its claim RPC (tens of ms locally). 400 ms
 * covers that on a loaded 2-core machine; the backoff itself is checked exactly through the API.
 */
const GAP_TOLERANCE_MS = 400;

const local = stackForFile({
  port: PORT,
  routes: {
    "/flaky": { kind: "failTimes", times: 2, status: 503 },
    "/hang": { kind: "hang", ms: 3_000 },
    "/down": { kind: "always", status: 500 },
  },
});
const { receiver, sink } = local;

function expectSameExecution(requests: Received[]): void {
  const id = requests[0]!.webhookId;
  expect(id).toMatch(/^exe_/);
  for (const r of requests) {
    expect(r.signatureError).toBeNull();
    expect(r.webhookId).toBe(id);
    expect(r.headers["idempotency-key"]).toBe(id);
  }
}

describe("retries over the real local stack", () => {
  it("retries a 503 twice with the same webhook-id, attempts 1..3, gaps ~1 s and ~2 s (invariants 5 and 6)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const res = await local.api.createJob({
      target: { url: `${receiver.url}/flaky`, body: { case: "flaky" } },
      delay: "500ms",
      retry: { initialDelayMs: 1_000, factor: 2, jitter: 0 },
    });
    expect(res.status).toBe(201);
    const e = await settledExecution(local.api, res.body.id, "succeeded", 3, 20_000);

    const requests = receiver.to("/flaky");
    expect(requests.map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(requests.map((r) => r.status)).toEqual([503, 503, 200]);
    expectSameExecution(requests);
    expect(requests[0]!.webhookId).toBe(e.id);

    // the backoff exactly, as the bucket recorded it: next due = previous finish + 1000 * 2^(n-1)
    const at = (s: string) => Date.parse(s);
    expect(e.attempts.map((a: AttemptView) => a.outcome)).toEqual(["retryable", "retryable", "succeeded"]);
    expect(e.attempts.map((a: AttemptView) => a.httpStatus)).toEqual([503, 503, 200]);
    expect(at(e.attempts[1]!.dueAt) - at(e.attempts[0]!.finishedAt!)).toBe(1_000);
    expect(at(e.attempts[2]!.dueAt) - at(e.attempts[1]!.finishedAt!)).toBe(2_000);

    // and as the target saw it
    const gaps = [requests[1]!.at - requests[0]!.at, requests[2]!.at - requests[1]!.at];
    report("retries-backoff", {
      gapsMs: gaps,
      expectedMs: [1_000, 2_000],
      toleranceMs: GAP_TOLERANCE_MS,
      startLagMs: e.attempts.map((a: AttemptView) => a.lagMs),
    });
    expect(gaps[0]).toBeGreaterThanOrEqual(1_000 - CLOCK_TOLERANCE_MS);
    expect(gaps[0]).toBeLessThanOrEqual(1_000 + GAP_TOLERANCE_MS);
    expect(gaps[1]).toBeGreaterThanOrEqual(2_000 - CLOCK_TOLERANCE_MS);
    expect(gaps[1]).toBeLessThanOrEqual(2_000 + GAP_TOLERANCE_MS);
  });

  it("retries a target that hangs past timeoutMs; the attempt is recorded as a retryable timeout (invariant 6)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const res = await local.api.createJob({
      target: { url: `${receiver.url}/hang`, body: { case: "hang" } },
      delay: "500ms",
      timeoutMs: 1_000,
      retry: { maxAttempts: 2, initialDelayMs: 500, factor: 2, jitter: 0 },
    });
    expect(res.status).toBe(201);
    const e = await settledExecution(local.api, res.body.id, "dead", 2, 20_000);

    const requests = receiver.to("/hang");
    expect(requests.length).toBeGreaterThanOrEqual(2);
    expect(requests.map((r) => r.attempt)).toEqual([1, 2]);
    expectSameExecution(requests);
    const first = e.attempts[0]!;
    expect(first.outcome).toBe("retryable");
    expect(first.httpStatus).toBeNull();
    expect(first.error).toMatch(/timeout/i);
    const heldMs = Date.parse(first.finishedAt!) - Date.parse(first.startedAt);
    report("retries-timeout", {
      attempts: e.attempts.length,
      firstOutcome: first.outcome,
      firstError: first.error,
      heldMs,
      deadReason: e.deadReason,
    });
    // the scheduler gave up at the timeout, not when the target finally answered (3 s)
    expect(heldMs).toBeGreaterThanOrEqual(1_000 - CLOCK_TOLERANCE_MS);
    expect(heldMs).toBeLessThan(2_500);
    expect(e.deadReason).toBe("attempts_exhausted");
  });

  it("ends a target that always fails dead after maxAttempts, lists it in the DLQ, and redrives it with the same webhook-id (failure row: target keeps failing)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const res = await local.api.createJob({
      target: { url: `${receiver.url}/down`, body: { case: "down" } },
      delay: "500ms",
      retry: { maxAttempts: 3, initialDelayMs: 300, factor: 2, jitter: 0 },
    });
    expect(res.status).toBe(201);
    const e = await settledExecution(local.api, res.body.id, "dead", 3, 20_000);
    expect(e.deadReason).toBe("attempts_exhausted");
    expect(e.lastHttpStatus).toBe(500);
    expect(e.attempts.map((a: AttemptView) => a.outcome)).toEqual(["retryable", "retryable", "retryable"]);
    expect(receiver.to("/down").map((r) => r.attempt)).toEqual([1, 2, 3]);

    const dead = await eventually(
      "the execution is in the DLQ",
      async () => {
        const list = (await local.api.request<{ executions: ExecutionView[] }>("GET", "/v1/dlq")).body.executions;
        return list.find((x) => x.id === e.id);
      },
      10_000,
      200,
    );
    expect(dead.status).toBe("dead");
    expect(dead.deadReason).toBe("attempts_exhausted");

    const redrivenAt = Date.now();
    const redrive = await local.api.request("POST", `/v1/executions/${e.id}/redrive`);
    expect(redrive.status).toBe(202);
    const fourth = await eventually("the redriven execution reaches the target", () => receiver.to("/down")[3], 10_000);
    expect(fourth.at).toBeGreaterThanOrEqual(redrivenAt - CLOCK_TOLERANCE_MS);
    expect(fourth.attempt).toBe(4);

    // a fresh budget of maxAttempts: attempts 4, 5, 6, then dead again and back in the DLQ
    const again = await settledExecution(local.api, res.body.id, "dead", 6, 20_000);
    const requests = receiver.to("/down");
    expect(requests.map((r) => r.attempt)).toEqual([1, 2, 3, 4, 5, 6]);
    expectSameExecution(requests);
    expect(again.deadReason).toBe("attempts_exhausted");
    report("retries-dlq-redrive", {
      attemptsBeforeRedrive: 3,
      redriveToFourthMs: fourth.at - redrivenAt,
      attemptsAfterRedrive: again.attempts.length,
      webhookIds: new Set(requests.map((r) => r.webhookId)).size,
    });
  });
});
