// The real local stack (wrangler dev: workerd with local D1, Durable Objects, alarms, Queues, and
// the example handler Worker bound as EXAMPLE_HANDLER, as `npm start` runs it), started for
// end-to-end tests and benchmarks. The child gets its own process group, and stop()
// / kill9() signal exactly that group (wrangler and the workerd it started), by the child's id.
// Everything wrangler prints (the migration tables, the dev server's output) goes to `log` only,
// so the tests and the bench show their own output; a failure to start quotes the last of it.
// wrangler dev never fires cron triggers by itself: once the stack is up, scripts/lib/cron.mjs
// fires wrangler.toml's [triggers] crons at it as production does (the scan every minute), and
// stops with it; each run's outcome goes to `log` too.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readCrons, startCron } from "./lib/cron.mjs";
import { applyMigrations, LOCAL_RUNTIME_ENV, LOCAL_SHARDS, localProfile, ROOT, WRANGLER, writeLocalConfig } from "./local-env.mjs";

/** how much of wrangler's last output a start failure quotes */
const TAIL_CHARS = 2000;

/**
 * @param {{ port: number, persistTo?: string, vars?: Record<string,string>, log?: (line: string) => void, logLevel?: string, inspectorPort?: number, v8Flags?: string[], shards?: number }} options
 *   shards: D1 shards (DB, DB_1, ...; default LOCAL_SHARDS)
 *   log: receives everything wrangler prints (default: dropped)
 *   logLevel: wrangler's log level (default "warn"; "info" logs every consumer batch, for profiling)
 *   inspectorPort: where wrangler serves DevTools for the scheduler's worker (default: a free port)
 *   v8Flags: V8 flags for the runtime, e.g. ["--expose-gc"] (miniflare's MINIFLARE_WORKERD_V8_FLAGS)
 */
export async function startStack(options) {
  const crons = readCrons(join(ROOT, "wrangler.toml")); // a form it cannot read fails here, before anything starts
  const persistTo = options.persistTo ?? mkdtempSync(join(tmpdir(), "scheduler-state-"));
  const output = tailOf(options.log ?? (() => {}));
  const shards = options.shards ?? LOCAL_SHARDS;
  // wrangler's migration output (a table per migration) goes to `log` only, as local-env.mjs says
  await applyMigrations(persistTo, { shards, log: output.log });
  const args = [
    WRANGLER,
    "dev",
    ...writeLocalConfig({ shards }),
    "--ip",
    "127.0.0.1",
    "--port",
    String(options.port),
    "--persist-to",
    persistTo,
    "--show-interactive-dev-session=false",
    "--log-level",
    options.logLevel ?? "warn",
    "--test-scheduled",
  ];
  if (options.inspectorPort !== undefined) args.push("--inspector-port", String(options.inspectorPort), "--inspector-ip", "127.0.0.1");
  for (const [k, v] of Object.entries({ ...localProfile(), ...options.vars })) args.push("--var", `${k}:${v}`);
  const v8Env = options.v8Flags?.length ? { MINIFLARE_WORKERD_V8_FLAGS: options.v8Flags.join(" ") } : {};
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    detached: true, // its own process group, so workerd goes down with it
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, ...v8Env, CI: "true" },
  });
  child.stdout.on("data", (d) => output.log(String(d)));
  child.stderr.on("data", (d) => output.log(String(d)));
  const url = `http://127.0.0.1:${options.port}`;
  let exited = false;
  /** @type {ReturnType<typeof startCron> | null} */
  let cron = null;
  child.on("exit", () => {
    exited = true;
    cron?.stop();
  });
  const signalGroup = (signal) => {
    if (exited) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      /* already gone */
    }
  };
  const stack = {
    url,
    persistTo,
    pid: child.pid,
    /** SIGTERM to the group, then SIGKILL if it lingers */
    async stop() {
      cron?.stop();
      signalGroup("SIGTERM");
      for (let i = 0; i < 50 && !exited; i++) await sleep(100);
      signalGroup("SIGKILL");
    },
    /** the crash: kill -9 of the whole runtime */
    kill9() {
      cron?.stop();
      signalGroup("SIGKILL");
    },
    exited: () => exited,
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (exited) throw new Error(`wrangler dev exited during start; its last output:\n${output.tail()}`);
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5000) });
      if (res.ok) {
        cron = startCron({ url, crons, log: (line) => output.log(`[local cron] ${line}\n`), logRuns: true });
        return stack;
      }
    } catch {
      /* not up yet */
    }
    await sleep(200);
  }
  await stack.stop();
  throw new Error(`wrangler dev did not become ready within 60 s; its last output:\n${output.tail()}`);
}

/**
 * `log`, keeping the last TAIL_CHARS of what passed through for an error message.
 * @param {(line: string) => void} log
 */
function tailOf(log) {
  let tail = "";
  return {
    /** @param {string} text */
    log(text) {
      log(text);
      tail += text;
      if (tail.length > 2 * TAIL_CHARS) tail = tail.slice(-TAIL_CHARS);
    },
    tail: () => tail.slice(-TAIL_CHARS),
  };
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
