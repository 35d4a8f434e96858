/**
 * Debounce by key (README "Debounce"): when a create opens a window, replaces the trailing job
 * (its run time min(now + delay, first + maxDelay)) or is absorbed by a leading one; a trailing
 * job due within DUE_MARGIN_MS is left alone (it may be firing by the time a replacement lands).
 */
import { describe, expect, it } from "vitest";
import { type Debounce, type DebounceWindow, DUE_MARGIN_MS, decideDebounce, isPending } from "../../src/core/debounce";

const trailing: Debounce = { key: "k", mode: "trailing", delayMs: 10_000, maxDelayMs: 25_000 };
const leading: Debounce = { ...trailing, mode: "leading" };
const T0 = 1_000_000;

describe("decideDebounce: trailing", () => {
  it("opens a window whose job runs delay after the first create", () => {
    expect(decideDebounce(null, trailing, T0)).toEqual({
      kind: "create",
      runAt: T0 + 10_000,
      window: { mode: "trailing", firstAt: T0, endsAt: T0 + 10_000 },
    });
  });

  it.each([
    // [now, expected run time]: min(now + delay, first + maxDelay)
    [T0 + 1, T0 + 10_001],
    [T0 + 9_999, T0 + 19_999],
    [T0 + 15_000, T0 + 25_000], // now + delay would be T0 + 25_000: equal to the cap
    [T0 + 18_000, T0 + 25_000], // capped at first + maxDelay
  ])("a create at %i replaces the pending job, which runs at %i", (now, runAt) => {
    const held: DebounceWindow = { jobId: "job_a", mode: "trailing", firstAt: T0, endsAt: Math.max(T0 + 10_000, now + DUE_MARGIN_MS + 1) };
    expect(decideDebounce(held, trailing, now)).toEqual({
      kind: "replace",
      jobId: "job_a",
      runAt,
      window: { ...held, endsAt: runAt },
    });
  });

  it("without maxDelay a steady stream keeps postponing the job", () => {
    const held: DebounceWindow = { jobId: "job_a", mode: "trailing", firstAt: T0, endsAt: T0 + 100_000 };
    const d = decideDebounce(held, { ...trailing, maxDelayMs: null }, T0 + 95_000);
    expect(d).toMatchObject({ kind: "replace", runAt: T0 + 105_000 });
  });

  it("a create at or after the window's end (the job came due) opens a new window with a new job", () => {
    const held: DebounceWindow = { jobId: "job_a", mode: "trailing", firstAt: T0, endsAt: T0 + 10_000 };
    expect(decideDebounce(held, trailing, T0 + 10_000)).toMatchObject({ kind: "create", runAt: T0 + 20_000 });
  });

  it.each([
    [T0 + 10_000 - DUE_MARGIN_MS, "create"], // due within the margin: it may be firing when a replacement lands
    [T0 + 10_000 - 1, "create"],
    [T0 + 10_000 - DUE_MARGIN_MS - 1, "replace"],
  ])("a create at %i, with the job due at T0 + 10 s, makes a %s", (now, kind) => {
    const held: DebounceWindow = { jobId: "job_a", mode: "trailing", firstAt: T0, endsAt: T0 + 10_000 };
    const d = decideDebounce(held, trailing, now);
    expect(d.kind).toBe(kind);
    if (d.kind === "create") expect(d).toMatchObject({ runAt: now + 10_000, window: { firstAt: now } });
  });

  it("isPending: a job is pending only while due later than now + DUE_MARGIN_MS", () => {
    expect(DUE_MARGIN_MS).toBeGreaterThanOrEqual(200);
    expect(isPending(T0 + DUE_MARGIN_MS + 1, T0)).toBe(true);
    expect(isPending(T0 + DUE_MARGIN_MS, T0)).toBe(false);
    expect(isPending(T0, T0)).toBe(false);
    expect(isPending(T0 - 1, T0)).toBe(false);
  });

  it("a window of the other mode is not joined", () => {
    const held: DebounceWindow = { jobId: "job_a", mode: "leading", firstAt: T0, endsAt: T0 + 10_000 };
    expect(decideDebounce(held, trailing, T0 + 1)).toMatchObject({ kind: "create", runAt: T0 + 10_001 });
  });
});

describe("decideDebounce: leading", () => {
  it("the first create runs at once", () => {
    expect(decideDebounce(null, leading, T0)).toEqual({
      kind: "create",
      runAt: T0,
      window: { mode: "leading", firstAt: T0, endsAt: T0 + 10_000 },
    });
  });

  it("creates within delay are absorbed and extend the window up to first + maxDelay", () => {
    let held: DebounceWindow = { jobId: "job_a", mode: "leading", firstAt: T0, endsAt: T0 + 10_000 };
    const d1 = decideDebounce(held, leading, T0 + 9_000);
    expect(d1).toEqual({ kind: "absorb", jobId: "job_a", window: { ...held, endsAt: T0 + 19_000 } });
    held = d1.window as DebounceWindow;
    const d2 = decideDebounce(held, leading, T0 + 18_000);
    expect(d2).toEqual({ kind: "absorb", jobId: "job_a", window: { ...held, endsAt: T0 + 25_000 } });
    // the cap: a create at first + maxDelay runs anew, at once
    expect(decideDebounce(d2.window as DebounceWindow, leading, T0 + 25_000)).toMatchObject({ kind: "create", runAt: T0 + 25_000 });
  });

  it("the margin is trailing's only: a create just before the window's end is absorbed", () => {
    const held: DebounceWindow = { jobId: "job_a", mode: "leading", firstAt: T0, endsAt: T0 + 10_000 };
    expect(decideDebounce(held, leading, T0 + 9_999)).toMatchObject({ kind: "absorb", jobId: "job_a" });
  });

  it("a create after delay runs anew", () => {
    const held: DebounceWindow = { jobId: "job_a", mode: "leading", firstAt: T0, endsAt: T0 + 10_000 };
    expect(decideDebounce(held, leading, T0 + 10_000)).toMatchObject({ kind: "create", runAt: T0 + 10_000 });
  });
});
