/**
 * Validate at the door (STYLE.md habit 8): a bad URL, header, body, time, retry policy or size is a
 * 400 naming its field when the job is created, never a failure when it fires. Also the normalized
 * job that a good request becomes, and the request hash behind idempotency keys (invariant 8).
 */
import { describe, expect, it } from "vitest";
import { configOf } from "../../src/config";
import { DEFAULT_RETRY_POLICY } from "../../src/core/backoff";
import { bucketOfJob } from "../../src/core/bucketing";
import { oneOffExecutionId } from "../../src/core/id";
import { type HttpTarget, isHttpTarget, type JobSpec } from "../../src/core/job";
import { FlowKeyName } from "../../src/schemas/job-input";
import { ApiError } from "../../src/use-cases/errors";
import { prepareJob } from "../../src/use-cases/validation";

// configOf parses a plain env object; no FIRE_QUEUE_n bindings are needed to validate a job
const config = configOf({ BUCKETS: "32", SCAN_WINDOW_MS: "60000" } as unknown as Env);
const loopbackConfig = configOf({ BUCKETS: "4", ALLOW_LOOPBACK_TARGETS: "true" } as unknown as Env);
const now = Date.UTC(2026, 0, 2, 15, 4, 5, 123);
const ctx = { tenant: "acme", now, config, fieldPrefix: "", shard: 0 };

const ok = { target: { url: "https://example.com/hook" } };
const withTarget = (target: Record<string, unknown>) => ({ target: { url: "https://example.com/hook", ...target } });

/** The spec's HTTP target (a test that expects one fails if it is a handler Worker or a pull queue). */
function http(spec: JobSpec): HttpTarget {
  if (!isHttpTarget(spec.target)) throw new Error("expected an HTTP target");
  return spec.target;
}

async function refusal(raw: unknown, fieldPrefix = ""): Promise<ApiError> {
  const error = await prepareJob(raw, { ...ctx, fieldPrefix }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error, "expected prepareJob to refuse the request").toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe("prepareJob refuses bad input with a 400 naming the field", () => {
  it.each<[string, unknown, string]>([
    // target.url
    ["missing target", {}, "target"],
    ["missing url", { target: {} }, "target.url"],
    ["url not a string", { target: { url: 42 } }, "target.url"],
    ["http in production", { target: { url: "http://example.com/" } }, "target.url"],
    ["loopback target", { target: { url: "https://127.0.0.1/" } }, "target.url"],
    ["metadata address", { target: { url: "https://169.254.169.254/" } }, "target.url"],
    ["not a URL", { target: { url: "example" } }, "target.url"],
    ["credentials in URL", { target: { url: "https://u:p@example.com/" } }, "target.url"],
    ["url over 2048 chars", { target: { url: `https://example.com/${"a".repeat(2048)}` } }, "target.url"],
    // target.method
    ["unknown method", withTarget({ method: "FETCH" }), "target.method"],
    ["lowercase method", withTarget({ method: "post" }), "target.method"],
    // target.headers
    ["reserved webhook-id", withTarget({ headers: { "webhook-id": "x" } }), "target.headers.webhook-id"],
    ["reserved webhook-signature", withTarget({ headers: { "webhook-signature": "v1,x" } }), "target.headers.webhook-signature"],
    ["reserved idempotency-key", withTarget({ headers: { "idempotency-key": "x" } }), "target.headers.idempotency-key"],
    ["reserved, other case", withTarget({ headers: { "Webhook-Timestamp": "1" } }), "target.headers.Webhook-Timestamp"],
    ["host header", withTarget({ headers: { Host: "evil.example" } }), "target.headers.Host"],
    ["content-length header", withTarget({ headers: { "content-length": "1" } }), "target.headers.content-length"],
    ["header value not a string", withTarget({ headers: { "x-a": 1 } }), "target.headers.x-a"],
    ["header value over 2 KiB", withTarget({ headers: { "x-big": "v".repeat(2049) } }), "target.headers.x-big"],
    [
      "more than 32 headers",
      withTarget({ headers: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`x-h${i}`, "v"])) }),
      "target.headers",
    ],
    // target.body
    ["string body over 64 KiB", withTarget({ body: "b".repeat(64 * 1024 + 1) }), "target.body"],
    ["JSON body over 64 KiB", withTarget({ body: { blob: "b".repeat(64 * 1024) } }), "target.body"],
    ["multi-byte body over 64 KiB in bytes", withTarget({ body: "é".repeat(32 * 1024 + 1) }), "target.body"],
    ["GET with a body", withTarget({ method: "GET", body: "x" }), "target.body"],
    ["GET with a JSON body", withTarget({ method: "GET", body: { a: 1 } }), "target.body"],
    // runAt / delay
    ["runAt garbage", { ...ok, runAt: "tomorrow" }, "runAt"],
    ["runAt without offset", { ...ok, runAt: "2026-01-02T15:04:05" }, "runAt"],
    ["runAt negative", { ...ok, runAt: -1 }, "runAt"],
    ["runAt not an integer", { ...ok, runAt: 1.5 }, "runAt"],
    ["runAt boolean", { ...ok, runAt: true }, "runAt"],
    ["runAt beyond the horizon", { ...ok, runAt: now + 367 * 86_400_000 }, "runAt"],
    ["delay garbage", { ...ok, delay: "5 minutes" }, "delay"],
    ["delay without unit", { ...ok, delay: "5" }, "delay"],
    ["delay negative", { ...ok, delay: -1 }, "delay"],
    ["delay in weeks", { ...ok, delay: "1w" }, "delay"],
    ["delay beyond the horizon", { ...ok, delay: "400d" }, "delay"],
    ["runAt and delay together", { ...ok, runAt: now + 1_000, delay: "5s" }, "delay"],
    // retry
    ["maxAttempts 0", { ...ok, retry: { maxAttempts: 0 } }, "retry.maxAttempts"],
    ["maxAttempts 101", { ...ok, retry: { maxAttempts: 101 } }, "retry.maxAttempts"],
    ["maxAttempts not an integer", { ...ok, retry: { maxAttempts: 2.5 } }, "retry.maxAttempts"],
    ["maxAttempts as a string", { ...ok, retry: { maxAttempts: "3" } }, "retry.maxAttempts"],
    ["maxDelayMs below initialDelayMs", { ...ok, retry: { initialDelayMs: 5_000, maxDelayMs: 4_999 } }, "retry.maxDelayMs"],
    ["initialDelayMs above the default maxDelayMs", { ...ok, retry: { initialDelayMs: 300_001 } }, "retry.maxDelayMs"],
    ["negative initialDelayMs", { ...ok, retry: { initialDelayMs: -1 } }, "retry.initialDelayMs"],
    ["factor below 1", { ...ok, retry: { factor: 0.5 } }, "retry.factor"],
    ["jitter above 1", { ...ok, retry: { jitter: 1.5 } }, "retry.jitter"],
    // timeoutMs
    ["timeoutMs below 1s", { ...ok, timeoutMs: 999 }, "timeoutMs"],
    ["timeoutMs above 14 min", { ...ok, timeoutMs: 840_001 }, "timeoutMs"],
    ["timeoutMs not an integer", { ...ok, timeoutMs: 1_500.5 }, "timeoutMs"],
    // trace: a control character anywhere in tracestate, at either end too (issue 36 item 9)
    ...["\tcongo=t61", "congo=t61\n", "con\u0001go=t61"].map(
      (tracestate) =>
        [
          `tracestate ${JSON.stringify(tracestate)}`,
          { ...ok, trace: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate } },
          "trace.tracestate",
        ] as [string, Record<string, unknown>, string],
    ),
    // metadata, name, idempotencyKey
    ["metadata over 4 KiB", { ...ok, metadata: { note: "m".repeat(4 * 1024) } }, "metadata"],
    ["metadata not an object", { ...ok, metadata: "x" }, "metadata"],
    ["empty name", { ...ok, name: "" }, "name"],
    ["name over 200 chars", { ...ok, name: "n".repeat(201) }, "name"],
    ["empty idempotencyKey", { ...ok, idempotencyKey: "" }, "idempotencyKey"],
    ["idempotencyKey over 200 chars", { ...ok, idempotencyKey: "k".repeat(201) }, "idempotencyKey"],
    // recurring-only fields
    ["timezone without cron", { ...ok, timezone: "Europe/Paris" }, "timezone"],
    ["cron and runAt together", { ...ok, cron: "*/5 * * * *", runAt: now }, "runAt"],
    ["cron with 3 fields", { ...ok, cron: "* * *" }, "cron"],
    ["unknown time zone", { ...ok, cron: "0 9 * * *", timezone: "Mars/Olympus" }, "timezone"],
  ])("%s -> invalid_field %s", async (_name, raw, field) => {
    const error = await refusal(raw);
    expect(error.status).toBe(400);
    expect(error.code).toBe("invalid_field");
    expect(error.field).toBe(field);
    expect(error.message.length).toBeGreaterThan(0);
  });

  it.each<[string, unknown, string]>([
    ["top level", { ...ok, foo: 1 }, "foo"],
    ["in target", withTarget({ foo: 1 }), "target.foo"],
    ["in retry", { ...ok, retry: { maxAttempts: 3, backoff: "linear" } }, "retry.backoff"],
    ["a near-miss of a real field", { ...ok, run_at: "2026-01-02T15:04:05Z" }, "run_at"],
  ])("an unknown field %s is unknown_field naming it", async (_name, raw, field) => {
    const error = await refusal(raw);
    expect(error.status).toBe(400);
    expect(error.code).toBe("unknown_field");
    expect(error.field).toBe(field);
    expect(error.message).toContain(field);
  });

  it.each<[unknown]>([[null], ["a string"], [[]], [42]])("a body that is not an object (%j) is a 400", async (raw) => {
    const error = await refusal(raw);
    expect(error.status).toBe(400);
    expect(error.code).toBe("invalid_field");
  });

  describe("inside a batch, the field carries the job's position (fieldPrefix)", () => {
    it.each<[string, unknown, string, string]>([
      ["target policy", { target: { url: "http://example.com/" } }, "invalid_field", "jobs[3].target.url"],
      ["schema", withTarget({ method: "FETCH" }), "invalid_field", "jobs[3].target.method"],
      ["reserved header", withTarget({ headers: { "webhook-id": "x" } }), "invalid_field", "jobs[3].target.headers.webhook-id"],
      ["body size", withTarget({ body: "b".repeat(64 * 1024 + 1) }), "invalid_field", "jobs[3].target.body"],
      ["delay", { ...ok, delay: "soon" }, "invalid_field", "jobs[3].delay"],
      ["retry policy", { ...ok, retry: { initialDelayMs: 10, maxDelayMs: 1 } }, "invalid_field", "jobs[3].retry.maxDelayMs"],
      ["unknown top-level field", { ...ok, foo: 1 }, "unknown_field", "jobs[3].foo"],
      ["unknown nested field", withTarget({ foo: 1 }), "unknown_field", "jobs[3].target.foo"],
      ["missing target", {}, "invalid_field", "jobs[3].target"],
    ])("%s -> %s %s", async (_name, raw, code, field) => {
      const error = await refusal(raw, "jobs[3]");
      expect(error.status).toBe(400);
      expect(error.code).toBe(code);
      expect(error.field).toBe(field);
    });
  });
});

describe("prepareJob normalizes a good request", () => {
  it("fills the defaults", async () => {
    const { job, spec } = await prepareJob(ok, ctx);
    expect(spec.target).toEqual({ url: "https://example.com/hook", method: "POST", headers: {}, body: null });
    expect(spec.timeoutMs).toBe(30_000);
    expect(spec.retry).toEqual(DEFAULT_RETRY_POLICY);
    expect(spec.retry).toEqual({ maxAttempts: 5, initialDelayMs: 1_000, maxDelayMs: 300_000, factor: 2, jitter: 0.2 });
    expect(spec.metadata).toBeNull();
    expect(job.name).toBeNull();
    expect(job.tenant).toBe("acme");
    expect(job.nextRunAt).toBe(now); // no runAt, no delay: due at once
    expect(job.idempotencyKey).toBeNull();
    expect(job.requestHash).toBeNull();
    expect(JSON.parse(job.spec)).toEqual(JSON.parse(JSON.stringify(spec)));
  });

  it("gives the job and its first execution prefixed, time-sortable ids", async () => {
    const { job } = await prepareJob(ok, ctx);
    expect(job.id).toMatch(/^job_[0-9a-z]{26}$/);
    expect(oneOffExecutionId(job.id)).toBe(`exe_${job.id.slice(4)}`);
    const later = await prepareJob(ok, { ...ctx, now: now + 1 });
    expect(later.job.id > job.id).toBe(true);
    const other = await prepareJob(ok, ctx);
    expect(other.job.id).not.toBe(job.id);
  });

  it("places the job in its bucket (by the random part its executions share)", async () => {
    for (let i = 0; i < 50; i++) {
      const { job } = await prepareJob({ ...ok, delay: `${i}m` }, ctx);
      expect(job.bucket).toBe(bucketOfJob(job.id, 32));
      expect(job.bucket).toBeGreaterThanOrEqual(0);
      expect(job.bucket).toBeLessThan(32);
    }
    const small = await prepareJob(ok, { ...ctx, config: loopbackConfig });
    expect(small.job.bucket).toBeLessThan(4);
  });

  it("merges a partial retry policy into the defaults", async () => {
    const { spec } = await prepareJob({ ...ok, retry: { maxAttempts: 3, jitter: 0 } }, ctx);
    expect(spec.retry).toEqual({ ...DEFAULT_RETRY_POLICY, maxAttempts: 3, jitter: 0 });
  });

  it("serializes a JSON body and adds content-type application/json", async () => {
    const { spec } = await prepareJob(withTarget({ body: { order: 42, items: ["a", "b"] } }), ctx);
    expect(http(spec).body).toBe('{"order":42,"items":["a","b"]}');
    expect(http(spec).headers).toEqual({ "content-type": "application/json" });
  });

  it.each<[unknown, string]>([
    [[1, 2], "[1,2]"],
    [42, "42"],
    [true, "true"],
  ])("serializes the JSON body %j", async (body, expected) => {
    const { spec } = await prepareJob(withTarget({ body }), ctx);
    expect(http(spec).body).toBe(expected);
    expect(http(spec).headers["content-type"]).toBe("application/json");
  });

  it("keeps a caller's content-type for a JSON body, whatever its case", async () => {
    const { spec } = await prepareJob(withTarget({ body: { a: 1 }, headers: { "Content-Type": "application/vnd.api+json" } }), ctx);
    expect(http(spec).headers).toEqual({ "Content-Type": "application/vnd.api+json" });
  });

  it("keeps a string body as is, without adding a content-type", async () => {
    const { spec } = await prepareJob(withTarget({ body: "plain text", headers: { "x-trace": "t1" } }), ctx);
    expect(http(spec).body).toBe("plain text");
    expect(http(spec).headers).toEqual({ "x-trace": "t1" });
  });

  it("accepts a body of exactly 64 KiB", async () => {
    const { spec } = await prepareJob(withTarget({ body: "b".repeat(64 * 1024) }), ctx);
    expect(http(spec).body).toHaveLength(64 * 1024);
  });

  it("a GET without a body is fine", async () => {
    const { spec } = await prepareJob(withTarget({ method: "GET" }), ctx);
    expect(spec.target).toMatchObject({ method: "GET", body: null });
  });

  it.each<[string, unknown, number]>([
    ["past runAt fires at once", "2020-01-01T00:00:00Z", now],
    ["past epoch ms fires at once", 0, now],
    ["runAt now", now, now],
    ["future runAt with an offset", "2026-01-02T17:00:00+01:00", Date.UTC(2026, 0, 2, 16, 0, 0)],
    ["future runAt with fraction", "2026-01-03T00:00:00.250Z", Date.UTC(2026, 0, 3, 0, 0, 0, 250)],
    ["future epoch ms", now + 90_000, now + 90_000],
  ])("runAt: %s", async (_name, runAt, dueAt) => {
    const { job } = await prepareJob({ ...ok, runAt }, ctx);
    expect(job.nextRunAt).toBe(dueAt);
  });

  it.each<[string | number, number]>([
    ["500ms", 500],
    ["30s", 30_000],
    ["5m", 300_000],
    ["2h", 7_200_000],
    ["1d", 86_400_000],
    [1_500, 1_500],
    [0, 0],
  ])("delay %j -> dueAt = now + %i", async (delay, ms) => {
    const { job } = await prepareJob({ ...ok, delay }, ctx);
    expect(job.nextRunAt).toBe(now + ms);
  });

  it("keeps name, metadata and timeoutMs", async () => {
    const { job, spec } = await prepareJob({ ...ok, name: "nightly", metadata: { team: "billing", n: 1 }, timeoutMs: 60_000 }, ctx);
    expect(job.name).toBe("nightly");
    expect(spec.metadata).toEqual({ team: "billing", n: 1 });
    expect(spec.timeoutMs).toBe(60_000);
  });

  it("normalizes the URL", async () => {
    const { spec } = await prepareJob({ target: { url: "https://EXAMPLE.com" } }, ctx);
    expect(http(spec).url).toBe("https://example.com/");
  });

  it("allows http loopback targets when ALLOW_LOOPBACK_TARGETS is true", async () => {
    const { spec } = await prepareJob({ target: { url: "http://127.0.0.1:8787/hook" } }, { ...ctx, config: loopbackConfig });
    expect(http(spec).url).toBe("http://127.0.0.1:8787/hook");
  });
});

describe("prepareJob request hash (invariant 8: same key + same request = replay, other request = 409)", () => {
  const hashOf = async (raw: unknown, headerIdempotencyKey?: string) =>
    (await prepareJob(raw, { ...ctx, headerIdempotencyKey })).job.requestHash;

  it("is only computed when an idempotency key is given", async () => {
    expect(await hashOf(ok)).toBeNull();
    expect(await hashOf({ ...ok, idempotencyKey: "k1" })).toMatch(/^[0-9a-f]{64}$/);
    expect(await hashOf(ok, "k1")).toMatch(/^[0-9a-f]{64}$/);
  });

  it("takes the key from the body field before the header", async () => {
    const { job } = await prepareJob({ ...ok, idempotencyKey: "from-body" }, { ...ctx, headerIdempotencyKey: "from-header" });
    expect(job.idempotencyKey).toBe("from-body");
    const fromHeader = await prepareJob(ok, { ...ctx, headerIdempotencyKey: "from-header" });
    expect(fromHeader.job.idempotencyKey).toBe("from-header");
  });

  it("is the same for the same request with another key order", async () => {
    const a = {
      idempotencyKey: "k1",
      target: { url: "https://example.com/hook", method: "PUT", body: { a: 1, b: { c: 2, d: [1, { e: 3, f: 4 }] } } },
      delay: "5m",
    };
    const b = {
      delay: "5m",
      target: { body: { b: { d: [1, { f: 4, e: 3 }], c: 2 }, a: 1 }, method: "PUT", url: "https://example.com/hook" },
      idempotencyKey: "k1",
    };
    expect(await hashOf(a)).toBe(await hashOf(b));
  });

  it("is the same whether the key comes from the header or the body, and whatever the key", async () => {
    expect(await hashOf({ ...ok, idempotencyKey: "k1" })).toBe(await hashOf(ok, "k1"));
    expect(await hashOf({ ...ok, idempotencyKey: "k1" })).toBe(await hashOf({ ...ok, idempotencyKey: "k2" }));
  });

  it("is the same when a default is spelled out", async () => {
    expect(await hashOf(withTarget({ method: "POST", headers: {} }), "k1")).toBe(await hashOf(ok, "k1"));
  });

  it.each<[string, unknown]>([
    ["another body", withTarget({ body: { a: 2 } })],
    ["another url", { target: { url: "https://example.com/other" } }],
    ["another method", withTarget({ method: "PUT", body: { a: 1 } })],
    ["another header", withTarget({ body: { a: 1 }, headers: { "x-a": "1" } })],
    ["another delay", { ...withTarget({ body: { a: 1 } }), delay: "5m" }],
    ["another retry policy", { ...withTarget({ body: { a: 1 } }), retry: { maxAttempts: 2 } }],
    ["string body instead of JSON", withTarget({ body: '{"a":1}' })],
  ])("differs for %s", async (_name, other) => {
    expect(await hashOf(withTarget({ body: { a: 1 } }), "k1")).not.toBe(await hashOf(other, "k1"));
  });
});

describe("flow-control key names", () => {
  it('refuses "." and ".." (a URL path normalizes them away, so /v1/flow-control/:key could never name them), keeps names that contain dots', () => {
    for (const key of [".", ".."]) expect(FlowKeyName.safeParse(key).success, key).toBe(false);
    for (const key of ["...", ".a", "a..b", "billing.api"]) expect(FlowKeyName.safeParse(key).success, key).toBe(true);
  });
});
