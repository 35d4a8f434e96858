/**
 * Flow control per key (issue 13, items 2 and 3), through the real consumer, the FlowKey object
 * and the API: over its key's limits an attempt waits (its lease goes back to the bucket, due
 * again later, no attempt used), a paused key starts nothing, a 429 with Retry-After slows the
 * whole key, and a key belongs to one tenant. The gate's own promises (no window over the rate,
 * never over the parallelism, order of due time) are property-tested in test/unit/flow.test.ts;
 * the rate and parallelism seen at a real target are measured in test/e2e/flow-control.test.ts.
 *
 * Time: one file-wide virtual clock (the buckets and the FlowKey objects read it); targets' hangs
 * are real. The fire queue is captured for the file: tests feed the consumer themselves.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  api,
  captureFiresForFile,
  counters,
  dispatchAll,
  dispatchOf,
  type Execution,
  fileClock,
  KEYS,
  newExecution,
  receiverUrl,
  startFire,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

async function flowKey(key: string, apiKey: string = KEYS.acme) {
  const res = await api(`/v1/flow-control/${key}`, {}, apiKey);
  expect(res.status).toBe(200);
  return (await res.json()) as {
    limits: { rate: number | null; periodSeconds: number; parallelism: number | null; from: string | null };
    paused: boolean;
    throttledUntil: string | null;
    inFlight: number;
    waiting: number;
    grantedTotal: number;
    throttledTotal: number;
  };
}

async function executionOfJob(jobId: string) {
  const res = await api(`/v1/jobs/${jobId}/executions`);
  const body = (await res.json()) as { executions: { status: string; attempts: { attempt: number; waitMs: number }[] }[] };
  return body.executions[0]!;
}

/** Jobs of one key, each dispatched by its bucket; returns them with their fire messages. */
async function dispatchedJobs(n: number, flowControl: Record<string, unknown>, path: () => string) {
  const jobs: { e: Execution; message: Awaited<ReturnType<typeof dispatch>> }[] = [];
  for (let i = 0; i < n; i++) {
    const e = await newExecution({ target: { url: `${receiverUrl()}${path()}` }, flowControl });
    jobs.push({ e, message: await dispatch(e) });
  }
  return jobs;
}

describe("flow control", () => {
  it("starts at most `parallelism` of a key at once: the rest wait in their bucket, due again later, without using an attempt", async () => {
    const waitsBefore = (await counters()).flow_waits_total ?? 0;
    const jobs = await dispatchedJobs(3, { key: "par-1", parallelism: 1 }, () => uniquePath("hang/300"));
    const batch = await startFire(jobs.map((j) => j.message));
    expect(batch.ackedOnReturn).toHaveLength(3);
    await batch.done;

    const views = await Promise.all(jobs.map((j) => j.e.view()));
    const ran = views.filter((v) => v?.status === "succeeded");
    const waited = views.filter((v) => v?.status === "scheduled");
    expect(ran).toHaveLength(1);
    expect(waited).toHaveLength(2);
    for (const v of waited) {
      expect(v!.attempts).toBe(0);
      expect(v!.dueAt).toBeGreaterThan(clock.at);
    }
    expect((await counters()).flow_waits_total).toBe(waitsBefore + 2);
    const key = await flowKey("par-1");
    expect(key.limits).toEqual({ rate: null, periodSeconds: 1, parallelism: 1, from: "job" });
    expect(key.inFlight).toBe(0);
    expect(key.waiting).toBe(2);

    // when their due time comes they run, one at a time in order of due time (then id), each on
    // its first attempt, the wait shown
    let waiting = jobs.filter((_, i) => views[i]?.status === "scheduled");
    for (let round = 0; round < 2; round++) {
      const messages = await dispatchAll(
        waiting.map((j) => j.e),
        clock,
        sent,
      );
      await (await startFire(messages)).done;
      const states = await Promise.all(waiting.map((j) => j.e.view()));
      expect(states.filter((v) => v?.status === "succeeded")).toHaveLength(1);
      const done = waiting.find((_, i) => states[i]?.status === "succeeded")!;
      // all were first due at the same instant: the smaller id goes first
      expect(done.e.exe.id).toBe(waiting.map((j) => j.e.exe.id).sort()[0]);
      const execution = await executionOfJob(done.e.job.id);
      expect(execution.attempts.map((a) => a.attempt)).toEqual([1]);
      expect(execution.attempts[0]!.waitMs).toBeGreaterThan(0);
      waiting = waiting.filter((j) => j !== done);
    }
  });

  it("starts nothing of a paused key until it is resumed; the pause is per key and shown", async () => {
    const paused = await api("/v1/flow-control/pausable/pause", { method: "POST" });
    expect(paused.status).toBe(200);
    expect(((await paused.json()) as { paused: boolean }).paused).toBe(true);

    const [job] = await dispatchedJobs(1, { key: "pausable", rate: 100 }, () => uniquePath());
    await (await startFire([job!.message])).done;
    expect((await job!.e.view())?.status).toBe("scheduled");
    expect((await executionOfJob(job!.e.job.id)).attempts).toEqual([]);

    // another key of the same tenant is not paused
    const [other] = await dispatchedJobs(1, { key: "not-paused", rate: 100 }, () => uniquePath());
    await (await startFire([other!.message])).done;
    expect((await other!.e.view())?.status).toBe("succeeded");

    const resumed = await api("/v1/flow-control/pausable/resume", { method: "POST" });
    expect(((await resumed.json()) as { paused: boolean }).paused).toBe(false);
    await (await startFire([await dispatch(job!.e)])).done;
    expect((await job!.e.view())?.status).toBe("succeeded");
  });

  it("slows the whole key for a 429's Retry-After: the next execution of that key waits until then", async () => {
    const [throttled] = await dispatchedJobs(1, { key: "slow-down", parallelism: 10 }, () => `${uniquePath("fail/429")}&retryAfter=30`);
    await (await startFire([throttled!.message])).done;
    const key = await flowKey("slow-down");
    expect(Date.parse(key.throttledUntil!)).toBeGreaterThanOrEqual(clock.at + 29_000);

    const [next] = await dispatchedJobs(1, { key: "slow-down", parallelism: 10 }, () => uniquePath());
    await (await startFire([next!.message])).done;
    const view = await next!.e.view();
    expect(view?.status).toBe("scheduled");
    expect(view!.dueAt).toBeGreaterThanOrEqual(Date.parse(key.throttledUntil!));
  });

  it("keeps a key per tenant: another tenant's key of the same name is untouched", async () => {
    await api("/v1/flow-control/shared-name/pause", { method: "POST" });
    const theirs = await flowKey("shared-name", KEYS.globex);
    expect(theirs.paused).toBe(false);
    expect((await flowKey("shared-name")).paused).toBe(true);
  });

  it("changes a key's limits live with PATCH; those win over the jobs' until changed", async () => {
    const res = await api("/v1/flow-control/patched", { method: "PATCH", body: { parallelism: 3, rate: 20 } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { limits: unknown }).limits).toEqual({ rate: 20, periodSeconds: 1, parallelism: 3, from: "api" });
    const jobs = await dispatchedJobs(3, { key: "patched", parallelism: 1 }, () => uniquePath("hang/100"));
    await (await startFire(jobs.map((j) => j.message))).done;
    const views = await Promise.all(jobs.map((j) => j.e.view()));
    expect(views.every((v) => v?.status === "succeeded")).toBe(true);
  });

  it("keeps an execution's earlier attempts when it waits: the attempt log shows the failed one and the one that ran after the wait", async () => {
    const [job] = await dispatchedJobs(1, { key: "log-kept", parallelism: 5 }, () => uniquePath("flaky/1"));
    await (await startFire([job!.message])).done;
    expect((await job!.e.view())?.attempts).toBe(1);

    await api("/v1/flow-control/log-kept/pause", { method: "POST" });
    await (await startFire([await dispatch(job!.e)])).done;
    expect((await job!.e.view())?.status).toBe("scheduled");

    await api("/v1/flow-control/log-kept/resume", { method: "POST" });
    await (await startFire([await dispatch(job!.e)])).done;
    expect((await job!.e.view())?.status).toBe("succeeded");
    const execution = await executionOfJob(job!.e.job.id);
    expect(execution.attempts.map((a) => a.attempt)).toEqual([1, 2]);
    expect(execution.attempts[1]!.waitMs).toBeGreaterThan(0);
  });

  it("forgets the stored permit of a delivery whose consumer never released it once it lapsed, so a restart does not restore it", async () => {
    const key = env.FLOW_KEY.getByName("acme\nlapsing");
    const limits = { rate: null, periodMs: 1_000, parallelism: 2 };
    const permits = () => runInDurableObject(key, (_o, state) => state.storage.sql.exec("SELECT execution_id FROM flow_permits").toArray());
    expect((await key.ask(limits, [{ executionId: "exe-dead-consumer", firstDueAt: clock.at, holdMs: 1_000 }]))[0]?.granted).toBe(true);
    expect(await permits()).toHaveLength(1);
    clock.advance(1_001);
    expect((await key.ask(limits, [{ executionId: "exe-next", firstDueAt: clock.at, holdMs: 1_000 }]))[0]?.granted).toBe(true);
    expect(await permits()).toEqual([{ execution_id: "exe-next" }]);
  });

  it("refuses bad flow control with a 400 naming the field", async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "k" } }, "flowControl"],
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "a b", rate: 1 } }, "flowControl.key"],
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "k", rate: 0 } }, "flowControl.rate"],
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "k", parallelism: 2, burst: 1 } }, "flowControl.burst"],
    ];
    for (const [path, body, field] of cases) {
      const res = await api(path, { method: "POST", body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
    }
    const patch = await api("/v1/flow-control/k", { method: "PATCH", body: { parallelism: 0 } });
    expect(patch.status).toBe(400);
    expect(((await patch.json()) as { error: { field: string } }).error.field).toBe("parallelism");
    const badKey = await api("/v1/flow-control/a%20b");
    expect(badKey.status).toBe(400);
    expect(((await badKey.json()) as { error: { field: string } }).error.field).toBe("key");
  });
});
