/**
 * The HTTP contract: bearer auth on every /v1 route, validation at the door (a 400 naming the
 * field, never a 500, STYLE.md habit 8), the batch endpoint, reads, listing with cursors,
 * cancel, tenant isolation and the one error envelope { error: { code, message, field } }.
 *
 * Near-term jobs here are due minutes ahead (or beyond the lookahead) on a file-wide clock that
 * only moves when a test moves it, and fire-queue sends are captured, so nothing is delivered
 * in the background; storage is shared by the tests of this file, so every test uses its own
 * jobs and names.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { oneOffExecutionId } from "../../src/core/id";
import {
  allShards,
  api,
  bucketRow,
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
  type JobJson,
  jobRow,
  KEYS,
  live,
  newExecution,
  receiverUrl,
  runAlarm,
  runScan,
  sentFor,
  uniquePath,
} from "./helpers";

const clock = fileClock(0);
const sent = captureFiresForFile();

interface Envelope {
  error: { code: string; message: string; field: string | null };
}

const target = () => ({ url: `${receiverUrl()}${uniquePath()}` });
/** a valid job that waits in D1 (beyond the lookahead): cheap, and never fires during the tests */
const farJob = (extra: Record<string, unknown> = {}) => ({ target: target(), delay: "1h", ...extra });

async function expectError(res: Response, status: number, field: string | null, code?: string): Promise<Envelope> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  expect(res.headers.get("content-type")).toMatch(/application\/json/);
  const body = JSON.parse(text) as Envelope;
  expect(body.error).toEqual({ code: code ?? expect.any(String), message: expect.any(String), field });
  return body;
}

async function jobCount(): Promise<number> {
  return countAll("SELECT count(*) AS n FROM jobs");
}

describe("authentication", () => {
  const routes: [string, string][] = [
    ["POST", "/v1/jobs"],
    ["POST", "/v1/jobs/batch"],
    ["GET", "/v1/jobs"],
    ["GET", "/v1/jobs/job_00000000000000000000000000"],
    ["DELETE", "/v1/jobs/job_00000000000000000000000000"],
    ["GET", "/v1/jobs/job_00000000000000000000000000/executions"],
    ["GET", "/v1/executions/exe_00000000000000000000000000"],
    ["POST", "/v1/executions/exe_00000000000000000000000000/redrive"],
    ["GET", "/v1/dlq"],
    ["GET", "/v1/metrics"],
    ["GET", "/metrics"],
    ["GET", "/v1/no-such-route"],
  ];
  const presented: [string, string | null][] = [
    ["no Authorization header", null],
    ["another scheme", "Basic dGVzdC1rZXktYWNtZTo="],
    ["a bare key", KEYS.acme],
    ["an unknown key", "Bearer not-a-key"],
    ["a key with a known prefix", `Bearer ${KEYS.acme}x`],
    ["an empty bearer", "Bearer "],
  ];

  it.each(routes)("%s %s answers 401 with the envelope for every bad credential", async (method, path) => {
    for (const [, authorization] of presented) {
      const headers: Record<string, string> = authorization === null ? {} : { authorization };
      // a body that would be invalid: authentication comes before validation
      const body = method === "POST" ? "{not json" : undefined;
      const res = await api(path, { method, headers, body }, null);
      await expectError(res, 401, "authorization", "unauthorized");
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
    }
  });

  it("accepts every configured key of a tenant, case-insensitive scheme", async () => {
    expect((await api("/v1/jobs?limit=1", {}, KEYS.acme)).status).toBe(200);
    expect((await api("/v1/jobs?limit=1", {}, KEYS.acme2)).status).toBe(200);
    expect((await api("/v1/jobs?limit=1", { headers: { authorization: `bearer ${KEYS.globex}` } }, null)).status).toBe(200);
  });

  it("serves /healthz without a key", async () => {
    const res = await api("/healthz", {}, null);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  it("answers an unknown route with the 404 envelope", async () => {
    await expectError(await api("/v1/no-such-route"), 404, null, "not_found");
    await expectError(await api("/v1/jobs/some-id/nope", { method: "POST" }), 404, null, "not_found");
    await expectError(await api("/nowhere", {}, null), 404, null, "not_found");
  });
});

describe("validation at the door", () => {
  const big = "x".repeat(64 * 1024);
  const cases: [string, unknown, string, string?][] = [
    ["unknown top-level field", farJob({ colour: "blue" }), "colour", "unknown_field"],
    ["unknown target field", { target: { ...target(), verb: "POST" }, delay: "1h" }, "target.verb", "unknown_field"],
    ["unknown retry field", farJob({ retry: { maxAttempts: 3, backoff: "linear" } }), "retry.backoff", "unknown_field"],
    ["missing target", { delay: "1h" }, "target"],
    ["target.url not a URL", { target: { url: "not a url" } }, "target.url"],
    ["target.url not http(s)", { target: { url: "ftp://example.com/x" } }, "target.url"],
    ["target.url with credentials", { target: { url: "https://user:pw@example.com/" } }, "target.url"],
    ["target.url too long", { target: { url: `https://example.com/${"a".repeat(2100)}` } }, "target.url"],
    ["unknown method", { target: { ...target(), method: "TRACE" } }, "target.method"],
    ["lower-case method", { target: { ...target(), method: "post" } }, "target.method"],
    [
      "reserved header webhook-signature",
      { target: { ...target(), headers: { "webhook-signature": "v1,forged" } } },
      "target.headers.webhook-signature",
    ],
    ["reserved header Host", { target: { ...target(), headers: { Host: "evil.example" } } }, "target.headers.Host"],
    [
      "reserved header idempotency-key",
      { target: { ...target(), headers: { "Idempotency-Key": "mine" } } },
      "target.headers.Idempotency-Key",
    ],
    ["invalid header name", { target: { ...target(), headers: { "bad header": "x" } } }, "target.headers.bad header"],
    // a value fetch() refuses would fail every attempt at fire time: refuse it now
    [
      "header value with CR LF",
      { target: { ...target(), headers: { "x-note": "a\r\nx-injected: 1" } }, delay: "1h" },
      "target.headers.x-note",
    ],
    ["header value with NUL", { target: { ...target(), headers: { "x-note": "a\u0000b" } }, delay: "1h" }, "target.headers.x-note"],
    ["body on a GET", { target: { ...target(), method: "GET", body: "x" } }, "target.body"],
    ["target.body over 64 KiB", { target: { ...target(), body: `${big}y` } }, "target.body"],
    ["runAt not a time", farJob({ delay: undefined, runAt: "tomorrow" }), "runAt"],
    ["runAt without an offset", { target: target(), runAt: "2030-01-02T15:04:05" }, "runAt"],
    ["runAt negative epoch", { target: target(), runAt: -1 }, "runAt"],
    ["runAt beyond the horizon", { target: target(), runAt: Date.now() + 400 * 86_400_000 }, "runAt"],
    ["delay not a duration", { target: target(), delay: "5 minutes" }, "delay"],
    ["delay negative", { target: target(), delay: -5 }, "delay"],
    ["delay of the wrong type", { target: target(), delay: true }, "delay"],
    ["runAt and delay", { target: target(), runAt: Date.now() + 60_000, delay: "1m" }, "delay"],
    ["retry.maxAttempts 0", farJob({ retry: { maxAttempts: 0 } }), "retry.maxAttempts"],
    ["retry.maxAttempts 101", farJob({ retry: { maxAttempts: 101 } }), "retry.maxAttempts"],
    ["retry.maxAttempts fractional", farJob({ retry: { maxAttempts: 2.5 } }), "retry.maxAttempts"],
    ["retry.factor below 1", farJob({ retry: { factor: 0.5 } }), "retry.factor"],
    ["retry.jitter above 1", farJob({ retry: { jitter: 1.5 } }), "retry.jitter"],
    ["retry.initialDelayMs negative", farJob({ retry: { initialDelayMs: -1 } }), "retry.initialDelayMs"],
    ["retry.maxDelayMs below initialDelayMs", farJob({ retry: { initialDelayMs: 5000, maxDelayMs: 1000 } }), "retry.maxDelayMs"],
    ["timeoutMs below 1 s", farJob({ timeoutMs: 999 }), "timeoutMs"],
    ["timeoutMs above 14 min", farJob({ timeoutMs: 840_001 }), "timeoutMs"],
    ["timeoutMs fractional", farJob({ timeoutMs: 1500.5 }), "timeoutMs"],
    ["empty name", farJob({ name: "" }), "name"],
    ["metadata over 4 KiB", farJob({ metadata: { blob: "m".repeat(5000) } }), "metadata"],
    ["a body that is not an object", [farJob()], "body"],
    ["a body that is JSON null", "null", "body"],
  ];

  it.each(cases)("rejects %s with a 400 naming the field", async (_label, body, field, code) => {
    const before = await jobCount();
    await expectError(await api("/v1/jobs", { method: "POST", body }), 400, field, code ?? "invalid_field");
    expect(await jobCount()).toBe(before);
  });

  it("rejects a body that is not JSON with a 400 naming the body", async () => {
    await expectError(await api("/v1/jobs", { method: "POST", body: "{not json" }), 400, "body", "invalid_json");
    await expectError(await api("/v1/jobs/batch", { method: "POST", body: "[1," }), 400, "body", "invalid_json");
    await expectError(await api("/v1/jobs", { method: "POST" }), 400, "body", "invalid_json");
  });

  it("rejects deeply nested JSON in target.body and metadata with a 400, not a 500", async () => {
    // 5,000 levels fit in the 128 KiB request limit; validation must not recurse that deep
    const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
    const url = `${receiverUrl()}${uniquePath()}`;
    for (const [json, field] of [
      [`{"target":{"url":"${url}","body":${deep}},"delay":"1h"}`, "target.body"],
      [`{"target":{"url":"${url}"},"metadata":{"a":${deep}},"delay":"1h"}`, "metadata"],
    ]) {
      const res = await api("/v1/jobs", { method: "POST", body: json });
      expect(res.status, await res.clone().text()).toBe(400);
      const error = ((await res.json()) as Envelope).error;
      expect(error.field?.startsWith(field!), error.field ?? "null").toBe(true);
    }
  });

  it("accepts a target.body of exactly 64 KiB", async () => {
    const job = await createJob({ target: { ...target(), body: big }, delay: "1h" });
    expect(job.target.body).toHaveLength(64 * 1024);
  });

  it("refuses a request body over its limit with 413, not 500", async () => {
    const body = JSON.stringify({ target: target(), metadata: { blob: "m".repeat(200 * 1024) } });
    await expectError(await api("/v1/jobs", { method: "POST", body }), 413, "body", "payload_too_large");
  });

  it("rejects a bad Idempotency-Key header naming it", async () => {
    await expectError(
      await api("/v1/jobs", { method: "POST", body: farJob(), headers: { "idempotency-key": "k".repeat(201) } }),
      400,
      "Idempotency-Key",
    );
  });

  it("leaves earlier accepted jobs untouched when a later request fails validation", async () => {
    const accepted = await createJob(farJob({ name: "keep-me" }));
    const jobBefore = await d1Of(accepted.id).prepare("SELECT * FROM jobs WHERE id = ?").bind(accepted.id).first();
    const executionBefore = await executionOf(accepted.id);
    const count = await jobCount();

    await expectError(
      await api("/v1/jobs", { method: "POST", body: { ...farJob(), name: "keep-me", bogus: 1 } }),
      400,
      "bogus",
      "unknown_field",
    );
    await expectError(await api("/v1/jobs", { method: "POST", body: "{" }), 400, "body", "invalid_json");
    await expectError(await api("/v1/jobs/batch", { method: "POST", body: { jobs: [] } }), 400, "jobs");

    expect(await jobCount()).toBe(count);
    expect(await d1Of(accepted.id).prepare("SELECT * FROM jobs WHERE id = ?").bind(accepted.id).first()).toEqual(jobBefore);
    expect(await executionOf(accepted.id)).toEqual(executionBefore);
    const shown = (await (await api(`/v1/jobs/${accepted.id}`)).json()) as JobJson;
    expect(shown).toMatchObject({ id: accepted.id, name: "keep-me", status: "active" });
  });
});

describe("POST /v1/jobs/batch", () => {
  it("writes 1000 jobs in one request, results in request order", async () => {
    const tag = crypto.randomUUID();
    const jobs = Array.from({ length: 1000 }, (_, i) => ({ name: `${tag}-${i}`, target: target(), delay: i % 2 === 0 ? "1h" : "170s" }));
    const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs } });
    expect(res.status).toBe(200);
    const { results } = (await res.json()) as { results: { status: number; job: JobJson }[] };
    expect(results).toHaveLength(1000);
    results.forEach((r, i) => {
      expect(r.status).toBe(201);
      expect(r.job.name).toBe(`${tag}-${i}`);
    });
    expect(new Set(results.map((r) => r.job.id)).size).toBe(1000);

    // D1 holds one row per job, active, no outcome yet
    const rows = await allShards<{ id: string; status: string; run_status: string | null; next_run_at: number }>(
      "SELECT id, status, run_status, next_run_at FROM jobs WHERE name LIKE ? || '-%'",
      tag,
    );
    expect(rows).toHaveLength(1000);
    expect(rows.every((r) => r.status === "active" && r.run_status === null)).toBe(true);
    // the far half waits in D1; the near half was handed to the buckets (one durable row each)
    const ids = results.map((r) => r.job.id);
    const near = new Set(ids.filter((_, i) => i % 2 === 1));
    let inBuckets = 0;
    const held: string[] = [];
    for (let k = 0; k < CONFIG.BUCKETS; k++) {
      const stub = bucketStub(k);
      const [row] = await bucketSql<{ n: number }>(
        stub,
        `SELECT count(*) AS n FROM executions WHERE job_id IN (SELECT value FROM json_each(?))`,
        JSON.stringify(ids),
      );
      inBuckets += row!.n;
      const views = await stub.inspect({ executionIds: ids.map((id) => oneOffExecutionId(id)) });
      for (const v of views) {
        expect(v.status).toBe("scheduled");
        held.push(v.jobId);
      }
    }
    expect(inBuckets).toBe(500);
    expect(new Set(held)).toEqual(near);
    // as the API shows them: a near one scheduled, a far one pending
    const shown = async (id: string) =>
      ((await (await api(`/v1/executions/${oneOffExecutionId(id)}`)).json()) as { status: string }).status;
    expect(await shown(ids[1]!)).toBe("scheduled");
    expect(await shown(ids[0]!)).toBe("pending");
  });

  it("answers mixed valid and invalid items per item, in order, and creates the valid ones", async () => {
    const jobs = [
      farJob({ name: "mixed-0" }),
      { target: { url: "nope" } },
      farJob({ name: "mixed-2" }),
      { ...farJob(), surprise: true },
      farJob({ retry: { maxAttempts: 0 } }),
      { target: { ...target(), headers: { "webhook-id": "x" } } },
      farJob({ name: "mixed-6" }),
    ];
    const before = await jobCount();
    const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs } });
    expect(res.status).toBe(200);
    const { results } = (await res.json()) as { results: ({ status: number; job: JobJson } & Partial<Envelope>)[] };
    expect(results.map((r) => r.status)).toEqual([201, 400, 201, 400, 400, 400, 201]);
    expect(results.map((r) => r.error?.field ?? null)).toEqual([
      null,
      "jobs[1].target.url",
      null,
      "jobs[3].surprise",
      "jobs[4].retry.maxAttempts",
      "jobs[5].target.headers.webhook-id",
      null,
    ]);
    expect(results[3]!.error!.code).toBe("unknown_field");
    expect(results.map((r) => r.job?.name ?? null)).toEqual(["mixed-0", null, "mixed-2", null, null, null, "mixed-6"]);
    expect(await jobCount()).toBe(before + 3);
    for (const i of [0, 2, 6]) {
      const id = results[i]!.job.id;
      const created = await api(`/v1/jobs/${id}`);
      expect(created.status).toBe(200);
      // due in an hour: waiting in D1, not held by its bucket yet
      const shown = (await created.json()) as JobJson & { latestExecution: { status: string } };
      expect(shown.latestExecution.status).toBe("pending");
      const exe = (await executionOf(id))!;
      expect(await live(bucketStub(exe.bucket), exe.id)).toBeUndefined();
    }
  });

  it("rejects more than 1000 jobs and an empty batch with a 400 naming jobs", async () => {
    const before = await jobCount();
    const tooMany = Array.from({ length: 1001 }, () => farJob());
    await expectError(await api("/v1/jobs/batch", { method: "POST", body: { jobs: tooMany } }), 400, "jobs");
    await expectError(await api("/v1/jobs/batch", { method: "POST", body: { jobs: [] } }), 400, "jobs");
    await expectError(await api("/v1/jobs/batch", { method: "POST", body: {} }), 400, "jobs");
    await expectError(await api("/v1/jobs/batch", { method: "POST", body: { jobs: [farJob()], extra: 1 } }), 400, "extra", "unknown_field");
    expect(await jobCount()).toBe(before);
  });
});

describe("reading jobs", () => {
  it("GET /v1/jobs/:id shows the job with its latest execution", async () => {
    const created = await createJob({ name: "read-me", target: { ...target(), body: { a: 1 } }, delay: "2m", metadata: { team: "x" } });
    const res = await api(`/v1/jobs/${created.id}`);
    expect(res.status).toBe(200);
    const job = (await res.json()) as JobJson & { latestExecution: { id: string; jobId: string; status: string; dueAt: string } };
    const row = (await executionOf(created.id))!;
    expect(job).toMatchObject({
      id: created.id,
      name: "read-me",
      status: "active",
      nextRunAt: new Date(row.due_at).toISOString(),
      target: { method: "POST", body: '{"a":1}', headers: { "content-type": "application/json" } },
      timeoutMs: 30_000,
      metadata: { team: "x" },
    });
    expect(job.latestExecution).toMatchObject({
      id: row.id,
      jobId: created.id,
      status: "scheduled",
      dueAt: new Date(row.due_at).toISOString(),
    });
  });

  it("GET /v1/jobs lists newest first and walks every page by cursor without duplicates or gaps", async () => {
    // globex: this file creates no other globex jobs, so the walk is short and exact
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      clock.advance(1); // one creation time each: ids sort by creation
      created.push((await createJob(farJob({ name: `page-${i}` }), KEYS.globex)).id);
    }
    const seen: JobJson[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const query: string = cursor === null ? "limit=2" : `limit=2&cursor=${encodeURIComponent(cursor)}`;
      const res = await api(`/v1/jobs?${query}`, {}, KEYS.globex);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { jobs: JobJson[]; nextCursor: string | null };
      expect(body.jobs.length).toBeLessThanOrEqual(2);
      seen.push(...body.jobs);
      cursor = body.nextCursor;
      if (cursor === null) break;
    }
    expect(cursor).toBeNull();
    const ids = seen.map((j) => j.id);
    expect(new Set(ids).size).toBe(ids.length);
    const results = await allShards<{ id: string }>("SELECT id FROM jobs WHERE tenant = 'globex'");
    expect([...ids].sort()).toEqual(results.map((r) => r.id).sort());
    expect(ids).toEqual(expect.arrayContaining(created));
    // newest first: by id descending (ids are time-sortable), so createdAt never grows down the list
    expect(ids.filter((id) => created.includes(id))).toEqual([...created].reverse());
    for (let i = 1; i < seen.length; i++) {
      const [a, b] = [seen[i - 1]!, seen[i]!];
      expect(a.id > b.id, `${a.id} before ${b.id}`).toBe(true);
      expect(a.createdAt >= b.createdAt, `${a.id} before ${b.id}`).toBe(true);
    }
  });

  it("GET /v1/jobs filters by status", async () => {
    const kept = await createJob(farJob({ name: "filter-active" }), KEYS.globex);
    const dropped = await createJob(farJob({ name: "filter-canceled" }), KEYS.globex);
    expect((await api(`/v1/jobs/${dropped.id}`, { method: "DELETE" }, KEYS.globex)).status).toBe(200);

    const canceled = (await (await api("/v1/jobs?status=canceled&limit=200", {}, KEYS.globex)).json()) as { jobs: JobJson[] };
    expect(canceled.jobs.map((j) => j.id)).toContain(dropped.id);
    expect(canceled.jobs.map((j) => j.id)).not.toContain(kept.id);
    expect(canceled.jobs.every((j) => j.status === "canceled")).toBe(true);
    const active = (await (await api("/v1/jobs?status=active&limit=200", {}, KEYS.globex)).json()) as { jobs: JobJson[] };
    expect(active.jobs.map((j) => j.id)).toContain(kept.id);
    expect(active.jobs.map((j) => j.id)).not.toContain(dropped.id);
    expect(active.jobs.every((j) => j.status === "active")).toBe(true);
  });

  it("rejects bad list parameters with a 400 naming them", async () => {
    await expectError(await api("/v1/jobs?status=sleeping"), 400, "status");
    await expectError(await api("/v1/jobs?limit=0"), 400, "limit");
    await expectError(await api("/v1/jobs?limit=201"), 400, "limit");
    await expectError(await api("/v1/jobs?cursor=%25%25%25"), 400, "cursor");
    await expectError(await api("/v1/jobs?sort=asc"), 400, "sort", "unknown_field");
  });
});

describe("DELETE /v1/jobs/:id", () => {
  it("cancels a job handed to its bucket: the job and its execution read canceled", async () => {
    const job = await createJob({ target: target(), delay: "2m" });
    const exe = (await executionOf(job.id))!;
    const stub = bucketStub(exe.bucket);
    expect((await live(stub, exe.id))?.status).toBe("scheduled");
    const canceledAt = clock.at;
    const res = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(res.status).toBe(200); // the bucket applied the cancel
    expect(((await res.json()) as JobJson).status).toBe("canceled");
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", version: 2, synced: 1 });
    // the bucket closed its execution canceled; its outcome reaches D1 with the next flush
    expect((await live(stub, exe.id))?.status).toBe("canceled");
    await clock.flush(stub);
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", run_status: "canceled", finished_at: canceledAt });
    expect(await bucketRow(stub, exe.id)).toBeUndefined();
    expect(await live(stub, exe.id)).toBeUndefined();
    const { executions } = (await (await api(`/v1/jobs/${job.id}/executions`)).json()) as { executions: { id: string; status: string }[] };
    expect(executions).toEqual([expect.objectContaining({ id: exe.id, status: "canceled" })]);
    const shown = (await (await api(`/v1/jobs/${job.id}`)).json()) as JobJson & { latestExecution: { status: string } };
    expect(shown.status).toBe("canceled");
    expect(shown.nextRunAt).toBeNull();
    expect(shown.latestExecution.status).toBe("canceled");
  });

  it("cancels a job still waiting in D1: its pending execution reads canceled", async () => {
    const job = await createJob(farJob());
    const exe = (await executionOf(job.id))!;
    const res = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", version: 2, synced: 1, run_status: null });
    expect(await live(bucketStub(exe.bucket), exe.id)).toBeUndefined();
    const shown = (await (await api(`/v1/executions/${exe.id}`)).json()) as { status: string; finishedAt: string | null };
    expect(shown.status).toBe("canceled");
    expect(shown.finishedAt).not.toBeNull();
    const { executions } = (await (await api(`/v1/jobs/${job.id}/executions`)).json()) as { executions: { status: string }[] };
    expect(executions.map((e) => e.status)).toEqual(["canceled"]);
    // canceling again changes nothing and answers the same
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(200);
    expect((await jobRow(job.id))!.version).toBe(2);
  });
});

/** Until the test ends (or `restore`), every bucket stub the Worker takes refuses applyJobs as if unreachable. */
function bucketsRefuseChanges(): () => void {
  const getByName = env.BUCKET.getByName.bind(env.BUCKET);
  const spy = vi.spyOn(env.BUCKET, "getByName").mockImplementation((name: string) => {
    const real = getByName(name);
    return new Proxy(real, {
      get: (target, property) =>
        property === "applyJobs" ? async () => Promise.reject(new Error("bucket unreachable (test)")) : Reflect.get(target, property),
    });
  });
  onTestFinished(() => spy.mockRestore());
  return () => spy.mockRestore();
}

describe("DELETE /v1/jobs/:id while its bucket is unreachable", () => {
  it("answers 202: the cancel is durable and unsynced; a retried DELETE re-sends it and answers 200", async () => {
    const job = await createJob({ target: target(), delay: "2m" });
    const exe = (await executionOf(job.id))!;
    const stub = bucketStub(exe.bucket);
    const restore = bucketsRefuseChanges();
    const res = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    restore();
    expect(res.status).toBe(202);
    expect(((await res.json()) as JobJson).status).toBe("canceled");
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", version: 2, synced: 0 });
    expect((await live(stub, exe.id))?.status).toBe("scheduled"); // not applied yet
    // the client retries: the same change is sent again (no new version) and now applied
    const again = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(again.status).toBe(200);
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", version: 2, synced: 1 });
    expect((await live(stub, exe.id))?.status).toBe("canceled");
  });

  it("a cancel answered 202 converges through the sync pass without the client", async () => {
    const job = await createJob({ target: target(), delay: "2m" });
    const exe = (await executionOf(job.id))!;
    const stub = bucketStub(exe.bucket);
    const restore = bucketsRefuseChanges();
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(202);
    restore();
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", synced: 0 });
    await runScan();
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", version: 2, synced: 1 });
    expect((await live(stub, exe.id))?.status).toBe("canceled");
    await clock.flush(stub);
    expect(await jobRow(job.id)).toMatchObject({ run_status: "canceled" });
    expect(await bucketRow(stub, exe.id)).toBeUndefined();
  });
});

describe("tenant isolation", () => {
  it("answers 404 to another tenant's job and execution ids, and changes nothing", async () => {
    const job = await createJob({ target: target(), delay: "2m" }, KEYS.acme);
    const row = (await executionOf(job.id))!;
    await expectError(await api(`/v1/jobs/${job.id}`, {}, KEYS.globex), 404, "id", "not_found");
    await expectError(await api(`/v1/jobs/${job.id}`, { method: "DELETE" }, KEYS.globex), 404, "id", "not_found");
    await expectError(await api(`/v1/jobs/${job.id}/executions`, {}, KEYS.globex), 404, "id", "not_found");
    await expectError(await api(`/v1/executions/${row.id}`, {}, KEYS.globex), 404, "id", "not_found");
    await expectError(await api(`/v1/executions/${row.id}/redrive`, { method: "POST" }, KEYS.globex), 404, "id", "not_found");
    const listed = (await (await api("/v1/jobs?limit=200", {}, KEYS.globex)).json()) as { jobs: JobJson[] };
    expect(listed.jobs.map((j) => j.id)).not.toContain(job.id);

    // the owner still sees it active and scheduled; its other key works too
    const shown = (await (await api(`/v1/jobs/${job.id}`, {}, KEYS.acme2)).json()) as JobJson & { latestExecution: { status: string } };
    expect(shown.status).toBe("active");
    expect(shown.latestExecution.status).toBe("scheduled");
  });

  it("answers 404 to an unknown job id", async () => {
    await expectError(await api("/v1/jobs/job_doesnotexist"), 404, "id", "not_found");
    await expectError(await api("/v1/jobs/job_doesnotexist", { method: "DELETE" }), 404, "id", "not_found");
    await expectError(await api("/v1/executions/exe_doesnotexist"), 404, "id", "not_found");
  });
});

describe("HTTP conventions", () => {
  it("answers a wrong method on a known route with 405 and an Allow header listing the methods it serves; an unknown route stays 404", async () => {
    const job = await createJob(farJob());
    for (const [method, path, allow] of [
      ["PUT", "/v1/jobs", "GET, HEAD, POST"],
      ["DELETE", "/v1/jobs", "GET, HEAD, POST"],
      ["POST", `/v1/jobs/${job.id}`, "DELETE, GET, HEAD, PATCH"],
      ["GET", `/v1/jobs/${job.id}/pause`, "POST"],
      ["DELETE", `/v1/jobs/${job.id}/resume`, "POST"],
      ["POST", `/v1/jobs/${job.id}/executions`, "GET, HEAD"],
      ["GET", "/v1/executions/exe_00000000000000000000000000/redrive", "POST"],
      ["PATCH", "/v1/dlq", "GET, HEAD"],
      ["POST", "/v1/metrics", "GET, HEAD"],
      ["POST", "/metrics", "GET, HEAD"],
    ] as const) {
      const res = await api(path, { method });
      await expectError(res, 405, "method", "method_not_allowed");
      expect(res.headers.get("allow"), `${method} ${path}`).toBe(allow);
    }
    // what Allow lists is served: HEAD answers like GET, without a body
    const head = await api(`/v1/jobs/${job.id}`, { method: "HEAD" });
    expect([head.status, await head.text()]).toEqual([200, ""]);
    await expectError(await api("/v1/nope", { method: "GET" }), 404, null, "not_found");
  });

  it("refuses a repeated query parameter with a 400 naming it", async () => {
    await expectError(await api("/v1/jobs?limit=1&limit=2"), 400, "limit");
    await expectError(await api("/v1/jobs?status=active&status=canceled"), 400, "status");
    await expectError(await api("/v1/dlq?cursor=a&cursor=b"), 400, "cursor");
    expect((await api("/v1/jobs?limit=1&status=active")).status).toBe(200);
  });

  it("answers resume of a one-off job with 409, like pause, and changes nothing", async () => {
    const job = await createJob(farJob());
    const before = await jobRow(job.id);
    await expectError(await api(`/v1/jobs/${job.id}/pause`, { method: "POST" }), 409, "id", "not_recurring");
    await expectError(await api(`/v1/jobs/${job.id}/resume`, { method: "POST" }), 409, "id", "not_recurring");
    expect(await jobRow(job.id)).toEqual(before);
  });

  it("names every batch item's error field with its jobs[i] prefix, whatever the error", async () => {
    const key = `batch-prefix-${crypto.randomUUID()}`;
    const res = await api("/v1/jobs/batch", {
      method: "POST",
      body: `{"jobs":[
        ${JSON.stringify(farJob({ idempotencyKey: key }))},
        {"target":{"url":"ftp://x"}},
        {"target":{"url":"${receiverUrl()}/ok"},"nope":1},
        {"target":{"url":"${receiverUrl()}/ok","body":{"n":1e400}}},
        {"target":{"url":"${receiverUrl()}/ok","headers":{"webhook-x":"1"}}},
        {"target":{"url":"${receiverUrl()}/ok"},"name":"\\ud800"},
        "not an object",
        ${JSON.stringify(farJob({ idempotencyKey: key, name: "another body" }))}
      ]}`,
    });
    expect(res.status).toBe(200);
    const { results } = (await res.json()) as { results: ({ status: number } & Partial<Envelope>)[] };
    expect(results.map((r) => [r.status, r.error?.code ?? null, r.error?.field ?? null])).toEqual([
      [201, null, null],
      [400, "invalid_field", "jobs[1].target.url"],
      [400, "unknown_field", "jobs[2].nope"],
      [400, "invalid_field", "jobs[3].target.body.n"],
      [400, "invalid_field", "jobs[4].target.headers.webhook-x"],
      [400, "invalid_field", "jobs[5].name"],
      [400, "invalid_field", "jobs[6]"],
      [409, "idempotency_key_reused", "jobs[7].idempotencyKey"],
    ]);
  });
});

describe("an execution is never shown in a state without its fields", () => {
  interface Shown {
    status: string;
    deadReason: string | null;
    finishedAt: string | null;
  }
  /** The rule: a terminal state carries finishedAt, dead carries deadReason, anything else carries neither. */
  function expectComplete(e: Shown, status: string) {
    expect(e.status).toBe(status);
    const terminal = ["succeeded", "dead", "canceled"].includes(e.status);
    expect(e.finishedAt !== null, `finishedAt of ${JSON.stringify(e)}`).toBe(terminal);
    expect(e.deadReason !== null, `deadReason of ${JSON.stringify(e)}`).toBe(e.status === "dead");
  }
  async function shownBoth(jobId: string, executionId: string): Promise<Shown[]> {
    const job = (await (await api(`/v1/jobs/${jobId}`)).json()) as { latestExecution: Shown };
    const execution = (await (await api(`/v1/executions/${executionId}`)).json()) as Shown;
    return [job.latestExecution, execution];
  }

  it("latestExecution and GET /v1/executions/:id show finishedAt and deadReason as soon as an execution ends (still in its bucket) and after it lands in D1", async () => {
    // due ahead of the clock, so no real alarm dispatches them before the test does
    const succeeded = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "140s" });
    const dead = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("fail/404")}` }, delay: "140s" });
    const canceled = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "170s" });
    const pending = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "2h" });
    // both are due at once (and may share a bucket): one travel, each bucket's alarm, then their messages
    clock.advance(140_000);
    for (const e of [succeeded, dead]) await runAlarm(e.stub);
    for (const e of [succeeded, dead]) expect((await fire(sentFor(sent, e.exe.id))).explicitAcks).toEqual(["m0"]);
    expect((await api(`/v1/jobs/${canceled.job.id}`, { method: "DELETE" })).status).toBe(200);
    const cases = [
      [succeeded, "succeeded"],
      [dead, "dead"],
      [canceled, "canceled"],
      [pending, "pending"],
    ] as const;
    for (const [e, status] of cases) for (const shown of await shownBoth(e.job.id, e.exe.id)) expectComplete(shown, status);
    expect((await live(dead.stub, dead.exe.id))?.status).toBe("dead"); // the first reads came from the bucket
    clock.advance(5_000);
    for (const e of [succeeded, dead, canceled]) await clock.flush(e.stub);
    expect(await live(dead.stub, dead.exe.id)).toBeUndefined(); // these from D1
    for (const [e, status] of cases) for (const shown of await shownBoth(e.job.id, e.exe.id)) expectComplete(shown, status);
  });
});
