/**
 * Trace context (issue 29 item 5): a W3C traceparent on the create request (its headers, or
 * `trace` in the body) is kept with the job; every attempt is sent a child traceparent of the same
 * trace with a span id of its own, to URLs and handler Workers, and the attempt shows that span id.
 * A job created outside any trace sends none and stores nothing more.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { attemptSpanId, parseTraceparent } from "../../src/core/trace";
import {
  api,
  bucketStub,
  captureFiresForFile,
  dispatchOf,
  type Execution,
  executionOf,
  fileClock,
  fire,
  type JobJson,
  jobRow,
  live,
  received,
  receiverUrl,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
const TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

/** POST /v1/jobs with these request headers; the job and its execution, located. */
async function create(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Execution> {
  const res = await api("/v1/jobs", { method: "POST", body, headers });
  expect(res.status).toBe(201);
  const job = (await res.json()) as JobJson;
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  return {
    job,
    exe,
    stub,
    view: async () => live(stub, exe.id),
    message: { v: 1, executionId: exe.id, bucket: exe.bucket, tenant: "acme", dueAt: exe.due_at },
  };
}

async function attemptOnce(e: Execution): Promise<void> {
  const result = await fire([await dispatch(e)]);
  expect(result.explicitAcks).toEqual(["m0"]);
}

async function attemptsOf(jobId: string): Promise<{ attempt: number; spanId: string | null }[]> {
  const res = await api(`/v1/jobs/${jobId}/executions`);
  expect(res.status).toBe(200);
  const { executions } = (await res.json()) as { executions: { attempts: { attempt: number; spanId: string | null }[] }[] };
  return executions[0]!.attempts;
}

describe("a job created inside a trace", () => {
  it("sends each attempt a child traceparent of the same trace, a new span per attempt, which the attempt shows", async () => {
    const path = uniquePath("flaky/1");
    const e = await create(
      { target: { url: `${receiverUrl()}${path}` }, retry: { maxAttempts: 3, initialDelayMs: 1_000, jitter: 0 } },
      { traceparent: TRACEPARENT, tracestate: TRACESTATE },
    );
    expect(e.job.trace).toEqual({ traceparent: TRACEPARENT, tracestate: TRACESTATE });

    await attemptOnce(e);
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 2 });

    const requests = await received(path);
    expect(requests).toHaveLength(2);
    const parents = requests.map((r) => parseTraceparent(r.headers.traceparent!)!);
    expect(parents.map((p) => p.traceId)).toEqual([TRACE_ID, TRACE_ID]);
    expect(parents.map((p) => p.flags)).toEqual(["01", "01"]);
    expect(parents.map((p) => p.parentId)).toEqual([attemptSpanId(e.exe.id, 1), attemptSpanId(e.exe.id, 2)]);
    expect(parents[0]!.parentId).not.toBe(parents[1]!.parentId);
    expect(parents[0]!.parentId).not.toBe("00f067aa0ba902b7");
    expect(requests.map((r) => r.headers.tracestate)).toEqual([TRACESTATE, TRACESTATE]);

    expect(await attemptsOf(e.job.id)).toEqual([
      expect.objectContaining({ attempt: 1, spanId: parents[0]!.parentId }),
      expect.objectContaining({ attempt: 2, spanId: parents[1]!.parentId }),
    ]);
  });

  it("hands a handler Worker the attempt's traceparent and tracestate", async () => {
    const e = await create({ target: { worker: "test", payload: { traced: true } } }, { traceparent: TRACEPARENT, tracestate: TRACESTATE });
    await attemptOnce(e);
    const call = (await env.TEST_HANDLER.calls()).find((c) => c.executionId === e.exe.id);
    expect(call).toMatchObject({ traceparent: `00-${TRACE_ID}-${attemptSpanId(e.exe.id, 1)}-01`, tracestate: TRACESTATE });
  });

  it("takes trace in the body over the request's headers, for each job of a batch", async () => {
    const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    const res = await api("/v1/jobs/batch", {
      method: "POST",
      headers: { traceparent: TRACEPARENT },
      body: {
        jobs: [
          { target: { url: `${receiverUrl()}/ok` }, delay: "1h" },
          { target: { url: `${receiverUrl()}/ok` }, delay: "1h", trace: { traceparent: other } },
        ],
      },
    });
    expect(res.status).toBe(200);
    const { results } = (await res.json()) as { results: { job: JobJson }[] };
    expect(results.map((r) => r.job.trace)).toEqual([{ traceparent: TRACEPARENT }, { traceparent: other }]);
  });

  it("keeps its trace across a PATCH", async () => {
    const e = await create({ target: { url: `${receiverUrl()}/ok` }, delay: "1h" }, { traceparent: TRACEPARENT });
    const res = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { delay: "2h", target: { body: "x" } } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as JobJson).trace).toEqual({ traceparent: TRACEPARENT });
  });

  it("refuses a malformed traceparent in the body, naming the field, and ignores one in the headers (as the spec says)", async () => {
    const bad = await api("/v1/jobs", {
      method: "POST",
      body: { target: { url: `${receiverUrl()}/ok` }, trace: { traceparent: "00-abc-def-01" } },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { field: string } }).error.field).toBe("trace.traceparent");

    const e = await create(
      { target: { url: `${receiverUrl()}/ok` }, delay: "1h" },
      { traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01`, tracestate: TRACESTATE },
    );
    expect(e.job.trace).toBeNull();
  });
});

describe("trace context, what a review found", () => {
  it("leaves the trace out of an idempotent create's request: a retry in a new span answers the first job", async () => {
    const body = { target: { url: `${receiverUrl()}/ok` }, delay: "1h", idempotencyKey: `trace-${crypto.randomUUID()}` };
    const first = await api("/v1/jobs", { method: "POST", body: { ...body, trace: { traceparent: TRACEPARENT } } });
    const retry = await api("/v1/jobs", {
      method: "POST",
      body: { ...body, trace: { traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01` } },
    });
    expect([first.status, retry.status]).toEqual([201, 200]);
    const [a, b] = [(await first.json()) as JobJson, (await retry.json()) as JobJson];
    expect(b.id).toBe(a.id);
    expect(b.trace).toEqual({ traceparent: TRACEPARENT });
  });

  it("moves a job to another trace with PATCH, and out of any with trace: null", async () => {
    const path = uniquePath("ok");
    const e = await create({ target: { url: `${receiverUrl()}${path}` }, delay: "1h" }, { traceparent: TRACEPARENT });
    const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const moved = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { trace: { traceparent: other } } });
    expect(((await moved.json()) as JobJson).trace).toEqual({ traceparent: other });
    const out = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { trace: null, delay: "0s" } });
    expect(((await out.json()) as JobJson).trace).toBeNull();
    await attemptOnce(e);
    expect((await received(path))[0]!.headers.traceparent).toBeUndefined();
  });

  it("passes on only the flags it knows (sampled, random), and never a job header's tracestate that is not the trace's", async () => {
    const path = uniquePath("ok");
    const e = await create(
      { target: { url: `${receiverUrl()}${path}`, headers: { tracestate: "mine=1", traceparent: "00-x" } } },
      { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-ff` },
    );
    expect(e.job.trace).toEqual({ traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-03` });
    await attemptOnce(e);
    const [request] = await received(path);
    expect(request!.headers.traceparent).toBe(`00-${TRACE_ID}-${attemptSpanId(e.exe.id, 1)}-03`);
    expect(request!.headers.tracestate).toBeUndefined();
  });

  it("hands a pull worker the attempt's traceparent with its lease", async () => {
    const queue = `traced-${crypto.randomUUID().slice(0, 8)}`;
    const e = await create({ target: { pull: queue, payload: { n: 1 } }, trace: { traceparent: TRACEPARENT, tracestate: TRACESTATE } });
    expect((await fire([await dispatch(e)])).explicitAcks).toEqual(["m0"]);
    const res = await api(`/v1/pull/${queue}/lease`, { method: "POST", body: {} });
    const { leases } = (await res.json()) as { leases: { executionId: string; traceparent?: string; tracestate?: string }[] };
    expect(leases).toEqual([
      expect.objectContaining({
        executionId: e.exe.id,
        traceparent: `00-${TRACE_ID}-${attemptSpanId(e.exe.id, 1)}-01`,
        tracestate: TRACESTATE,
      }),
    ]);
  });
});

describe("a job created outside any trace", () => {
  it("sends no traceparent, shows no span and stores the spec as before", async () => {
    const path = uniquePath("ok");
    const e = await create({ target: { url: `${receiverUrl()}${path}` } });
    expect(e.job.trace).toBeNull();
    await attemptOnce(e);
    const [request] = await received(path);
    expect(request!.headers.traceparent).toBeUndefined();
    expect(request!.headers.tracestate).toBeUndefined();
    expect((await attemptsOf(e.job.id))[0]!.spanId).toBeNull();
    expect(JSON.parse((await jobRow(e.job.id))!.spec as string)).not.toHaveProperty("trace");
  });
});
