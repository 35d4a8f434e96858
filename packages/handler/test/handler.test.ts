import { afterEach, describe, expect, it, vi } from "vitest";
import { HANDLER_METHOD, type HandlerDelivery } from "../src/protocol.ts";
import { PermanentError, RetryLater, runHandler } from "../src/run.ts";

const delivery: HandlerDelivery<{ n: number }> = {
  executionId: "exe_1",
  jobId: "job_1",
  tenant: "acme",
  attempt: 2,
  dueAt: "2026-11-01T00:00:00.000Z",
  payload: { n: 7 },
};

afterEach(() => vi.restoreAllMocks());

describe("runHandler", () => {
  it("passes the delivery to the handler as is", async () => {
    const seen: unknown[] = [];
    await runHandler((d) => {
      seen.push(d);
    }, delivery);
    expect(seen).toEqual([delivery]);
  });

  it("a return is success, sync or async; a string returned is the detail", async () => {
    expect(await runHandler(() => {}, delivery)).toEqual({ outcome: "succeeded" });
    expect(await runHandler(async () => {}, delivery)).toEqual({ outcome: "succeeded" });
    expect(await runHandler(() => "sent 3 emails", delivery)).toEqual({ outcome: "succeeded", detail: "sent 3 emails" });
    expect(await runHandler(async () => "done", delivery)).toEqual({ outcome: "succeeded", detail: "done" });
    // no detail key at all when there is none: what crosses RPC is exactly the contract
    expect(Object.keys(await runHandler(() => {}, delivery))).toEqual(["outcome"]);
  });

  it("PermanentError fails the execution at once, sync or async", async () => {
    expect(
      await runHandler(() => {
        throw new PermanentError("no such order");
      }, delivery),
    ).toEqual({ outcome: "permanent", error: "no such order" });
    expect(
      await runHandler(async () => {
        throw new PermanentError("gone");
      }, delivery),
    ).toEqual({ outcome: "permanent", error: "gone" });
  });

  it("RetryLater retries, with retryAfterMs only when afterMs is a usable number", async () => {
    const run = (error: RetryLater) =>
      runHandler(() => {
        throw error;
      }, delivery);
    expect(await run(new RetryLater("rate limited", { afterMs: 5000 }))).toEqual({
      outcome: "retry",
      error: "rate limited",
      retryAfterMs: 5000,
    });
    expect(await run(new RetryLater("busy", { afterMs: 1.2 }))).toEqual({ outcome: "retry", error: "busy", retryAfterMs: 2 });
    expect(await run(new RetryLater("now", { afterMs: 0 }))).toEqual({ outcome: "retry", error: "now", retryAfterMs: 0 });
    expect(await run(new RetryLater("plain"))).toEqual({ outcome: "retry", error: "plain" });
    for (const afterMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(await run(new RetryLater("odd", { afterMs }))).toEqual({ outcome: "retry", error: "odd" });
    }
  });

  it("any other throw is retryable with its message, and is logged with the execution", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const boom = new TypeError("cannot read x of undefined");
    expect(
      await runHandler(() => {
        throw boom;
      }, delivery),
    ).toEqual({ outcome: "retry", error: "cannot read x of undefined" });
    expect(await runHandler(() => Promise.reject(new Error("db down")), delivery)).toEqual({ outcome: "retry", error: "db down" });
    expect(logged).toHaveBeenCalledTimes(2);
    expect(logged.mock.calls[0]).toEqual([expect.stringContaining("exe_1 attempt 2"), boom]);
  });

  it("a thrown non-Error, or an Error without a message, still gives a message", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const run = (value: unknown) =>
      runHandler(() => {
        throw value;
      }, delivery);
    expect(await run("just text")).toEqual({ outcome: "retry", error: "just text" });
    expect(await run({ code: 42 })).toEqual({ outcome: "retry", error: '{"code":42}' });
    expect(await run(undefined)).toEqual({ outcome: "retry", error: "undefined" });
    expect(await run(new Error(""))).toEqual({ outcome: "retry", error: "Error" });
    expect(await run(new PermanentError(""))).toEqual({ outcome: "permanent", error: "PermanentError" });
  });

  it("recognises the kit's errors from another copy of the kit (by their registered brand)", async () => {
    // what a second bundled copy's classes look like: other classes, the same Symbol.for brands
    const otherPermanent = Object.assign(new Error("other copy"), { [Symbol.for("edge-scheduler-handler.PermanentError")]: true });
    const otherRetry = Object.assign(new Error("later"), { [Symbol.for("edge-scheduler-handler.RetryLater")]: true, afterMs: 100 });
    expect(
      await runHandler(() => {
        throw otherPermanent;
      }, delivery),
    ).toEqual({ outcome: "permanent", error: "other copy" });
    expect(
      await runHandler(() => {
        throw otherRetry;
      }, delivery),
    ).toEqual({ outcome: "retry", error: "later", retryAfterMs: 100 });
  });

  it("the errors are Errors with their own names (a log shows which)", () => {
    const permanent = new PermanentError("p");
    const later = new RetryLater("r", { afterMs: 10, cause: permanent });
    expect(permanent).toBeInstanceOf(Error);
    expect(permanent.name).toBe("PermanentError");
    expect(later.name).toBe("RetryLater");
    expect(later.afterMs).toBe(10);
    expect(later.cause).toBe(permanent);
  });
});

it("HANDLER_METHOD is deliver, the method ScheduledHandler implements", () => {
  expect(HANDLER_METHOD).toBe("deliver");
});
