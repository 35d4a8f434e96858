/**
 * Where features meet (issue 36 items 1, 4, 6 and 8): defects found where callbacks, priority,
 * recurring jobs, redrive and pull queues share an execution or a bucket, each reproduced through
 * the real API, buckets, consumer and pull queues, asserting what the user sees.
 *
 * - A callback is an execution of its own, whose spec is its own (src/bucket/held-rows.ts
 *   specOwnerOf): it waits under its own priority and is grouped by its own target, and neither
 *   its parent job's priority nor that job's leaving or PATCH strands it or the job's executions
 *   (item 1: a recurring job's retry after a callback left; a callback's retry after a PATCH of
 *   priority; a redriven execution's first callback while it retries). Item 4: a pull job's
 *   callbacks are deliveries, sent in groups of FIRE_GROUP_SIZE.
 * - A lease a slow bucket grants after its pull queue stopped waiting is given back without
 *   using an attempt, and the queue holds the offer again: a worker then leases it as attempt 1
 *   (item 6).
 * - A PATCH of priority answered 200 is the order of the pull queue's very next lease (item 8).
 *
 * One file-wide virtual clock; the buckets' sends are captured (as groups) and handed to the real
 * consumer here.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import type { FireGroup } from "../../src/bucket/protocol";
import { occurrenceId } from "../../src/core/id";
import { pullQueueName } from "../../src/core/pull";
import { BUCKET_ANSWER_MS } from "../../src/pull/bucket-leases";
import type { PullQueue } from "../../src/pull/pull-queue";
import type { PullLeaseView } from "../../src/schemas/responses";
import {
  api,
  bucketStub,
  CONFIG,
  callbackIdOf,
  captureFireGroupsForFile,
  createJob,
  executionJson,
  fileClock,
  fire,
  jobRow,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const clock = fileClock(30 * 60_000);
const groups = captureFireGroupsForFile();

/** A retry policy whose retries wait `delayMs`, exactly. */
const retryEvery = (delayMs: number, maxAttempts = 3) => ({
  maxAttempts,
  initialDelayMs: delayMs,
  factor: 1,
  maxDelayMs: delayMs,
  jitter: 0,
});

/** Runs the bucket's alarm and hands everything the buckets sent to the consumer, as the queue would; returns the groups. */
async function pass(stub: ReturnType<typeof bucketStub>): Promise<FireGroup[]> {
  await runAlarm(stub);
  const sent = groups.splice(0);
  if (sent.length > 0) await fire(sent);
  return sent;
}

async function patch(jobId: string, body: Record<string, unknown>): Promise<void> {
  expect((await api(`/v1/jobs/${jobId}`, { method: "PATCH", body })).status).toBe(200);
}

async function cancel(jobId: string): Promise<void> {
  expect((await api(`/v1/jobs/${jobId}`, { method: "DELETE" })).status).toBeLessThan(300);
}

async function lease(queue: string, body: Record<string, unknown> = {}): Promise<PullLeaseView[]> {
  const res = await api(`/v1/pull/${queue}/lease`, { method: "POST", body });
  expect(res.status).toBe(200);
  return ((await res.json()) as { leases: PullLeaseView[] }).leases;
}

async function report(
  token: string,
  what: "complete" | "fail",
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await api(`/v1/pull/leases/${token}/${what}`, { method: "POST", ...(body === undefined ? {} : { body }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

let queues = 0;
function freshQueue(): string {
  queues += 1;
  return `meet-${queues}`;
}

describe("a callback is an execution of its own (issue 36 item 1)", () => {
  it("a recurring job of priority 9: its occurrence's retry is sent after a callback of an earlier occurrence left the bucket", async () => {
    const failing = uniquePath("fail/503");
    const callbackPath = uniquePath("ok");
    const job = await createJob({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      cron: "* * * * *",
      priority: 9,
      callback: { url: `${receiverUrl()}${callbackPath}` },
      retry: retryEvery(20_000),
    });
    const row = (await jobRow(job.id))!;
    const stub = bucketStub(row.bucket);
    const first = row.next_run_at!;
    clock.travelTo(first);
    await pass(stub); // occurrence 1: 200
    await clock.flush(stub); // its outcome in D1: its callback starts
    await patch(job.id, { target: { url: `${receiverUrl()}${failing}` } }); // from now on the target fails (the priority stays 9)

    clock.travelTo(first + 60_000);
    await pass(stub); // occurrence 2: 503, its retry due in 20 s; the callback: 200
    expect(await received(callbackPath)).toHaveLength(1);
    await clock.flush(stub); // the callback's outcome in D1: it leaves the bucket
    const second = occurrenceId(job.id, first + 60_000);
    expect((await executionJson(second)).status).toBe("scheduled");

    clock.travelTo(first + 80_000);
    await pass(stub);
    expect(await received(failing)).toHaveLength(2); // the retry went out
    await cancel(job.id);
  });

  it("a callback waiting for its retry is sent after its job's priority is PATCHed", async () => {
    const callbackPath = uniquePath("flaky/1"); // 503 once, then 200
    const job = await createJob({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      cron: "* * * * *",
      callback: { url: `${receiverUrl()}${callbackPath}` },
      retry: retryEvery(20_000),
    });
    const row = (await jobRow(job.id))!;
    const stub = bucketStub(row.bucket);
    clock.travelTo(row.next_run_at!);
    await pass(stub); // the occurrence: 200
    await clock.flush(stub); // its callback starts
    await pass(stub); // the callback: 503, its retry due in 20 s
    expect(await received(callbackPath)).toHaveLength(1);

    await patch(job.id, { priority: 2 });
    clock.advance(20_000);
    await pass(stub);
    expect(await received(callbackPath)).toHaveLength(2); // the retry went out
    await cancel(job.id);
  });

  it("a redriven execution of priority 9: its first failure callback, still retrying, is sent after the execution died again and left", async () => {
    const failurePath = uniquePath("flaky/1"); // 503 once (the first callback's first attempt), then 200
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/404")}` },
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
      priority: 9,
      retry: retryEvery(60_000, 2),
    });
    await pass(e.stub); // 404: dead
    await clock.flush(e.stub);
    const first = await callbackIdOf(e.exe.id, "failure");
    await pass(e.stub); // the first callback: 503, its retry due in 60 s

    expect((await api(`/v1/executions/${e.exe.id}/redrive`, { method: "POST" })).status).toBe(202);
    await pass(e.stub); // dead again
    await clock.flush(e.stub); // the execution leaves the bucket; its second callback starts
    const second = await callbackIdOf(e.exe.id, "failure");
    await pass(e.stub); // the second callback: 200

    clock.advance(60_000);
    await pass(e.stub); // the first callback's retry: 200
    const requests = await received(failurePath);
    expect(requests.map((r) => r.headers["webhook-id"])).toEqual([first, second, first]);
  });
});

describe("a pull job's callbacks are deliveries (issue 36 item 4)", () => {
  it("go out in groups of FIRE_GROUP_SIZE, not of the pull size", async () => {
    const queue = freshQueue();
    const failurePath = uniquePath("ok");
    const spec = {
      target: { pull: queue, payload: null },
      cron: "* * * * *",
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
      retry: retryEvery(1_000, 1),
    };
    // more jobs in one bucket than a group of deliveries holds
    const wanted = CONFIG.FIRE_GROUP_SIZE + 2;
    const byBucket = new Map<number, string[]>();
    const others: string[] = [];
    for (let i = 0; i < 100 && ![...byBucket.values()].some((ids) => ids.length >= wanted); i++) {
      const job = await createJob(spec);
      const { bucket } = (await jobRow(job.id))!;
      byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), job.id]);
    }
    const [bucket, jobIds] = [...byBucket].find(([, ids]) => ids.length >= wanted)!;
    for (const [b, ids] of byBucket) if (b !== bucket) others.push(...ids);
    for (const id of others) await cancel(id);
    const stub = bucketStub(bucket);
    clock.travelTo((await jobRow(jobIds[0]!))!.next_run_at!);
    await pass(stub); // the occurrences are offered to the queue
    const leases = await lease(queue, { max: 100, leaseMs: 60_000 });
    expect(leases).toHaveLength(wanted);
    for (const l of leases) expect((await report(l.token, "fail", { retryable: false, error: "bad input" })).status).toBe(200);
    await clock.flush(stub); // the deaths in D1: their failure callbacks start

    const sent = await pass(stub);
    const callbackGroups = sent.filter((g) => g.executions.some((x) => x.executionId.startsWith("exe_i")));
    expect(callbackGroups.flatMap((g) => g.executions)).toHaveLength(wanted);
    for (const g of callbackGroups) expect(g.executions.length).toBeLessThanOrEqual(CONFIG.FIRE_GROUP_SIZE);
    expect(await received(failurePath)).toHaveLength(wanted);
    for (const id of jobIds) await cancel(id);
  });
});

describe("a pull queue and a slow bucket (issue 36 item 6)", () => {
  /** A promise the test resolves when it says. */
  function gate(): { opened: Promise<void>; open(): void } {
    let open: () => void = () => undefined;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    return { opened, open };
  }

  it("a lease the bucket granted after the queue stopped waiting is given back without using an attempt, even after a request dropped its offer: a worker leases it as attempt 1", async () => {
    const queue = freshQueue();
    const e = await newExecution({ target: { pull: queue, payload: null }, retry: retryEvery(1_000, 1) });
    await pass(e.stub); // offered
    expect((await e.view())?.status).toBe("dispatched");

    // the bucket answers the queue's lease request after the queue's wait for it (BUCKET_ANSWER_MS)
    // ended, and the queue's giving back reaches the bucket only when the test says
    const late = gate();
    const back = gate();
    const answers: Promise<unknown>[] = [];
    const namespace = env.BUCKET as unknown as { getByName(name: string): Record<string, unknown> };
    const realGetByName = namespace.getByName.bind(namespace);
    const stubs = vi.spyOn(namespace, "getByName").mockImplementation((name: string) => {
      const real = realGetByName(name) as unknown as Record<string | symbol, (...args: unknown[]) => Promise<unknown>>;
      return new Proxy({} as Record<string, unknown>, {
        get(_target, prop) {
          if (prop === "then") return undefined;
          return (...args: unknown[]) => {
            if (prop === "complete") return back.opened.then(() => real[prop]!(...args));
            if (prop !== "leaseOffered") return real[prop]!(...args);
            const answer = late.opened.then(() => real[prop]!(...args));
            answers.push(answer);
            return answer;
          };
        },
      });
    });
    const realSetTimeout = globalThis.setTimeout;
    // the queue's wait for its bucket ends at once (no real 5 s in a test)
    const timers = vi
      .spyOn(globalThis, "setTimeout")
      .mockImplementation(((handler: () => void, ms?: number, ...rest: unknown[]) =>
        (realSetTimeout as (...args: unknown[]) => ReturnType<typeof setTimeout>)(
          handler,
          ms === BUCKET_ANSWER_MS ? 0 : ms,
          ...rest,
        )) as typeof setTimeout);
    try {
      expect(await lease(queue, { max: 1, leaseMs: 30_000 })).toEqual([]); // the queue gave up on the bucket
      timers.mockRestore();
      late.open(); // the bucket's late answer: a lease granted to nobody
      expect(await Promise.all(answers)).toMatchObject([[{ ok: true, executionId: e.exe.id }]]);
      // meanwhile a request meets the offer while that lease stands: the queue drops it
      expect(await lease(queue, { max: 1, leaseMs: 30_000 })).toEqual([]);
      back.open();
      const queueStub = env.PULL_QUEUE.getByName(pullQueueName("acme", queue));
      await runInDurableObject(queueStub, (q: PullQueue) => Promise.all([...q.lateAnswers]));
    } finally {
      stubs.mockRestore();
      timers.mockRestore();
    }
    // past the late lease's deadline: nothing expires (it was given back), nothing is dead
    clock.advance(31_000);
    await runAlarm(e.stub);
    expect((await executionJson(e.exe.id)).status).not.toBe("dead");

    const [got, ...more] = await lease(queue, { max: 1, leaseMs: 30_000 });
    expect(more).toEqual([]);
    expect(got).toMatchObject({ executionId: e.exe.id, attempt: 1 });
    expect((await report(got!.token, "complete")).body.status).toBe("succeeded");
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ status: "succeeded", attempts: 1 });
  });
});

describe("a PATCH of priority and a pull queue (issue 36 item 8)", () => {
  it("the lease sent right after the PATCH's 200 hands out by the new priorities", async () => {
    const queue = freshQueue();
    const offer = async (priority: number) => {
      clock.advance(1); // each due at a time of its own
      const e = await newExecution({ target: { pull: queue, payload: null }, priority });
      await pass(e.stub);
      expect((await e.view())?.status).toBe("dispatched");
      return e;
    };
    const lowered = await offer(9);
    const middle = await offer(5);
    const raised = await offer(5);
    await patch(lowered.job.id, { priority: 1 });
    await patch(raised.job.id, { priority: 9 });
    const order = [];
    for (let i = 0; i < 3; i++) order.push((await lease(queue, { max: 1, leaseMs: 30_000 }))[0]?.executionId);
    expect(order).toEqual([raised.exe.id, middle.exe.id, lowered.exe.id]);
  });
});
