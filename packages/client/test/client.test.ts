import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type ClientOptions,
  type CreateJob,
  type Job,
  SchedulerClient,
  SchedulerError,
  SchedulerNetworkError,
  VERSION,
} from "../src/index.ts";

/** What the fake server saw of one request. */
interface Seen {
  method: string;
  url: string;
  path: string;
  query: URLSearchParams;
  headers: Headers;
  body: unknown;
}

type Responder = (request: Seen) => Response | Promise<Response>;

/** A fetch that answers with the responders in turn (the last one repeats) and records every request. */
function fakeFetch(...responders: Responder[]) {
  const seen: Seen[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const text = await request.text();
    const entry = {
      method: request.method,
      url: request.url,
      path: url.pathname,
      query: url.searchParams,
      headers: request.headers,
      body: text ? JSON.parse(text) : undefined,
    };
    seen.push(entry);
    const responder = responders[Math.min(seen.length, responders.length) - 1];
    if (!responder) throw new Error("fakeFetch: no responders");
    return responder(entry);
  };
  return { fetch, seen };
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Responder =>
  () =>
    new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const envelope = (status: number, code: string, message = code, field: string | null = null, headers: Record<string, string> = {}) =>
  json(status, { error: { code, message, field } }, headers);
const networkError: Responder = () => {
  throw new TypeError("fetch failed");
};

function client(fetch: ClientOptions["fetch"], options: Partial<ClientOptions> = {}) {
  return new SchedulerClient({
    baseUrl: "http://sched.test/",
    apiKey: "sk_test",
    fetch,
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
    ...options,
  });
}

function job(id: string, extra: Partial<Job> = {}): Job {
  return {
    id,
    name: null,
    status: "active",
    nextRunAt: null,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    target: { url: "https://example.com/hook", method: "POST", headers: {}, body: null },
    timeoutMs: 30_000,
    retry: { maxAttempts: 5, initialDelayMs: 1000, maxDelayMs: 300_000, factor: 2, jitter: 0.2 },
    metadata: null,
    flowControl: null,
    trace: null,
    priority: 5,
    labels: {},
    idempotencyKey: null,
    ...extra,
  };
}

function execution(id: string) {
  return {
    id,
    jobId: "job_1",
    dueAt: "2026-01-01T00:00:00.000Z",
    status: "dead" as const,
    lastHttpStatus: 500,
    lastError: null,
    deadReason: "attempts_exhausted",
    finishedAt: null,
    attempts: 5,
  };
}

const NEW_JOB: CreateJob = { target: { url: "https://example.com/hook", body: { hello: "world" } }, delay: "5s" };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

afterEach(() => {
  vi.useRealTimers();
});

describe("requests", () => {
  it("sends the API key, a JSON body and its content type", async () => {
    const { fetch, seen } = fakeFetch(json(201, job("job_1")));
    const created = await client(fetch).jobs.create(NEW_JOB);

    expect(created.id).toBe("job_1");
    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request?.method).toBe("POST");
    expect(request?.url).toBe("http://sched.test/v1/jobs");
    expect(request?.headers.get("authorization")).toBe("Bearer sk_test");
    expect(request?.headers.get("content-type")).toBe("application/json");
    expect(request?.headers.get("user-agent")).toMatch(/^edge-scheduler-client\/\d+\.\d+\.\d+/);
    expect(request?.body).toEqual({ ...NEW_JOB, idempotencyKey: expect.stringMatching(UUID) });
  });

  it("sends no body and no content type on a read, and keeps a base path", async () => {
    const { fetch, seen } = fakeFetch(json(200, { ok: true }));
    await expect(client(fetch, { baseUrl: "https://api.test/scheduler//", userAgent: "my-app/1" }).health()).resolves.toEqual({ ok: true });
    expect(seen[0]?.url).toBe("https://api.test/scheduler/healthz");
    expect(seen[0]?.body).toBeUndefined();
    expect(seen[0]?.headers.get("content-type")).toBeNull();
    expect(seen[0]?.headers.get("user-agent")).toBe("my-app/1");
  });

  it.each([
    ["jobs.get", (c: SchedulerClient) => c.jobs.get("job/1"), "GET", "/v1/jobs/job%2F1", undefined],
    ["jobs.update", (c: SchedulerClient) => c.jobs.update("job_1", { name: "n" }), "PATCH", "/v1/jobs/job_1", { name: "n" }],
    ["jobs.cancel", (c: SchedulerClient) => c.jobs.cancel("job_1"), "DELETE", "/v1/jobs/job_1", undefined],
    ["jobs.pause", (c: SchedulerClient) => c.jobs.pause("job_1"), "POST", "/v1/jobs/job_1/pause", undefined],
    ["jobs.resume", (c: SchedulerClient) => c.jobs.resume("job_1"), "POST", "/v1/jobs/job_1/resume", undefined],
    ["executions.get", (c: SchedulerClient) => c.executions.get("exe_1"), "GET", "/v1/executions/exe_1", undefined],
    ["executions.redrive", (c: SchedulerClient) => c.executions.redrive("exe_1"), "POST", "/v1/executions/exe_1/redrive", undefined],
    ["dlq.redrive", (c: SchedulerClient) => c.dlq.redrive("exe_1"), "POST", "/v1/executions/exe_1/redrive", undefined],
    ["metrics", (c: SchedulerClient) => c.metrics(), "GET", "/v1/metrics", undefined],
  ])("%s: %s %s", async (_name, call, method, path, body) => {
    const { fetch, seen } = fakeFetch(json(200, { any: "thing" }));
    await expect(call(client(fetch))).resolves.toEqual({ any: "thing" });
    expect(seen.map((r) => [r.method, new URL(r.url).pathname, r.body])).toEqual([[method, path, body]]);
  });

  it("takes 202 (durable, converging) as success", async () => {
    const { fetch } = fakeFetch(json(202, job("job_1", { status: "canceled" })));
    await expect(client(fetch).jobs.cancel("job_1")).resolves.toMatchObject({ id: "job_1", status: "canceled" });
  });

  it("unwraps a job's executions", async () => {
    const { fetch, seen } = fakeFetch(json(200, { executions: [{ ...execution("exe_1"), attempts: [] }] }));
    const executions = await client(fetch).jobs.executions("job_1");
    expect(executions.map((e) => e.id)).toEqual(["exe_1"]);
    expect(seen[0]?.path).toBe("/v1/jobs/job_1/executions");
  });

  it("encodes flow keys as one path segment", async () => {
    const key = "origin:https://a.example";
    const encoded = "/v1/flow-control/origin%3Ahttps%3A%2F%2Fa.example";
    const { fetch, seen } = fakeFetch(json(200, { key }));
    const flow = client(fetch).flowControl;
    await flow.get(key);
    await flow.pause(key);
    await flow.resume(key);
    await flow.update(key, { rate: 10, parallelism: null });
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([
      `GET http://sched.test${encoded}`,
      `POST http://sched.test${encoded}/pause`,
      `POST http://sched.test${encoded}/resume`,
      `PATCH http://sched.test${encoded}`,
    ]);
    expect(seen[3]?.body).toEqual({ rate: 10, parallelism: null });
  });
});

describe("idempotent create", () => {
  it("sends one idempotency key, the same after a 503 and after a network error", async () => {
    const { fetch, seen } = fakeFetch(envelope(503, "unavailable"), networkError, json(201, job("job_1")));
    const c = client(fetch);
    await expect(c.jobs.create(NEW_JOB)).resolves.toMatchObject({ id: "job_1" });

    expect(seen).toHaveLength(3);
    const keys = seen.map((r) => (r.body as CreateJob).idempotencyKey);
    expect(keys[0]).toMatch(UUID);
    expect(new Set(keys)).toEqual(new Set([keys[0]]));
    expect(new Set(seen.map((r) => JSON.stringify(r.body))).size).toBe(1);

    // a new call is a new job: a new key
    await c.jobs.create(NEW_JOB);
    expect((seen[3]!.body as CreateJob).idempotencyKey).toMatch(UUID);
    expect((seen[3]!.body as CreateJob).idempotencyKey).not.toBe(keys[0]);
  });

  it("uses the job's own key, and an explicit key wins over it; the key travels in the body, so any text is a key", async () => {
    const { fetch, seen } = fakeFetch(json(201, job("job_1")));
    const c = client(fetch);
    await c.jobs.create({ ...NEW_JOB, idempotencyKey: "from-body" });
    await c.jobs.create({ ...NEW_JOB, idempotencyKey: "from-body" }, { idempotencyKey: "explicit" });
    await c.jobs.create(NEW_JOB, { idempotencyKey: "commande-é-日本" });

    expect(seen.map((r) => (r.body as CreateJob).idempotencyKey)).toEqual(["from-body", "explicit", "commande-é-日本"]);
    expect(seen.every((r) => r.headers.get("idempotency-key") === null)).toBe(true);
  });

  it("sends a W3C trace given as options as the create request's headers, not in the body", async () => {
    const { fetch, seen } = fakeFetch(json(201, job("job_1")));
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    await client(fetch).jobs.create(NEW_JOB, { traceparent, tracestate: "vendor=1" });
    await client(fetch).jobs.create(NEW_JOB);
    expect(seen.map((r) => [r.headers.get("traceparent"), r.headers.get("tracestate")])).toEqual([
      [traceparent, "vendor=1"],
      [null, null],
    ]);
    expect(seen[0]?.body).not.toHaveProperty("trace");
  });

  it("fails at once, without retries, on a request that cannot be made", async () => {
    const { fetch, seen } = fakeFetch(json(200, {}));
    const error = await client(fetch, { apiKey: "clé-日本" })
      .jobs.get("job_1")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(seen).toHaveLength(0);
  });

  it("refuses a retry budget that is not a whole number of at least 1", () => {
    const { fetch } = fakeFetch(json(200, {}));
    for (const maxAttempts of [Number.NaN, Number.POSITIVE_INFINITY, 0, 1.5]) {
      expect(() => client(fetch, { retry: { maxAttempts } })).toThrow(RangeError);
    }
  });

  it("does not repeat an update that reschedules (runAt or delay) after a 503, but repeats one that does not", async () => {
    const rescheduling = fakeFetch(envelope(503, "unavailable"), json(200, job("job_1")));
    await expect(client(rescheduling.fetch).jobs.update("job_1", { delay: "5s" })).rejects.toMatchObject({ status: 503 });
    expect(rescheduling.seen).toHaveLength(1);
    const renaming = fakeFetch(envelope(503, "unavailable"), json(200, job("job_1")));
    await expect(client(renaming.fetch).jobs.update("job_1", { name: "x" })).resolves.toMatchObject({ id: "job_1" });
    expect(renaming.seen).toHaveLength(2);
  });

  it("createMany gives every item without a key its own, keeps them across a retry, and keeps the order", async () => {
    const items: CreateJob[] = [
      { ...NEW_JOB, name: "a", idempotencyKey: "mine" },
      { ...NEW_JOB, name: "b" },
      { ...NEW_JOB, name: "c" },
    ];
    const answer: Responder = (request) => {
      const jobs = (request.body as { jobs: CreateJob[] }).jobs;
      return json(200, { results: jobs.map((j, i) => ({ status: 201, job: job(`job_${i}`, { name: j.name ?? null }) })) })(request);
    };
    const { fetch, seen } = fakeFetch(envelope(500, "internal"), answer);
    const results = await client(fetch).jobs.createMany(items);

    expect(seen).toHaveLength(2);
    expect(seen[0]?.path).toBe("/v1/jobs/batch");
    const sent = (seen[0]!.body as { jobs: CreateJob[] }).jobs;
    expect(sent.map((j) => j.name)).toEqual(["a", "b", "c"]);
    expect(sent[0]?.idempotencyKey).toBe("mine");
    expect(sent[1]?.idempotencyKey).toMatch(UUID);
    expect(sent[2]?.idempotencyKey).toMatch(UUID);
    expect(sent[1]?.idempotencyKey).not.toBe(sent[2]?.idempotencyKey);
    expect(seen[1]?.body).toEqual(seen[0]?.body); // the retry sent the same keys
    expect(items[1]?.idempotencyKey).toBeUndefined(); // the caller's objects are left alone
    expect(results.map((r) => ("job" in r ? r.job.name : null))).toEqual(["a", "b", "c"]);
  });
});

describe("retries", () => {
  const rateLimited = (retryAfter: string) =>
    envelope(429, "rate_limited", "too many requests", "authorization", { "retry-after": retryAfter });

  it("waits at least Retry-After seconds", async () => {
    vi.useFakeTimers();
    const { fetch, seen } = fakeFetch(rateLimited("2"), json(200, job("job_1")));
    const got = client(fetch, { retry: { initialDelayMs: 1, maxDelayMs: 1000 } }).jobs.get("job_1");

    await vi.advanceTimersByTimeAsync(1999);
    expect(seen).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(2);
    await expect(got).resolves.toMatchObject({ id: "job_1" });
  });

  it("reads Retry-After as an HTTP date too, and caps it at 6 × maxDelayMs", async () => {
    vi.useFakeTimers({ now: new Date("2026-01-01T00:00:00Z") });
    const { fetch, seen } = fakeFetch(rateLimited("Thu, 01 Jan 2026 00:00:03 GMT"), rateLimited("3600"), json(200, job("job_1")));
    const got = client(fetch, { retry: { initialDelayMs: 1, maxDelayMs: 1000 } }).jobs.get("job_1");

    await vi.advanceTimersByTimeAsync(2999);
    expect(seen).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(5999); // an hour asked, 6 s (6 × 1000 ms) waited
    expect(seen).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(3);
    await expect(got).resolves.toMatchObject({ id: "job_1" });
  });

  it("gives the last error, with its Retry-After, when the attempts run out", async () => {
    const { fetch, seen } = fakeFetch(rateLimited("0"));
    const error = await client(fetch, { retry: { maxAttempts: 3, initialDelayMs: 1 } })
      .jobs.get("job_1")
      .catch((e: unknown) => e);
    expect(seen).toHaveLength(3);
    expect(error).toBeInstanceOf(SchedulerError);
    expect(error).toMatchObject({ status: 429, code: "rate_limited", field: "authorization", retryAfterMs: 0 });
  });

  it("does not retry a 400, and reads its envelope", async () => {
    const { fetch, seen } = fakeFetch(
      envelope(400, "invalid_field", "target.url must be http or https", "target.url"),
      json(201, job("x")),
    );
    const error = await client(fetch)
      .jobs.create(NEW_JOB)
      .catch((e: unknown) => e);
    expect(seen).toHaveLength(1);
    expect(error).toBeInstanceOf(SchedulerError);
    expect(error).toMatchObject({
      name: "SchedulerError",
      status: 400,
      code: "invalid_field",
      field: "target.url",
      message: "target.url must be http or https",
      retryAfterMs: null,
    });
  });

  it("does not retry a 409", async () => {
    const { fetch, seen } = fakeFetch(envelope(409, "conflict"), json(200, job("x")));
    await expect(client(fetch).jobs.pause("job_1")).rejects.toMatchObject({ status: 409, code: "conflict" });
    expect(seen).toHaveLength(1);
  });

  it("maxAttempts 1 means no retries", async () => {
    const { fetch, seen } = fakeFetch(envelope(503, "unavailable"), json(200, job("x")));
    await expect(client(fetch, { retry: { maxAttempts: 1 } }).jobs.get("job_1")).rejects.toMatchObject({ status: 503 });
    expect(seen).toHaveLength(1);
  });

  it("does not repeat a redrive after a 503 or a lost answer", async () => {
    for (const failure of [envelope(503, "unavailable"), networkError]) {
      const { fetch, seen } = fakeFetch(failure, json(202, { ...execution("exe_1"), redriven: true }));
      const c = client(fetch);
      const error = await c.executions.redrive("exe_1").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(failure === networkError ? SchedulerNetworkError : SchedulerError);
      expect(seen).toHaveLength(1);
    }
  });

  it("repeats a redrive after a 429 (refused before it ran)", async () => {
    const { fetch, seen } = fakeFetch(rateLimited("0"), json(202, { ...execution("exe_1"), redriven: true }));
    await expect(client(fetch).dlq.redrive("exe_1")).resolves.toMatchObject({ id: "exe_1", redriven: true });
    expect(seen).toHaveLength(2);
  });

  it("throws SchedulerNetworkError when no answer comes after the retries", async () => {
    const { fetch, seen } = fakeFetch(networkError);
    const error = await client(fetch)
      .jobs.get("job_1")
      .catch((e: unknown) => e);
    expect(seen).toHaveLength(4);
    expect(error).toBeInstanceOf(SchedulerNetworkError);
    expect((error as SchedulerNetworkError).cause).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain("after 4 attempts");
  });

  it("takes a timeout as no answer", async () => {
    // answers only to its abort signal, as fetch does
    const neverAnswers = (_input: RequestInfo | URL, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    const error = await client(neverAnswers, { timeoutMs: 20, retry: { maxAttempts: 2, initialDelayMs: 1 } })
      .metrics()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SchedulerNetworkError);
    expect((error as SchedulerNetworkError).cause).toMatchObject({ name: "TimeoutError" });
  });

  it("gives a non-JSON 502 the code http_502 (after retrying it)", async () => {
    const { fetch, seen } = fakeFetch(
      () => new Response("<html>Bad Gateway</html>", { status: 502, headers: { "content-type": "text/html" } }),
    );
    const error = await client(fetch)
      .jobs.get("job_1")
      .catch((e: unknown) => e);
    expect(seen).toHaveLength(4);
    expect(error).toBeInstanceOf(SchedulerError);
    expect(error).toMatchObject({ status: 502, code: "http_502", field: null });
    expect((error as Error).message).toContain("Bad Gateway");
  });
});

describe("pagination", () => {
  const pages: Responder = (request) => {
    const cursor = request.query.get("cursor");
    if (cursor === null) return json(200, { jobs: [job("j1"), job("j2")], nextCursor: "c1" })(request);
    if (cursor === "c1") return json(200, { jobs: [job("j3"), job("j4")], nextCursor: "c2" })(request);
    if (cursor === "c2") return json(200, { jobs: [job("j5")], nextCursor: null })(request);
    return envelope(400, "invalid_field", "bad cursor", "cursor")(request);
  };

  it("follows nextCursor across pages and stops at null", async () => {
    const { fetch, seen } = fakeFetch(pages);
    const ids: string[] = [];
    for await (const j of client(fetch).jobs.list({ status: "active", limit: 2 })) ids.push(j.id);

    expect(ids).toEqual(["j1", "j2", "j3", "j4", "j5"]);
    expect(seen.map((r) => r.query.toString())).toEqual([
      "status=active&limit=2",
      "status=active&limit=2&cursor=c1",
      "status=active&limit=2&cursor=c2",
    ]);
  });

  it("toArray(max) stops fetching once it has max items", async () => {
    const { fetch, seen } = fakeFetch(pages);
    const c = client(fetch);
    expect((await c.jobs.list().toArray(3)).map((j) => j.id)).toEqual(["j1", "j2", "j3"]);
    expect(seen).toHaveLength(2);
    expect(await c.jobs.list().toArray(0)).toEqual([]);
    expect(seen).toHaveLength(2);
    expect(await c.jobs.list().toArray()).toHaveLength(5);
  });

  it("gives one page at a time", async () => {
    const { fetch, seen } = fakeFetch(pages);
    const page = await client(fetch).jobs.list({ limit: 2 }).page("c1");
    expect(page.items.map((j) => j.id)).toEqual(["j3", "j4"]);
    expect(page.nextCursor).toBe("c2");
    expect(seen[0]?.query.get("cursor")).toBe("c1");
  });

  it("lists the DLQ the same way", async () => {
    const { fetch, seen } = fakeFetch(
      json(200, { executions: [execution("e1")], nextCursor: "c1" }),
      json(200, { executions: [execution("e2")], nextCursor: null }),
    );
    expect((await client(fetch).dlq.list({ limit: 1 }).toArray()).map((e) => e.id)).toEqual(["e1", "e2"]);
    expect(seen.map((r) => `${r.path}?${r.query}`)).toEqual(["/v1/dlq?limit=1", "/v1/dlq?limit=1&cursor=c1"]);
  });

  it("lists executions by filter, following nextCursor past a short page", async () => {
    const { fetch, seen } = fakeFetch(
      json(200, { executions: [], nextCursor: "c1" }),
      json(200, { executions: [execution("e1")], nextCursor: null }),
    );
    const filter = { status: "dead", jobId: "job_1", label: "team:a", httpStatus: 500, from: "2026-01-01T00:00:00Z" } as const;
    expect((await client(fetch).executions.list(filter).toArray()).map((e) => e.id)).toEqual(["e1"]);
    const first = "status=dead&jobId=job_1&label=team%3Aa&httpStatus=500&from=2026-01-01T00%3A00%3A00Z";
    expect(seen.map((r) => `${r.path}?${r.query}`)).toEqual([`/v1/executions?${first}`, `/v1/executions?${first}&cursor=c1`]);
  });

  it("sends the jobs list's name and url filters", async () => {
    const { fetch, seen } = fakeFetch(json(200, { jobs: [job("j1")], nextCursor: null }));
    await client(fetch).jobs.list({ name: "nightly-", url: "https://api.example.com/" }).toArray();
    expect(seen[0]?.query.toString()).toBe("name=nightly-&url=https%3A%2F%2Fapi.example.com%2F");
  });
});

describe("VERSION", () => {
  it("is the package's version (the User-Agent names it)", async () => {
    const { readFileSync } = await import("node:fs");
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });
});

describe("bulk actions", () => {
  const action = {
    id: "act_1",
    kind: "cancel",
    status: "running",
    matched: 0,
    done: 0,
    failed: 0,
    failures: [],
    createdAt: "2026-01-01T00:00:00.000Z",
    finishedAt: null,
  };

  it("starts one with an Idempotency-Key kept across a retry, so a lost answer finds the same action", async () => {
    const { fetch, seen } = fakeFetch(envelope(503, "unavailable"), json(202, action));
    await expect(client(fetch).jobs.bulk("cancel", { filter: { label: "team:x" } })).resolves.toMatchObject({ id: "act_1" });
    expect(seen.map((r) => r.path)).toEqual(["/v1/jobs/cancel", "/v1/jobs/cancel"]);
    const keys = seen.map((r) => r.headers.get("idempotency-key"));
    expect(keys[0]).toMatch(UUID);
    expect(keys[1]).toBe(keys[0]);
    expect(seen[0]?.body).toEqual({ filter: { label: "team:x" } });
  });

  it("redrives many dead executions and reads an action's progress", async () => {
    const { fetch, seen } = fakeFetch(json(202, { ...action, kind: "redrive" }), json(200, { ...action, status: "done" }));
    const c = client(fetch);
    await c.dlq.redriveMany({ ids: ["exe_1"] }, { idempotencyKey: "mine" });
    await expect(c.actions.get("act_1")).resolves.toMatchObject({ status: "done" });
    expect(seen.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /v1/dlq/redrive", "GET /v1/actions/act_1"]);
    expect(seen[0]?.headers.get("idempotency-key")).toBe("mine");
  });
});

describe("alerts", () => {
  const target = {
    url: "https://example.com/alerts",
    headers: { "x-team": "ops" },
    throttledForMs: 120_000,
    digestIntervalMs: 10_000,
    digestMaxListed: 100,
  };

  it("sets the target with a PUT (repeated after a 5xx: it sets the same), reads it and deletes it (204)", async () => {
    const { fetch, seen } = fakeFetch(
      envelope(503, "unavailable"),
      json(200, target),
      json(200, target),
      () => new Response(null, { status: 204 }),
    );
    const c = client(fetch);
    await expect(c.alerts.set({ url: target.url, headers: target.headers, throttledForMs: 120_000 })).resolves.toEqual(target);
    await expect(c.alerts.get()).resolves.toEqual(target);
    await expect(c.alerts.delete()).resolves.toBeUndefined();
    expect(seen.map((r) => `${r.method} ${r.path}`)).toEqual(["PUT /v1/alerts", "PUT /v1/alerts", "GET /v1/alerts", "DELETE /v1/alerts"]);
    expect(seen[0]?.body).toEqual({ url: target.url, headers: { "x-team": "ops" }, throttledForMs: 120_000 });
    expect(seen[0]?.headers.get("content-type")).toBe("application/json");
  });

  it("reads no target as null, and throws the API's 400 naming the field", async () => {
    const { fetch } = fakeFetch(
      envelope(404, "not_found", "no alert target is set"),
      envelope(400, "invalid_field", "too small", "throttledForMs"),
    );
    const c = client(fetch);
    await expect(c.alerts.get()).resolves.toBeNull();
    const error = await c.alerts.set({ url: target.url, throttledForMs: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SchedulerError);
    expect(error).toMatchObject({ status: 400, field: "throttledForMs" });
  });
});
