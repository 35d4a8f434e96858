// The private Redis of `npm run bench:peers`: Debian's redis-server (installed with apt-get when it is
// missing and we are root), started on 127.0.0.1 at a free port with no persistence in a temporary
// directory of its own, and stopped by its own pid. It never touches a Redis the machine already runs.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { freePort } from "../lib/port.mjs";
import { sleep } from "../lib/stats.mjs";

/** where a redis-server may be besides the PATH (Debian puts it in /usr/bin) */
const USUAL_DIRS = ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/opt/homebrew/bin"];

/** The redis-server to run: REDIS_SERVER (a path) if set, else the first on the PATH or in USUAL_DIRS; null if none. */
export function findRedisServer(env = process.env) {
  if (env.REDIS_SERVER) {
    if (!existsSync(env.REDIS_SERVER)) throw new Error(`REDIS_SERVER=${env.REDIS_SERVER}: no such file`);
    return env.REDIS_SERVER;
  }
  for (const dir of [...(env.PATH ?? "").split(delimiter), ...USUAL_DIRS]) {
    if (dir && existsSync(join(dir, "redis-server"))) return join(dir, "redis-server");
  }
  return null;
}

/**
 * redis-server's path, installing Debian's package first when it is missing and this process is
 * root with apt-get at hand; otherwise an error saying how to install it. apt-get's output goes to
 * stderr. (On a machine run by systemd, the package also starts the system's own Redis service on
 * 6379; this bench never uses it.)
 */
export function ensureRedisServer({ log = (line) => console.error(line) } = {}) {
  const found = findRedisServer();
  if (found) return found;
  const aptGet = ["/usr/bin/apt-get", "/bin/apt-get"].find((p) => existsSync(p));
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  if (!aptGet || !root) {
    throw new Error(
      "bench:peers needs redis-server (Redis 6.2 or later), which is not installed. Install it, then run again:\n" +
        "  Debian/Ubuntu: sudo apt-get install redis-server\n" +
        "  macOS:         brew install redis\n" +
        "or set REDIS_SERVER to a redis-server binary. The bench starts its own on 127.0.0.1 at a free port and stops it; it never uses a running one.",
    );
  }
  log("bench:peers: redis-server is missing; installing Debian's package (apt-get update, apt-get install redis-server)");
  const opts = {
    stdio: /** @type {const} */ (["ignore", 2, 2]),
    timeout: 10 * 60_000,
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  };
  execFileSync(aptGet, ["update", "-qq"], opts);
  execFileSync(aptGet, ["install", "-y", "-qq", "--no-install-recommends", "redis-server"], opts);
  const installed = findRedisServer();
  if (!installed) throw new Error("apt-get install redis-server finished, but no redis-server is on the PATH or in /usr/bin");
  return installed;
}

/** "7.0.15" from `redis-server --version` ("Redis server v=7.0.15 sha=..."); null if unreadable. */
export function redisVersionOf(text) {
  return /v=(\d+\.\d+\.\d+)/.exec(text)?.[1] ?? null;
}

/** Whether a Redis answers PING on 127.0.0.1:`port` within `timeoutMs`. */
export function pings(port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let answer = "";
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      answer += chunk;
      if (answer.includes("\r\n")) done(answer.startsWith("+PONG"));
    });
  });
}

/**
 * Starts `binary` on 127.0.0.1 at a free port: no RDB snapshots, no AOF, its files in a new
 * temporary directory. Resolves once it answers PING (at most 10 s; a port taken meanwhile is
 * retried on another, three times at most).
 * @returns {Promise<{ port: number, pid: number, version: string | null, stop: () => Promise<void> }>}
 */
export async function startRedis(binary) {
  const version = redisVersionOf(execFileSync(binary, ["--version"], { encoding: "utf8" }));
  let lastError = null;
  for (let tries = 0; tries < 3; tries++) {
    const dir = mkdtempSync(join(tmpdir(), "bench-peers-redis-"));
    const port = await freePort();
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
    args.push("--dir", dir, "--logfile", join(dir, "redis.log"), "--daemonize", "no", "--protected-mode", "yes");
    const child = spawn(binary, args, { stdio: "ignore" });
    let exited = false;
    child.on("exit", () => {
      exited = true;
    });
    child.on("error", (error) => {
      exited = true;
      lastError = error;
    });
    const stop = async () => {
      if (!exited) child.kill("SIGTERM");
      for (let i = 0; i < 50 && !exited; i++) await sleep(100);
      if (!exited) child.kill("SIGKILL");
      for (let i = 0; i < 20 && !exited; i++) await sleep(100);
      if (dir.startsWith(tmpdir()) && dir.includes("bench-peers-redis-")) rmSync(dir, { recursive: true, force: true });
    };
    for (let i = 0; i < 50 && !exited; i++) {
      if (await pings(port)) return { port, pid: /** @type {number} */ (child.pid), version, stop };
      await sleep(200);
    }
    const logText = existsSync(join(dir, "redis.log")) ? readFileSync(join(dir, "redis.log"), "utf8").slice(-1000) : "";
    lastError ??= new Error(`redis-server did not answer on 127.0.0.1:${port}; its log:\n${logText}`);
    await stop();
  }
  throw lastError;
}
