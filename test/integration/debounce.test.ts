/**
 * Debounce by key (issue 29 item 3, README "Debounce"): a create with the key of a pending
 * debounced job replaces it (trailing: the latest payload runs delay after the latest create, never
 * later than maxDelay after the first) or is absorbed (leading: the first runs at once). Holds
 * under 20 concurrent creates with one key (one job runs, with the last payload the key's object
 * accepted) and, in the integration-shards project, across D1 shards (the concurrent creates'
 * jobs are prepared in several shards; the key's object names the one job). A job that is no longer
 * pending (fired, canceled) is left alone: the create makes a new one. Driven through the API, the
 * buckets' alarms on the file's virtual clock and the real consumer to the loopback receiver.
 * "failures": a create that fails midway (a D1 error, the key's object reset) leaves nothing that
 * misleads its retry or the next create, and answers 503 on its own (a batch's other items stand).
 * "timing": a create that waited in its key's queue is decided at the object's clock, not its
 * request's, and a trailing job about to run (DUE_MARGIN_MS) is left alone.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { bucketOf } from "../../src/core/bucketing";
import { DUE_MARGIN_MS } from "../../src/core/debounce";
import { shardOfId } from "../../src/core/id";
import type { DebounceKeys } from "../../src/debounce/debounce-keys";
import { DEBOUNCE_SLOTS } from "../../src/use-cases/debounce";
import {
  allShards,
  api,
  captureFiresForFile,
  D1_PROTOTYPE,
  deliverAll,
  fileClock,
  interceptD1Batch,
  type JobJson,
  received,
  receiverUrl,
  spyOnD1,
  uniquePath,
} from "./helpers";

// two hours ahead: no alarm fires by itself (deliverAll runs them at their time)
const clock = fileClock(2 * 3_600_000);
const sent = captureFiresForFile();

type Created = JobJson & {
  debounce?: { key: string; mode: string; delayMs: number; maxDelayMs: number | null; replaced?: boolean; absorbed?: boolean };
};

async function create(body: Record<string, unknown>): Promise<{ status: number; job: Created }> {
  const res = await api("/v1/jobs", { method: "POST", body });
  const json = (await res.json()) as Created;
  if (res.status >= 300) throw new Error(`create answered ${res.status}: ${JSON.stringify(json)}`);
  return { status: res.status, job: json };
}

const newKey = () => `key-${crypto.randomUUID()}`;
const iso = (at: number) => new Date(at).toISOString();

/** The key's DebounceKeys object (api/debounce.ts). */
const keysStub = (key: string) => env.DEBOUNCE_KEYS.getByName(`acme\n${bucketOf(key, DEBOUNCE_SLOTS)}`);

type Settle = (tenant: string, prepared: { job: { id: string; spec: string } }, now: number) => Promise<unknown>;

/** Wraps the key's object's settle (each create's turn) until the returned restore is called. */
async function wrapSettle(
  key: string,
  wrap: (settle: Settle, ...args: Parameters<Settle>) => Promise<unknown>,
): Promise<() => Promise<void>> {
  let original!: Settle;
  await runInDurableObject(keysStub(key), (instance: DebounceKeys) => {
    const self = instance as unknown as { settle: Settle };
    original = self.settle;
    const bound = original.bind(instance);
    self.settle = (...args) => wrap(bound, ...args);
  });
  return () =>
    runInDurableObject(keysStub(key), (instance: DebounceKeys) => {
      (instance as unknown as { settle: Settle }).settle = original;
    });
}

/** Until restored, preparing the UPDATE of a job's settings (a PATCH, so a replacement) throws as D1 would. */
function failJobUpdates() {
  const prepare = D1_PROTOTYPE.prepare;
  return spyOnD1("prepare").mockImplementation(function (this: D1Database, query: string) {
    if (/^update "jobs" set "name"/i.test(query)) throw new Error("D1_ERROR: simulated failure");
    return prepare.call(this, query);
  } as D1Database["prepare"]);
}

/** The jobs of a debounce key, on every shard. */
const jobsOfKey = (key: string) =>
  allShards<{ id: string }>("SELECT id FROM jobs WHERE tenant = 'acme' AND json_extract(spec, '$.debounce.key') = ?", key);

describe("trailing", () => {
  it("a create with the key of a pending job replaces it: one job runs, with the latest target and payload, delay after the latest create", async () => {
    const key = newKey();
    const path = uniquePath();
    const first = await create({ target: { url: `${receiverUrl()}${path}&v=1`, body: { n: 1 } }, debounce: { key, delay: "10s" } });
    expect(first.status).toBe(201);
    expect(first.job.debounce).toEqual({ key, mode: "trailing", delayMs: 10_000, maxDelayMs: null, replaced: false, absorbed: false });
    expect(first.job.nextRunAt).toBe(iso(clock.at + 10_000));
    clock.advance(4_000);
    const second = await create({
      target: { url: `${receiverUrl()}${path}&v=2`, body: { n: 2 }, headers: { "x-v": "2" } },
      debounce: { key, delay: "10s" },
      labels: { v: "2" },
    });
    expect(second.status).toBe(200);
    expect(second.job.id).toBe(first.job.id);
    expect(second.job.debounce).toMatchObject({ key, replaced: true, absorbed: false });
    expect(second.job.nextRunAt).toBe(iso(clock.at + 10_000));
    // the job shows its key, and the replacement's settings whole
    const shown = (await (await api(`/v1/jobs/${first.job.id}`)).json()) as Created;
    expect(shown.debounce).toEqual({ key, mode: "trailing", delayMs: 10_000, maxDelayMs: null });
    expect(shown.target).toMatchObject({ url: `${receiverUrl()}${path}&v=2`, body: '{"n":2}' });
    expect(shown.labels).toEqual({ v: "2" });

    await deliverAll(clock, sent, 30_000);
    const got = await received(path);
    expect(got.map((r) => [r.path, JSON.parse(r.body)])).toEqual([[`${path}&v=2`, { n: 2 }]]);
    expect(got[0]!.headers["x-v"]).toBe("2");
    // the job ran: the next create with the key makes a new one
    const after = await create({ target: { url: `${receiverUrl()}${path}&v=3` }, debounce: { key, delay: "10s" } });
    expect(after.status).toBe(201);
    expect(after.job.id).not.toBe(first.job.id);
  });

  it("maxDelay caps the run time at the window's first create + maxDelay", async () => {
    const key = newKey();
    const debounce = { key, delay: "10s", maxDelay: "15s" };
    const t0 = clock.at;
    const first = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce });
    clock.advance(8_000);
    const second = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce });
    expect(second.job.id).toBe(first.job.id);
    expect(second.job.nextRunAt).toBe(iso(t0 + 15_000)); // not t0 + 18 s
    clock.advance(6_000); // t0 + 14 s: still pending
    const third = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce });
    expect(third.job).toMatchObject({ id: first.job.id, nextRunAt: iso(t0 + 15_000) });
  });

  it("a canceled pending job is left alone: the create makes a new job", async () => {
    const key = newKey();
    const first = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce: { key, delay: "1m" } });
    expect((await api(`/v1/jobs/${first.job.id}`, { method: "DELETE" })).status).toBe(200);
    const second = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce: { key, delay: "1m" } });
    expect(second.status).toBe(201);
    expect(second.job.id).not.toBe(first.job.id);
    const third = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce: { key, delay: "1m" } });
    expect(third).toMatchObject({ status: 200, job: { id: second.job.id } });
  });

  it("with idempotency keys (as the typed client sends): a retried replacing create changes nothing, also after the job ran", async () => {
    const key = newKey();
    const path = uniquePath();
    const body = (n: number, idempotencyKey: string) => ({
      target: { url: `${receiverUrl()}${path}`, body: `${n}` },
      debounce: { key, delay: "10s" },
      idempotencyKey,
    });
    const first = await create(body(1, `${key}-1`));
    clock.advance(2_000);
    const second = await create(body(2, `${key}-2`));
    expect(second.job).toMatchObject({ id: first.job.id, debounce: { replaced: true } });
    clock.advance(2_000);
    const retried = await create(body(2, `${key}-2`));
    expect(retried.status).toBe(200);
    expect(retried.job).toMatchObject({ id: first.job.id, nextRunAt: second.job.nextRunAt }); // not moved again
    const reused = await api("/v1/jobs", { method: "POST", body: body(3, `${key}-2`) });
    expect(reused.status).toBe(409);
    await deliverAll(clock, sent, 30_000);
    const late = await create(body(2, `${key}-2`));
    expect(late).toMatchObject({ status: 200, job: { id: first.job.id } });
    expect((await received(path)).map((r) => r.body)).toEqual(["2"]);
  });

  it("in a batch, a later item with the same key replaces the earlier one's job", async () => {
    const key = newKey();
    const path = uniquePath();
    const res = await api("/v1/jobs/batch", {
      method: "POST",
      body: {
        jobs: [
          { target: { url: `${receiverUrl()}${path}`, body: "a" }, debounce: { key, delay: "5s" } },
          { target: { url: `${receiverUrl()}${path}` }, delay: "5s" },
          { target: { url: `${receiverUrl()}${path}`, body: "c" }, debounce: { key, delay: "5s" } },
        ],
      },
    });
    const { results } = (await res.json()) as { results: { status: number; job: Created }[] };
    expect(results.map((r) => r.status)).toEqual([201, 201, 200]);
    expect(results[2]!.job.id).toBe(results[0]!.job.id);
    expect(results[2]!.job.debounce).toMatchObject({ replaced: true });
    await deliverAll(clock, sent, 20_000);
    expect((await received(path)).map((r) => r.body).sort()).toEqual(["", "c"]);
  });
});

describe("leading", () => {
  it("the first create runs at once; later ones within delay are absorbed; after the window a create runs anew", async () => {
    const key = newKey();
    const path = uniquePath();
    const debounce = { key, delay: "30s", mode: "leading" };
    const first = await create({ target: { url: `${receiverUrl()}${path}`, body: "first" }, debounce });
    expect(first.status).toBe(201);
    expect(first.job.nextRunAt).toBe(iso(clock.at));
    clock.advance(5_000);
    const second = await create({ target: { url: `${receiverUrl()}${path}`, body: "second" }, debounce });
    expect(second.status).toBe(200);
    expect(second.job.id).toBe(first.job.id);
    expect(second.job.debounce).toMatchObject({ mode: "leading", replaced: false, absorbed: true });
    expect(second.job.target).toMatchObject({ body: "first" });
    await deliverAll(clock, sent, 10_000);
    expect((await received(path)).map((r) => r.body)).toEqual(["first"]);
    // absorbed 20 s after the first: the window now ends 30 s after that
    clock.travelTo(Date.parse(first.job.createdAt) + 20_000);
    expect((await create({ target: { url: `${receiverUrl()}${path}`, body: "absorbed" }, debounce })).status).toBe(200);
    clock.travelTo(Date.parse(first.job.createdAt) + 50_000);
    const anew = await create({ target: { url: `${receiverUrl()}${path}`, body: "again" }, debounce });
    expect(anew.status).toBe(201);
    await deliverAll(clock, sent, 10_000);
    expect((await received(path)).map((r) => r.body)).toEqual(["first", "again"]);
  });
});

describe("concurrent creates", () => {
  it("20 concurrent creates with one key: one job, which runs once with the last payload the key accepted (across shards in integration-shards)", async () => {
    const key = newKey();
    const path = uniquePath();
    // the order the key's object takes the creates in, and the shards their jobs were prepared in
    const stub = env.DEBOUNCE_KEYS.getByName(`acme\n${bucketOf(key, DEBOUNCE_SLOTS)}`);
    const accepted: { n: number; shard: number | null }[] = [];
    await runInDurableObject(stub, (instance: DebounceKeys) => {
      const self = instance as unknown as {
        settle: (tenant: string, prepared: { job: { id: string; spec: string } }, now: number) => Promise<unknown>;
      };
      const settle = self.settle.bind(instance);
      self.settle = (tenant, prepared, now) => {
        accepted.push({ n: (JSON.parse(JSON.parse(prepared.job.spec).target.body) as { n: number }).n, shard: shardOfId(prepared.job.id) });
        return settle(tenant, prepared, now);
      };
    });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, n) =>
        create({ target: { url: `${receiverUrl()}${path}`, body: { n } }, debounce: { key, delay: "10s" } }),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(19).fill(200), 201]);
    const ids = new Set(answers.map((a) => a.job.id));
    expect(ids.size).toBe(1);
    expect(accepted).toHaveLength(20);
    const last = accepted.at(-1)!.n;
    if (Number(env.TEST_SHARDS) > 1) expect(new Set(accepted.map((a) => a.shard)).size).toBeGreaterThan(1);
    const [id] = ids;
    const shown = (await (await api(`/v1/jobs/${id}`)).json()) as Created;
    expect(JSON.parse(shown.target.body!)).toEqual({ n: last });
    await deliverAll(clock, sent, 30_000);
    expect((await received(path)).map((r) => JSON.parse(r.body))).toEqual([{ n: last }]);
  });
});

describe("failures", () => {
  it("a replacement whose PATCH fails answers 503 and gives its idempotency key up: the retry replaces the job with its payload", async () => {
    const key = newKey();
    const path = uniquePath();
    const body = (n: number) => ({
      target: { url: `${receiverUrl()}${path}`, body: `${n}` },
      debounce: { key, delay: "10s" },
      idempotencyKey: `${key}-${n}`,
    });
    const first = await create(body(1));
    clock.advance(2_000);
    const failing = failJobUpdates();
    let failed: Response;
    try {
      failed = await api("/v1/jobs", { method: "POST", body: body(2) });
    } finally {
      failing.mockRestore();
    }
    expect(failed.status).toBe(503);
    expect(failed.headers.get("retry-after")).toBe("1");
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe("unavailable");
    clock.advance(1_000);
    // the client's retry: the same request and key
    const retried = await create(body(2));
    expect(retried.status).toBe(200);
    expect(retried.job).toMatchObject({ id: first.job.id, target: { body: "2" }, debounce: { replaced: true } });
    await deliverAll(clock, sent, 30_000);
    expect((await received(path)).map((r) => r.body)).toEqual(["2"]);
  });

  it("in a batch, a debounced item that fails midway gets its own 503; the batch's other items stand", async () => {
    const key = newKey();
    const path = uniquePath();
    await create({ target: { url: `${receiverUrl()}${path}`, body: "a" }, debounce: { key, delay: "10s" } });
    clock.advance(1_000);
    const failing = failJobUpdates();
    let res: Response;
    try {
      res = await api("/v1/jobs/batch", {
        method: "POST",
        body: {
          jobs: [
            { target: { url: `${receiverUrl()}${path}`, body: "plain" }, delay: "5s" },
            { target: { url: `${receiverUrl()}${path}`, body: "b" }, debounce: { key, delay: "10s" } },
          ],
        },
      });
    } finally {
      failing.mockRestore();
    }
    expect(res.status).toBe(200);
    const { results } = (await res.json()) as { results: { status: number; job?: Created; error?: { code: string } }[] };
    expect(results.map((r) => r.status)).toEqual([201, 503]);
    expect(results[1]!.error!.code).toBe("unavailable");
    await deliverAll(clock, sent, 30_000);
    // the plain item ran; the failed item changed nothing: its key's job ran with the first payload
    expect((await received(path)).map((r) => r.body).sort()).toEqual(["a", "plain"]);
  });

  it("the key's object reset after a new job is written and before its window: the next create replaces that job, not a second one", async () => {
    const key = newKey();
    const path = uniquePath();
    let state!: DurableObjectState;
    await runInDurableObject(keysStub(key), (_instance, s) => {
      state = s;
    });
    // the create's job is written; then the object resets before anything else of the create runs
    let inserted = false;
    const resetting = interceptD1Batch(async (statements, run) => {
      const results = await run(statements);
      if (!inserted) {
        inserted = true;
        state.abort("reset by the test");
      }
      return results;
    });
    let cut: Response;
    try {
      cut = await api("/v1/jobs", {
        method: "POST",
        body: { target: { url: `${receiverUrl()}${path}`, body: "1" }, debounce: { key, delay: "10s" } },
      });
    } finally {
      resetting.mockRestore();
    }
    expect(cut.status).toBe(503);
    const orphans = await jobsOfKey(key);
    expect(orphans).toHaveLength(1);
    clock.advance(1_000);
    const next = await create({ target: { url: `${receiverUrl()}${path}`, body: "2" }, debounce: { key, delay: "10s" } });
    expect(next).toMatchObject({ status: 200, job: { id: orphans[0]!.id, debounce: { replaced: true } } });
    expect(await jobsOfKey(key)).toHaveLength(1);
    await deliverAll(clock, sent, 30_000);
    expect((await received(path)).map((r) => r.body)).toEqual(["2"]);
  });

  it("the key's object reset after a replacement's PATCH and before the window moved: a create after the old end still replaces that job", async () => {
    const key = newKey();
    const path = uniquePath();
    const first = await create({ target: { url: `${receiverUrl()}${path}`, body: "1" }, debounce: { key, delay: "10s" } });
    clock.advance(8_000);
    let state!: DurableObjectState;
    await runInDurableObject(keysStub(key), (_instance, s) => {
      state = s;
    });
    let patched = false;
    const resetting = interceptD1Batch(async (statements, run) => {
      const results = await run(statements);
      if (!patched) {
        patched = true;
        state.abort("reset by the test");
      }
      return results;
    });
    let cut: Response;
    try {
      cut = await api("/v1/jobs", {
        method: "POST",
        body: { target: { url: `${receiverUrl()}${path}`, body: "2" }, debounce: { key, delay: "10s" } },
      });
    } finally {
      resetting.mockRestore();
    }
    expect(cut.status).toBe(503);
    const moved = (await (await api(`/v1/jobs/${first.job.id}`)).json()) as Created;
    expect(moved.nextRunAt).toBe(iso(clock.at + 10_000)); // the PATCH landed
    clock.advance(3_000); // past the window's first end, before the job's new run time
    const next = await create({ target: { url: `${receiverUrl()}${path}`, body: "3" }, debounce: { key, delay: "10s" } });
    expect(next).toMatchObject({ status: 200, job: { id: first.job.id, debounce: { replaced: true } } });
    expect(await jobsOfKey(key)).toHaveLength(1);
    await deliverAll(clock, sent, 30_000);
    expect((await received(path)).map((r) => r.body)).toEqual(["3"]);
  });
});

describe("timing", () => {
  it(`a trailing job due within ${DUE_MARGIN_MS} ms is left alone: the create makes a new job`, async () => {
    const key = newKey();
    const first = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce: { key, delay: "10s" } });
    clock.advance(10_000 - DUE_MARGIN_MS);
    const second = await create({ target: { url: `${receiverUrl()}${uniquePath()}` }, debounce: { key, delay: "10s" } });
    expect(second.status).toBe(201);
    expect(second.job.id).not.toBe(first.job.id);
  });

  it("a create that waited in its key's queue until its job came due is decided then, at the object's clock: a new job", async () => {
    const key = newKey();
    const path = uniquePath();
    const first = await create({ target: { url: `${receiverUrl()}${path}`, body: "1" }, debounce: { key, delay: "10s" } });
    clock.advance(5_000); // the second create is sent 5 s before the job is due
    let entered!: () => void;
    const waiting = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let go!: () => void;
    const gate = new Promise<void>((resolve) => {
      go = resolve;
    });
    // as behind a long queue of the key's creates: its turn comes only once the job is due
    const restore = await wrapSettle(key, async (settle, ...args) => {
      entered();
      await gate;
      return settle(...args);
    });
    try {
      const pending = create({ target: { url: `${receiverUrl()}${path}`, body: "2" }, debounce: { key, delay: "10s" } });
      await waiting;
      clock.advance(5_000);
      go();
      const second = await pending;
      expect(second.status).toBe(201);
      expect(second.job.id).not.toBe(first.job.id);
      expect(second.job.nextRunAt).toBe(iso(clock.at + 10_000));
    } finally {
      await restore();
    }
    await deliverAll(clock, sent, 30_000);
    expect((await received(path)).map((r) => r.body)).toEqual(["1", "2"]);
  });
});

describe("validation", () => {
  it.each([
    [{ cron: "* * * * *", debounce: { key: "k", delay: "5s" } }, "debounce"],
    [{ delay: "5s", debounce: { key: "k", delay: "5s" } }, "delay"],
    [{ runAt: 0, debounce: { key: "k", delay: "5s" } }, "runAt"],
    [{ debounce: { key: "k", delay: "soon" } }, "debounce.delay"],
    [{ debounce: { key: "k", delay: "10s", maxDelay: "5s" } }, "debounce.maxDelay"],
    [{ debounce: { key: "k", delay: "10s", mode: "both" } }, "debounce.mode"],
    [{ debounce: { key: "", delay: "10s" } }, "debounce.key"],
    [{ debounce: { key: "k", delay: "10s", extra: 1 } }, "debounce.extra"],
  ])("refuses %j with a 400 naming %s", async (fields, field) => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}/ok` }, ...fields } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });
});
