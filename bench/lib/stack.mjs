// The runtime under test, started the way users run it: scripts/local-stack.mjs's startStack
// (wrangler dev with local tracing off), a fresh temporary state directory, a random API key and
// signing secret, loopback targets allowed, plus the run's SCHEDULER_<NAME>=value overrides
// (BUCKETS, ALARM_QUANTUM_MS, FIRE_BATCH_LIMIT, ...). The scripts are imported from the code root
// in use (the project, or the bench's frozen copy of it: see snapshot.mjs).
import { randomBytes } from "node:crypto";
import { createWriteStream, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { envBool, envString } from "../../scripts/lib/env.mjs";
import { heldReportOf } from "./queue-latency.mjs";

/** BENCH_LOG_LEVEL=info logs every consumer batch ("QUEUE fire n/m (ms)"), for profiling */
const LOG_LEVEL = envString("BENCH_LOG_LEVEL", undefined, { oneOf: ["debug", "info", "log", "warn", "error", "none"] });
const KEEP_STATE = envBool("BENCH_KEEP_STATE", false);

export const PORT_MIN = 18900;
export const PORT_MAX = 18950;
let nextPort = PORT_MIN;
let codeRoot = null;
/** stacks started and not yet stopped, for killAllStacks() on Ctrl-C */
const live = new Set();

/** SIGKILL to the process group of every stack still running (each by its own group id). */
export function killAllStacks() {
  for (const stack of live) stack.kill9();
  live.clear();
}

/** The directory whose scripts/, src/ and wrangler.toml the stacks run. */
export function useCodeRoot(root) {
  codeRoot = root;
}

/** Ports are handed out in turn, so a restarted stack never waits for the old socket. */
export function allocatePort() {
  const port = nextPort;
  nextPort = nextPort >= PORT_MAX ? PORT_MIN : nextPort + 1;
  return port;
}

/**
 * Fresh credentials, and the vars that start a stack with them and the run's `overrides`: an API
 * key of tenant "bench", and one per name in `otherTenants` (`keys[name]`).
 */
export function credentials(overrides = {}, otherTenants = []) {
  const apiKey = randomBytes(24).toString("base64url");
  const keys = Object.fromEntries(otherTenants.map((name) => [name, randomBytes(24).toString("base64url")]));
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const apiKeys = [`bench:${apiKey}`, ...Object.entries(keys).map(([name, key]) => `${name}:${key}`)].join(",");
  return {
    apiKey,
    keys,
    secret,
    // loopback targets: the bench's target is on 127.0.0.1, whatever the local profile says
    // the local profile only counts in a bench (its size checks cost CPU): src/platform/profile.ts
    vars: { API_KEYS: apiKeys, WEBHOOK_SECRET: secret, ALLOW_LOOPBACK_TARGETS: "true", PLATFORM_LIMITS: "meter", ...overrides },
  };
}

/**
 * Starts a stack; its log goes to <logDir>/<name>.log (capped at `logLimitBytes`).
 * @returns the stack, its port, its start time, `held` (the latency emulation's reports, see
 *   queue-latency.mjs) and `close()` (stop it, close the log).
 */
export async function launch({ name, creds, persistTo, logDir, shards, logLimitBytes = 50 * 1024 * 1024 }) {
  if (!codeRoot) throw new Error("useCodeRoot() first");
  mkdirSync(logDir, { recursive: true });
  const file = createWriteStream(join(logDir, `${name}.log`), { flags: "w" });
  let written = 0;
  /** the latency emulation's reports of what it held (QUEUE_LATENCY), in order */
  const held = [];
  let partial = "";
  const log = (text) => {
    const lines = (partial + text).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      const report = heldReportOf(line);
      if (report) held.push(report);
    }
    if (written >= logLimitBytes) return;
    written += text.length;
    file.write(`${Date.now()} ${text}`);
  };
  const port = allocatePort();
  const startedAt = Date.now();
  let stack;
  try {
    const { startStack } = await import(pathToFileURL(join(codeRoot, "scripts", "local-stack.mjs")).href);
    // the latency emulation reports with console.log, which wrangler's default level ("warn") drops
    const logLevel = LOG_LEVEL ?? (creds.vars.QUEUE_LATENCY ? "log" : undefined);
    stack = await startStack({ port, persistTo, vars: creds.vars, log, logLevel, shards });
  } catch (error) {
    file.end();
    throw error;
  }
  live.add(stack);
  return {
    stack,
    port,
    startMs: Date.now() - startedAt,
    held,
    async close() {
      await stack.stop();
      live.delete(stack);
      await new Promise((resolve) => file.end(resolve));
    },
  };
}

/** Deletes a temporary state directory this bench created (never anything else). */
export function removeState(dir) {
  if (!dir || KEEP_STATE) return;
  if (dir.startsWith(tmpdir()) && dir.includes("scheduler-state-")) rmSync(dir, { recursive: true, force: true });
}
