/**
 * Handler Workers (issue 15): a job's target can be a Worker bound to the scheduler by a service
 * binding (test/support/handler-worker.mjs, bound as TEST_HANDLER, granted to acme only). Proves:
 * the grant is checked at the door (another tenant's Worker answers exactly like one that does not
 * exist) and again at delivery; the RPC carries the execution id, attempt, due time and payload;
 * what the handler returns or throws is classified like an HTTP answer, with the same leases,
 * retries and dead letters; a handler slower than the job's timeout fails that attempt.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  api,
  captureFiresForFile,
  dispatchOf,
  type Execution,
  fileClock,
  fire,
  KEYS,
  newExecution,
  receiverUrl,
  startFire,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

const testHandler = env.TEST_HANDLER;

/** One attempt: the alarm dispatches it, the consumer calls the handler and reports. */
async function attemptOnce(e: Execution): Promise<void> {
  const result = await fire([await dispatch(e)]);
  expect(result.explicitAcks).toEqual(["m0"]);
}

async function refusal(body: unknown, key: string = KEYS.acme) {
  const res = await api("/v1/jobs", { method: "POST", body }, key);
  expect(res.status).toBe(400);
  return ((await res.json()) as { error: { code: string; message: string; field: string } }).error;
}

describe("a handler Worker target at the door", () => {
  it("is accepted for a granted tenant and shown with its payload", async () => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: { worker: "test", payload: { order: 7 } }, delay: "1h" } });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { target: unknown }).target).toEqual({ worker: "test", payload: { order: 7 } });
  });

  it("is refused for a tenant it was not granted, exactly as a Worker that does not exist", async () => {
    const notGranted = await refusal({ target: { worker: "test" } }, KEYS.globex);
    const missing = await refusal({ target: { worker: "nope" } }, KEYS.globex);
    expect(notGranted).toMatchObject({ code: "invalid_field", field: "target.worker" });
    expect(notGranted.message.replace('"test"', '"?"')).toBe(missing.message.replace('"nope"', '"?"'));
  });

  it.each<[string, unknown, string]>([
    ["url and worker", { url: `${receiverUrl()}/ok`, worker: "test" }, "target.worker"],
    ["neither url nor worker", { payload: 1 }, "target.url"],
    ["an HTTP field on a worker", { worker: "test", method: "PUT" }, "target.method"],
    ["a body on a worker", { worker: "test", body: "x" }, "target.body"],
    ["a payload on a URL", { url: `${receiverUrl()}/ok`, payload: 1 }, "target.payload"],
    ["a worker name out of shape", { worker: "Not A Name" }, "target.worker"],
  ])("refuses %s, naming the field", async (_case, target, field) => {
    expect(await refusal({ target })).toMatchObject({ field });
  });

  it("is refused in a batch item and in a PATCH of the tenant's own job when the Worker is not granted to it", async () => {
    const batch = await api("/v1/jobs/batch", { method: "POST", body: { jobs: [{ target: { worker: "test" } }] } }, KEYS.globex);
    const [item] = ((await batch.json()) as { results: { status: number; error?: { field: string } }[] }).results;
    expect(item).toMatchObject({ status: 400, error: { field: "jobs[0].target.worker" } });

    const own = await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}/ok` }, delay: "1h" } }, KEYS.globex);
    const id = ((await own.json()) as { id: string }).id;
    const patched = await api(`/v1/jobs/${id}`, { method: "PATCH", body: { target: { worker: "test" } } }, KEYS.globex);
    expect(patched.status).toBe(400);
    expect(((await patched.json()) as { error: { field: string } }).error.field).toBe("target.worker");
  });

  it("PATCH switches a job between an HTTP target and a handler Worker, and merges within one", async () => {
    const job = (await (
      await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}/ok` }, delay: "1h" } })
    ).json()) as {
      id: string;
    };
    const patch = async (target: unknown) => api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { target } });
    expect(((await (await patch({ worker: "test", payload: { a: 1 } })).json()) as { target: unknown }).target).toEqual({
      worker: "test",
      payload: { a: 1 },
    });
    expect(((await (await patch({ payload: { a: 2 } })).json()) as { target: unknown }).target).toEqual({
      worker: "test",
      payload: { a: 2 },
    });
    const mixed = await patch({ method: "GET" });
    expect(mixed.status).toBe(400);
    expect(((await mixed.json()) as { error: { field: string } }).error.field).toBe("target.method");
    expect(((await (await patch({ url: `${receiverUrl()}/back` })).json()) as { target: unknown }).target).toMatchObject({
      url: `${receiverUrl()}/back`,
      method: "POST",
      body: null,
    });
  });
});

describe("delivery over the binding", () => {
  it("calls deliver() with the execution id, attempt, due time and payload, and a return of nothing succeeds", async () => {
    const e = await newExecution({ target: { worker: "test", payload: { order: 42 } } });
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 1, lastHttpStatus: null });
    const call = (await testHandler.calls()).find((c) => c.executionId === e.exe.id);
    expect(call).toEqual({
      executionId: e.exe.id,
      jobId: e.job.id,
      tenant: "acme",
      attempt: 1,
      dueAt: new Date(e.exe.due_at).toISOString(),
      payload: { order: 42 },
    });
  });

  it.each<[string, unknown, { status: string; deadReason?: string | null; lastError?: string | null }]>([
    ["succeeded", { outcome: "succeeded", detail: "done" }, { status: "succeeded" }],
    ["string", "sent", { status: "succeeded" }],
    [
      "permanent",
      { outcome: "permanent", error: "no such account" },
      { status: "dead", deadReason: "permanent", lastError: "no such account" },
    ],
    ["retry", { outcome: "retry", error: "busy" }, { status: "scheduled", lastError: "busy" }],
    ["something else", { ok: true }, { status: "dead", deadReason: "permanent" }],
  ])("classifies a returned %s like an HTTP answer", async (_case, answer, expected) => {
    const e = await newExecution({ target: { worker: "test", payload: { answer } }, retry: { maxAttempts: 3 } });
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ ...expected, attempts: 1 });
  });

  it("retries a throw (like a 5xx) with the job's backoff, no sooner than a retryAfterMs, then dead when attempts run out", async () => {
    const thrown = await newExecution({
      target: { worker: "test", payload: { throw: "database down" } },
      retry: { maxAttempts: 2, jitter: 0 },
    });
    await attemptOnce(thrown);
    expect(await thrown.view()).toMatchObject({ status: "scheduled", attempts: 1, lastError: "the handler threw: database down" });
    await attemptOnce(thrown);
    expect(await thrown.view()).toMatchObject({ status: "dead", attempts: 2, deadReason: "attempts_exhausted" });

    const later = await newExecution({
      target: { worker: "test", payload: { answer: { outcome: "retry", error: "later", retryAfterMs: 120_000 } } },
      retry: { initialDelayMs: 1_000, maxDelayMs: 600_000, jitter: 0 },
    });
    await attemptOnce(later);
    const view = (await later.view())!;
    expect(view.dueAt - view.attemptLog[0]!.finishedAt!).toBe(120_000);
  });

  it("redrives a dead execution: the handler is called again with a fresh attempt budget", async () => {
    const e = await newExecution({ target: { worker: "test", payload: { answer: { outcome: "permanent", error: "not yet" } } } });
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "dead" });
    await clock.flush(e.stub);
    expect((await api(`/v1/executions/${e.exe.id}/redrive`, { method: "POST" })).status).toBe(202);
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "dead", attempts: 2 });
    expect((await testHandler.calls()).filter((c) => c.executionId === e.exe.id).map((c) => c.attempt)).toEqual([1, 2]);
  });

  it("fails an attempt whose handler outlasts the job's timeout (retried like any timeout)", async () => {
    const e = await newExecution({ target: { worker: "test", payload: { sleepMs: 3_000 } }, timeoutMs: 1_000 });
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "scheduled", attempts: 1, lastError: "timeout after 1000 ms" });
  });

  it("never calls a Worker whose grant or binding is gone by delivery time: the attempt fails permanently", async () => {
    const e = await newExecution({ target: { worker: "unbound" } });
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({
      status: "dead",
      deadReason: "permanent",
      // the binding's name is the operator's: the tenant's attempt does not show it
      lastError: 'handler Worker "unbound" is not bound in this deployment',
    });

    // granted at create, withdrawn before delivery (a deploy changed HANDLER_WORKERS)
    const withdrawn = await newExecution({ target: { worker: "test", payload: { order: 1 } } });
    const message = await dispatch(withdrawn);
    const withdrawnEnv = { ...env, HANDLER_WORKERS: JSON.stringify({ test: { binding: "TEST_HANDLER", tenants: ["globex"] } }) } as Env;
    await (await startFire([message], { env: withdrawnEnv })).done;
    expect(await withdrawn.view()).toMatchObject({ status: "dead", lastError: expect.stringContaining("not granted") });
    expect((await testHandler.calls()).some((c) => c.executionId === withdrawn.exe.id)).toBe(false);
  });
});
