/** Callbacks' pure rules (src/core/callback.ts): which callback an outcome fires, its id, body and spec. */
import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY_POLICY } from "../../src/core/backoff";
import { bucketOfExecution } from "../../src/core/bucketing";
import { callbackBody, callbackExecutionId, callbackFor, callbackSpec, parseCallbacks } from "../../src/core/callback";
import { newJobId, oneOffExecutionId, shardOfId } from "../../src/core/id";
import type { JobSpec } from "../../src/core/job";

const SPEC: JobSpec = {
  target: { url: "https://example.com/t", method: "POST", headers: {}, body: null },
  timeoutMs: 5_000,
  retry: DEFAULT_RETRY_POLICY,
  metadata: null,
  schedule: null,
  callback: { url: "https://example.com/ok", method: "POST", headers: { "x-a": "1" }, body: null },
  failureCallback: { worker: "alerts", payload: null },
};
const PARENT = oneOffExecutionId(newJobId(1_800_000_000_000, new Uint8Array(16).fill(7), 3));

describe("callbackFor", () => {
  it.each([
    ["succeeded", "success"],
    ["dead", "failure"],
    ["canceled", null],
  ])("an execution that ended %s fires %s", (status, kind) => {
    expect(callbackFor(SPEC, status)?.kind ?? null).toBe(kind);
  });

  it("fires nothing for a job without callbacks", () => {
    const { callback: _c, failureCallback: _f, ...plain } = SPEC;
    expect(callbackFor(plain, "succeeded")).toBeNull();
    expect(callbackFor(plain, "dead")).toBeNull();
  });
});

describe("callbackExecutionId", () => {
  const FIRST = { attempts: 3, finishedAt: 1_800_000_060_000 };

  it("is stable for one outcome, differs by kind and from its parent, and keeps the parent's shard and bucket", () => {
    const success = callbackExecutionId(PARENT, "success", FIRST);
    const failure = callbackExecutionId(PARENT, "failure", FIRST);
    expect(success).toBe(callbackExecutionId(PARENT, "success", { ...FIRST })); // a flush that runs twice
    expect(new Set([PARENT, success, failure]).size).toBe(3);
    for (const id of [success, failure]) {
      expect(id).toMatch(/^exe_[0-9a-z]{26}$/); // a fire message's execution id
      expect(id).toHaveLength(PARENT.length);
      expect(shardOfId(id)).toBe(3);
      expect(bucketOfExecution(id, 64)).toBe(bucketOfExecution(PARENT, 64));
    }
    expect(success[4]).toBe("o"); // no job's or occurrence's id has it (not in the id alphabet)
    expect(failure[4]).toBe("i");
  });

  it("gives each outcome of a redriven execution its own id (its own webhook-id): attempts, or the time of a death without one", () => {
    const first = callbackExecutionId(PARENT, "failure", FIRST);
    const redriven = callbackExecutionId(PARENT, "failure", { attempts: 4, finishedAt: 1_800_000_120_000 });
    const poisoned = callbackExecutionId(PARENT, "failure", { attempts: 3, finishedAt: 1_800_000_120_000 });
    expect(new Set([first, redriven, poisoned]).size).toBe(3);
    // many outcomes of one execution: no two share an id
    const ids = Array.from({ length: 10_000 }, (_, i) =>
      callbackExecutionId(PARENT, "failure", { attempts: i, finishedAt: 1_800_000_000_000 + i }),
    );
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe("callbackBody", () => {
  it("carries the outcome with RFC 3339 times and a 256-character excerpt", () => {
    const body = callbackBody("success", {
      executionId: PARENT,
      jobId: "job_x",
      status: "succeeded",
      attempts: 2,
      httpStatus: 200,
      response: "x".repeat(300),
      error: null,
      deadReason: null,
      dueAt: 0,
      startedAt: 1_000,
      finishedAt: 2_000,
    });
    expect(body).toMatchObject({
      type: "execution.succeeded",
      executionId: PARENT,
      status: "succeeded",
      attempts: 2,
      httpStatus: 200,
      dueAt: "1970-01-01T00:00:00.000Z",
      startedAt: "1970-01-01T00:00:01.000Z",
      finishedAt: "1970-01-01T00:00:02.000Z",
    });
    expect(body.responseExcerpt).toBe(`${"x".repeat(256)}…`); // the first 256 characters, the cut marked
  });
});

describe("callbackSpec", () => {
  it("POSTs the outcome as JSON to a URL, keeping its headers; no callbacks of its own (no loop)", () => {
    const spec = callbackSpec(SPEC, SPEC.callback!, { a: 1 });
    expect(spec.target).toEqual({
      url: "https://example.com/ok",
      method: "POST",
      headers: { "x-a": "1", "content-type": "application/json" },
      body: '{"a":1}',
    });
    expect(spec.callback).toBeUndefined();
    expect(spec.failureCallback).toBeUndefined();
    expect(spec).toMatchObject({ timeoutMs: 5_000, retry: DEFAULT_RETRY_POLICY, schedule: null, flowControl: null });
    expect(callbackFor(spec, "succeeded")).toBeNull();
    expect(callbackFor(spec, "dead")).toBeNull();
  });

  it("hands a handler Worker the outcome as its payload", () => {
    expect(callbackSpec(SPEC, SPEC.failureCallback!, { a: 1 }).target).toEqual({ worker: "alerts", payload: '{"a":1}' });
  });
});

describe("parseCallbacks", () => {
  it("reads the stored column; none, or anything else, is no callback", () => {
    expect(parseCallbacks('[{"kind":"success","status":"dead","attempts":3}]')).toEqual([{ kind: "success", status: "dead", attempts: 3 }]);
    // the callback's id is stored for the guard on its outcome's write, and not shown
    expect(parseCallbacks('[{"kind":"failure","status":"scheduled","attempts":0,"id":"exe_i123"}]')).toEqual([
      { kind: "failure", status: "scheduled", attempts: 0 },
    ]);
    expect(parseCallbacks(null)).toEqual([]);
    expect(parseCallbacks("{}")).toEqual([]);
    expect(parseCallbacks("not json")).toEqual([]);
  });
});
