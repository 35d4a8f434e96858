/**
 * Pull workers (issue 15): a job's target can be a pull queue of its tenant; workers lease its
 * executions over HTTP and report on each with the token they got. Proves: an execution due for
 * a pull queue is offered (not leased) by its claim and held by the queue once, however often its
 * message comes; a lease is the bucket's, with the worker's length, fenced like the consumer's
 * (a zombie's late report is rejected and counted); an expired lease (a killed worker) runs the
 * execution again for another worker; fail is classified (retryable with Retry-After, or
 * permanent into the DLQ); long polling answers when work arrives; tenants never see each
 * other's queues or leases; bad input is a 400 naming the field.
 */

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { pullQueueName } from "../../src/core/pull";
import { OFFER_SWEEP_MS, type PullQueue } from "../../src/pull/pull-queue";
import type { PullLeaseView } from "../../src/schemas/responses";
import {
  api,
  captureFiresForFile,
  counters,
  dispatchOf,
  type Execution,
  fileClock,
  fire,
  KEYS,
  newExecution,
  receiverUrl,
  runAlarm,
  takeSent,
  uniquePath,
} from "./helpers";

const clock = fileClock(20 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

/** A lease as the API answers it (the document's PullLease). */
type Lease = PullLeaseView;

let queues = 0;
/** A queue name of its own for each test: queues are per tenant and name, and storage is per file. */
function freshQueue(): string {
  queues += 1;
  return `q-${queues}`;
}

async function lease(queue: string, body: Record<string, unknown> = {}, key: string = KEYS.acme): Promise<Lease[]> {
  const res = await api(`/v1/pull/${queue}/lease`, { method: "POST", body }, key);
  expect(res.status).toBe(200);
  return ((await res.json()) as { leases: Lease[] }).leases;
}

async function report(token: string, what: "heartbeat" | "complete" | "fail", body?: unknown, key: string = KEYS.acme) {
  const res = await api(`/v1/pull/leases/${token}/${what}`, { method: "POST", ...(body === undefined ? {} : { body }) }, key);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> & { error?: { code: string; field: string } } };
}

/** A pull job due now, dispatched by its bucket and claimed by the consumer: offered to its queue. */
async function offered(queue: string, extra: Record<string, unknown> = {}): Promise<Execution & { sent: FireMessage }> {
  const e = await newExecution({ target: { pull: queue, payload: { video: 7 } }, retry: { initialDelayMs: 1_000, jitter: 0 }, ...extra });
  const message = await dispatch(e);
  const result = await fire([message]);
  expect(result.explicitAcks).toEqual(["m0"]);
  return { ...e, sent: message };
}

/** Rows the tenant's queue object wrote since it started (its storage's bill). */
function queueRowsWritten(queue: string, tenant = "acme"): Promise<number> {
  return runInDurableObject(env.PULL_QUEUE.getByName(pullQueueName(tenant, queue)), (instance: PullQueue) => instance.rowsWritten);
}

async function waiting(queue: string): Promise<number> {
  const res = await api(`/v1/pull/${queue}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { waiting: number }).waiting;
}

async function flushed(e: Execution) {
  await clock.flush(e.stub);
  const res = await api(`/v1/executions/${e.exe.id}`);
  return (await res.json()) as { status: string; attempts: number; lastError: string | null; deadReason: string | null };
}

describe("a pull target's execution", () => {
  it("is offered to its queue by the claim (not leased), held once however often its message comes, and leased by a worker with its payload; 2 rows written in the queue", async () => {
    const queue = freshQueue();
    const e = await offered(queue);
    expect((await e.view())?.status).toBe("dispatched");
    expect(await waiting(queue)).toBe(1);
    expect(await queueRowsWritten(queue)).toBe(1);
    // the same message again (a redelivery): the same offer, held once, nothing written; counted as a duplicate
    const before = (await counters()).duplicates_suppressed_total ?? 0;
    const again = await fire([e.sent]);
    expect(again.explicitAcks).toEqual(["m0"]);
    expect(((await counters()).duplicates_suppressed_total ?? 0) - before).toBe(1);
    expect(await waiting(queue)).toBe(1);
    expect(await queueRowsWritten(queue)).toBe(1);

    const [got, ...more] = await lease(queue, { max: 10, leaseMs: 60_000 });
    expect(more).toEqual([]);
    expect(got).toMatchObject({ executionId: e.exe.id, jobId: e.job.id, attempt: 1, payload: { video: 7 } });
    expect(Date.parse(got!.leaseDeadlineAt) - clock.at).toBe(60_000);
    expect((await e.view())?.status).toBe("running");
    expect(await waiting(queue)).toBe(0);
    expect(await lease(queue)).toEqual([]); // leased: nobody else gets it
    expect(await queueRowsWritten(queue)).toBe(2); // the offer and its removal

    const done = await report(got!.token, "complete");
    expect(done).toEqual({ status: 200, body: { executionId: e.exe.id, status: "succeeded" } });
    expect((await report(got!.token, "complete")).body.error).toMatchObject({ code: "stale_lease", field: "token" });
    expect(await flushed(e)).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("a heartbeat extends the lease by its own length and says when the job was canceled meanwhile", async () => {
    const queue = freshQueue();
    const e = await offered(queue);
    const [got] = await lease(queue, { leaseMs: 5_000 });
    clock.advance(4_000);
    const beat = await report(got!.token, "heartbeat");
    expect(beat.status).toBe(200);
    expect(Date.parse(beat.body.leaseDeadlineAt as string) - clock.at).toBe(5_000);
    expect(beat.body.canceled).toBe(false);
    clock.advance(4_000); // past the first deadline, within the extended one
    await runAlarm(e.stub);
    expect((await e.view())?.status).toBe("running");

    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    expect((await report(got!.token, "heartbeat")).body.canceled).toBe(true);
    // the attempt that was running still reports; a canceled job's failure is not retried
    expect((await report(got!.token, "fail", { error: "stopped" })).body.status).toBe("canceled");
  });
});

describe("a killed pull worker and a zombie", () => {
  it("an expired lease fails the attempt (lease_expired) and the execution is offered again; another worker completes it and the first one's late report is rejected and counted", async () => {
    const queue = freshQueue();
    const before = await counters();
    const e = await offered(queue);
    const [first] = await lease(queue, { leaseMs: 2_000 });
    // the worker is killed: no heartbeat, no report
    clock.advance(2_000);
    await runAlarm(e.stub);
    const retried = await e.view();
    expect(retried).toMatchObject({ status: "scheduled", attempts: 1 });
    expect(retried?.attemptLog[0]).toMatchObject({ attempt: 1, outcome: "lease_expired" });

    // the retry is due after the backoff: dispatched, offered, leased by another worker
    expect(await fire([await dispatch(e)])).toMatchObject({ explicitAcks: ["m0"] });
    const [second] = await lease(queue, { leaseMs: 30_000 });
    expect(second).toMatchObject({ executionId: e.exe.id, attempt: 2 });
    expect(second!.token).not.toBe(first!.token);

    // the zombie wakes up: each of its reports is rejected, and none touches attempt 2
    expect((await report(first!.token, "heartbeat")).status).toBe(409);
    expect((await report(first!.token, "complete")).body.error).toMatchObject({ code: "stale_lease" });
    expect((await report(first!.token, "fail", { retryable: false })).status).toBe(409);
    expect((await e.view())?.status).toBe("running");

    expect((await report(second!.token, "complete")).body.status).toBe("succeeded");
    const after = await counters();
    expect((after.stale_lease_rejects_total ?? 0) - (before.stale_lease_rejects_total ?? 0)).toBe(3);
    expect((after.lease_expired_total ?? 0) - (before.lease_expired_total ?? 0)).toBe(1);
    expect(await flushed(e)).toMatchObject({ status: "succeeded", attempts: 2 });
  });
});

describe("fail", () => {
  it("retryable with retryAfterMs: due again no sooner than that; not retryable: dead, in the DLQ with the worker's error", async () => {
    const queue = freshQueue();
    const e = await offered(queue, { retry: { maxAttempts: 5, initialDelayMs: 1_000, jitter: 0 } });
    const [got] = await lease(queue);
    const failed = await report(got!.token, "fail", { retryable: true, error: "encoder busy", retryAfterMs: 45_000 });
    expect(failed).toEqual({ status: 200, body: { executionId: e.exe.id, status: "scheduled" } });
    const view = await e.view();
    expect(view!.dueAt - clock.at).toBe(45_000);
    expect(view!.attemptLog[0]).toMatchObject({ outcome: "retryable", error: "the pull worker failed: encoder busy", httpStatus: null });

    await fire([await dispatch(e)]);
    const [again] = await lease(queue);
    expect(again).toMatchObject({ attempt: 2 });
    expect((await report(again!.token, "fail", { retryable: false, error: "corrupt input" })).body.status).toBe("dead");
    expect(await flushed(e)).toMatchObject({ status: "dead", deadReason: "permanent", lastError: "the pull worker failed: corrupt input" });
    const dlq = (await (await api("/v1/dlq")).json()) as { executions: { id: string }[] };
    expect(dlq.executions.map((x) => x.id)).toContain(e.exe.id);
  });
});

describe("long polling", () => {
  it("a request with waitMs waits for work and answers as soon as an execution is offered", async () => {
    const queue = freshQueue();
    const started = performance.now();
    const polling = lease(queue, { waitMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const view = (await (await api(`/v1/pull/${queue}`)).json()) as { pollers: number };
    expect(view.pollers).toBe(1);
    const e = await offered(queue);
    const [got] = await polling;
    expect(got).toMatchObject({ executionId: e.exe.id });
    expect(performance.now() - started).toBeLessThan(9_000); // it did not wait out its waitMs
  });

  it("with nothing to lease, answers an empty list after waitMs", async () => {
    const queue = freshQueue();
    const started = performance.now();
    expect(await lease(queue, { waitMs: 300 })).toEqual([]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  });
});

describe("offers its bucket no longer stands by", () => {
  it("a job canceled while its execution waited in the queue: the stale offer is dropped by the next request, nothing is leased", async () => {
    const queue = freshQueue();
    const e = await offered(queue);
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    expect(await waiting(queue)).toBe(1);
    expect(await lease(queue, { max: 5 })).toEqual([]);
    expect(await waiting(queue)).toBe(0);
  });

  it("a backlog of stale offers ahead of a live one does not hold it back: one request drops them and leases the live one", async () => {
    const queue = freshQueue();
    const stale = [];
    for (let i = 0; i < 6; i++) stale.push(await offered(queue));
    clock.advance(1); // due after them: behind them in the queue
    const live = await offered(queue);
    for (const e of stale) expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    expect(await waiting(queue)).toBe(7);
    const got = await lease(queue, { max: 1 });
    expect(got.map((l) => l.executionId)).toEqual([live.exe.id]);
    expect(await waiting(queue)).toBe(0);
  });

  it("a queue nobody polls drops its stale offers at its next sweep (OFFER_SWEEP_MS) and keeps the live ones; a request meeting none of them first", async () => {
    const queue = freshQueue();
    const stub = env.PULL_QUEUE.getByName(pullQueueName("acme", queue));
    const stale = await offered(queue);
    const live = await offered(queue);
    expect((await api(`/v1/jobs/${stale.job.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    expect(await waiting(queue)).toBe(2);
    // the sweep is armed by the first offer, OFFER_SWEEP_MS after it
    const armedAt = await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());
    expect(armedAt).not.toBeNull();
    expect(armedAt! - clock.at).toBeLessThanOrEqual(OFFER_SWEEP_MS);
    clock.travelTo(armedAt!);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await waiting(queue)).toBe(1);
    // armed again while offers remain; the live one is still leased by a worker
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).toBe(clock.at + OFFER_SWEEP_MS);
    expect((await lease(queue, { max: 5 })).map((l) => l.executionId)).toEqual([live.exe.id]);
    // with nothing left the sweep stops
    clock.advance(OFFER_SWEEP_MS);
    await runDurableObjectAlarm(stub);
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).toBeNull();
  });

  it("the sweep keeps the offers of a bucket that does not answer", async () => {
    const queue = freshQueue();
    const stub = env.PULL_QUEUE.getByName(pullQueueName("acme", queue));
    const e = await offered(queue);
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    const namespace = env.BUCKET as unknown as { getByName(name: string): unknown };
    const spy = vi.spyOn(namespace, "getByName").mockImplementation(() => ({
      stillOffered: async () => {
        throw new Error("injected: bucket unreachable");
      },
    }));
    try {
      clock.advance(OFFER_SWEEP_MS);
      await runDurableObjectAlarm(stub);
    } finally {
      spy.mockRestore();
    }
    expect(await waiting(queue)).toBe(1);
    clock.advance(OFFER_SWEEP_MS);
    await runDurableObjectAlarm(stub);
    expect(await waiting(queue)).toBe(0);
  });

  it("a job moved to another queue while it waited is offered there, and the old queue cannot lease it", async () => {
    const from = freshQueue();
    const to = freshQueue();
    const e = await offered(from);
    const patched = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { target: { pull: to } } });
    expect(patched.status).toBeLessThan(300);
    expect((await e.view())?.status).toBe("scheduled"); // dispatched again under its new target
    expect(await fire([await dispatch(e)])).toMatchObject({ explicitAcks: ["m0"] });
    expect(await lease(from, { max: 5 })).toEqual([]);
    expect(await waiting(from)).toBe(0);
    const [got] = await lease(to);
    expect(got).toMatchObject({ executionId: e.exe.id, attempt: 1 });
  });

  it("a job switched from a pull queue to a URL while it waited is delivered to the URL; the queue's offer is dropped", async () => {
    const queue = freshQueue();
    const e = await offered(queue);
    const url = `${receiverUrl()}${uniquePath("ok")}`;
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { target: { url } } })).status).toBeLessThan(300);
    expect(await fire([await dispatch(e)])).toMatchObject({ explicitAcks: ["m0"] });
    expect(await lease(queue, { max: 5 })).toEqual([]);
    expect(await flushed(e)).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("a pull queue that fails to take the offer: the execution goes on in a message of its own, and its next claim offers it again (held once)", async () => {
    const queue = freshQueue();
    const e = await newExecution({ target: { pull: queue } });
    const message = await dispatch(e);
    const spy = vi
      .spyOn(env.PULL_QUEUE, "getByName")
      .mockImplementationOnce(
        () => ({ offer: () => Promise.reject(new Error("pull queue down")) }) as unknown as ReturnType<typeof env.PULL_QUEUE.getByName>,
      );
    const failed = await fire([message]);
    spy.mockRestore();
    // acked: the offer that failed was passed on alone (consumer/fire.ts passOn), never retried with its group
    expect(failed.explicitAcks).toEqual(["m0"]);
    expect(await waiting(queue)).toBe(0);
    const mine = takeSent(sent, e.exe.id); // its dispatch, then the message passed on
    const passed = mine.slice(1);
    expect(mine).toEqual([message, message]);
    expect(await fire(passed)).toMatchObject({ explicitAcks: ["m0"] });
    expect(await fire([message], { attempts: 3 })).toMatchObject({ explicitAcks: ["m0"] });
    expect(await waiting(queue)).toBe(1);
    expect(await lease(queue, { max: 5 })).toHaveLength(1);
  });
});

describe("tenants", () => {
  it("another tenant's queue of the same name is another queue, and another tenant's token is rejected", async () => {
    const queue = freshQueue();
    await offered(queue);
    expect(await lease(queue, { max: 5 }, KEYS.globex)).toEqual([]);
    const [got] = await lease(queue);
    const foreign = await report(got!.token, "complete", undefined, KEYS.globex);
    expect(foreign.status).toBe(409);
    expect((await report(got!.token, "complete")).status).toBe(200);
  });
});

describe("bad input", () => {
  it.each<[string, string, unknown, string]>([
    ["a queue name out of shape", "/v1/pull/Not%20A%20Queue/lease", {}, "queue"],
    ["leaseMs below a second", "/v1/pull/q/lease", { leaseMs: 10 }, "leaseMs"],
    ["waitMs above 20 s", "/v1/pull/q/lease", { waitMs: 60_000 }, "waitMs"],
    ["max above 100", "/v1/pull/q/lease", { max: 101 }, "max"],
    ["an unknown field", "/v1/pull/q/lease", { maxx: 1 }, "maxx"],
    ["a token this API never handed out", "/v1/pull/leases/nope/complete", undefined, "token"],
    [
      "a token naming a bucket beyond any",
      `/v1/pull/leases/plt_999999_exe_${"0".repeat(26)}_00000000-0000-0000-0000-000000000000/heartbeat`,
      undefined,
      "token",
    ],
    ["a fail with a non-boolean retryable", "/v1/pull/leases/nope/fail", { retryable: "yes" }, "token"],
  ])("%s is a 400 (%s) naming the field", async (_case, path, body, field) => {
    const res = await api(path, { method: "POST", ...(body === undefined ? {} : { body }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });

  it.each<[string, unknown, string]>([
    ["pull and url", { pull: "q", url: "https://example.com/" }, "target.pull"],
    ["pull and worker", { pull: "q", worker: "test" }, "target.pull"],
    ["an HTTP field on a pull target", { pull: "q", method: "PUT" }, "target.method"],
    ["a queue name out of shape", { pull: "Q!" }, "target.pull"],
  ])("a target with %s is refused, naming the field", async (_case, target, field) => {
    const res = await api("/v1/jobs", { method: "POST", body: { target } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });

  it("flow control on a pull target is refused (its workers set the pace)", async () => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: { pull: "q" }, flowControl: { key: "k", rate: 1 } } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe("flowControl");
  });
});
