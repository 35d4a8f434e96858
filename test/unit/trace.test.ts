/**
 * W3C Trace Context (core/trace.ts): what a receiver must accept and ignore, and the child span
 * each attempt is sent (same trace, a span id of its own per attempt, stable for one attempt).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { attemptSpanId, attemptTraceHeaders, parseTraceparent, traceOfHeaders, usableTracestate } from "../../src/core/trace";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

describe("parseTraceparent", () => {
  it("reads version 00", () => {
    expect(parseTraceparent(PARENT)).toEqual({ traceId: TRACE_ID, parentId: "00f067aa0ba902b7", flags: "01" });
  });

  it.each([
    ["upper-case hex", `00-${TRACE_ID.toUpperCase()}-00f067aa0ba902b7-01`],
    ["all-zero trace id", `00-${"0".repeat(32)}-00f067aa0ba902b7-01`],
    ["all-zero parent id", `00-${TRACE_ID}-${"0".repeat(16)}-01`],
    ["version ff", `ff-${TRACE_ID}-00f067aa0ba902b7-01`],
    ["version 00 with more fields", `${PARENT}-extra`],
    ["a short trace id", `00-${TRACE_ID.slice(1)}-00f067aa0ba902b7-01`],
    ["no flags", `00-${TRACE_ID}-00f067aa0ba902b7`],
    ["empty", ""],
    ["not hex", `00-${"g".repeat(32)}-00f067aa0ba902b7-01`],
  ])("refuses %s", (_, value) => {
    expect(parseTraceparent(value)).toBeNull();
  });

  it("reads a later version's four fields and ignores what follows", () => {
    expect(parseTraceparent(`01-${TRACE_ID}-00f067aa0ba902b7-01-whatever`)).toEqual({
      traceId: TRACE_ID,
      parentId: "00f067aa0ba902b7",
      flags: "01",
    });
  });
});

describe("traceOfHeaders", () => {
  it("keeps a valid traceparent and its tracestate, in version 00 form", () => {
    expect(traceOfHeaders(`01-${TRACE_ID}-00f067aa0ba902b7-00-x`, "congo=t61rcWkgMzE")).toEqual({
      traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-00`,
      tracestate: "congo=t61rcWkgMzE",
    });
  });

  it("ignores an invalid traceparent, and its tracestate with it (the spec's rule for a receiver)", () => {
    expect(traceOfHeaders("garbage", "congo=t61rcWkgMzE")).toBeNull();
    expect(traceOfHeaders(undefined, "congo=t61rcWkgMzE")).toBeNull();
  });

  it("refuses a tracestate with a control character wherever it is, at an end too; drops only spaces around it (issue 36 item 9)", () => {
    for (const value of [
      "\tcongo=t61",
      "congo=t61\n",
      "congo=t61\r",
      "\u000bcongo=t61",
      "congo=\u0001t61",
      "congo=t61\u007f",
      "con\tgo=t61",
    ])
      expect(usableTracestate(value), JSON.stringify(value)).toBeNull();
    expect(usableTracestate("  congo=t61  ")).toBe("congo=t61");
    expect(usableTracestate("congo=t61, rojo=00f0")).toBe("congo=t61, rojo=00f0");
  });

  it("drops an unusable tracestate but keeps the traceparent", () => {
    expect(traceOfHeaders(PARENT, "x".repeat(513))).toEqual({ traceparent: PARENT });
    expect(usableTracestate("a=\u0001")).toBeNull();
  });
});

describe("an attempt's span", () => {
  it("is a child of the job's trace: same trace id and flags, the attempt's span as the parent", () => {
    const headers = attemptTraceHeaders({ traceparent: PARENT, tracestate: "congo=t61rcWkgMzE" }, "exe_1", 1)!;
    const child = parseTraceparent(headers.traceparent)!;
    expect(child.traceId).toBe(TRACE_ID);
    expect(child.flags).toBe("01");
    expect(child.parentId).toBe(attemptSpanId("exe_1", 1));
    expect(child.parentId).not.toBe("00f067aa0ba902b7");
    expect(headers.tracestate).toBe("congo=t61rcWkgMzE");
  });

  it("is the same for one attempt and different for the next and for another execution", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 99 }), (id, attempt) => {
        const span = attemptSpanId(id, attempt);
        expect(span).toMatch(/^[0-9a-f]{16}$/);
        expect(span).not.toBe("0".repeat(16));
        expect(attemptSpanId(id, attempt)).toBe(span);
        expect(attemptSpanId(id, attempt + 1)).not.toBe(span);
        expect(attemptSpanId(`${id}x`, attempt)).not.toBe(span);
      }),
    );
  });
});
