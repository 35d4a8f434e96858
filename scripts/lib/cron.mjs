// The cron triggers of wrangler.toml, fired at a running local stack as production fires them.
// `wrangler dev` never runs a Worker's cron triggers by itself, so without this the scheduler's
// scan (src/scanner/scan.ts: jobs due beyond the lookahead handed to their bucket, unacknowledged
// changes re-sent, buckets re-armed, history purged) never runs locally.
//
// At each instant a cron expression matches (in UTC, as production evaluates it), this requests
// the local runtime's trigger route, miniflare's GET /cdn-cgi/local/scheduled?cron=&time=, which
// wrangler dev serves with or without --test-scheduled: it runs the Worker's scheduled() with
// that cron and scheduledTime, and answers once the handler and its waitUntil work are done
// (format=json: {"outcome": "ok"} and 200, or 500 when the handler threw). --test-scheduled's
// /__scheduled?cron= runs the same handler but cannot pass the time.
import { readFileSync } from "node:fs";
import { Cron } from "croner";

export const SCHEDULED_PATH = "/cdn-cgi/local/scheduled";

/** a run still going after this long is given up (a hung runtime must not hold the cron back for good) */
const RUN_TIMEOUT_MS = 10 * 60_000;
/** the longest one timer sleeps; a far-off match is reached in steps (setTimeout's limit is ~24.8 days) */
const MAX_SLEEP_MS = 3_600_000;

/**
 * The cron expressions of a wrangler TOML config's top-level `[triggers]` table (`crons = [...]`,
 * on one line or several, with comments); [] when it has none. A form this reader does not
 * understand is an error naming the form to use, never a silently empty list (unit-tested
 * against wrangler's own reader on wrangler.toml).
 * @param {string} text
 * @returns {string[]}
 */
export function cronsOf(text) {
  const lines = text.split(/\r?\n/);
  const unsupported = () =>
    new Error(
      'wrangler.toml declares its cron triggers in a form scripts/lib/cron.mjs cannot read: write them as [triggers] crons = ["..."]',
    );
  let table = "";
  let body = null;
  for (const line of lines) {
    const header = /^\s*\[\[?([^\]]*)\]\]?\s*(#.*)?$/.exec(line); // [table] or [[array of tables]]
    if (header) {
      table = header[1].trim();
      if (table === "triggers") body = [];
      continue;
    }
    if (table === "" && /^\s*triggers\s*[.=]/.test(line)) throw unsupported();
    if (table === "triggers") body.push(line);
  }
  if (body === null) return [];
  const joined = body.join("\n");
  const key = /^\s*crons\s*=\s*/m.exec(joined);
  if (!key) {
    if (/^\s*["']?crons/m.test(joined)) throw unsupported();
    return [];
  }
  const crons = [];
  let i = key.index + key[0].length;
  if (joined[i] !== "[") throw unsupported();
  i++;
  for (;;) {
    const rest = joined.slice(i);
    const skipped = /^(?:\s|,|#[^\n]*)*/.exec(rest)[0];
    i += skipped.length;
    const c = joined[i];
    if (c === "]") return crons;
    // a basic string ("...", escapes other than \" and \\ are not used in cron expressions) or a literal one ('...')
    const string = c === '"' ? /^"((?:[^"\\\n]|\\["\\])*)"/.exec(joined.slice(i)) : c === "'" ? /^'([^'\n]*)'/.exec(joined.slice(i)) : null;
    if (!string) throw unsupported();
    crons.push(c === '"' ? string[1].replace(/\\(["\\])/g, "$1") : string[1]);
    i += string[0].length;
  }
}

/**
 * The cron expressions of the wrangler config at `path`.
 * @param {string} path
 */
export function readCrons(path) {
  return cronsOf(readFileSync(path, "utf8"));
}

/**
 * How often a cron expression matches, in words, when its next matches are evenly spaced
 * ("every minute", "every 5 minutes", "every hour"); else "on its schedule".
 * @param {string} cron
 * @param {number} [now]
 */
export function cadenceOf(cron, now = Date.now()) {
  const runs = new Cron(cron, { utcOffset: 0, mode: "5-part" }).nextRuns(6, new Date(now)).map((d) => d.getTime());
  const gaps = new Set(runs.slice(1).map((t, i) => t - runs[i]));
  if (gaps.size !== 1) return "on its schedule";
  const [gap] = gaps;
  for (const [ms, unit] of [
    [86_400_000, "day"],
    [3_600_000, "hour"],
    [60_000, "minute"],
  ]) {
    if (gap % ms === 0) return gap === ms ? `every ${unit}` : `every ${gap / ms} ${unit}s`;
  }
  return "on its schedule";
}

/** 127.0.0.0/8, ::1 and localhost: the only hosts this fires at */
function isLoopback(hostname) {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * Fires each cron expression's scheduled event at the local stack at `url` at every instant it
 * matches, in UTC, with that instant as the event's scheduledTime; until stop(). Its timers are
 * unref'd (they never keep a process alive). At most one run per expression is in flight: a
 * match that comes while the previous run still goes is skipped and logged, and a missed match
 * (a sleeping machine) is not made up for, so runs never pile up. A run that fails (no answer, or
 * the handler threw) is logged; the next match runs as usual.
 * @param {{ url: string, crons: string[], log?: (line: string) => void, logRuns?: boolean, timeoutMs?: number, fetch?: typeof fetch }} options
 *   url: the stack's base URL, a loopback address
 *   log: where failures (and with logRuns, every run) are written (default: console.error)
 *   logRuns: log every run, not only failures
 *   timeoutMs: a run still going after this long is given up (default 10 minutes)
 *   fetch: for tests
 * @returns {{ crons: string[], stop: () => void }}
 */
export function startCron(options) {
  const base = new URL(options.url);
  if (!isLoopback(base.hostname)) throw new Error(`the local cron fires only at a loopback address, not ${options.url}`);
  const log = options.log ?? ((line) => console.error(line));
  const fetchImpl = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? RUN_TIMEOUT_MS;
  const stopping = new AbortController();
  const timers = new Set();
  let stopped = false;

  const sleepUntil = (at, then) => {
    const timer = setTimeout(
      () => {
        timers.delete(timer);
        if (stopped) return;
        if (Date.now() < at)
          sleepUntil(at, then); // a capped sleep, or a clock set back
        else then();
      },
      Math.min(MAX_SLEEP_MS, Math.max(0, at - Date.now())),
    );
    timer.unref?.();
    timers.add(timer);
  };

  // every expression is checked before any timer starts: a bad one throws here
  const patterns = options.crons.map((cron) => new Cron(cron, { utcOffset: 0, mode: "5-part" }));
  options.crons.forEach((cron, n) => {
    const pattern = patterns[n];
    let running = false;
    let last = 0;
    const run = async (at) => {
      const label = `cron "${cron}" at ${new Date(at).toISOString()}`;
      const target = new URL(SCHEDULED_PATH, base);
      target.search = new URLSearchParams({ cron, time: String(at), format: "json" }).toString();
      const started = Date.now();
      try {
        const res = await fetchImpl(target, { signal: AbortSignal.any([stopping.signal, AbortSignal.timeout(timeoutMs)]) });
        const text = await res.text();
        if (!res.ok) log(`${label}: the scheduled handler failed (${res.status} ${text.slice(0, 200)})`);
        else if (options.logRuns) log(`${label}: ran in ${Date.now() - started} ms`);
      } catch (error) {
        if (!stopped) log(`${label}: no answer (${error instanceof Error ? error.message : String(error)})`);
      }
    };
    const arm = () => {
      const next = pattern.nextRun(new Date(Math.max(Date.now(), last)));
      if (!next) return; // it never matches again
      sleepUntil(next.getTime(), () => {
        const at = next.getTime();
        last = at;
        if (running) log(`cron "${cron}" at ${new Date(at).toISOString()}: skipped, the previous run is still going`);
        else {
          running = true;
          void run(at).finally(() => {
            running = false;
          });
        }
        arm();
      });
    };
    arm();
  });

  return {
    crons: [...options.crons],
    /** clears every timer and gives up the runs in flight */
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      stopping.abort();
    },
  };
}
