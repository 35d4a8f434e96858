/** Callbacks' pure rules (src/core/callback.ts): which callback an outcome fires, its id, body and spec. */
import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY_POLICY } from "../../src/core/backoff";
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
  it("is stable, differs by kind and from its parent, and keeps the parent's shard", () => {
    const id = PARENT;
    const success = callbackExecutionId(id, "success");
    const failure = callbackExecutionId(id, "failure");
    expect(success).toBe(callbackExecutionId(id, "success"));
    expect(new Set([id, success, failure]).size).toBe(3);
    expect(success).toMatch(/^exe_[0-9a-z]{26}$/); // a fire message's execution id
    expect(success).toHaveLength(id.length);
    expect(shardOfId(success)).toBe(3);
    expect(shardOfId(failure)).toBe(3);
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
    expect(parseCallbacks(null)).toEqual([]);
    expect(parseCallbacks("{}")).toEqual([]);
    expect(parseCallbacks("not json")).toEqual([]);
  });
});
