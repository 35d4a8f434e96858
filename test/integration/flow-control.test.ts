/**
 * Flow control per key (issue 13, items 2 and 3), through the real consumer, the FlowKey object
 * and the API: over its key's limits an attempt waits (its lease goes back to the bucket, due
 * again later, no attempt used), a paused key starts nothing, a 429 with Retry-After slows the
 * whole key (at most FLOW_WAIT_MAX_MS; a resume or a PATCH ends it), and a key belongs to one tenant. A job without a key is governed by its target
 * origin's implicit key: at most ORIGIN_PARALLELISM at once per origin, and a 429 with
 * Retry-After slows that origin's other key-less jobs. The gate's own promises (no window over the rate,
 * never over the parallelism, order of due time) are property-tested in test/unit/flow.test.ts;
 * the rate and parallelism seen at a real target are measured in test/e2e/flow-control.test.ts.
 *
 * Time: one file-wide virtual clock (the buckets and the FlowKey objects read it); targets' hangs
 * are real. The fire queue is captured for the file: tests feed the consumer themselves.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { ORIGIN_KEY_PARTS } from "../../src/core/origin-key";
import type { FlowKey } from "../../src/flow/flow-key";
import {
  allShards,
  api,
  captureFiresForFile,
  counters,
  D1_PROTOTYPE,
  dispatchAll,
  dispatchOf,
  type Execution,
  fileClock,
  KEYS,
  newExecution,
  received,
  receiverUrl,
  spyOnD1,
  startFire,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
/** config FLOW_WAIT_MAX_MS's default: the longest a key's answer holds an execution back */
const FLOW_WAIT_MAX_MS = 300_000;
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
  it("starts at most `parallelism` of a key at once: a short wait is spent in the consumer, each runs on its first attempt, the wait shown", async () => {
    const waitsBefore = (await counters()).flow_waits_total ?? 0;
    const base = uniquePath("hang/300");
    let n = 0;
    const jobs = await dispatchedJobs(3, { key: "par-1", parallelism: 1 }, () => `${base}&i=${n++}`);
    const batch = await startFire(jobs.map((j) => j.message));
    expect(batch.ackedOnReturn).toHaveLength(3);
    await batch.done;

    // the target saw one at a time: each request arrived after the one before it was answered
    const arrivals = (await received(base)).map((r) => r.at).sort((a, b) => a - b);
    expect(arrivals).toHaveLength(3);
    for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]! - arrivals[i - 1]!).toBeGreaterThanOrEqual(290);
    const views = await Promise.all(jobs.map((j) => j.e.view()));
    expect(views.map((v) => v?.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    const waits: number[] = [];
    for (const j of jobs) {
      const execution = await executionOfJob(j.e.job.id);
      expect(execution.attempts.map((a) => a.attempt)).toEqual([1]);
      waits.push(execution.attempts[0]!.waitMs ?? 0);
    }
    expect(waits.filter((w) => w > 0)).toHaveLength(2);
    expect((await counters()).flow_waits_total).toBe(waitsBefore + 2);
    const key = await flowKey("par-1");
    expect(key.limits).toEqual({ rate: null, periodSeconds: 1, parallelism: 1, from: "job" });
    expect(key.inFlight).toBe(0);
  });

  it("sends a longer wait back to its bucket, due again later, without using an attempt; it runs then, on its first attempt", async () => {
    const waitsBefore = (await counters()).flow_waits_total ?? 0;
    // the first due holds the key's one slot longer than the consumer waits (2 s)
    const flowControl = { key: "par-long", parallelism: 1 };
    const [long] = await dispatchedJobs(1, flowControl, () => uniquePath("hang/2600"));
    clock.advance(1);
    const short = await dispatchedJobs(2, flowControl, () => uniquePath());
    const jobs = [long!, ...short];
    await (await startFire(jobs.map((j) => j.message))).done;

    const views = await Promise.all(jobs.map((j) => j.e.view()));
    const waited = views.filter((v) => v?.status === "scheduled");
    expect(views.map((v) => v?.status)).toEqual(["succeeded", "scheduled", "scheduled"]);
    for (const v of waited) {
      expect(v!.attempts).toBe(0);
      expect(v!.dueAt).toBeGreaterThan(clock.at);
    }
    expect((await counters()).flow_waits_total).toBe(waitsBefore + 2);
    expect((await flowKey("par-long")).waiting).toBe(2);

    // when their due time comes they run, each on its first attempt, the wait shown
    const messages = await dispatchAll(
      short.map((j) => j.e),
      clock,
      sent,
    );
    await (await startFire(messages)).done;
    for (const j of short) {
      const execution = await executionOfJob(j.e.job.id);
      expect(execution.status).toBe("succeeded");
      expect(execution.attempts.map((a) => a.attempt)).toEqual([1]);
      expect(execution.attempts[0]!.waitMs).toBeGreaterThan(0);
    }
  });

  it("does not start an attempt whose job was canceled while it waited in the consumer: its permit is freed and it ends canceled", async () => {
    const flowControl = { key: "cancel-while-waiting", parallelism: 1 };
    const [first] = await dispatchedJobs(1, flowControl, () => uniquePath("hang/600"));
    clock.advance(1);
    const waiterPath = uniquePath();
    const [waiter] = await dispatchedJobs(1, flowControl, () => waiterPath);
    const batch = await startFire([first!.message, waiter!.message]);
    // the waiter is waiting in the consumer for the one slot: cancel its job now
    expect((await api(`/v1/jobs/${waiter!.e.job.id}`, { method: "DELETE" })).status).toBe(200);
    await batch.done;

    expect((await first!.e.view())?.status).toBe("succeeded");
    expect(await received(waiterPath)).toEqual([]);
    expect((await waiter!.e.view())?.status).toBe("canceled");
    const key = await flowKey("cancel-while-waiting");
    expect(key.inFlight).toBe(0);
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

  it("holds a key at most FLOW_WAIT_MAX_MS for one Retry-After of a year: the next execution waits no longer; the one that got it retries within its retry.maxDelayMs", async () => {
    const year = 365 * 86_400;
    const flowControl = { key: "slow-down-year", parallelism: 10 };
    const [throttled] = await dispatchedJobs(1, flowControl, () => `${uniquePath("fail/429")}&retryAfter=${year}`);
    await (await startFire([throttled!.message])).done;
    const key = await flowKey("slow-down-year");
    expect(Date.parse(key.throttledUntil!)).toBe(clock.at + FLOW_WAIT_MAX_MS);
    // the execution's own retry honours Retry-After up to its policy's maxDelayMs (5 min by default)
    const own = await throttled!.e.view();
    expect(own).toMatchObject({ status: "scheduled", attempts: 1 });
    expect(own!.dueAt).toBeLessThanOrEqual(clock.at + 300_000);

    const [next] = await dispatchedJobs(1, flowControl, () => uniquePath());
    await (await startFire([next!.message])).done;
    const view = await next!.e.view();
    expect(view).toMatchObject({ status: "scheduled", attempts: 0 });
    expect(view!.dueAt).toBe(clock.at + FLOW_WAIT_MAX_MS);
  });

  it.each([
    ["POST /resume", (key: string) => api(`/v1/flow-control/${key}/resume`, { method: "POST" })],
    ["PATCH", (key: string) => api(`/v1/flow-control/${key}`, { method: "PATCH", body: { parallelism: 10 } })],
  ])("%s ends a target's slow-down: the key's next execution starts at once", async (_, end) => {
    const name = `slow-down-ended-${crypto.randomUUID().slice(0, 8)}`;
    const flowControl = { key: name, parallelism: 10 };
    const [throttled] = await dispatchedJobs(1, flowControl, () => `${uniquePath("fail/429")}&retryAfter=60`);
    await (await startFire([throttled!.message])).done;
    expect((await flowKey(name)).throttledUntil).not.toBeNull();

    const res = await end(name);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { throttledUntil: string | null }).throttledUntil).toBeNull();
    expect((await flowKey(name)).throttledUntil).toBeNull();
    const [next] = await dispatchedJobs(1, flowControl, () => uniquePath());
    await (await startFire([next!.message])).done;
    expect((await next!.e.view())?.status).toBe("succeeded");
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

  it("keeps an origin key's permits in memory only: a key-less delivery writes no permit rows, a job's own key does", async () => {
    const limits = { rate: null, periodMs: 1_000, parallelism: 2 };
    const ask = { executionId: "exe-origin-permit", firstDueAt: clock.at, holdMs: 1_000 };
    const own = env.FLOW_KEY.getByName("acme\nown-key");
    const origin = env.FLOW_KEY.getByName("acme\norigin:https://api.example.com#0");
    const stored = (key: typeof own) =>
      runInDurableObject(key, (_o, state) => state.storage.sql.exec("SELECT execution_id FROM flow_permits").toArray());
    expect((await own.ask(limits, [ask]))[0]?.granted).toBe(true);
    expect((await origin.ask(limits, [ask]))[0]?.granted).toBe(true);
    expect(await stored(own)).toHaveLength(1);
    expect(await stored(origin)).toHaveLength(0);
    // the origin's permit still counts: the limit holds while the object lives
    expect((await origin.view()).inFlight).toBe(1);
  });

  it("refuses bad flow control with a 400 naming the field", async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "k" } }, "flowControl"],
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "a b", rate: 1 } }, "flowControl.key"],
      // reserved for the origin keys, whatever follows
      ["/v1/jobs", { target: { url: `${receiverUrl()}/ok` }, flowControl: { key: "origin:billing", rate: 1 } }, "flowControl.key"],
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
    for (const name of ["a b", "origin:https://API.example.com", "origin:https://api.example.com/path"]) {
      const badKey = await api(`/v1/flow-control/${encodeURIComponent(name)}`);
      expect(badKey.status, name).toBe(400);
      expect(((await badKey.json()) as { error: { field: string } }).error.field).toBe("key");
    }
  });

  describe("without a key of its own: the target origin's key", () => {
    const ORIGIN_PARALLELISM = 2;
    const consumerEnv = { ...env, ORIGIN_PARALLELISM: String(ORIGIN_PARALLELISM) };
    // one receiver, two origins: the same port by address and by name
    const origin = new URL(receiverUrl()).origin;
    const otherOrigin = origin.replace("127.0.0.1", "localhost");
    const originKey = (o: string) => encodeURIComponent(`origin:${o}`);

    async function keyless(n: number, base: string, path: () => string) {
      const jobs: { e: Execution; message: Awaited<ReturnType<typeof dispatch>> }[] = [];
      for (let i = 0; i < n; i++) {
        const e = await newExecution({ target: { url: `${base}${path()}` } });
        jobs.push({ e, message: await dispatch(e) });
      }
      return jobs;
    }

    it("starts at most ORIGIN_PARALLELISM key-less deliveries to one origin at once; another origin is unaffected", async () => {
      const tag = crypto.randomUUID();
      const one = await keyless(4, origin, () => `/hang/300?t=${tag}-one-${crypto.randomUUID()}`);
      const other = await keyless(2, otherOrigin, () => `/hang/300?t=${tag}-other-${crypto.randomUUID()}`);
      await (
        await startFire(
          [...one, ...other].map((j) => j.message),
          { env: consumerEnv },
        )
      ).done;

      // all ran in this batch, at most ORIGIN_PARALLELISM at a time at the target: a request
      // arrived only once one of the ORIGIN_PARALLELISM before it had been answered (300 ms)
      const views = await Promise.all(one.map((j) => j.e.view()));
      expect(views.map((v) => v?.status)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
      for (const v of views) expect(v!.attempts).toBe(1);
      const arrivals = (await received(`/hang/300?t=${tag}-one-`)).map((r) => r.at).sort((a, b) => a - b);
      expect(arrivals).toHaveLength(4);
      for (let i = ORIGIN_PARALLELISM; i < arrivals.length; i++)
        expect(arrivals[i]! - arrivals[i - ORIGIN_PARALLELISM]!).toBeGreaterThanOrEqual(290);
      // the other origin has its own key: both ran at once
      expect((await Promise.all(other.map((j) => j.e.view()))).map((v) => v?.status)).toEqual(["succeeded", "succeeded"]);
      const otherArrivals = (await received(`/hang/300?t=${tag}-other-`)).map((r) => r.at);
      expect(otherArrivals).toHaveLength(2);
      expect(Math.abs(otherArrivals[0]! - otherArrivals[1]!)).toBeLessThan(290);

      const res = await api(`/v1/flow-control/${originKey(origin)}`);
      expect(res.status).toBe(200);
      const key = (await res.json()) as { key: string; limits: unknown; inFlight: number; waiting: number; throttledTotal: number };
      expect(key.key).toBe(`origin:${origin}`);
      expect(key.limits).toEqual({ rate: null, periodSeconds: 1, parallelism: ORIGIN_PARALLELISM, from: "job" });
      expect(key.inFlight).toBe(0);
      expect(key.throttledTotal).toBeGreaterThanOrEqual(4 - ORIGIN_PARALLELISM);
    });

    it("slows the origin for a 429's Retry-After: its other key-less jobs wait until then, another origin's do not", async () => {
      const [throttled] = await keyless(1, origin, () => `${uniquePath("fail/429")}&retryAfter=30`);
      await (await startFire([throttled!.message], { env: consumerEnv })).done;
      const key = (await (await api(`/v1/flow-control/${originKey(origin)}`)).json()) as { throttledUntil: string };
      expect(Date.parse(key.throttledUntil)).toBeGreaterThanOrEqual(clock.at + 29_000);

      const [next] = await keyless(1, origin, () => uniquePath());
      const [elsewhere] = await keyless(1, otherOrigin, () => uniquePath());
      await (await startFire([next!.message, elsewhere!.message], { env: consumerEnv })).done;
      const view = await next!.e.view();
      expect(view).toMatchObject({ status: "scheduled", attempts: 0 });
      expect(view!.dueAt).toBeGreaterThanOrEqual(Date.parse(key.throttledUntil));
      expect((await elsewhere!.e.view())?.status).toBe("succeeded");

      // ORIGIN_PARALLELISM 0 turns the origin keys off: nothing is asked, the delivery starts
      const [unkeyed] = await keyless(1, origin, () => uniquePath());
      await (await startFire([unkeyed!.message], { env: { ...env, ORIGIN_PARALLELISM: "0" } })).done;
      expect((await unkeyed!.e.view())?.status).toBe("succeeded");
    });

    /**
     * Issue 35 item 6: an origin's key is held by ORIGIN_KEY_PARTS objects, so that no object takes
     * every key-less delivery of an origin (a Durable Object's soft limit is 1,000 requests/s).
     */
    describe("held by parts (issue 35 item 6)", () => {
      const partOf = (key: string, part: number) => env.FLOW_KEY.getByName(`acme\n${key}#${part}`);

      it("a 429's slow-down heard by one part reaches every part; the API shows and changes the parts as one key", async () => {
        const host = `http://origin-${crypto.randomUUID().slice(0, 8)}.example`;
        const key = `origin:${host}`;
        const views = () => Promise.all(Array.from({ length: ORIGIN_KEY_PARTS }, (_, part) => partOf(key, part).view()));
        await partOf(key, 3).ask({ rate: null, periodMs: 1_000, parallelism: 63 }, [
          { executionId: "exe-part-3", firstDueAt: clock.at, holdMs: 60_000 },
        ]);
        await partOf(key, 3).release([{ executionId: "exe-part-3", retryAfterMs: 30_000 }]);
        for (const view of await views()) expect(view.throttledUntil).toBe(clock.at + 30_000);

        const shown = await flowKey(encodeURIComponent(key));
        expect(shown.throttledUntil).toBe(new Date(clock.at + 30_000).toISOString());
        expect(shown.grantedTotal).toBe(1);
        const paused = await api(`/v1/flow-control/${encodeURIComponent(key)}/pause`, { method: "POST" });
        expect(((await paused.json()) as { paused: boolean }).paused).toBe(true);
        for (const view of await views()) expect(view.paused).toBe(true);
        const patched = await api(`/v1/flow-control/${encodeURIComponent(key)}`, { method: "PATCH", body: { parallelism: 100 } });
        expect(((await patched.json()) as { limits: { parallelism: number } }).limits.parallelism).toBe(100);
        expect((await views()).map((v) => v.limits.parallelism).reduce((a, b) => a! + b!, 0)).toBe(100);
      });

      it("a part takes over what the origin's single object held before parts: a pause, PATCHed limits", async () => {
        const key = `origin:http://before-${crypto.randomUUID().slice(0, 8)}.example`;
        const single = env.FLOW_KEY.getByName(`acme\n${key}`);
        await single.changeLimits({ parallelism: 32 });
        await single.setPaused(true);
        const part = partOf(key, 5);
        const [answer] = await part.ask({ rate: null, periodMs: 1_000, parallelism: 63 }, [
          { executionId: "exe-adopted", firstDueAt: clock.at, holdMs: 60_000 },
        ]);
        expect(answer?.granted).toBe(false);
        expect(await part.view()).toMatchObject({ paused: true, limitsFrom: "api", limits: { parallelism: 2 } });
      });
    });
  });
});

/**
 * Per-key metrics (issue 13 item 5): each key's object lists itself in D1's flow_keys once, on
 * the first call that gives it state; GET /v1/metrics and GET /metrics read the caller's listed
 * keys from their objects.
 */
describe("flow-control keys in the metrics", () => {
  interface KeyShown {
    key: string;
    waiting?: number;
    inFlight?: number;
    currentRate?: number;
    paused?: boolean;
    grantedTotal?: number;
    throttledTotal?: number;
    error?: { code: string };
  }
  const flowMetrics = async (apiKey: string = KEYS.acme) => {
    const res = await api("/v1/metrics", {}, apiKey);
    expect(res.status).toBe(200);
    return ((await res.json()) as { flowControl: { keys: KeyShown[]; truncated: boolean } }).flowControl;
  };
  const prometheus = async (apiKey: string = KEYS.acme) => {
    const res = await api("/metrics", {}, apiKey);
    expect(res.status).toBe(200);
    return (await res.text()).split("\n");
  };
  const objectOf = (key: string, tenant = "acme") => env.FLOW_KEY.getByName(`${tenant}\n${key}`);
  /** The object writes its flow_keys row in the background: wait for a write in flight. */
  const listed = (key: string, tenant = "acme") => runInDurableObject(objectOf(key, tenant), (o: FlowKey) => o.registering);
  /** The keys every shard's flow_keys lists for a tenant, in key order. */
  const registry = async (tenant: string) =>
    (await allShards<{ key: string }>("SELECT key FROM flow_keys WHERE tenant = ?", tenant)).map((r) => r.key).sort();

  it("shows a key's waiting, in flight and throttled total in /v1/metrics and /metrics after its jobs waited", async () => {
    // one a 10 s: the other two are told to come back later than the consumer waits, so they wait in their buckets
    const jobs = await dispatchedJobs(3, { key: "metered", rate: 1, periodSeconds: 10 }, () => uniquePath());
    await (await startFire(jobs.map((j) => j.message))).done;
    await listed("metered");
    expect(await registry("acme")).toContain("metered");
    // a delivery still running holds a permit (asked as the consumer asks, first due before the waiters)
    const held = await objectOf("metered").ask({ rate: null, periodMs: 1_000, parallelism: 1 }, [
      { executionId: "exe-still-running", firstDueAt: clock.at - 60_000, holdMs: 60_000 },
    ]);
    expect(held[0]?.granted).toBe(true);

    const { keys, truncated } = await flowMetrics();
    expect(truncated).toBe(false);
    // one ran and two were told to wait by the consumer's ask; one permit is held now
    const want = { key: "metered", waiting: 2, inFlight: 1, currentRate: 2, paused: false, grantedTotal: 2, throttledTotal: 2 };
    expect(keys.find((k) => k.key === "metered")).toMatchObject(want);
    expect(keys.map((k) => k.key)).toEqual([...keys.map((k) => k.key)].sort());

    const lines = await prometheus();
    const labels = '{tenant="acme",key="metered"}';
    expect(lines).toEqual(
      expect.arrayContaining([
        `scheduler_flow_waiting${labels} 2`,
        `scheduler_flow_in_flight${labels} 1`,
        `scheduler_flow_current_rate${labels} 2`,
        `scheduler_flow_paused${labels} 0`,
        `scheduler_flow_granted_total${labels} 2`,
        `scheduler_flow_throttled_total${labels} 2`,
        `scheduler_flow_keys_listed{tenant="acme"} ${keys.length}`,
        'scheduler_flow_keys_unreadable{tenant="acme"} 0',
        'scheduler_flow_keys_truncated{tenant="acme"} 0',
      ]),
    );
  });

  it("shows only the caller's tenant's keys; a read of a key lists nothing", async () => {
    expect((await api("/v1/flow-control/globex-only", { method: "PATCH", body: { parallelism: 2 } }, KEYS.globex)).status).toBe(200);
    await listed("globex-only", "globex");
    expect((await api("/v1/flow-control/acme-paused/pause", { method: "POST" })).status).toBe(200);
    await listed("acme-paused");
    // globex only reads its key of the same name
    expect((await api("/v1/flow-control/acme-paused", {}, KEYS.globex)).status).toBe(200);
    expect(await registry("globex")).not.toContain("acme-paused");

    const acme = (await flowMetrics()).keys.map((k) => k.key);
    expect(acme).toContain("acme-paused");
    expect(acme).not.toContain("globex-only");
    const globex = (await flowMetrics(KEYS.globex)).keys.map((k) => k.key);
    expect(globex).toContain("globex-only");
    expect(globex).not.toContain("acme-paused");

    const acmeText = await prometheus();
    expect(acmeText).toContain('scheduler_flow_paused{tenant="acme",key="acme-paused"} 1');
    expect(acmeText.filter((l) => l.includes("globex"))).toEqual([]);
    expect((await prometheus(KEYS.globex)).filter((l) => l.includes('tenant="acme"'))).toEqual([]);
  });

  it("answers the metrics when the key list cannot be read: the buckets' figures, the keys marked unavailable, never a 500", async () => {
    const prepare = D1_PROTOTYPE.prepare;
    const failing = spyOnD1("prepare").mockImplementation(function (this: D1Database, sql: string) {
      if (sql.includes('from "flow_keys"')) throw new Error("injected: D1 unavailable");
      return prepare.call(this, sql);
    });
    onTestFinished(() => failing.mockRestore());
    const json = await api("/v1/metrics");
    expect(json.status).toBe(200);
    const body = (await json.json()) as { counters: Record<string, number>; flowControl: { keys: unknown[]; error?: { code: string } } };
    expect(typeof body.counters.fired_total).toBe("number");
    expect(body.flowControl).toMatchObject({ keys: [], error: { code: "unavailable" } });
    const text = await api("/metrics");
    expect(text.status).toBe(200);
    expect(await text.text()).toContain("scheduler_fired_total");
    expect(failing.mock.calls.some(([sql]) => sql.includes('from "flow_keys"'))).toBe(true);
  });

  it("lists a key whose flow_keys write failed on its next call, and writes it once", async () => {
    const prepare = D1_PROTOTYPE.prepare;
    const inserts = (sql: string) => sql.startsWith('insert into "flow_keys"');
    const failing = spyOnD1("prepare").mockImplementation(function (this: D1Database, sql: string) {
      if (inserts(sql)) throw new Error("injected: D1 unavailable");
      return prepare.call(this, sql);
    });
    onTestFinished(() => failing.mockRestore());
    // the call itself succeeds; only the listing failed
    expect((await api("/v1/flow-control/late-listed", { method: "PATCH", body: { rate: 5 } })).status).toBe(200);
    await listed("late-listed");
    expect(failing.mock.calls.filter(([sql]) => inserts(sql))).toHaveLength(1);
    failing.mockRestore();
    expect(await registry("acme")).not.toContain("late-listed");
    expect((await flowMetrics()).keys.map((k) => k.key)).not.toContain("late-listed");

    expect((await api("/v1/flow-control/late-listed/pause", { method: "POST" })).status).toBe(200);
    await listed("late-listed");
    expect(await registry("acme")).toContain("late-listed");
    expect((await flowMetrics()).keys.find((k) => k.key === "late-listed")).toMatchObject({ paused: true });

    // remembered in the object's own storage: no later call writes it again
    const watching = spyOnD1("prepare");
    onTestFinished(() => watching.mockRestore());
    expect((await api("/v1/flow-control/late-listed/resume", { method: "POST" })).status).toBe(200);
    await listed("late-listed");
    expect(watching.mock.calls.filter(([sql]) => inserts(sql))).toEqual([]);
    const stored = await runInDurableObject(objectOf("late-listed"), (_o, state) =>
      state.storage.sql.exec("SELECT value FROM flow_settings WHERE name = 'registered'").toArray(),
    );
    expect(stored).toEqual([{ value: "true" }]);
  });

  it("shows a key whose object fails as unavailable, never a 500; the other keys as usual", async () => {
    expect((await api("/v1/flow-control/unreachable", { method: "PATCH", body: { parallelism: 1 } })).status).toBe(200);
    await listed("unreachable");
    const getByName = env.FLOW_KEY.getByName.bind(env.FLOW_KEY);
    const broken = vi.spyOn(env.FLOW_KEY, "getByName").mockImplementation((name: string) => {
      if (name !== "acme\nunreachable") return getByName(name);
      return { view: () => Promise.reject(new Error("injected: object unavailable")) } as unknown as ReturnType<typeof getByName>;
    });
    onTestFinished(() => broken.mockRestore());

    const { keys } = await flowMetrics();
    expect(keys.find((k) => k.key === "unreachable")).toMatchObject({ error: { code: "unavailable" } });
    expect(keys.find((k) => k.key === "metered")).toMatchObject({ waiting: expect.any(Number) });
    const lines = await prometheus();
    expect(lines).toContain('scheduler_flow_keys_unreadable{tenant="acme"} 1');
    expect(lines.filter((l) => l.includes('key="unreachable"'))).toEqual([]);
    expect(lines.some((l) => l.startsWith('scheduler_flow_waiting{tenant="acme",key="metered"} '))).toBe(true);
  });

  it("lists at most 100 keys in /v1/metrics, in key order, and says it truncated", async () => {
    // seeded as their objects would list them; their objects are read (and made) by the metrics
    const seeded = Array.from({ length: 101 }, (_, i) => `bulk-${String(i).padStart(3, "0")}`);
    await env.DB.prepare("INSERT INTO flow_keys (tenant, key, created_at) SELECT 'globex', value, 0 FROM json_each(?)")
      .bind(JSON.stringify(seeded))
      .run();
    const { keys, truncated } = await flowMetrics(KEYS.globex);
    expect(truncated).toBe(true);
    expect(keys.map((k) => k.key)).toEqual((await registry("globex")).slice(0, 100));
    expect((await prometheus(KEYS.globex)).filter((l) => l.startsWith("scheduler_flow_keys_"))).toEqual([
      'scheduler_flow_keys_listed{tenant="globex"} 102',
      'scheduler_flow_keys_unreadable{tenant="globex"} 0',
      'scheduler_flow_keys_truncated{tenant="globex"} 0',
    ]);
  });
});
