/**
 * Tenants and keys (issue 6): every read and write is scoped to the tenant of the API key.
 * - another tenant's id answers 404 exactly like a missing id (never 403: no existence leak) on
 *   every route that takes an id, and changes nothing in D1 or in the bucket;
 * - lists (GET /v1/jobs, GET /v1/dlq) and metrics (GET /v1/metrics, GET /metrics) never show
 *   another tenant's rows or activity;
 * - a missing, malformed, unknown or revoked key is 401 on every /v1 route and /metrics, before
 *   anything else runs; a tenant's keys rotate (both work and see the same jobs, then the old
 *   one is removed from API_KEYS and gets 401);
 * - the per-key rate limit (the API_RATE_LIMITER binding) answers 429 with Retry-After and the
 *   error envelope once exceeded.
 *
 * Time: one file-wide virtual clock (helpers.fileClock) 10 minutes ahead of the real one, so no
 * bucket alarm fires on its own; tests run the alarms. Every fire-queue send is captured
 * (captureFiresForFile) and fed to the consumer with fire(). Revision 2: a one-off job's outcome
 * is on its D1 row once the bucket flushed it, a dead one is also in dead_letters, and what the
 * bucket holds is read with inspect() and its durable rows.
 */
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { oneOffExecutionId } from "../../src/core/id";
import worker from "../../src/platform/local-worker";
import {
  allShards,
  api,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  countAll,
  createJob,
  d1Of,
  executionOf,
  fileClock,
  fire,
  jobRow,
  KEYS,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const BUCKETS = CONFIG.BUCKETS;
const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

const url = (kind = "ok") => `${receiverUrl()}${uniquePath(kind)}`;

/**
 * Runs a job's execution (created due now) once: its bucket's alarm at the due time dispatches
 * it, the consumer delivers it, and the flush writes the outcome to D1.
 */
async function runNow(jobId: string): Promise<void> {
  const exe = (await executionOf(jobId))!;
  const stub = bucketStub(exe.bucket);
  clock.travelTo(Math.max(clock.at, exe.due_at));
  await runAlarm(stub);
  const mine = sent.filter((m) => m.executionId === exe.id);
  for (const m of mine) sent.splice(sent.indexOf(m), 1);
  expect(mine).toHaveLength(1);
  expect((await fire(mine)).explicitAcks).toEqual(["m0"]);
  await clock.flush(stub);
}

/** The rows a tenant owns, one per kind of id a route takes. */
interface Fixture {
  key: string;
  /** a one-off job handed to its bucket (scheduled) */
  oneOff: { jobId: string; executionId: string; bucket: number };
  /** a recurring job, active */
  recurring: string;
  /** a recurring job, paused */
  paused: string;
  /** a one-off job whose only execution is dead (permanent failure), its outcome in D1 */
  dead: { jobId: string; executionId: string; bucket: number };
}

async function fixtureOf(key: string): Promise<Fixture> {
  const oneOff = await createJob({ name: "one-off", target: { url: url() }, delay: "2m" }, key);
  const oneOffExe = (await executionOf(oneOff.id))!;
  const recurring = await createJob({ name: "recurring", target: { url: url() }, cron: "0 0 1 1 *" }, key);
  const paused = await createJob({ name: "paused", target: { url: url() }, cron: "0 0 1 1 *" }, key);
  expect((await api(`/v1/jobs/${paused.id}/pause`, { method: "POST" }, key)).status).toBe(200);
  const dead = await createJob({ name: "dead", target: { url: url("fail/404") }, retry: { maxAttempts: 1 } }, key);
  await runNow(dead.id);
  const deadExe = (await executionOf(dead.id))!;
  expect(await jobRow(dead.id)).toMatchObject({ status: "completed", run_status: "dead", dead_reason: "permanent" });
  return {
    key,
    oneOff: { jobId: oneOff.id, executionId: oneOffExe.id, bucket: oneOffExe.bucket },
    recurring: recurring.id,
    paused: paused.id,
    dead: { jobId: dead.id, executionId: deadExe.id, bucket: deadExe.bucket },
  };
}

/**
 * Every row of a fixture's jobs, in D1 (jobs, occurrences, dead letters) and in their buckets
 * (durable execution and schedule rows, and what each holds live): what "changes nothing" compares.
 */
async function snapshot(f: Fixture): Promise<unknown> {
  const ids = [f.oneOff.jobId, f.recurring, f.paused, f.dead.jobId];
  const jobIds = JSON.stringify(ids);
  const d1 = (table: string, column: string) =>
    allShards(`SELECT * FROM ${table} WHERE ${column} IN (SELECT value FROM json_each(?)) ORDER BY 1, 2`, jobIds);
  const buckets: unknown[] = [];
  for (let k = 0; k < BUCKETS; k++) {
    const stub = bucketStub(k);
    buckets.push(await bucketSql(stub, "SELECT * FROM executions WHERE job_id IN (SELECT value FROM json_each(?)) ORDER BY id", jobIds));
    buckets.push(await bucketSql(stub, "SELECT * FROM schedules WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id", jobIds));
    for (const jobId of ids) buckets.push(await stub.inspect({ jobId }));
  }
  return {
    jobs: await d1("jobs", "id"),
    occurrences: await d1("occurrences", "job_id"),
    deadLetters: await d1("dead_letters", "job_id"),
    buckets,
  };
}

/** Every route that takes an id, aimed at a fixture's rows; `missing` swaps in ids that exist nowhere. */
function idRoutes(f: Fixture, missing = false): [string, string, unknown?][] {
  const job = (id: string) => (missing ? `job_${"0".repeat(26)}` : id);
  const exe = (id: string) => (missing ? `exe_${"0".repeat(26)}` : id);
  return [
    ["GET", `/v1/jobs/${job(f.oneOff.jobId)}`],
    ["PATCH", `/v1/jobs/${job(f.oneOff.jobId)}`, { name: "stolen" }],
    ["PATCH", `/v1/jobs/${job(f.recurring)}`, { cron: "* * * * *" }],
    // a body the owner would get a 400 for: ownership is decided first, so a foreign id still reads as missing
    ["PATCH", `/v1/jobs/${job(f.oneOff.jobId)}`, { timeoutMs: -1 }],
    ["DELETE", `/v1/jobs/${job(f.oneOff.jobId)}`],
    ["DELETE", `/v1/jobs/${job(f.recurring)}`],
    ["POST", `/v1/jobs/${job(f.recurring)}/pause`],
    ["POST", `/v1/jobs/${job(f.paused)}/resume`],
    ["GET", `/v1/jobs/${job(f.oneOff.jobId)}/executions`],
    ["GET", `/v1/jobs/${job(f.dead.jobId)}/executions`],
    ["GET", `/v1/executions/${exe(f.oneOff.executionId)}`],
    ["GET", `/v1/executions/${exe(f.dead.executionId)}`],
    ["POST", `/v1/executions/${exe(f.dead.executionId)}/redrive`],
  ];
}

/** Every authenticated route (ids of real rows: a bad key must not reach them either). */
function allRoutes(f: Fixture): [string, string, unknown?][] {
  return [
    ["POST", "/v1/jobs", { target: { url: url() }, delay: "1h" }],
    ["POST", "/v1/jobs/batch", { jobs: [{ target: { url: url() }, delay: "1h" }] }],
    ["GET", "/v1/jobs"],
    ["GET", "/v1/jobs?status=active&limit=1"],
    ...idRoutes(f),
    ["GET", "/v1/dlq"],
    ["GET", "/v1/metrics"],
    ["GET", "/metrics"],
  ];
}

async function jsonOf(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`not JSON (${res.status}): ${text.slice(0, 200)}`);
  }
}

/**
 * The platform's billing meters (SYSTEM_TENANT counters) are whole in every tenant's view by
 * design (core/metrics.ts summarize): any request of any tenant moves them. Left out where a
 * tenant's view must not move.
 */
/** what every tenant sees of the whole deployment: what the platform bills, the archive, each D1 shard's size */
const METERS = [
  "do_rows_written_total",
  "d1_rows_written_total",
  "alarms_set_total",
  "do_requests_total",
  "fire_messages_total",
  "archived_executions_total",
  "archive_objects_total",
  "archive_bytes_total",
  "archive_write_failures_total",
  "d1_shard_bytes",
  "d1_shard_history_max_bytes",
  "d1_shard_max_bytes",
  "d1_shard_oldest_history_timestamp_seconds",
];
function tenantOnly(summary: unknown): unknown {
  const {
    d1_rows_written_total_by_shard: _byShard,
    d1_shards: _shards,
    ...s
  } = summary as {
    counters: Record<string, number>;
    d1_rows_written_total_by_shard: unknown;
    d1_shards: unknown;
  };
  return { ...s, counters: Object.fromEntries(Object.entries(s.counters).filter(([name]) => !METERS.includes(name))) };
}
function withoutMeters(text: string): string {
  return text
    .split("\n")
    .filter((line) => !METERS.some((m) => line.startsWith(`scheduler_${m} `) || line.startsWith(`scheduler_${m}{`)))
    .join("\n");
}

/** All of a tenant's rows behind a paged list endpoint (cursor walk, bounded). */
async function walk(path: string, key: string, field: "jobs" | "executions"): Promise<{ id: string }[]> {
  const out: { id: string }[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 50; page++) {
    const sep = path.includes("?") ? "&" : "?";
    const res = await api(
      cursor === null ? `${path}${sep}limit=200` : `${path}${sep}limit=200&cursor=${encodeURIComponent(cursor)}`,
      {},
      key,
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown> & { nextCursor: string | null };
    out.push(...(body[field] as { id: string }[]));
    cursor = body.nextCursor;
    if (cursor === null) return out;
  }
  throw new Error(`${path}: more than 50 pages`);
}

let acme: Fixture;
let globex: Fixture;
beforeAll(async () => {
  acme = await fixtureOf(KEYS.acme);
  globex = await fixtureOf(KEYS.globex);
});

describe("cross-tenant access", () => {
  it.each([
    ["globex", "acme"],
    ["acme", "globex"],
  ] as const)(
    "%s gets 404 (never 403) on every route aimed at %s's ids, exactly as for a missing id, and nothing changes",
    async (who, whose) => {
      const caller = who === "acme" ? KEYS.acme : KEYS.globex;
      const owner = whose === "acme" ? acme : globex;
      const before = await snapshot(owner);
      const foreign = idRoutes(owner);
      const missing = idRoutes(owner, true);
      for (const [i, [method, path, body]] of foreign.entries()) {
        const res = await api(path, { method, body }, caller);
        const label = `${method} ${path}`;
        expect(res.status, label).toBe(404);
        expect(res.headers.get("content-type"), label).toMatch(/application\/json/);
        const shown = await jsonOf(res);
        expect(shown, label).toEqual({ error: { code: "not_found", message: expect.any(String), field: "id" } });
        // indistinguishable from an id that exists nowhere
        const [m, missingPath, missingBody] = missing[i]!;
        const absent = await api(missingPath, { method: m, body: missingBody }, caller);
        expect(absent.status, label).toBe(404);
        expect(shown, label).toEqual(await jsonOf(absent));
      }
      expect(await snapshot(owner)).toEqual(before);
      // the owner still sees its rows as they were
      const own = await api(`/v1/jobs/${owner.oneOff.jobId}`, {}, owner.key);
      expect(await jsonOf(own)).toMatchObject({
        id: owner.oneOff.jobId,
        name: "one-off",
        status: "active",
        latestExecution: { status: "scheduled" },
      });
      expect(await jobRow(owner.dead.jobId)).toMatchObject({ run_status: "dead" });
      const deadShown = await jsonOf(await api(`/v1/executions/${owner.dead.executionId}`, {}, owner.key));
      expect(deadShown).toMatchObject({ id: owner.dead.executionId, status: "dead", deadReason: "permanent" });
    },
  );

  it("GET /v1/jobs never lists another tenant's jobs, with any status filter and any cursor", async () => {
    for (const f of [acme, globex]) {
      const other = f === acme ? globex : acme;
      const otherIds = [other.oneOff.jobId, other.recurring, other.paused, other.dead.jobId];
      for (const status of ["", "active", "paused", "canceled", "completed"]) {
        const listed = await walk(status ? `/v1/jobs?status=${status}` : "/v1/jobs", f.key, "jobs");
        const results = await allShards<{ id: string }>(
          `SELECT id FROM jobs WHERE tenant = ? ${status ? "AND status = ?" : ""}`,
          ...(status ? [f === acme ? "acme" : "globex", status] : [f === acme ? "acme" : "globex"]),
        );
        expect(listed.map((j) => j.id).sort(), `${f.key} ${status}`).toEqual(results.map((r) => r.id).sort());
        for (const id of otherIds) expect(listed.map((j) => j.id)).not.toContain(id);
      }
    }
    // a cursor minted for one tenant pages through the caller's own rows only
    const first = (await (await api("/v1/jobs?limit=1", {}, KEYS.acme)).json()) as { nextCursor: string };
    const borrowed = await api(`/v1/jobs?limit=200&cursor=${encodeURIComponent(first.nextCursor)}`, {}, KEYS.globex);
    expect(borrowed.status).toBe(200);
    const rows = ((await borrowed.json()) as { jobs: { id: string }[] }).jobs;
    for (const j of rows) {
      expect((await d1Of(j.id).prepare("SELECT tenant FROM jobs WHERE id = ?").bind(j.id).first<{ tenant: string }>())!.tenant).toBe(
        "globex",
      );
    }
  });

  it("GET /v1/dlq never lists another tenant's dead executions", async () => {
    for (const f of [acme, globex]) {
      const other = f === acme ? globex : acme;
      const listed = (await walk("/v1/dlq", f.key, "executions")).map((e) => e.id);
      expect(listed).toContain(f.dead.executionId);
      expect(listed).not.toContain(other.dead.executionId);
      const results = await allShards<{ id: string }>(
        "SELECT execution_id AS id FROM dead_letters WHERE tenant = ?",
        f === acme ? "acme" : "globex",
      );
      expect([...listed].sort()).toEqual(results.map((r) => r.id).sort());
    }
  });

  it("one tenant's activity never shows in another's metrics or DLQ", async () => {
    const acmeJson = tenantOnly(await jsonOf(await api("/v1/metrics", {}, KEYS.acme)));
    const acmeText = withoutMeters(await (await api("/metrics", {}, KEYS.acme)).text());
    const acmeDlq = await walk("/v1/dlq", KEYS.acme, "executions");
    const globexBefore = (await jsonOf(await api("/v1/metrics", {}, KEYS.globex))) as { counters: Record<string, number> };

    // globex: a success, a permanent failure (dead), a retry, a cancel, a redrive
    const ok = await createJob({ target: { url: url() } }, KEYS.globex);
    const dead = await createJob({ target: { url: url("fail/404") }, retry: { maxAttempts: 1 } }, KEYS.globex);
    const retried = await createJob(
      { target: { url: url("fail/500") }, retry: { maxAttempts: 3, initialDelayMs: 60_000, jitter: 0 } },
      KEYS.globex,
    );
    const canceled = await createJob({ target: { url: url() }, delay: "2m" }, KEYS.globex);
    for (const j of [ok, dead, retried]) await runNow(j.id);
    expect((await api(`/v1/jobs/${canceled.id}`, { method: "DELETE" }, KEYS.globex)).status).toBe(200);
    expect((await api(`/v1/executions/${globex.dead.executionId}/redrive`, { method: "POST" }, KEYS.globex)).status).toBe(202);
    for (let k = 0; k < BUCKETS; k++) await clock.flush(bucketStub(k));
    // the redriven execution is due again: the alarms that flushed also fired it (captured, not consumed)
    const redriven = sent.filter((m) => m.executionId === globex.dead.executionId);
    expect(redriven).toHaveLength(1);
    sent.splice(sent.indexOf(redriven[0]!), 1);
    const globexDlq = (await walk("/v1/dlq", KEYS.globex, "executions")).map((e) => e.id);
    expect(globexDlq).toContain(oneOffExecutionId(dead.id));
    expect(globexDlq).not.toContain(globex.dead.executionId); // redriven: off the list

    // acme sees none of it (the platform's meters, shared by every tenant's view, left out)
    expect(tenantOnly(await jsonOf(await api("/v1/metrics", {}, KEYS.acme)))).toEqual(acmeJson);
    expect(withoutMeters(await (await api("/metrics", {}, KEYS.acme)).text())).toBe(acmeText);
    expect(await walk("/v1/dlq", KEYS.acme, "executions")).toEqual(acmeDlq);

    // globex's counters moved by exactly what it did
    const globexAfter = (await jsonOf(await api("/v1/metrics", {}, KEYS.globex))) as { counters: Record<string, number> };
    const delta = (name: string) => globexAfter.counters[name]! - globexBefore.counters[name]!;
    const names = [
      "fired_total",
      "succeeded_total",
      "dead_total",
      "failed_attempts_total",
      "retries_total",
      "canceled_total",
      "redrive_total",
    ];
    expect(Object.fromEntries(names.map((n) => [n, delta(n)]))).toEqual({
      fired_total: 4,
      succeeded_total: 1,
      dead_total: 1,
      failed_attempts_total: 2,
      retries_total: 1,
      canceled_total: 1,
      redrive_total: 1,
    });
  });
});

describe("API keys", () => {
  const presented: [string, string | null][] = [
    ["a missing Authorization header", null],
    ["the Basic scheme", "Basic x"],
    ["Bearer without a key", "Bearer"],
    ["Bearer with two tokens", `Bearer a ${KEYS.acme}`],
    ["Bearer with the key and a trailing token", `Bearer ${KEYS.acme} b`],
    ["an unknown key", "Bearer sk-not-a-key"],
    // revoked: a key no longer in API_KEYS (rotation below shows a real removal)
    ["a revoked key", "Bearer test-key-acme-revoked"],
    ["a key of another tenant's length with one byte changed", `Bearer ${KEYS.globex.slice(0, -1)}y`],
  ];

  it("answers 401 with the envelope on every /v1 route and /metrics for a missing, malformed, unknown or revoked key, and changes nothing", async () => {
    const before = await snapshot(acme);
    const jobs = await countAll("SELECT count(*) AS n FROM jobs");
    for (const [method, path, body] of allRoutes(acme)) {
      for (const [label, authorization] of presented) {
        const headers: Record<string, string> = authorization === null ? {} : { authorization };
        const res = await api(path, { method, headers, body }, null);
        const what = `${method} ${path} with ${label}`;
        expect(res.status, what).toBe(401);
        expect(res.headers.get("www-authenticate"), what).toBe("Bearer");
        expect(await jsonOf(res), what).toEqual({ error: { code: "unauthorized", message: expect.any(String), field: "authorization" } });
      }
    }
    expect(await countAll("SELECT count(*) AS n FROM jobs")).toBe(jobs);
    expect(await snapshot(acme)).toEqual(before);
  });

  it("rotates a tenant's keys: both keys see the same jobs; once the old key leaves API_KEYS it gets 401 and the new one still sees everything", async () => {
    const made = await createJob({ name: "made-with-key-2", target: { url: url() }, delay: "1h" }, KEYS.acme2);
    const viaOld = await jsonOf(await api(`/v1/jobs/${made.id}`, {}, KEYS.acme));
    const viaNew = await jsonOf(await api(`/v1/jobs/${made.id}`, {}, KEYS.acme2));
    expect(viaOld).toEqual(viaNew);
    expect(await walk("/v1/jobs", KEYS.acme, "jobs")).toEqual(await walk("/v1/jobs", KEYS.acme2, "jobs"));

    // the rotation's last step: API_KEYS without the old key (a new env object: config is parsed per env)
    const rotated = { ...env, API_KEYS: `acme:${KEYS.acme2},globex:${KEYS.globex}` };
    const call = (path: string, key: string) =>
      worker.fetch!(
        new Request(`http://scheduler${path}`, { headers: { authorization: `Bearer ${key}` } }) as never,
        rotated as never,
        createExecutionContext(),
      );
    expect((await call(`/v1/jobs/${made.id}`, KEYS.acme)).status).toBe(401);
    expect((await call("/v1/jobs?limit=1", KEYS.acme)).status).toBe(401);
    const after = await call(`/v1/jobs/${made.id}`, KEYS.acme2);
    expect(after.status).toBe(200);
    expect(await jsonOf(after)).toEqual(viaNew);
    expect((await call(`/v1/jobs/${acme.oneOff.jobId}`, KEYS.acme2)).status).toBe(200);
  });
});

describe("rate limit per API key", () => {
  // Last in the file: it spends acme's second key's budget (wrangler.toml [[ratelimits]]: 1000
  // requests per 10 s window). Miniflare's limiter is real: windows are aligned to the wall
  // clock, so 2,001 requests cannot all fit in two windows: a 429 must come within them.
  it("answers 429 with Retry-After and the envelope once a key exceeds its limit; other keys go on", async () => {
    const budget = 1000;
    // refused by validation after the key is counted: no D1 read, so 2,001 fit in two windows on a loaded machine too
    const cheap = () => api("/v1/jobs?limit=0", {}, KEYS.acme2);
    let limited: Response | null = null;
    let sent = 0;
    while (limited === null && sent <= 2 * budget) {
      const batch = await Promise.all(Array.from({ length: 50 }, cheap));
      sent += batch.length;
      for (const res of batch) {
        if (res.status === 429 && limited === null) limited = res;
        else {
          expect([400, 429]).toContain(res.status);
          await res.body?.cancel();
        }
      }
    }
    expect(limited, `no 429 after ${sent} requests`).not.toBeNull();
    expect(limited!.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect(await jsonOf(limited!)).toEqual({ error: { code: "rate_limited", message: expect.any(String), field: "authorization" } });
    // per key: the tenant's other key and another tenant's key are not limited
    expect((await api("/v1/jobs?limit=1", {}, KEYS.acme)).status).toBe(200);
    expect((await api("/v1/jobs?limit=1", {}, KEYS.globex)).status).toBe(200);
  }, 60_000);
});
