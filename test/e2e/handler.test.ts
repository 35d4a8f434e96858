/**
 * Handler Workers over a service binding, against the real local stack: the stack runs the example
 * handler (examples/handler) beside the scheduler, bound as EXAMPLE_HANDLER and granted to every
 * tenant as "example" (scripts/local-env.mjs writeLocalConfig). A job's target {"worker":
 * "example", "payload": ...} is delivered by RPC (the handler's deliver, packages/handler); the
 * payload tells the example how to answer: {"failTimes": n} fails attempts 1..n, {"permanent":
 * true} fails for good. An attempt of a handler Worker has no HTTP status.
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { percentile, report, settledExecution, stackForFile } from "./harness.js";

const PORT = 18900;

const local = stackForFile({ port: PORT });
const { receiver, sink } = local;

describe("handler Workers over a service binding", () => {
  it("retries a handler that throws, then succeeds on attempt 2; no HTTP status on either attempt", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const target = { worker: "example", payload: { failTimes: 1 } };
    const res = await local.api.createJob({ target, delay: "500ms", retry: { maxAttempts: 3, initialDelayMs: 200, jitter: 0 } });
    expect(res.status).toBe(201);
    expect((res.body as unknown as { target: unknown }).target).toEqual(target);

    const e = await settledExecution(local.api, res.body.id, "succeeded", 2, 20_000);
    const [first, second] = e.attempts;
    expect(first).toMatchObject({ attempt: 1, outcome: "retryable", httpStatus: null });
    // a plain Error thrown in the handler: its message crosses the binding (packages/handler runHandler)
    expect(first!.error).toContain("example handler: failing attempt 1 of 1");
    expect(second).toMatchObject({ attempt: 2, outcome: "succeeded", httpStatus: null });
    expect(e.lastHttpStatus).toBeNull();
    expect(e.deadReason).toBeNull();
    // the backoff as the bucket recorded it: attempt 2 due initialDelayMs after attempt 1 finished
    expect(Date.parse(second!.dueAt) - Date.parse(first!.finishedAt!)).toBe(200);
    report("handler-retry", { attempts: e.attempts.length, lagMs: e.attempts.map((a) => a.lagMs), firstError: first!.error });
  });

  it("a PermanentError ends the execution dead (reason permanent) after one attempt", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const res = await local.api.createJob({
      target: { worker: "example", payload: { permanent: true } },
      delay: "500ms",
      retry: { maxAttempts: 3, initialDelayMs: 200 },
    });
    expect(res.status).toBe(201);
    const e = await settledExecution(local.api, res.body.id, "dead", 1, 20_000);
    expect(e.deadReason).toBe("permanent");
    expect(e.lastHttpStatus).toBeNull();
    expect(e.attempts).toHaveLength(1);
    expect(e.attempts[0]).toMatchObject({ attempt: 1, outcome: "permanent", httpStatus: null });
    expect(e.attempts[0]!.error).toContain("example handler: permanent failure asked for by the payload");
    // no second attempt comes later
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await local.api.executions(res.body.id)).body.executions[0]!.attempts).toHaveLength(1);
  });

  it("refuses a job naming a handler Worker the scheduler does not know (400, field target.worker)", async () => {
    const res = await local.api.createJob({ target: { worker: "nope" } });
    expect(res.status).toBe(400);
    expect((res.body as unknown as { error: { field?: string } }).error.field).toBe("target.worker");
  });

  it("reports the lag of a service-binding delivery beside an HTTP delivery's, due at the same moments", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const COUNT = 5;
    const jobs = await local.api.createJobs([
      ...Array.from({ length: COUNT }, () => ({ target: { worker: "example", payload: null }, delay: "1s" })),
      ...Array.from({ length: COUNT }, () => ({ target: { url: `${receiver.url}/ok` }, delay: "1s" })),
    ]);
    const executions = await Promise.all(jobs.map((job) => settledExecution(local.api, job.id, "succeeded", 1, 20_000)));
    const lag = (from: number) => executions.slice(from, from + COUNT).map((e) => e.attempts[0]!.lagMs);
    const worker = lag(0);
    const http = lag(COUNT);
    expect(executions.slice(0, COUNT).every((e) => e.attempts[0]!.httpStatus === null)).toBe(true);
    expect(executions.slice(COUNT).every((e) => e.attempts[0]!.httpStatus === 200)).toBe(true);
    report("handler-lag", {
      deliveries: COUNT,
      serviceBindingLagMs: { p50: percentile(worker, 50), max: Math.max(...worker) },
      httpLagMs: { p50: percentile(http, 50), max: Math.max(...http) },
    });
  });
});
