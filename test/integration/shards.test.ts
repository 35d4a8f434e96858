/**
 * The system of record across D1 shards (issue "10k jobs/s for a month", db/shards.ts). Runs in
 * both integration projects (1 and 3 shards); what needs several shards runs in the 3-shard one.
 *
 * Proves: a job's shard is named by its id and its executions' ids; new jobs spread evenly (a
 * request's jobs in one shard, requests in turn); adding a shard moves nothing and strands
 * nothing (jobs created under 2 shards, one-off, recurring, paused and dead, fire and list as
 * before under 3); lowering the count is refused (503 shards_lowered) and the scan syncs nothing;
 * every list pages through every shard without skipping or repeating (property, random page
 * sizes); a shard that fails makes a list answer 503 naming it while firing and changes of other
 * shards go on; a flush writes each shard's outcomes by itself (a failing shard delays only its
 * own); an idempotency key names one job across shards, also while their number changes.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { shardOfId } from "../../src/core/id";
import { checkShardCount, SHARD_CHECK_MS, ShardsLowered, shardOfOrNull, shardsOf } from "../../src/db/shards";
import worker from "../../src/platform/local-worker";
import { assertDocumented } from "./conformance";
import {
  allShards,
  api,
  bucketStub,
  captureFiresForFile,
  createJob,
  D1_PROTOTYPE,
  d1Of,
  deliverAll,
  everyD1,
  fileClock,
  fire,
  type JobJson,
  jobRow,
  KEYS,
  received,
  receiverUrl,
  runScan,
  uniquePath,
} from "./helpers";

// a year ahead: no alarm the objects arm fires by itself (deliverAll runs them at their time)
const clock = fileClock(365 * 86_400_000);
const sent = captureFiresForFile();
const SHARDS = Number(env.TEST_SHARDS);
const several = SHARDS >= 3 ? it : it.skip;

/** The Worker with some of its bindings hidden (a deployment with fewer shards), and vars set. */
function envWith(shards: number, vars: Record<string, string> = {}): Env {
  const e = { ...env, ...vars } as Record<string, unknown>;
  for (let i = shards; i < SHARDS; i++) delete e[i === 0 ? "DB" : `DB_${i}`];
  return e as unknown as Env;
}

/** The API as `e`'s deployment answers it (acme's key); the answer is held to the OpenAPI document. */
async function apiWith(e: Env, path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const headers = new Headers({ authorization: `Bearer ${KEYS.acme}`, ...init.headers });
  if (init.body !== undefined) headers.set("content-type", "application/json");
  const url = `http://scheduler${path}`;
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(url, { method: init.method ?? "GET", headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) }),
    e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  await assertDocumented(init.method ?? "GET", url, res);
  return res;
}

const target = (path = uniquePath()) => ({ url: `${receiverUrl()}${path}` });

/** GET /v1/metrics' D1 rows written per shard; their sum is the counter's total */
async function d1RowsByShard() {
  const m = (await (await api("/v1/metrics")).json()) as {
    counters: Record<string, number>;
    d1_rows_written_total_by_shard: Record<string, number>;
  };
  const byShard = m.d1_rows_written_total_by_shard;
  expect(Object.values(byShard).reduce((a, b) => a + b, 0)).toBe(m.counters.d1_rows_written_total);
  for (const shard of Object.keys(byShard)) expect(Number(shard)).toBeLessThan(SHARDS);
  return { of: (shard: number | null) => byShard[String(shard)] ?? 0 };
}

describe("resharding", () => {
  // first in the file: the deployment runs with 2 shards before any request with 3
  several(
    "adding a shard (2 to 3) moves nothing and strands nothing: one-off, recurring, paused and dead jobs fire and list as before; an idempotency key names its one job across the change",
    async () => {
      const two = envWith(2);
      const create = async (body: Record<string, unknown>) => {
        const res = await apiWith(two, "/v1/jobs", { method: "POST", body });
        expect(res.status).toBe(201);
        return (await res.json()) as JobJson;
      };
      const path = uniquePath();
      const oneOff = await create({ target: target(`${path}&k=oneoff`), delay: "5s", labels: { reshard: "yes" } });
      const far = await create({ target: target(`${path}&k=far`), delay: "5m", labels: { reshard: "yes" } });
      const recurring = await create({ target: target(`${path}&k=cron`), cron: "*/10 * * * * *", labels: { reshard: "yes" } });
      const paused = await create({ target: target(`${path}&k=paused`), cron: "*/10 * * * * *", labels: { reshard: "yes" } });
      expect((await apiWith(two, `/v1/jobs/${paused.id}/pause`, { method: "POST" })).status).toBe(200);
      const dead = await create({
        target: target(`/fail/400?t=${crypto.randomUUID()}`),
        retry: { maxAttempts: 1 },
        labels: { reshard: "yes" },
      });
      for (const job of [oneOff, far, recurring, paused, dead]) expect(shardOfId(job.id)).toBeLessThan(2);
      // an idempotency key used now names the same job after the change
      const key = `reshard-${crypto.randomUUID()}`;
      const keyed = { target: target(), delay: "1h" };
      const first = await apiWith(two, "/v1/jobs", { method: "POST", body: keyed, headers: { "idempotency-key": key } });
      expect(first.status).toBe(201);
      const original = ((await first.json()) as JobJson).id;
      await deliverAll(clock, sent, 2_000);

      // now three shards: the same jobs, found from their ids; new ones use all three
      for (let i = 0; i < 4; i++) {
        const again = await api("/v1/jobs", { method: "POST", body: keyed, headers: { "idempotency-key": key } });
        expect(again.status).toBe(200);
        expect(((await again.json()) as JobJson).id).toBe(original);
      }
      expect((await api("/v1/jobs", { method: "POST", body: { ...keyed, delay: "2h" }, headers: { "idempotency-key": key } })).status).toBe(
        409,
      );
      const fresh = [];
      for (let i = 0; i < 3; i++)
        fresh.push(await createJob({ target: target(`${path}&k=fresh${i}`), delay: "1s", labels: { reshard: "yes" } }));
      expect(new Set(fresh.map((j) => shardOfId(j.id))).size).toBe(3);
      clock.advance(5 * 60_000);
      await runScan();
      await deliverAll(clock, sent, 30_000);
      await runScan();
      await deliverAll(clock, sent, 30_000);
      const hits = async (k: string) =>
        (await received(`${new URL(target(path).url).pathname}${new URL(target(path).url).search}&k=${k}`)).length;
      expect(await hits("oneoff")).toBe(1);
      expect(await hits("far")).toBe(1);
      expect(await hits("cron")).toBeGreaterThanOrEqual(3);
      expect(await hits("paused")).toBe(0);
      for (let i = 0; i < 3; i++) expect(await hits(`fresh${i}`)).toBe(1);
      // the dead one is in the DLQ and redrives under three shards
      const dlq = (await (await api("/v1/dlq?limit=100")).json()) as { executions: { id: string }[] };
      expect(dlq.executions.map((e) => e.id)).toContain(`exe_${dead.id.slice(4)}`);
      expect((await api(`/v1/executions/exe_${dead.id.slice(4)}/redrive`, { method: "POST" })).status).toBe(202);
      // and every list still holds every job
      const listed = (await (await api("/v1/jobs?label=reshard:yes&limit=100")).json()) as { jobs: JobJson[] };
      expect(listed.jobs.map((j) => j.id).sort()).toEqual([oneOff, far, recurring, paused, dead, ...fresh].map((j) => j.id).sort());
      for (const job of [recurring, paused]) await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    },
    60_000,
  );

  several("then fewer shards than the deployment has had are refused with 503 shards_lowered, naming the binding to restore", async () => {
    await api("/v1/jobs"); // the deployment has run with all of them
    const res = await apiWith(envWith(2), "/v1/jobs");
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "shards_lowered",
      message: expect.stringContaining(`bind ${Array.from({ length: SHARDS - 2 }, (_, i) => `DB_${i + 2}`).join(", ")} again`),
    });
  });
});

describe("a job's shard", () => {
  it("is named by its id, and by its executions' ids; its row is there and nowhere else", async () => {
    const job = await createJob({ target: target(), delay: "1h" });
    const shard = shardOfId(job.id)!;
    expect(shard).toBeLessThan(SHARDS);
    for (const [i, d1] of everyD1().entries()) {
      const row = await d1.prepare("SELECT id FROM jobs WHERE id = ?").bind(job.id).first();
      expect(row, `shard ${i}`).toEqual(i === shard ? { id: job.id } : null);
    }
  });

  it("new jobs spread evenly: single creates take the shards in turn, a batch's jobs share one", async () => {
    const counts = new Array<number>(SHARDS).fill(0);
    for (let i = 0; i < 6 * SHARDS; i++) counts[shardOfId((await createJob({ target: target(), delay: "1h" })).id)!]! += 1;
    expect(counts).toEqual(new Array(SHARDS).fill(6));
    const batch = await api("/v1/jobs/batch", {
      method: "POST",
      body: { jobs: Array.from({ length: 5 }, () => ({ target: target(), delay: "1h" })) },
    });
    const ids = ((await batch.json()) as { results: { job: JobJson }[] }).results.map((r) => r.job.id);
    expect(new Set(ids.map((id) => shardOfId(id))).size).toBe(1);
  });
});

describe("lists page through every shard", () => {
  it("GET /v1/jobs and /v1/executions, with random page sizes, list each item once, newest first (property)", async () => {
    const tenantKey = KEYS.globex;
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api(
        "/v1/jobs/batch",
        {
          method: "POST",
          body: { jobs: Array.from({ length: 3 + i }, () => ({ target: target(), delay: "2h", labels: { list: "walk" } })) },
        },
        tenantKey,
      );
      made.push(...((await res.json()) as { results: { job: JobJson }[] }).results.map((r) => r.job.id));
    }
    const all = [...new Set(made)];
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 30, maxLength: 30 }), async (sizes) => {
        for (const [list, key, idOf] of [
          ["/v1/jobs?label=list:walk", "jobs", (id: string) => id],
          ["/v1/executions?label=list:walk", "executions", (id: string) => `exe_${id.slice(4)}`],
        ] as const) {
          const seen: string[] = [];
          let cursor: string | null = null;
          for (const size of sizes) {
            const res = await api(`${list}&limit=${size}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, {}, tenantKey);
            expect(res.status).toBe(200);
            const body = (await res.json()) as Record<string, { id: string }[]> & { nextCursor: string | null };
            seen.push(...body[key]!.map((item) => item.id));
            cursor = body.nextCursor;
            if (cursor === null) break;
          }
          if (cursor !== null) continue; // the sizes ran out before the end: nothing to compare
          expect(seen).toEqual(all.map(idOf).sort().reverse());
        }
      }),
      { numRuns: 8 },
    );
  }, 60_000);

  it("GET /v1/dlq lists every shard's dead letters newest first, each once, across pages", async () => {
    const dead: string[] = [];
    for (let i = 0; i < Math.max(3, SHARDS); i++) {
      const job = await createJob({ target: target(`/fail/400?t=${crypto.randomUUID()}`), retry: { maxAttempts: 1 } }, KEYS.acme);
      dead.push(`exe_${job.id.slice(4)}`);
    }
    await deliverAll(clock, sent);
    const seen: string[] = [];
    const times: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 50; page++) {
      const res = await api(`/v1/dlq?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      const body = (await res.json()) as { executions: { id: string; finishedAt: string }[]; nextCursor: string | null };
      seen.push(...body.executions.map((e) => e.id));
      times.push(...body.executions.map((e) => Date.parse(e.finishedAt)));
      cursor = body.nextCursor;
      if (cursor === null) break;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(seen).toEqual(expect.arrayContaining(dead));
  });
});

describe("what a list page costs with S shards", () => {
  it("states the D1 rows read per page (meta.rows_read): about S times one shard's, limit + 1 each", async () => {
    const tenantKey = KEYS.globex;
    // S batches of 60: one per shard (a request's jobs share one; requests take them in turn)
    for (let i = 0; i < SHARDS; i++) {
      const res = await api(
        "/v1/jobs/batch",
        { method: "POST", body: { jobs: Array.from({ length: 60 }, () => ({ target: target(), delay: "3h", labels: { cost: "page" } })) } },
        tenantKey,
      );
      expect(res.status).toBe(200);
    }
    const stmt = Object.getPrototypeOf(env.DB.prepare("SELECT 1")) as D1PreparedStatement;
    const original = { all: stmt.all, raw: stmt.raw };
    let rowsRead = 0;
    // drizzle reads through raw(), which answers no meta: the same statement once more through all() for its rows_read
    (stmt as unknown as Record<string, unknown>).raw = async function (this: D1PreparedStatement, ...args: unknown[]) {
      // read first, then add: \`rowsRead += await ...\` would read rowsRead before the await, and
      // the shards' reads run at once
      const read = (await original.all.call(this)).meta.rows_read ?? 0;
      rowsRead += read;
      return (original.raw as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    };
    const cost = async (path: string) => {
      rowsRead = 0;
      expect((await api(path, {}, tenantKey)).status).toBe(200);
      return rowsRead;
    };
    try {
      const figures = {
        shards: SHARDS,
        "GET /v1/jobs?limit=50": await cost("/v1/jobs?limit=50"),
        "GET /v1/jobs?label=cost:page&limit=50": await cost("/v1/jobs?label=cost:page&limit=50"),
        "GET /v1/executions?limit=50": await cost("/v1/executions?limit=50"),
        "GET /v1/dlq?limit=50": await cost("/v1/dlq?limit=50"),
      };
      console.log(JSON.stringify({ rowsReadPerPage: figures }));
      // each shard reads its own page (51 for a page of 50: each holds 60 of the tenant's jobs) and no more
      expect(figures["GET /v1/jobs?limit=50"]).toBe(SHARDS * 51);
      expect(figures["GET /v1/executions?limit=50"]).toBe(SHARDS * 51);
    } finally {
      Object.assign(stmt, original);
    }
  });
});

describe("a shard that does not answer", () => {
  several("makes a list answer 503 naming it; a job of another shard still fires and changes", async () => {
    // a job on a shard other than the failing one
    let healthy: JobJson | undefined;
    for (let i = 0; i < 3 && (!healthy || shardOfId(healthy.id) === 1); i++) healthy = await createJob({ target: target(), delay: "2s" });
    expect(shardOfId(healthy!.id)).not.toBe(1);
    const failing = d1Of("job_0000000000u010000000000000"); // shard 1's database
    const prepare = D1_PROTOTYPE.prepare;
    const spy = vi.spyOn(D1_PROTOTYPE, "prepare").mockImplementation(function (this: D1Database, query: string) {
      if (this === failing) throw new Error("injected: shard 1 unavailable");
      return prepare.call(this, query);
    });
    try {
      for (const list of ["/v1/jobs", "/v1/executions", "/v1/dlq"]) {
        const res = await api(list);
        expect(res.status, list).toBe(503);
        expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
          code: "shard_unavailable",
          message: expect.stringContaining("D1 shard 1 (binding DB_1)"),
        });
      }
      expect((await api(`/v1/jobs/${healthy!.id}`, { method: "PATCH", body: { name: "still-changes" } })).status).toBe(200);
      await deliverAll(clock, sent);
      expect(await received(new URL(healthy!.target.url).pathname + new URL(healthy!.target.url).search)).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
  });

  several("a flush writes each shard's outcomes by itself: a failing shard delays only its own", async () => {
    // two jobs of one bucket on two shards: create until found (buckets and shards are independent)
    const jobs: JobJson[] = [];
    for (let i = 0; i < 60 && jobs.length < 2; i++) {
      const job = await createJob({ target: target(), delay: "1s" });
      const bucket = (await jobRow(job.id))!.bucket;
      if (jobs.length === 0 || ((await jobRow(jobs[0]!.id))!.bucket === bucket && shardOfId(jobs[0]!.id) !== shardOfId(job.id)))
        jobs.push(job);
      else await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    }
    expect(jobs).toHaveLength(2);
    const [kept, delayed] = jobs as [JobJson, JobJson];
    const failing = d1Of(delayed.id);
    const batch = D1_PROTOTYPE.batch;
    const spy = vi.spyOn(D1_PROTOTYPE, "batch").mockImplementation(function (this: D1Database, statements: D1PreparedStatement[]) {
      if (this === failing) return Promise.reject(new Error("injected: shard unavailable"));
      return batch.call(this, statements) as Promise<D1Result[]>;
    } as D1Database["batch"]);
    const before = await d1RowsByShard();
    try {
      await deliverAll(clock, sent);
      expect(await jobRow(kept.id)).toMatchObject({ status: "completed", run_status: "succeeded" });
      expect(await jobRow(delayed.id)).toMatchObject({ status: "active", run_status: null });
    } finally {
      spy.mockRestore();
    }
    // the metrics count each shard's rows apart: the failing one wrote nothing
    const during = await d1RowsByShard();
    expect(during.of(shardOfId(kept.id))).toBeGreaterThan(before.of(shardOfId(kept.id)));
    expect(during.of(shardOfId(delayed.id))).toBe(before.of(shardOfId(delayed.id)));
    await clock.flush(bucketStub((await jobRow(delayed.id))!.bucket));
    expect(await jobRow(delayed.id)).toMatchObject({ status: "completed", run_status: "succeeded" });
    expect((await d1RowsByShard()).of(shardOfId(delayed.id))).toBeGreaterThan(during.of(shardOfId(delayed.id)));
  });
});

describe("what a review found (each failed before its fix)", () => {
  several(
    "while a deployment with more shards rolls out, an older isolate answers 503 for a job on the new shard (was 404), and refuses lists within a minute (were short)",
    async () => {
      // an older isolate's view: two shards bound; shard 2 is one the deployment has had
      const old = shardsOf(envWith(2));
      let onNew: JobJson | undefined;
      for (let i = 0; i < 6 && (!onNew || shardOfId(onNew.id) !== 2); i++) onNew = await createJob({ target: target(), delay: "1h" });
      expect(shardOfId(onNew!.id)).toBe(2);
      await expect(shardOfOrNull(old, onNew!.id)).rejects.toMatchObject({ shard: 2, binding: "DB_2", reason: "missing" });
      // an id naming a shard the deployment never had is no job (404)
      expect(await shardOfOrNull(old, "job_0000000000uzz0000000000000")).toBeNull();
      // the count is looked at again after SHARD_CHECK_MS: a raise by a newer deployment is seen within it
      // (the API's own view of the bindings, looked at last by its requests before now)
      const bound = shardsOf(env);
      const t = Date.now() + SHARD_CHECK_MS;
      await checkShardCount(bound, t);
      await env.DB.prepare("UPDATE scheduler_meta SET value = ? WHERE key = 'shards'")
        .bind(String(SHARDS + 1))
        .run();
      try {
        await checkShardCount(bound, t + SHARD_CHECK_MS - 1);
        await expect(checkShardCount(bound, t + SHARD_CHECK_MS)).rejects.toBeInstanceOf(ShardsLowered);
      } finally {
        await env.DB.prepare("UPDATE scheduler_meta SET value = ? WHERE key = 'shards'").bind(String(SHARDS)).run();
        await checkShardCount(bound, t + 2 * SHARD_CHECK_MS);
      }
      expect((await api(`/v1/jobs/${onNew!.id}`, { method: "DELETE" })).status).toBe(200);
    },
  );

  several(
    "a batch retried while the shard of its key's first claim is down stores nothing (its job without a key was stored by a 503, then again)",
    async () => {
      // a batch with a keyed and a keyless job whose insert fails in its shard, the last one (the next
      // request's after one on the shard before it): the key stays claimed there
      for (let i = 0; i < 2 * SHARDS; i++) if (shardOfId((await createJob({ target: target(), delay: "1h" })).id) === SHARDS - 2) break;
      const key = `batch-${crypto.randomUUID()}`;
      const keylessUrl = `${receiverUrl()}${uniquePath()}`;
      const body = {
        jobs: [
          { target: target(), delay: "1h", idempotencyKey: key },
          { target: { url: keylessUrl }, delay: "1h" },
        ],
      };
      const batch = D1_PROTOTYPE.batch;
      const down = d1Of(`job_0000000000u0${SHARDS - 1}0000000000000`);
      const spy = vi.spyOn(D1_PROTOTYPE, "batch").mockImplementation(function (this: D1Database, statements: D1PreparedStatement[]) {
        if (this === down) return Promise.reject(new Error("injected: shard unavailable"));
        return batch.call(this, statements) as Promise<D1Result[]>;
      } as D1Database["batch"]);
      const keyless = () => allShards<{ id: string }>("SELECT id FROM jobs WHERE json_extract(spec, '$.target.url') = ?", keylessUrl);
      try {
        // retried until a request lands on another shard than the key's: it must write both or neither
        for (let i = 0; i < 2 * SHARDS; i++) {
          expect((await api("/v1/jobs/batch", { method: "POST", body })).status).toBe(503);
          expect(await keyless()).toEqual([]);
        }
      } finally {
        spy.mockRestore();
      }
      const ok = await api("/v1/jobs/batch", { method: "POST", body });
      expect(ok.status).toBe(200);
      expect(await keyless()).toHaveLength(1);
    },
  );

  it("a keyed create while shard 0 does not answer (a fresh isolate: its legacy keys not yet known gone) is a 503 naming it (was a 500)", async () => {
    const shard0 = env.DB;
    const prepare = D1_PROTOTYPE.prepare;
    const spy = vi.spyOn(D1_PROTOTYPE, "prepare").mockImplementation(function (this: D1Database, query: string) {
      if (this === shard0) throw new Error("injected: shard 0 unavailable");
      return prepare.call(this, query);
    });
    try {
      for (let i = 0; i < 2 * SHARDS; i++) {
        // a fresh isolate's view (it has not yet seen shard 0's legacy key table empty)
        const res = await apiWith(envWith(SHARDS), "/v1/jobs", {
          method: "POST",
          body: { target: target(), delay: "1h" },
          headers: { "idempotency-key": crypto.randomUUID() },
        });
        expect(res.status).toBe(503);
        expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
          code: "shard_unavailable",
          message: expect.stringContaining("binding DB)"),
        });
      }
    } finally {
      spy.mockRestore();
    }
  });

  // last in the file: its scan purges the file's finished jobs
  it("a replay of a key whose job was purged as history answers it from the archive (200, completed), never a job that runs again", async () => {
    const path = uniquePath();
    const body = { target: target(path) };
    const key = `purged-${crypto.randomUUID()}`;
    const first = await api("/v1/jobs", { method: "POST", body, headers: { "idempotency-key": key } });
    expect(first.status).toBe(201);
    const job = (await first.json()) as JobJson;
    await deliverAll(clock, sent);
    expect(await jobRow(job.id)).toMatchObject({ status: "completed" });
    // history kept a minute, keys a day (the settings allow it)
    clock.advance(10 * 60_000);
    const ctx = createExecutionContext();
    await worker.scheduled(
      createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }),
      envWith(SHARDS, { HISTORY_RETENTION_MS: "60000" }),
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(await jobRow(job.id)).toBeUndefined();
    const replay = await apiWith(envWith(SHARDS, { HISTORY_RETENTION_MS: "60000" }), "/v1/jobs", {
      method: "POST",
      body,
      headers: { "idempotency-key": key },
    });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toMatchObject({ id: job.id, status: "completed" });
    expect(await jobRow(job.id)).toBeUndefined();
  });
});

void fire;
