// The runtime under test, started the way users run it: scripts/local-stack.mjs's startStack
// (wrangler dev with local tracing off), a fresh temporary state directory, a random API key and
// signing secret, loopback targets allowed, plus BENCH_VAR_<NAME>=value overrides (BUCKETS,
// ALARM_QUANTUM_MS, FIRE_BATCH_LIMIT, ...). The scripts are imported from the code root in use
// (the project, or the bench's frozen copy of it: see snapshot.mjs).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { sleep } from "./stats.mjs";

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

/** Config overrides from BENCH_VAR_<NAME>=value. */
export function varOverrides(env = process.env) {
  const out = {};
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith("BENCH_VAR_") && v !== undefined) out[k.slice("BENCH_VAR_".length)] = v;
  }
  return out;
}

export function credentials() {
  const apiKey = randomBytes(24).toString("base64url");
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  return {
    apiKey,
    secret,
    vars: { API_KEYS: `bench:${apiKey}`, WEBHOOK_SECRET: secret, ALLOW_LOOPBACK_TARGETS: "true", ...varOverrides() },
  };
}

/**
 * Starts a stack; its log goes to <logDir>/<name>.log (capped at `logLimitBytes`).
 * @returns the stack, its port, its start time and `close()` (stop it, close the log).
 */
export async function launch({ name, creds, persistTo, logDir, logLimitBytes = 50 * 1024 * 1024 }) {
  if (!codeRoot) throw new Error("useCodeRoot() first");
  mkdirSync(logDir, { recursive: true });
  const file = createWriteStream(join(logDir, `${name}.log`), { flags: "w" });
  let written = 0;
  const log = (text) => {
    if (written >= logLimitBytes) return;
    written += text.length;
    file.write(`${Date.now()} ${text}`);
  };
  const port = allocatePort();
  const startedAt = Date.now();
  let stack;
  try {
    const level = process.env.BENCH_LOG_LEVEL;
    if (level) stack = await startStackLogging({ port, persistTo, vars: creds.vars, log, level });
    else {
      const { startStack } = await import(pathToFileURL(join(codeRoot, "scripts", "local-stack.mjs")).href);
      stack = await startStack({ port, persistTo, vars: creds.vars, log });
    }
  } catch (error) {
    file.end();
    throw error;
  }
  live.add(stack);
  return {
    stack,
    port,
    startMs: Date.now() - startedAt,
    async close() {
      await stack.stop();
      live.delete(stack);
      await new Promise((resolve) => file.end(resolve));
    },
  };
}

/** Deletes a temporary state directory this bench created (never anything else). */
export function removeState(dir) {
  if (!dir || process.env.BENCH_KEEP_STATE === "1") return;
  if (dir.startsWith(tmpdir()) && dir.includes("scheduler-state-")) rmSync(dir, { recursive: true, force: true });
}

/**
 * For profiling only (BENCH_LOG_LEVEL=info|debug): scripts/local-stack.mjs's startStack with
 * another wrangler log level, so the log shows Miniflare's per-batch "QUEUE fire n/m (ms)" lines
 * (`npm start` runs at wrangler's default level, info). Same arguments and environment otherwise.
 */
async function startStackLogging({ port, persistTo: given, vars, log, level }) {
  const { applyMigrations, LOCAL_RUNTIME_ENV, ROOT, WRANGLER } = await import(pathToFileURL(join(codeRoot, "scripts", "local-env.mjs")).href);
  const persistTo = given ?? mkdtempSync(join(tmpdir(), "scheduler-state-"));
  applyMigrations(persistTo);
  const args = [WRANGLER, "dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persistTo,
    "--show-interactive-dev-session=false", "--log-level", level, "--test-scheduled"];
  for (const [k, v] of Object.entries(vars)) args.push("--var", `${k}:${v}`);
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, CI: "true" },
  });
  child.stdout.on("data", (d) => log(String(d)));
  child.stderr.on("data", (d) => log(String(d)));
  let exited = false;
  child.on("exit", () => { exited = true; });
  const signalGroup = (signal) => {
    if (exited) return;
    try { process.kill(-child.pid, signal); } catch { /* gone */ }
  };
  const stack = {
    url: `http://127.0.0.1:${port}`,
    persistTo,
    pid: child.pid,
    async stop() {
      signalGroup("SIGTERM");
      for (let i = 0; i < 50 && !exited; i++) await sleep(100);
      signalGroup("SIGKILL");
    },
    kill9() { signalGroup("SIGKILL"); },
    exited: () => exited,
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (exited) throw new Error("wrangler dev exited during start");
    try {
      if ((await fetch(`${stack.url}/healthz`)).ok) return stack;
    } catch { /* not up yet */ }
    await sleep(200);
  }
  await stack.stop();
  throw new Error("wrangler dev did not become ready within 60 s");
}
