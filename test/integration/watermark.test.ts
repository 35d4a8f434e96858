/**
 * The size watermark of a shard's history (issue "History never fills the database", part 1): a
 * shard above HISTORY_MAX_BYTES has its finished history purged oldest first, before
 * HISTORY_RETENTION_MS, until it is below; live jobs (active however old, paused) and dead letters
 * stay; creates go on. A small watermark here: the shard's own size (meta.size_after) less part of
 * the history the test writes.
 *
 * Its own file: the purge it provokes would reach other files' history.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { newId } from "../../src/core/id";
import { scan } from "../../src/scanner/scan";
import { api, CONFIG, fileClock, receiverUrl, uniquePath } from "./helpers";

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

    const report = await scan({ ...env, HISTORY_MAX_BYTES: String(watermark) } as Env, now);
    // the oldest history went (kept 15 days: what finished 20 days ago), the recent stayed
    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ? AND id LIKE 'job_oldest%'", tenant)).toBe(0);
    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ? AND id LIKE 'job_recent%'", tenant)).toBe(2_000);
    expect(report.trimmed).toBeGreaterThanOrEqual(2_000);
    expect(await sizeOf()).toBeLessThanOrEqual(watermark);
    // live jobs and the dead letter stay
    expect(await count("SELECT count(*) AS n FROM jobs WHERE id IN (?, ?)", active, paused)).toBe(2);
    expect(await count("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?", deadExecution)).toBe(1);
    // creates go on
    const created = await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "1h" } });
    expect(created.status).toBe(201);
  });
});
