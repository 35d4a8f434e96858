/**
 * The size watermark of a shard's history (issue "History never fills the database", part 1): a
 * shard above HISTORY_MAX_BYTES has its finished history purged oldest first, before
 * HISTORY_RETENTION_MS, until it is below; live jobs (active however old, paused) and dead letters
 * stay; creates go on. A small watermark here: the shard's own size (meta.size_after) less part of
 * the history the test writes.
 *
 * Its own file: the purge it provokes would reach other files' history.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { newId, shardOfId } from "../../src/core/id";
import { toRfc3339 } from "../../src/core/when";
import { shardBinding, shardsOf } from "../../src/db/shards";
import worker from "../../src/platform/local-worker";
import { limitedEnv } from "../../src/platform/profile";
import { scan } from "../../src/scanner/scan";
import { api, CONFIG, fileClock, interceptD1Batch, KEYS, keySql, receiverUrl, uniquePath } from "./helpers";

const DAY = 86_400_000;
const clock = fileClock(10 * 60_000);

const sizeOf = async () => (await env.DB.prepare("SELECT 1").run()).meta.size_after;
const count = async (query: string, ...binds: unknown[]) =>
  (await env.DB.prepare(query)
    .bind(...binds)
    .first<{ n: number }>())!.n;

/** `n` finished one-off jobs of `tenant` in shard 0, finished `age` ago, each with about 1 KB of spec. */
async function finishedJobs(tenant: string, n: number, at: number, label: string) {
  await env.DB.prepare(
    `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
     INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, next_run_at, created_at, updated_at, fired, attempts, run_status)
     SELECT ?, 'job_' || ? || printf('%020d', i), NULL, i % ?, 'completed', 1, 1, '{"pad":"' || hex(randomblob(500)) || '"}', ?, ?, ?, 1, 1, 'succeeded' FROM k`,
  )
    .bind(n, tenant, label, CONFIG.BUCKETS, at, at, at)
    .run();
}

describe("a shard above HISTORY_MAX_BYTES", () => {
  it("has its oldest finished history purged before the retention until below the watermark; live jobs and dead letters stay; creates go on", async () => {
    const now = clock.at;
    const tenant = `watermark-${crypto.randomUUID()}`;
    const before = await sizeOf();
    await finishedJobs(tenant, 2_000, now - 20 * DAY, "oldest");
    const withOldest = await sizeOf();
    await finishedJobs(tenant, 2_000, now - 2 * DAY, "recent");
    // live ones, as old as the oldest history: never purged to make room
    const oldId = () => newId("job", now - 20 * DAY, crypto.getRandomValues(new Uint8Array(16)));
    const active = oldId();
    const paused = oldId();
    const deadJob = oldId();
    const deadExecution = `exe_${deadJob.slice(4)}`;
    await env.DB.batch([
      env.DB.prepare(
        `INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, next_run_at, created_at, updated_at, fired, attempts)
         VALUES (?, ?, NULL, 0, 'active', 1, 1, '{}', ?, ?, ?, 0, 0), (?, ?, NULL, 0, 'paused', 1, 1, '{}', ?, ?, ?, 0, 0)`,
      ).bind(tenant, active, now + DAY, now - 20 * DAY, now - 20 * DAY, tenant, paused, now - 20 * DAY, now - 20 * DAY, now - 20 * DAY),
      env.DB.prepare(
        `INSERT INTO dead_letters (tenant, execution_id, job_id, bucket, due_at, occurrence, attempts, dead_reason, dead_at, redrive_at)
         VALUES (?, ?, ?, 0, ?, 1, 5, 'attempts_exhausted', ?, NULL)`,
      ).bind(tenant, deadExecution, deadJob, now - 20 * DAY, now - 20 * DAY),
    ]);
    const full = await sizeOf();
    expect(withOldest - before).toBeGreaterThan(1_000_000); // the oldest history: about 2 MB
    // the watermark: below the shard's size by half the oldest history's
    const watermark = full - Math.floor((withOldest - before) / 2);

    // with the watermark at the shard's size nothing is purged before the retention
    const untouched = await scan({ ...env, HISTORY_MAX_BYTES: String(full) } as Env, now);
    expect(untouched.trimmed).toBe(0);
    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ?", tenant)).toBe(4_002);

    // the metrics show each shard's size, watermarks and oldest history
    const shard0 = async () => ((await (await api("/v1/metrics")).json()) as { d1_shards: Record<string, unknown>[] }).d1_shards[0];
    expect(await shard0()).toEqual({
      shard: 0,
      binding: "DB",
      bytes: await sizeOf(),
      historyMaxBytes: CONFIG.HISTORY_MAX_BYTES,
      shardMaxBytes: CONFIG.SHARD_MAX_BYTES,
      oldestHistoryAt: toRfc3339(now - 20 * DAY),
    });
    const prometheus = await (await api("/metrics")).text();
    expect(prometheus).toContain(`scheduler_d1_shard_bytes{shard="0"} ${await sizeOf()}`);
    expect(prometheus).toContain(`scheduler_d1_shard_max_bytes{shard="0"} ${CONFIG.SHARD_MAX_BYTES}`);
    expect(prometheus).toContain(`scheduler_d1_shard_oldest_history_timestamp_seconds{shard="0"} ${Math.floor((now - 20 * DAY) / 1000)}`);

    const report = await scan({ ...env, HISTORY_MAX_BYTES: String(watermark) } as Env, now);
    // the oldest history went (kept 15 days: what finished 20 days ago), the recent stayed
    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ? AND id LIKE 'job_oldest%'", tenant)).toBe(0);
    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ? AND id LIKE 'job_recent%'", tenant)).toBe(2_000);
    expect(report.trimmed).toBeGreaterThanOrEqual(2_000);
    expect(await sizeOf()).toBeLessThanOrEqual(watermark);
    clock.advance(10_000); // past the gauges' reuse (read-model.ts SHARD_GAUGES_TTL_MS)
    expect(await shard0()).toMatchObject({ bytes: await sizeOf(), oldestHistoryAt: toRfc3339(now - 2 * DAY) });
    // live jobs and the dead letter stay
    expect(await count("SELECT count(*) AS n FROM jobs WHERE id IN (?, ?)", active, paused)).toBe(2);
    expect(await count("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?", deadExecution)).toBe(1);
    // creates go on
    const created = await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "1h" } });
    expect(created.status).toBe(201);
  });
});

/**
 * The second watermark (SHARD_MAX_BYTES): a shard whose live jobs keep it above takes no new jobs;
 * they go to shards with room, and with none a create is a 507 naming the shards and what to do.
 * Nothing accepted before is touched. The Worker is called with its own env here, the watermark
 * set per call: 1 byte is below any shard, so every shard is full.
 */
describe("shards above SHARD_MAX_BYTES", () => {
  const call = async (testEnv: Env, path: string, body?: unknown) => {
    const ctx = createExecutionContext();
    const response = await worker.fetch(
      new Request(`http://scheduler${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${KEYS.acme}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
      testEnv,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return response;
  };
  const job = () => ({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "1h" });

  it("take no new jobs: creates go to shards with room; with none, 507 naming them, after validation; what was accepted stays", async () => {
    const roomy = { ...env } as Env;
    const count = shardsOf(roomy).count;
    const accepted = (await (await call(roomy, "/v1/jobs", job())).json()) as { id: string };
    expect(accepted.id).toMatch(/^job_/);

    // every shard but the last is full: every create goes to the last
    const someFull = { ...env, SHARD_MAX_BYTES: String(10e9) } as Env;
    // the shards the Worker sees: it runs with its env under the local profile (src/platform/local-worker.ts)
    const shards = shardsOf(limitedEnv(someFull));
    for (let i = 0; i < count - 1; i++) shards.noteSize(i, 2e10);
    for (let i = 0; i < 2 * count; i++) {
      const created = (await (await call(someFull, "/v1/jobs", job())).json()) as { id: string };
      expect(shardOfId(created.id)).toBe(count - 1);
    }
    // D1 refuses a write as full: 507, and the next create goes elsewhere (with one shard, 507 again)
    // (with an idempotency key: the claim is given up, so a retry is not sent back to the full shard)
    const key = `full-${crypto.randomUUID()}`;
    const full = interceptD1Batch(() => Promise.reject(new Error("D1_ERROR: database or disk is full: SQLITE_FULL")));
    const refusedByD1 = await call(someFull, "/v1/jobs", { ...job(), idempotencyKey: key });
    full.mockRestore();
    expect(refusedByD1.status).toBe(507);
    expect(await refusedByD1.json()).toMatchObject({ error: { code: "shards_full" } });
    expect(await keySql("acme", key, "SELECT count(*) AS n FROM idempotency_keys WHERE key = ?", key)).toEqual([{ n: 0 }]);
    for (let i = 0; i < count - 1; i++) shards.noteSize(i, 1e6); // room again
    const after = await call(someFull, "/v1/jobs", job());
    if (count > 1) {
      expect(after.status).toBe(201);
      expect(shardOfId(((await after.json()) as { id: string }).id)).not.toBe(count - 1);
    }

    // every shard above the watermark: a bad field is still a 400, a good create a 507 naming them
    const allFull = { ...env, SHARD_MAX_BYTES: "1" } as Env;
    const bad = await call(allFull, "/v1/jobs", { target: { url: "ftp://x" } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { field: "target.url" } });
    for (const [path, body] of [
      ["/v1/jobs", job()],
      ["/v1/jobs/batch", { jobs: [job(), job()] }],
    ] as const) {
      const refused = await call(allFull, path, body);
      expect(refused.status, path).toBe(507);
      const error = ((await refused.json()) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("shards_full");
      for (let i = 0; i < count; i++) expect(error.message).toContain(`${i} (${shardBinding(i)}`);
      expect(error.message).toContain(`bind ${shardBinding(count)}`);
    }
    // nothing already accepted is touched: the job is there and still due; lists and reads answer
    const read = await call(allFull, `/v1/jobs/${accepted.id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ id: accepted.id, status: "active" });
    expect((await call(allFull, "/v1/jobs?limit=5")).status).toBe(200);
  });
});
