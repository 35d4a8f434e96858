/**
 * Convergence ("one writer per fact", item 1): every job change (create, cancel, pause, resume,
 * PATCH, redrive) is durable when answered and converges without the client's help. When one
 * RPC, D1 write or alarm fails, the change is still applied: at once, or by the sync pass
 * (runScan). The bucket never delivers, retries or re-dispatches an execution of a job that is
 * canceled or paused at the version it holds, and no projection goes backwards.
 *
 * Failures are injected in this isolate, which the Worker and the buckets share: env.BUCKET's
 * getByName returns a stub whose method rejects, a D1 shard's batch throws or waits, globalThis.fetch
 * runs a change while an attempt is at the target, and a D1 read of the sync pass waits while a
 * PATCH applies. The fire queue is captured for the whole file; tests consume it with fire().
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import type { FireMessage, JobDefinition } from "../../src/bucket/protocol";
import { oneOffExecutionId } from "../../src/core/id";
import { dbOf, jsonChunks } from "../../src/db/kit";
import { type FinishedExecution, writeOutcomes } from "../../src/db/write-outcomes";
import {
  api,
  bucketSql,
  CONFIG,
  captureFiresForFile,
  counters,
  createJob,
  type D1Job,
  d1Of,
  fileClock,
  fire,
  interceptD1Batch,
  jobRow,
  live,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  runScan,
  sendAndConsume,
  spyOnD1,
  startFire,
  uniquePath,
} from "./helpers";

const LOOKAHEAD_MS = CONFIG.LOOKAHEAD_MS;
const LEASE_MS = CONFIG.LEASE_MS;
/** D1 binds a string (or a row) of at most 2,000,000 bytes. */
const D1_MAX_STRING_BYTES = 2_000_000;
const EVERY_10_S = "*/10 * * * * *";

const clock = fileClock(0);
const sent = captureFiresForFile();
const encoder = new TextEncoder();

/** The real namespace's getByName, taken before any test replaces it (tests drive the buckets directly). */
const realGetByName = env.BUCKET.getByName.bind(env.BUCKET);
const bucketStub = (bucket: number) => realGetByName(`bucket-${bucket}`);
type Stub = ReturnType<typeof bucketStub>;

// ---------------------------------------------------------------------------------------------
// local helpers

const url = (path: string) => `${receiverUrl()}${path}`;
/** An execution id ends with its job's random part (one-off and occurrence ids alike). */
const ofJob = (executionId: string, jobId: string) => executionId.slice(-16) === jobId.slice(-16);

async function stubOf(jobId: string): Promise<Stub> {
  return bucketStub((await jobRow(jobId))!.bucket);
}

async function row(jobId: string): Promise<D1Job> {
  return (await jobRow(jobId))!;
}

/** The fire messages sent for a job's executions (by anyone: a test's alarm or a background one), taken out of the capture. */
function take(jobId: string): FireMessage[] {
  const mine = sent.filter((m) => ofJob(m.executionId, jobId));
  for (let i = sent.length - 1; i >= 0; i--) if (ofJob(sent[i]!.executionId, jobId)) sent.splice(i, 1);
  return mine;
}

/** Runs the job's bucket alarm now and returns what was sent for the job. */
async function tick(jobId: string): Promise<FireMessage[]> {
  await runAlarm(await stubOf(jobId));
  return take(jobId);
}

/** Runs the alarm, expects exactly one fire message for the job and has the consumer take it. */
async function deliverOne(jobId: string): Promise<FireMessage> {
  const messages = await tick(jobId);
  expect(messages).toHaveLength(1);
  const result = await fire(messages);
  expect(result.explicitAcks).toEqual(["m0"]);
  return messages[0]!;
}

/** Writes the job's bucket outcomes to D1 (advances the flush delay). */
async function flush(jobId: string): Promise<void> {
  await clock.flush(await stubOf(jobId));
}

/**
 * Runs a bucket's alarm with `meanwhile` run once, just before the alarm's first D1 batch is
 * written (the write then goes ahead): an interleaving inside the write window. Fails unless the
 * alarm wrote a batch.
 */
async function alarmWithBeforeItsWrite(stub: Stub, meanwhile: () => Promise<void>): Promise<void> {
  let armed = true;
  const written: Promise<unknown>[] = [];
  const spy = interceptD1Batch(async (statements, run) => {
    if (!armed) return run(statements);
    armed = false;
    await meanwhile();
    const write = run(statements);
    written.push(write);
    return write;
  });
  try {
    await runAlarm(stub);
    await Promise.all(written);
  } finally {
    spy.mockRestore();
  }
  expect(armed, "the alarm wrote no D1 batch").toBe(false);
}

/** The consumer on an explicit batch: what it acked and what it retried, with the delay asked for. */
async function fireRecordingDelays(
  bodies: unknown[],
  attempts: number,
): Promise<{ acked: string[]; retried: { msgId: string; delaySeconds: number | undefined }[] }> {
  const run = await startFire(bodies, { attempts });
  const result = await run.done;
  return { acked: result.explicitAcks, retried: run.retried };
}

/** Seconds-aligned instant at least `ms` from now (runAt is given as RFC 3339). */
function secondsFromNow(ms: number): number {
  return Math.ceil((clock.at + ms) / 1000) * 1000;
}

const iso = (at: number) => new Date(at).toISOString();

/**
 * From now until the test ends, the stubs env.BUCKET hands out (to the API, the consumer, the
 * scanner: they share this isolate's env) reject `method`; every other method reaches the bucket.
 */
function bucketFails(method: keyof Bucket): { readonly calls: number; restore(): void } {
  const namespace = env.BUCKET as unknown as { getByName(name: string): Record<string, unknown> };
  const original = namespace.getByName.bind(namespace);
  let calls = 0;
  const spy = vi.spyOn(namespace, "getByName").mockImplementation((name: string) => {
    const real = original(name) as Record<string | symbol, (...args: unknown[]) => unknown>;
    return new Proxy({} as Record<string, unknown>, {
      get(_target, prop) {
        if (prop === "then") return undefined;
        if (prop === method) {
          return async () => {
            calls += 1;
            throw new Error(`injected: bucket ${String(method)} failed`);
          };
        }
        return (...args: unknown[]) => real[prop]!(...args);
      },
    });
  });
  onTestFinished(() => spy.mockRestore());
  return {
    get calls() {
      return calls;
    },
    restore: () => spy.mockRestore(),
  };
}

/**
 * The first time the consumer calls a target whose URL contains `path`, runs `during` (a change
 * through the API) while that attempt is at the target, then lets the request go on. Returns what
 * `during` returned once it ran.
 */
function whileAtTarget<T>(path: string, during: () => Promise<T>, respond?: () => Response): { result: () => T } {
  const realFetch = globalThis.fetch;
  let ran = false;
  let value: T | undefined;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const target = input instanceof Request ? input.url : String(input);
    if (target.includes(path)) {
      if (!ran) {
        ran = true;
        value = await during();
      }
      if (respond) return respond();
    }
    return realFetch(input, init);
  });
  onTestFinished(() => spy.mockRestore());
  return {
    result: () => {
      if (!ran) throw new Error(`no attempt reached ${path}`);
      return value as T;
    },
  };
}

/**
 * The first D1 read whose SQL matches `pattern` and whose rows include `mustInclude` (any reader:
 * the buckets' sync pass runs in this isolate) returns its rows only after `after` ran: the
 * reader then acts on what it read before.
 */
function afterRead<T>(pattern: RegExp, mustInclude: string, after: () => Promise<T>): { result: () => T } {
  const proto = Object.getPrototypeOf(env.DB.prepare("SELECT 1")) as Record<string, unknown>;
  const originals = { all: proto.all as (...a: unknown[]) => Promise<unknown>, raw: proto.raw as (...a: unknown[]) => Promise<unknown> };
  let ran = false;
  let value: T | undefined;
  for (const method of ["all", "raw"] as const) {
    proto[method] = async function (this: { statement?: string }, ...args: unknown[]) {
      const out = await originals[method].apply(this, args);
      if (!ran && pattern.test(this.statement ?? "") && JSON.stringify(out).includes(mustInclude)) {
        ran = true;
        value = await after();
      }
      return out;
    };
  }
  const restore = (): void => {
    Object.assign(proto, originals);
  };
  onTestFinished(restore);
  return {
    result: () => {
      if (!ran) throw new Error(`no D1 read matched ${pattern} with ${mustInclude}`);
      return value as T;
    },
  };
}

/** Clean-up: the job's finished outcomes go to D1 first, then the job is canceled (and must be, at once). */
async function cancelQuietly(jobId: string): Promise<void> {
  await flush(jobId);
  const res = await api(`/v1/jobs/${jobId}`, { method: "DELETE" });
  if (res.status !== 200) throw new Error(`clean-up: cancel of ${jobId} answered ${res.status}`);
}

async function executionView(id: string): Promise<{ status: string; attempts: number }> {
  return (await (await api(`/v1/executions/${id}`)).json()) as { status: string; attempts: number };
}

async function jobView(id: string): Promise<{ status: string; nextRunAt: string | null }> {
  return (await (await api(`/v1/jobs/${id}`)).json()) as { status: string; nextRunAt: string | null };
}

// ---------------------------------------------------------------------------------------------

describe("1. an attempt of a canceled or paused job is never retried or delivered again", () => {
  it("a one-off job canceled while its attempt runs: the attempt fails retryably, and it is not retried", async () => {
    const path = uniquePath("fail/500");
    const { job, exe, stub } = await newExecution({
      target: { url: url(path), method: "POST" },
      retry: { initialDelayMs: 1000, jitter: 0 },
    });
    const retriesBefore = (await counters()).retries_total!;
    const cancel = whileAtTarget(path, () => api(`/v1/jobs/${job.id}`, { method: "DELETE" }));

    await deliverOne(job.id);
    expect(cancel.result().status).toBe(200);
    expect((await live(stub, exe.id))?.status).toBe("canceled");

    // past every backoff the policy could choose: nothing is sent again
    clock.advance(120_000);
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    expect(await row(job.id)).toMatchObject({ status: "canceled", run_status: "canceled", attempts: 1, last_http_status: 500 });
    expect(await executionView(exe.id)).toMatchObject({ status: "canceled", attempts: 1 });
    expect((await counters()).retries_total).toBe(retriesBefore);
  });

  it("a one-off job canceled while its attempt runs: its lease expires (the report was lost), and it is not delivered again", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" } });
    const lost = bucketFails("complete");
    const cancel = whileAtTarget(path, () => api(`/v1/jobs/${job.id}`, { method: "DELETE" }));

    await deliverOne(job.id);
    lost.restore();
    expect(lost.calls).toBe(1);
    expect(cancel.result().status).toBe(200);
    expect((await live(stub, exe.id))?.status).toBe("running");

    clock.advance(LEASE_MS + 1);
    expect(await tick(job.id)).toEqual([]); // the alarm expired the lease: canceled, not retried
    expect(await executionView(exe.id)).toMatchObject({ status: "canceled", attempts: 1 });
    clock.advance(120_000);
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    expect(await row(job.id)).toMatchObject({ status: "canceled", run_status: "canceled", attempts: 1 });
    expect(await executionView(exe.id)).toMatchObject({ status: "canceled" });
  });

  it("a recurring job paused while an occurrence runs: the occurrence fails retryably, is not retried, and nothing more fires", async () => {
    const path = uniquePath("fail/503");
    const job = await createJob({
      target: { url: url(path), method: "POST" },
      cron: EVERY_10_S,
      retry: { initialDelayMs: 1000, jitter: 0 },
    });
    onTestFinished(() => cancelQuietly(job.id));
    const first = (await row(job.id)).next_run_at!;
    clock.travelTo(first);
    const pause = whileAtTarget(path, () => api(`/v1/jobs/${job.id}/pause`, { method: "POST" }));

    const message = await deliverOne(job.id);
    expect(pause.result().status).toBe(200);
    expect((await live(await stubOf(job.id), message.executionId))?.status).toBe("canceled");

    clock.advance(60_000); // six occurrences and every backoff
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    expect(await jobView(job.id)).toMatchObject({ status: "paused", nextRunAt: null });
    expect(await executionView(message.executionId)).toMatchObject({ status: "canceled", attempts: 1 });
  });
});

describe("2. cancel or pause whose bucket call fails: 202, and the sync pass stops the job", () => {
  it("cancels a recurring job: 202 (not 500), a retried cancel re-sends it (202, not a no-op 200), and after the sync pass nothing fires", async () => {
    const path = uniquePath("ok");
    const job = await createJob({ target: { url: url(path), method: "POST" }, cron: EVERY_10_S });
    clock.travelTo((await row(job.id)).next_run_at!);
    await deliverOne(job.id);
    await flush(job.id); // the occurrence's outcome is in D1 (see the next describe for one that is not)
    expect(await received(path)).toHaveLength(1);

    const down = bucketFails("applyJobs");
    const first = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(first.status).toBe(202);
    expect(((await first.json()) as { status: string }).status).toBe("canceled");
    const again = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(again.status).toBe(202);
    expect(down.calls).toBe(2); // the retried request sent the change again
    expect(await row(job.id)).toMatchObject({ status: "canceled", synced: 0 });
    down.restore();

    await runScan();
    expect(await row(job.id)).toMatchObject({ status: "canceled", synced: 1 });
    clock.advance(60_000);
    expect(await tick(job.id)).toEqual([]);
    expect(await received(path)).toHaveLength(1);
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(200);
  });

  it("pauses a recurring job: 202, a retried pause re-sends it, and after the sync pass no occurrence is delivered", async () => {
    const path = uniquePath("ok");
    const job = await createJob({ target: { url: url(path), method: "POST" }, cron: EVERY_10_S });
    onTestFinished(() => cancelQuietly(job.id));
    clock.travelTo((await row(job.id)).next_run_at!);
    await deliverOne(job.id);
    await flush(job.id);

    const down = bucketFails("applyJobs");
    expect((await api(`/v1/jobs/${job.id}/pause`, { method: "POST" })).status).toBe(202);
    expect((await api(`/v1/jobs/${job.id}/pause`, { method: "POST" })).status).toBe(202);
    expect(down.calls).toBe(2);
    down.restore();

    await runScan();
    clock.advance(60_000);
    expect(await tick(job.id)).toEqual([]);
    expect(await received(path)).toHaveLength(1);
    expect(await jobView(job.id)).toMatchObject({ status: "paused" });
    expect((await api(`/v1/jobs/${job.id}/pause`, { method: "POST" })).status).toBe(200);
  });

  it("cancels a one-off job its bucket holds: 202, and after the sync pass it never fires", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" }, delay: "30s" });
    expect((await live(stub, exe.id))?.status).toBe("scheduled");

    const down = bucketFails("applyJobs");
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(202);
    down.restore();
    await runScan();
    expect((await live(stub, exe.id))?.status).toBe("canceled");

    clock.advance(60_000);
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await received(path)).toHaveLength(0);
    expect(await row(job.id)).toMatchObject({ status: "canceled", run_status: "canceled", synced: 1 });
    expect(await executionView(exe.id)).toMatchObject({ status: "canceled" });
  });
});

describe("2b. a change right after an occurrence finished, its outcome not yet written to D1", () => {
  it("cancels a recurring job at once (200); the finished occurrence stays succeeded and the bucket's sync pass keeps working", async () => {
    const path = uniquePath("ok");
    const job = await createJob({ target: { url: url(path), method: "POST" }, cron: EVERY_10_S });
    onTestFinished(() => cancelQuietly(job.id));
    const stub = await stubOf(job.id);
    clock.travelTo((await row(job.id)).next_run_at!);
    const message = await deliverOne(job.id);
    expect((await live(stub, message.executionId))?.status).toBe("succeeded"); // on its way to D1

    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(200);
    await runScan();
    expect(await row(job.id)).toMatchObject({ status: "canceled", synced: 1 });
    clock.advance(60_000);
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await executionView(message.executionId)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(await received(path)).toHaveLength(1);
  });
});

describe("3. resume or a schedule PATCH whose bucket call fails: 202, and after the sync pass the job fires again", () => {
  it("resumes a paused recurring job: 202, and after the sync pass its next occurrence is delivered", async () => {
    const path = uniquePath("ok");
    const job = await createJob({ target: { url: url(path), method: "POST" }, cron: EVERY_10_S });
    onTestFinished(() => cancelQuietly(job.id));
    expect((await api(`/v1/jobs/${job.id}/pause`, { method: "POST" })).status).toBe(200);
    clock.advance(25_000);

    const down = bucketFails("applyJobs");
    expect((await api(`/v1/jobs/${job.id}/resume`, { method: "POST" })).status).toBe(202);
    expect((await api(`/v1/jobs/${job.id}/resume`, { method: "POST" })).status).toBe(202);
    expect(down.calls).toBe(2);
    down.restore();
    expect(await tick(job.id)).toEqual([]);

    await runScan();
    const next = (await row(job.id)).next_run_at!;
    expect(next).toBeGreaterThanOrEqual(clock.at);
    clock.travelTo(next);
    const message = await deliverOne(job.id);
    expect(message.dueAt).toBe(next);
    expect(await received(path)).toHaveLength(1);
    expect((await api(`/v1/jobs/${job.id}/resume`, { method: "POST" })).status).toBe(200);
  });

  it("PATCHes a recurring job's schedule: 202, and after the sync pass the new schedule's next occurrence is delivered", async () => {
    const path = uniquePath("ok");
    const job = await createJob({ target: { url: url(path), method: "POST" }, cron: "0 0 1 1 *" });
    onTestFinished(() => cancelQuietly(job.id));
    const stub = await stubOf(job.id);

    const down = bucketFails("applyJobs");
    const patch = await api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { cron: EVERY_10_S } });
    expect(patch.status).toBe(202);
    down.restore();
    const held = () => bucketSql<{ version: number }>(stub, "SELECT version FROM schedules WHERE id = ?", job.id);
    expect(await held()).toEqual([{ version: 1 }]);

    await runScan();
    expect(await held()).toEqual([{ version: 2 }]);
    const next = (await row(job.id)).next_run_at!;
    expect(next - clock.at).toBeLessThanOrEqual(10_000);
    clock.travelTo(next);
    const message = await deliverOne(job.id);
    expect(message.dueAt).toBe(next);
    expect(await received(path)).toHaveLength(1);
  });
});

describe("4. PATCH of a one-off job's runAt while its attempt runs", () => {
  it("the old attempt's success does not complete the job; it runs again at the new time, once, with the same webhook-id", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" } });
    const newAt = secondsFromNow(60_000);
    const patch = whileAtTarget(path, () => api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { runAt: iso(newAt) } }));

    await deliverOne(job.id);
    expect(patch.result().status).toBe(200);
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled", dueAt: newAt });
    await flush(job.id);
    expect(await row(job.id)).toMatchObject({ status: "active", run_status: null, next_run_at: newAt });
    expect(await jobView(job.id)).toMatchObject({ status: "active", nextRunAt: iso(newAt) });

    expect(await tick(job.id)).toEqual([]);
    clock.travelTo(newAt);
    expect((await deliverOne(job.id)).dueAt).toBe(newAt);
    await flush(job.id);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2 });
    const requests = await received(path);
    expect(requests).toHaveLength(2);
    expect(new Set(requests.map((r) => r.headers["webhook-id"]))).toEqual(new Set([exe.id]));
  });

  it("the old attempt's failure does not end the job; a DELETE before the new time answers 200 and nothing runs", async () => {
    const path = uniquePath("fail/500");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" }, retry: { maxAttempts: 1 } });
    const newAt = secondsFromNow(60_000);
    const patch = whileAtTarget(path, () => api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { runAt: iso(newAt) } }));

    await deliverOne(job.id);
    expect(patch.result().status).toBe(200);
    // one attempt allowed, and it failed: still not dead, the new time has a fresh budget
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled", dueAt: newAt, attempts: 1 });
    await flush(job.id);
    expect(await row(job.id)).toMatchObject({ status: "active", run_status: null });

    clock.advance(10_000);
    const cancel = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(cancel.status).toBe(200);
    clock.travelTo(newAt + 1000);
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    expect(await row(job.id)).toMatchObject({ status: "canceled", run_status: "canceled" });
  });
});

describe("5. dead-letter messages and claim failures", () => {
  it("a dead-letter message of an old dispatch does not kill an execution waiting for (or running) its retry", async () => {
    const path = uniquePath("flaky/1");
    const { job, exe, stub } = await newExecution({
      target: { url: url(path), method: "POST" },
      retry: { initialDelayMs: 5000, jitter: 0 },
    });
    const deadBefore = (await counters()).dead_total!;
    const old = await deliverOne(job.id); // 503: retry in 5 s
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled", attempts: 1 });

    const dlq = await fire([old], { queue: "fire-dlq", attempts: 4 });
    expect(dlq.explicitAcks).toEqual(["m0"]);
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled", attempts: 1 });

    clock.advance(5000);
    const [retry] = await tick(job.id);
    expect(retry).toBeDefined();
    expect(retry!.dueAt).not.toBe(old.dueAt);
    // the queue gives up on the retry's own message while its attempt holds a lease: not poison either
    const whileRunning = whileAtTarget(path, () => fire([retry], { queue: "fire-dlq", attempts: 4 }));
    expect((await fire([retry!])).explicitAcks).toEqual(["m0"]);
    expect(whileRunning.result().explicitAcks).toEqual(["m0"]);

    await flush(job.id);
    expect(await received(path)).toHaveLength(2);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2, dead_reason: null });
    expect(await d1Of(exe.id).prepare("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?").bind(exe.id).first("n")).toBe(0);
    expect((await counters()).dead_total).toBe(deadBefore);
  });

  it("a claim that fails retries the message with a growing delay, never at once, and the execution is delivered later", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" } });
    const [message] = await tick(job.id);

    const down = bucketFails("claim");
    const first = await fireRecordingDelays([message], 1);
    expect(first).toEqual({ acked: [], retried: [{ msgId: "m0", delaySeconds: 2 }] });
    const third = await fireRecordingDelays([message], 3);
    expect(third).toEqual({ acked: [], retried: [{ msgId: "m0", delaySeconds: 8 }] });
    expect(down.calls).toBe(2);
    down.restore();
    expect(await live(stub, exe.id)).toMatchObject({ status: "dispatched", attempts: 0 });
    expect(await received(path)).toHaveLength(0);

    expect((await fire([message])).explicitAcks).toEqual(["m0"]);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
  });
});

describe("6. pause while the bucket creates and writes an occurrence", () => {
  it("the occurrences that fall into the pause never fire; resume continues from the next future occurrence", async () => {
    const path = uniquePath("ok");
    const job = await createJob({ target: { url: url(path), method: "POST" }, cron: EVERY_10_S });
    onTestFinished(() => cancelQuietly(job.id));
    const stub = await stubOf(job.id);
    const first = (await row(job.id)).next_run_at!;
    clock.travelTo(first + 2000); // past the flush delay of anything written before

    // the alarm creates the occurrence and plans the next; while its D1 write is in flight, pause
    let paused: Response | undefined;
    await alarmWithBeforeItsWrite(stub, async () => {
      paused = await api(`/v1/jobs/${job.id}/pause`, { method: "POST" });
    });
    expect(paused?.status).toBe(200);

    // the occurrence created before the pause was dispatched: its message is a duplicate now
    const [occurrence] = take(job.id);
    expect(occurrence?.dueAt).toBe(first);
    expect((await fire([occurrence!])).explicitAcks).toEqual(["m0"]);
    expect(await received(path)).toHaveLength(0);

    clock.advance(35_000); // three or four occurrences fall into the pause
    expect(await tick(job.id)).toEqual([]);
    await flush(job.id);
    expect(await executionView(occurrence!.executionId)).toMatchObject({ status: "canceled", attempts: 0 });

    const resumedAt = clock.at;
    expect((await api(`/v1/jobs/${job.id}/resume`, { method: "POST" })).status).toBe(200);
    expect(await tick(job.id)).toEqual([]); // nothing of the paused window catches up
    const next = Math.ceil(resumedAt / 10_000) * 10_000;
    clock.travelTo(next);
    const delivered = await deliverOne(job.id);
    expect(delivered.dueAt).toBe(next);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    const history = await d1Of(job.id)
      .prepare("SELECT due_at AS dueAt, status FROM occurrences WHERE job_id = ? ORDER BY due_at")
      .bind(job.id)
      .all<{ dueAt: number; status: string }>();
    expect(history.results).toEqual([
      { dueAt: first, status: "canceled" },
      { dueAt: next, status: "succeeded" },
    ]);
  });

  it("a schedule whose last occurrence finishes while its projection is being written still completes in D1", async () => {
    const job = await createJob({ target: { url: url(uniquePath("ok")), method: "POST" }, cron: EVERY_10_S, maxOccurrences: 1 }); // ends completed
    const stub = await stubOf(job.id);
    clock.travelTo((await row(job.id)).next_run_at! + 2000);

    // the alarm creates the only occurrence and projects "not completed" (it is live); while that
    // write is in flight the occurrence is claimed and succeeds
    await alarmWithBeforeItsWrite(stub, async () => {
      const [message] = take(job.id);
      const inside = bucketStub((await row(job.id)).bucket); // a stub of this context (I/O cannot cross objects)
      const [lease] = await inside.claim([{ executionId: message!.executionId, dueAt: message!.dueAt }]);
      if (!lease?.ok) throw new Error("claim refused");
      await inside.complete([
        { executionId: message!.executionId, token: lease.token, outcome: { kind: "succeeded", httpStatus: 200, excerpt: "ok" } },
      ]);
    });
    expect(await row(job.id)).toMatchObject({ status: "active" });

    await flush(job.id); // the next flush writes the outcome and the completion
    expect(await row(job.id)).toMatchObject({ status: "completed" });
  });

  it("the schedule projection refused at the old version (the pause raced it) still reaches D1 at the new one", async () => {
    const job = await createJob({ target: { url: url(uniquePath("ok")), method: "POST" }, cron: EVERY_10_S });
    onTestFinished(() => cancelQuietly(job.id));
    const stub = await stubOf(job.id);
    clock.travelTo((await row(job.id)).next_run_at! + 2000);

    await alarmWithBeforeItsWrite(stub, async () => {
      await api(`/v1/jobs/${job.id}/pause`, { method: "POST" });
    });
    take(job.id);

    clock.advance(5000);
    await flush(job.id);
    await runScan();
    const [schedule] = await bucketSql<{ version: number; fired: number }>(
      stub,
      "SELECT version, fired FROM schedules WHERE id = ?",
      job.id,
    );
    expect(await row(job.id)).toMatchObject({ status: "paused", version: schedule!.version, fired: schedule!.fired });
    expect(schedule!.fired).toBe(1);
  });
});

describe("7. a runAt PATCH during the sync pass's read", () => {
  it("the pull read the old row while the PATCH applied: one execution, delivered once at the new time", async () => {
    const path = uniquePath("ok");
    const oldAt = secondsFromNow(LOOKAHEAD_MS + 60_000);
    const job = await createJob({ target: { url: url(path), method: "POST" }, runAt: iso(oldAt) });
    const exe = oneOffExecutionId(job.id);
    const stub = await stubOf(job.id);
    expect(await live(stub, exe)).toBeUndefined(); // beyond the lookahead: D1 only
    clock.advance(120_000);
    const newAt = oldAt + 30_000;

    const patch = afterRead(/next_run_at"? <=/, job.id, () => api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { runAt: iso(newAt) } }));
    await runScan();
    expect(patch.result().status).toBe(200);
    expect(await live(stub, exe)).toMatchObject({ status: "scheduled", dueAt: newAt });
    expect(await bucketSql(stub, "SELECT due_at FROM executions WHERE id = ?", exe)).toEqual([{ due_at: newAt }]);

    clock.travelTo(oldAt);
    expect(await tick(job.id)).toEqual([]);
    clock.travelTo(newAt);
    expect((await deliverOne(job.id)).dueAt).toBe(newAt);
    await flush(job.id);
    await runScan();
    clock.advance(60_000);
    expect(await tick(job.id)).toEqual([]);
    const requests = await received(path);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.headers["webhook-id"]).toBe(exe);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
  });

  it("the PATCH's bucket call failed while the pull applied the old row: the same pass moves it, delivered once at the new time", async () => {
    const path = uniquePath("ok");
    const oldAt = secondsFromNow(LOOKAHEAD_MS + 60_000);
    const job = await createJob({ target: { url: url(path), method: "POST" }, runAt: iso(oldAt) });
    const exe = oneOffExecutionId(job.id);
    const stub = await stubOf(job.id);
    clock.advance(120_000);
    const newAt = oldAt + 30_000;

    const patch = afterRead(/next_run_at"? <=/, job.id, async () => {
      const down = bucketFails("applyJobs");
      try {
        return await api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { runAt: iso(newAt) } });
      } finally {
        down.restore();
      }
    });
    await runScan();
    expect(patch.result().status).toBe(202);
    expect(await row(job.id)).toMatchObject({ synced: 1, next_run_at: newAt });
    expect(await bucketSql(stub, "SELECT due_at FROM executions WHERE id = ?", exe)).toEqual([{ due_at: newAt }]);

    clock.travelTo(oldAt);
    expect(await tick(job.id)).toEqual([]);
    clock.travelTo(newAt);
    expect((await deliverOne(job.id)).dueAt).toBe(newAt);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded" });
  });
});

/** Until the test ends, records the UTF-8 size of every string bound in a D1 batch. */
function recordBoundStrings() {
  const bound: number[] = [];
  const spy = interceptD1Batch(async (statements, run) => {
    for (const s of statements) {
      for (const p of (s as unknown as { params?: unknown[] }).params ?? [])
        if (typeof p === "string") bound.push(encoder.encode(p).byteLength);
    }
    return run(statements);
  });
  onTestFinished(() => spy.mockRestore());
  return { bound, spy };
}

describe("8. D1 JSON chunks are sized in bytes", () => {
  const emojiError = `HTTP 500: ${"😀".repeat(500)}`; // 1,010 UTF-16 units, 2,010 bytes
  const eAcute = "é".repeat(500);

  it("jsonChunks keeps every chunk under the limit in UTF-8 bytes, not in characters", () => {
    const items = Array.from({ length: 1000 }, (_, i) => ({
      i,
      error: emojiError,
      log: JSON.stringify(Array(5).fill({ error: emojiError })),
    }));
    const chunks = jsonChunks(items);
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(encoder.encode(chunk).byteLength).toBeLessThanOrEqual(1_000_000);
    expect(chunks.flatMap((c) => JSON.parse(c) as unknown[])).toEqual(items);
  });

  it("writes 1,000 outcomes with long non-ASCII errors in one flush batch, every bound string within D1's limit", async () => {
    const res = await api("/v1/jobs/batch", {
      method: "POST",
      body: {
        jobs: Array.from({ length: 1000 }, (_, i) => ({ target: { url: url(`${uniquePath("ok")}&i=${i}`), method: "POST" }, delay: "1d" })),
      },
    });
    const ids = ((await res.json()) as { results: { job: { id: string } }[] }).results.map((r) => r.job.id);
    expect(ids).toHaveLength(1000);
    // a request's jobs go to one shard
    const d1 = d1Of(ids[0]!);
    const due = await d1
      .prepare("SELECT id, next_run_at AS at FROM jobs WHERE id IN (SELECT value FROM json_each(?))")
      .bind(JSON.stringify(ids))
      .all<{ id: string; at: number }>();
    const now = clock.at;
    const log = Array.from({ length: 5 }, (_, a) => ({
      attempt: a + 1,
      dueAt: now,
      startedAt: now,
      finishedAt: now,
      outcome: "retryable",
      httpStatus: 500,
      error: a % 2 ? emojiError : `HTTP 500: ${eAcute}`,
    }));
    const finished: FinishedExecution[] = due.results.map((j) => ({
      id: oneOffExecutionId(j.id),
      jobId: j.id,
      tenant: "acme",
      bucket: 0,
      recurring: false,
      occurrenceAt: j.at,
      occurrence: 1,
      status: "dead",
      attempts: 5,
      lastHttpStatus: 500,
      lastError: emojiError,
      deadReason: "attempts_exhausted",
      finishedAt: now,
      attemptLog: JSON.stringify(log),
    }));
    const { bound, spy } = recordBoundStrings();

    await writeOutcomes(dbOf(d1), finished, [], now);
    spy.mockRestore();
    expect(bound.length).toBeGreaterThan(2);
    expect(Math.max(...bound)).toBeLessThanOrEqual(D1_MAX_STRING_BYTES);
    const rows = await d1
      .prepare(
        `SELECT count(*) AS n FROM jobs WHERE id IN (SELECT value FROM json_each(?))
         AND status = 'completed' AND run_status = 'dead' AND attempts = 5 AND last_error = ?`,
      )
      .bind(JSON.stringify(ids), emojiError)
      .first<{ n: number }>();
    expect(rows?.n).toBe(1000);
    const dead = await d1
      .prepare("SELECT count(*) AS n FROM dead_letters WHERE job_id IN (SELECT value FROM json_each(?)) AND last_error = ?")
      .bind(JSON.stringify(ids), emojiError)
      .first<{ n: number }>();
    expect(dead?.n).toBe(1000);
  });

  // 2,000 attempts through the real consumer: longer than the default 5 s on a loaded 2-core machine
  it("1,000 jobs whose target answers 500 with a non-ASCII body until dead: every bucket's flush lands in D1", {
    timeout: 30_000,
  }, async () => {
    const path = uniquePath("fail/500");
    const body = (i: number) => (i % 2 ? "😀".repeat(500) : eAcute);
    const res = await api("/v1/jobs/batch", {
      method: "POST",
      body: {
        jobs: Array.from({ length: 1000 }, (_, i) => ({
          target: { url: url(`${path}&i=${i}`), method: "POST" },
          retry: { maxAttempts: 2, initialDelayMs: 1000, jitter: 0 },
        })),
      },
    });
    const ids = ((await res.json()) as { results: { job: { id: string } }[] }).results.map((r) => r.job.id);
    expect(ids).toHaveLength(1000);
    const mine = new Set(ids.map((id) => oneOffExecutionId(id)));
    // the target, simulated here: the loopback receiver has no route for such a body
    const target = vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
      const i = Number(new URL(input instanceof Request ? input.url : String(input)).searchParams.get("i"));
      return new Response(body(i), { status: 500, headers: { "content-type": "text/plain; charset=utf-8" } });
    });
    onTestFinished(() => target.mockRestore());
    const { bound, spy: batches } = recordBoundStrings();
    const buckets = CONFIG.BUCKETS;

    for (let round = 0; round < 2; round++) {
      const bucketList = Array.from({ length: buckets }, (_, b) => b);
      const messages = await sendAndConsume(bucketList, sent, (m) => mine.has(m.executionId), 1000, fire);
      expect(messages).toHaveLength(1000);
      clock.advance(1000);
    }
    for (let b = 0; b < buckets; b++) await clock.flush(bucketStub(b));
    target.mockRestore();
    batches.mockRestore();

    expect(Math.max(...bound)).toBeLessThanOrEqual(D1_MAX_STRING_BYTES);
    const rows = await d1Of(ids[0]!)
      .prepare(
        `SELECT count(*) AS n FROM jobs WHERE id IN (SELECT value FROM json_each(?))
         AND status = 'completed' AND run_status = 'dead' AND attempts = 2 AND last_error IN (?, ?)`,
      )
      .bind(JSON.stringify(ids), emojiError, `HTTP 500: ${eAcute}`)
      .first<{ n: number }>();
    expect(rows?.n).toBe(1000);
  });
});

describe("any single D1 write or alarm that fails: the change or outcome still lands", () => {
  it("an outcome whose flush to D1 fails once is written by the next flush", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" } });
    await deliverOne(job.id);
    const failOnce = spyOnD1("batch").mockRejectedValueOnce(new Error("injected: D1 batch failed"));
    onTestFinished(() => failOnce.mockRestore());
    await clock.flush(stub);
    expect(failOnce).toHaveBeenCalled();
    failOnce.mockRestore();
    expect(await row(job.id)).toMatchObject({ status: "active", run_status: null });
    expect(await executionView(exe.id)).toMatchObject({ status: "succeeded" }); // the bucket's live view meanwhile

    await clock.flush(stub);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
    expect(await received(path)).toHaveLength(1);
  });

  it("a cancel whose bucket applied it but whose D1 acknowledgement failed answers 202; the sync pass acknowledges it", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" }, delay: "30s" });
    const failOnce = spyOnD1("batch").mockRejectedValueOnce(new Error("injected: D1 batch failed"));
    onTestFinished(() => failOnce.mockRestore());
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(202);
    failOnce.mockRestore();
    expect((await live(stub, exe.id))?.status).toBe("canceled");
    expect(await row(job.id)).toMatchObject({ status: "canceled", synced: 0 });

    // the canceled execution reaches D1 within the flush delay; the sync pass (every minute) then
    // finds the change unsynced and acknowledges the version the bucket holds
    await clock.flush(stub);
    await runScan();
    expect(await row(job.id)).toMatchObject({ synced: 1, run_status: "canceled" });
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(200);
    clock.advance(60_000);
    expect(await tick(job.id)).toEqual([]);
    expect(await received(path)).toHaveLength(0);
  });

  it("a bucket whose alarm was lost is re-armed by the sync pass and fires what is due", async () => {
    const path = uniquePath("ok");
    const { job, stub } = await newExecution({ target: { url: url(path), method: "POST" }, delay: "5s" });
    await runInDurableObject(stub, (_instance, state) => state.storage.deleteAlarm());
    clock.advance(6000);

    await runScan();
    const alarm = await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(clock.at + 1000);
    await deliverOne(job.id);
    await flush(job.id);
    expect(await received(path)).toHaveLength(1);
  });

  it("a one-off redrive whose bucket call fails answers 202; the sync pass runs it again with a fresh budget", async () => {
    const path = uniquePath("flaky/1");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" }, retry: { maxAttempts: 1 } });
    await deliverOne(job.id);
    await flush(job.id);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "dead" });
    clock.advance(5000);

    const down = bucketFails("applyJobs");
    const redrive = await api(`/v1/executions/${exe.id}/redrive`, { method: "POST" });
    expect(redrive.status).toBe(202);
    expect(down.calls).toBe(1);
    down.restore();
    expect(await row(job.id)).toMatchObject({ status: "active", synced: 0 });

    await runScan();
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled" });
    await deliverOne(job.id);
    await flush(job.id);
    expect(await received(path)).toHaveLength(2);
    expect(await row(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2 });
    expect(await d1Of(exe.id).prepare("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?").bind(exe.id).first("n")).toBe(0);
  });
});

describe("a projection never goes backwards", () => {
  it("the bucket ignores an older job version applied after a newer one", async () => {
    const path = uniquePath("ok");
    const { job, exe, stub } = await newExecution({ target: { url: url(path), method: "POST" }, delay: "60s" });
    const d1 = await row(job.id);
    const def = (version: number, status: JobDefinition["status"], nextRunAt: number): JobDefinition => ({
      jobId: job.id,
      tenant: "acme",
      version,
      status,
      specJson: d1.spec as string,
      recurring: false,
      nextRunAt,
      fired: 0,
      attempts: 0,
      attemptLog: null,
    });
    const later = d1.next_run_at! + 30_000;
    expect(await stub.applyJobs(d1.bucket, [def(20, "active", later)])).toEqual([{ jobId: job.id, version: 20 }]);
    const before = await live(stub, exe.id);
    expect(before).toMatchObject({ status: "scheduled", dueAt: later });

    expect(await stub.applyJobs(d1.bucket, [def(10, "canceled", d1.next_run_at!)])).toEqual([{ jobId: job.id, version: 20 }]);
    expect(await live(stub, exe.id)).toEqual(before);
    expect(await bucketSql(stub, "SELECT due_at, version, job_status FROM executions WHERE id = ?", exe.id)).toEqual([
      { due_at: later, version: 20, job_status: "active" },
    ]);
    await stub.applyJobs(d1.bucket, [def(30, "canceled", later)]); // clean up
  });

  it("the bucket ignores an older version of a recurring job's schedule", async () => {
    const job = await createJob({ target: { url: url(uniquePath("ok")), method: "POST" }, cron: EVERY_10_S });
    onTestFinished(() => cancelQuietly(job.id));
    const d1 = await row(job.id);
    const stub = bucketStub(d1.bucket);
    expect((await api(`/v1/jobs/${job.id}/pause`, { method: "POST" })).status).toBe(200);
    const held = () => bucketSql(stub, "SELECT version, status, next_at FROM schedules WHERE id = ?", job.id);
    const before = await held();
    expect(before).toEqual([{ version: 2, status: "paused", next_at: null }]);
    const stale: JobDefinition = {
      jobId: job.id,
      tenant: "acme",
      version: 1,
      status: "active",
      specJson: d1.spec as string,
      recurring: true,
      nextRunAt: d1.next_run_at,
      fired: 0,
      attempts: 0,
      attemptLog: null,
    };
    expect(await stub.applyJobs(d1.bucket, [stale])).toEqual([{ jobId: job.id, version: 2 }]);
    expect(await held()).toEqual(before);
    clock.advance(30_000);
    expect(await tick(job.id)).toEqual([]);
  });

  it("D1 ignores an outcome with fewer attempts than it holds, and a schedule projection of another version", async () => {
    const job = await createJob({ target: { url: url(uniquePath("ok")), method: "POST" }, delay: "1d" });
    const d1 = await row(job.id);
    const db = dbOf(d1Of(job.id));
    const outcome = (attempts: number, status: FinishedExecution["status"]): FinishedExecution => ({
      id: oneOffExecutionId(job.id),
      jobId: job.id,
      tenant: "acme",
      bucket: d1.bucket,
      recurring: false,
      occurrenceAt: d1.next_run_at!,
      occurrence: 1,
      status,
      attempts,
      lastHttpStatus: status === "dead" ? 500 : 200,
      lastError: status === "dead" ? "HTTP 500" : null,
      deadReason: status === "dead" ? "attempts_exhausted" : null,
      finishedAt: clock.at,
      attemptLog: null,
    });
    await writeOutcomes(db, [outcome(3, "dead")], [], clock.at);
    const after3 = await row(job.id);
    expect(after3).toMatchObject({ run_status: "dead", attempts: 3, last_http_status: 500 });
    await writeOutcomes(db, [outcome(2, "succeeded")], [], clock.at + 1);
    expect(await row(job.id)).toEqual(after3);

    const recurring = await createJob({ target: { url: url(uniquePath("ok")), method: "POST" }, cron: "0 0 1 1 *" });
    onTestFinished(() => cancelQuietly(recurring.id));
    const r = await row(recurring.id);
    const recurringDb = dbOf(d1Of(recurring.id)); // its own shard
    const projection = (version: number, fired: number, nextRunAt: number) => ({
      tenant: "acme",
      jobId: recurring.id,
      version,
      nextRunAt,
      fired,
      completed: false,
    });
    await writeOutcomes(recurringDb, [], [projection(r.version, 3, r.next_run_at! + 1000)], clock.at);
    const at3 = await row(recurring.id);
    expect(at3).toMatchObject({ fired: 3, next_run_at: r.next_run_at! + 1000 });
    await writeOutcomes(recurringDb, [], [projection(r.version, 1, r.next_run_at! + 1000)], clock.at); // fewer fired: kept
    await writeOutcomes(recurringDb, [], [projection(r.version - 1, 9, r.next_run_at! + 9000)], clock.at); // older version: ignored
    expect(await row(recurring.id)).toEqual(at3);
  });
});
