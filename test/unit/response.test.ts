/**
 * Classification of a target's answer (DESIGN.md "HTTP targets"): 2xx succeed; 408, 429, 5xx
 * retry honouring Retry-After (invariant 6); every other status is permanent.
 */
import { describe, expect, it } from "vitest";
import {
  classifyHandlerResult,
  classifyStatus,
  type DeliveryOutcome,
  EXCERPT_LENGTH,
  excerpt,
  parseRetryAfterMs,
} from "../../src/core/response";

describe("classifyStatus", () => {
  it.each([200, 201, 202, 204, 299])("%i succeeds", (status) => {
    expect(classifyStatus(status)).toBe("succeeded");
  });

  it.each([408, 429, 500, 502, 503, 504, 599])("%i is retryable", (status) => {
    expect(classifyStatus(status)).toBe("retryable");
  });

  it.each([100, 199, 300, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 409, 410, 422, 499])(
    "%i is permanent (redirects are not followed)",
    (status) => {
      expect(classifyStatus(status)).toBe("permanent");
    },
  );
});

describe("parseRetryAfterMs", () => {
  const now = Date.UTC(2015, 9, 21, 7, 28, 0); // Wed, 21 Oct 2015 07:28:00 GMT

  it.each<[string, number]>([
    ["0", 0],
    ["1", 1_000],
    ["120", 120_000],
    [" 30 ", 30_000],
    ["86400", 86_400_000],
    ["Wed, 21 Oct 2015 07:28:30 GMT", 30_000], // HTTP-date, relative to now
    ["Wed, 21 Oct 2015 08:28:00 GMT", 3_600_000],
    ["Thu, 22 Oct 2015 07:28:00 GMT", 86_400_000],
    ["Wed, 21 Oct 2015 07:28:00 GMT", 0],
    ["Wed, 21 Oct 2015 07:27:00 GMT", 0], // a past date means "now", never negative
    ["Thu, 01 Jan 1970 00:00:00 GMT", 0],
  ])("%j -> %i ms", (header, expected) => {
    expect(parseRetryAfterMs(header, now)).toBe(expected);
  });

  it("is undefined when the header is absent", () => {
    expect(parseRetryAfterMs(null, now)).toBeUndefined();
  });

  it.each([[""], ["   "], ["soon"], ["five"], ["Infinity"], ["NaN"], ["0x10"], ["5 minutes"]])("is undefined for garbage %j", (header) => {
    expect(parseRetryAfterMs(header, now)).toBeUndefined();
  });

  it.each([["1.5"], ["-1"], ["-120"], ["1,2"], ["+5"]])(
    "is undefined for %j: neither delay-seconds (1*DIGIT) nor an HTTP-date (RFC 9110 10.2.3)",
    (header) => {
      expect(parseRetryAfterMs(header, now)).toBeUndefined();
    },
  );
});

describe("excerpt", () => {
  it("keeps a text within the bound unchanged", () => {
    expect(excerpt("")).toBe("");
    expect(excerpt("ok")).toBe("ok");
    const exact = "x".repeat(EXCERPT_LENGTH);
    expect(excerpt(exact)).toBe(exact);
  });

  it("cuts a longer text at the bound and marks the cut", () => {
    const long = "y".repeat(EXCERPT_LENGTH * 50);
    const cut = excerpt(long);
    expect(cut.startsWith("y".repeat(EXCERPT_LENGTH))).toBe(true);
    expect(cut.endsWith("…")).toBe(true);
    expect(cut.length).toBe(EXCERPT_LENGTH + 1);
  });

  it.each([
    [1, "abc", "a…"],
    [3, "abc", "abc"],
    [3, "abcd", "abc…"],
    [10, "0123456789abc", "0123456789…"],
  ])("with limit %i: %j -> %j", (limit, text, expected) => {
    expect(excerpt(text, limit)).toBe(expected);
  });

  it("stays bounded for any input length", () => {
    for (const n of [0, 1, 1023, 1024, 1025, 4096, 1_000_000])
      expect(excerpt("z".repeat(n)).length).toBeLessThanOrEqual(EXCERPT_LENGTH + 1);
  });

  it("never cuts a surrogate pair in half (the excerpt stays valid UTF-16, so JSON and SQLite keep it intact)", () => {
    const emoji = "😀".repeat(EXCERPT_LENGTH); // 2 code units each: the cut falls inside a pair for odd limits
    for (const limit of [1, 3, 7, EXCERPT_LENGTH - 1]) {
      const cut = excerpt(emoji, limit);
      expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(cut)).toBe(false);
    }
  });
});

describe("classifyHandlerResult (a handler Worker's answer, classified like an HTTP one)", () => {
  it.each<[string, unknown, DeliveryOutcome]>([
    ["nothing", undefined, { kind: "succeeded", httpStatus: null, excerpt: "" }],
    ["null", null, { kind: "succeeded", httpStatus: null, excerpt: "" }],
    [
      "succeeded with detail",
      { outcome: "succeeded", detail: "sent 3 mails" },
      { kind: "succeeded", httpStatus: null, excerpt: "sent 3 mails" },
    ],
    ["retry", { outcome: "retry", error: "busy" }, { kind: "failed", failure: "retryable", httpStatus: null, error: "busy" }],
    [
      "retry after",
      { outcome: "retry", error: "busy", retryAfterMs: 5_000 },
      { kind: "failed", failure: "retryable", httpStatus: null, error: "busy", retryAfterMs: 5_000 },
    ],
    [
      "permanent",
      { outcome: "permanent", error: "no such user" },
      { kind: "failed", failure: "permanent", httpStatus: null, error: "no such user" },
    ],
  ])("%s", (_case, result, expected) => {
    expect(classifyHandlerResult(result)).toEqual(expected);
  });

  it.each([Number.NaN, -1, Number.POSITIVE_INFINITY, "5000"])("ignores a retryAfterMs of %s", (retryAfterMs) => {
    expect(classifyHandlerResult({ outcome: "retry", error: "x", retryAfterMs })).not.toHaveProperty("retryAfterMs");
  });

  it("names what it got when it is not a HandlerResult, and fails it permanently (the same code would answer the same)", () => {
    const outcome = classifyHandlerResult({ ok: true });
    expect(outcome).toMatchObject({ kind: "failed", failure: "permanent", httpStatus: null });
    expect(outcome.kind === "failed" && outcome.error).toContain('{"ok":true}');
  });

  it("keeps an excerpt of a long error or detail, as for HTTP bodies", () => {
    const long = "e".repeat(EXCERPT_LENGTH + 10);
    const outcome = classifyHandlerResult({ outcome: "permanent", error: long });
    expect(outcome.kind === "failed" && outcome.error.length).toBe(EXCERPT_LENGTH + 1);
  });
});

describe("classifyHandlerResult, edge answers", () => {
  it("rounds a fractional retryAfterMs up, and describes an answer JSON cannot write", () => {
    expect(classifyHandlerResult({ outcome: "retry", error: "x", retryAfterMs: 1000.2 })).toMatchObject({ retryAfterMs: 1001 });
    expect(classifyHandlerResult({ n: 1n })).toMatchObject({
      kind: "failed",
      failure: "permanent",
      error: expect.stringContaining("object"),
    });
    expect(classifyHandlerResult(["a"])).toMatchObject({ kind: "failed", failure: "permanent" });
  });
});
