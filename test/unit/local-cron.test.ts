/**
 * The local stack's cron (scripts/lib/cron.mjs): it reads wrangler.toml's [triggers] as wrangler
 * does, and fires each expression at the local runtime's trigger route at every matching instant
 * in UTC, one run at a time, failures logged and the next match run as usual, until stop().
 * The e2e proof that a real stack's scan runs this way: test/e2e/local-cron.test.ts.
 */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { unstable_readConfig } from "wrangler";
import { cadenceOf, cronsOf, readCrons, SCHEDULED_PATH, startCron } from "../../scripts/lib/cron.mjs";

describe("cronsOf: wrangler.toml's [triggers] crons", () => {
  it("reads wrangler.toml as wrangler does", () => {
    const path = join(import.meta.dirname, "../../wrangler.toml");
    const wrangler = unstable_readConfig({ config: path }, { hideWarnings: true });
    expect(readCrons(path)).toEqual(wrangler.triggers.crons);
    expect(readCrons(path).length).toBeGreaterThan(0);
  });

  it.each([
    ["one line", '[triggers]\ncrons = ["* * * * *"]', ["* * * * *"]],
    ["a comment after", '[triggers]\ncrons = ["* * * * *"]     # the scanner', ["* * * * *"]],
    [
      "several lines, comments, a trailing comma",
      "[triggers]\ncrons = [\n  \"*/5 * * * *\", # five\n  '0 3 * * mon',\n]\n",
      ["*/5 * * * *", "0 3 * * mon"],
    ],
    ["an empty list", "[triggers]\ncrons = []", []],
    ["no [triggers]", 'name = "x"\n[vars]\ncrons = "not these"', []],
    ["another table's crons", '[env.staging.triggers]\ncrons = ["0 * * * *"]', []],
    [
      "tables around it",
      '[[queues.consumers]]\nqueue = "a"\n[triggers]\ncrons = ["1 * * * *"]\n[[queues.consumers]]\ncrons = 1',
      ["1 * * * *"],
    ],
  ])("%s", (_name, text, crons) => {
    expect(cronsOf(text)).toEqual(crons);
  });

  it.each([
    ["an inline table", 'triggers = { crons = ["* * * * *"] }'],
    ["a dotted key", 'triggers.crons = ["* * * * *"]'],
    ["a value that is not a list", '[triggers]\ncrons = "* * * * *"'],
    ["a quoted key", '[triggers]\n"crons" = ["* * * * *"]'],
    ["an unterminated list", '[triggers]\ncrons = ["* * * * *"'],
  ])("refuses %s, naming the form to use", (_name, text) => {
    expect(() => cronsOf(text)).toThrow(/\[triggers\] crons = \["\.\.\."\]/);
  });

  it("says how often an expression matches", () => {
    expect(cadenceOf("* * * * *")).toBe("every minute");
    expect(cadenceOf("*/5 * * * *")).toBe("every 5 minutes");
    expect(cadenceOf("0 * * * *")).toBe("every hour");
    expect(cadenceOf("0 3 * * mon")).toBe("every 7 days");
    expect(cadenceOf("0 3 1,15 * *")).toBe("on its schedule");
  });
});

describe("startCron", () => {
  const T0 = Date.parse("2026-03-01T12:00:20.000Z");
  let calls: { url: URL; answer: (status: number, body?: string) => void; fail: (error: Error) => void }[];
  let lines: string[];
  const fakeFetch = (url: URL | string) =>
    new Promise<Response>((resolve, reject) => {
      calls.push({
        url: new URL(url),
        answer: (status, body = JSON.stringify({ outcome: status === 200 ? "ok" : "exception" })) =>
          resolve(new Response(body, { status })),
        fail: reject,
      });
    });
  const start = (crons: string[], logRuns = false) =>
    startCron({ url: "http://127.0.0.1:8787", crons, log: (line) => lines.push(line), logRuns, fetch: fakeFetch as typeof fetch });

  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
    calls = [];
    lines = [];
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("fires at each minute boundary with that instant as the scheduled time, then no more after stop()", async () => {
    const cron = start(["* * * * *"]);
    await vi.advanceTimersByTimeAsync(39_999);
    expect(calls).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(1);
    const { url } = calls[0]!;
    expect(url.origin + url.pathname).toBe(`http://127.0.0.1:8787${SCHEDULED_PATH}`);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      cron: "* * * * *",
      time: String(Date.parse("2026-03-01T12:01:00.000Z")),
      format: "json",
    });
    calls[0]!.answer(200);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls.map((c) => Number(c.url.searchParams.get("time")))).toEqual([T0 + 40_000, T0 + 100_000]);
    calls[1]!.answer(200);
    cron.stop();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toHaveLength(2);
    expect(vi.getTimerCount()).toBe(0);
    expect(lines).toEqual([]);
  });

  it("logs a failed run and runs the next match as usual", async () => {
    const cron = start(["* * * * *"]);
    await vi.advanceTimersByTimeAsync(40_000);
    calls[0]!.fail(new TypeError("fetch failed"));
    await vi.advanceTimersByTimeAsync(60_000);
    calls[1]!.answer(500);
    await vi.advanceTimersByTimeAsync(60_000);
    calls[2]!.answer(200);
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(3);
    expect(lines).toEqual([
      'cron "* * * * *" at 2026-03-01T12:01:00.000Z: no answer (fetch failed)',
      'cron "* * * * *" at 2026-03-01T12:02:00.000Z: the scheduled handler failed (500 {"outcome":"exception"})',
    ]);
    cron.stop();
  });

  it("keeps one run in flight: a match during a run is skipped and logged", async () => {
    const cron = start(["* * * * *"], true);
    await vi.advanceTimersByTimeAsync(40_000 + 60_000 + 60_000);
    expect(calls).toHaveLength(1);
    calls[0]!.answer(200);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(2);
    expect(lines).toEqual([
      'cron "* * * * *" at 2026-03-01T12:02:00.000Z: skipped, the previous run is still going',
      'cron "* * * * *" at 2026-03-01T12:03:00.000Z: skipped, the previous run is still going',
      'cron "* * * * *" at 2026-03-01T12:01:00.000Z: ran in 120000 ms',
    ]);
    cron.stop();
  });

  it("fires each expression on its own schedule", async () => {
    const cron = start(["*/2 * * * *", "1 * * * *"]);
    for (let minute = 0; minute < 4; minute++) {
      await vi.advanceTimersByTimeAsync(60_000);
      for (const c of calls) c.answer(200);
    }
    expect(calls.map((c) => `${c.url.searchParams.get("cron")} ${new Date(Number(c.url.searchParams.get("time"))).toISOString()}`)).toEqual(
      ["1 * * * * 2026-03-01T12:01:00.000Z", "*/2 * * * * 2026-03-01T12:02:00.000Z", "*/2 * * * * 2026-03-01T12:04:00.000Z"],
    );
    cron.stop();
  });

  it("gives up the run in flight at stop(), without logging it", async () => {
    const cron = startCron({
      url: "http://127.0.0.1:8787",
      crons: ["* * * * *"],
      log: (line) => lines.push(line),
      fetch: ((_url: URL, init: RequestInit) =>
        new Promise((_resolve, reject) => init.signal!.addEventListener("abort", () => reject(init.signal!.reason)))) as typeof fetch,
    });
    await vi.advanceTimersByTimeAsync(40_000);
    cron.stop();
    await vi.advanceTimersByTimeAsync(0);
    expect(lines).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("fires only at loopback addresses, and refuses a bad expression", () => {
    expect(() => startCron({ url: "http://10.0.0.5:8787", crons: ["* * * * *"] })).toThrow(/loopback/);
    expect(() => startCron({ url: "http://127.0.0.1:8787", crons: ["* * * * * *"] })).toThrow(/5 parts|five/);
    expect(vi.getTimerCount()).toBe(0);
  });
});
