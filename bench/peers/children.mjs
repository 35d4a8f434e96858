// The processes `npm run bench:peers` forks (the BullMQ worker, the webhook receiver): each speaks a
// small IPC protocol ({type: "ready"} first, then answers to requests of the same type), and each is
// stopped by its own pid: SIGTERM, then SIGKILL if it lingers. stopAll() is the Ctrl-C path.
import { fork } from "node:child_process";
import { sleep } from "../lib/stats.mjs";

/** children started and not yet exited */
const live = new Set();

/**
 * Forks `script` with `env` added; resolves once it says {type: "ready"} (with its message), or
 * rejects if it exits first or stays silent for `readyTimeoutMs`.
 * @returns {Promise<{ pid: number, ready: Record<string, unknown>, latest: Map<string, Record<string, unknown>>, request: (type: string, payload?: object) => Promise<any>, exited: () => boolean, stop: () => Promise<void> }>}
 */
export async function forkChild(script, env, { readyTimeoutMs = 30_000 } = {}) {
  const child = fork(script, [], { env: { ...process.env, ...env }, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  let exited = false;
  const handle = {
    pid: child.pid,
    ready: {},
    /** the last message of each type the child sent by itself (e.g. "progress") */
    latest: new Map(),
    exited: () => exited,
    /** sends {type, ...payload}; resolves with the child's next message of that type */
    request(type, payload = {}) {
      return new Promise((resolve, reject) => {
        if (exited) return reject(new Error(`${script} has exited`));
        waiting.set(type, { resolve, reject });
        child.send({ type, ...payload });
      });
    },
    async stop() {
      if (exited) return;
      child.kill("SIGTERM");
      for (let i = 0; i < 50 && !exited; i++) await sleep(100);
      if (!exited) child.kill("SIGKILL");
      for (let i = 0; i < 20 && !exited; i++) await sleep(100);
    },
  };
  /** @type {Map<string, { resolve: (m: any) => void, reject: (e: Error) => void }>} */
  const waiting = new Map();
  live.add(handle);
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start within ${readyTimeoutMs} ms`)), readyTimeoutMs);
    child.on("message", (message) => {
      if (message.type === "ready") {
        clearTimeout(timer);
        resolve(message);
      }
      const w = waiting.get(message.type);
      if (w) {
        waiting.delete(message.type);
        w.resolve(message);
      } else handle.latest.set(message.type, message);
    });
    child.on("exit", (code, signal) => {
      exited = true;
      live.delete(handle);
      clearTimeout(timer);
      const error = new Error(`${script} exited (code ${code}, signal ${signal})`);
      reject(error);
      for (const w of waiting.values()) w.reject(error);
      waiting.clear();
    });
  });
  try {
    handle.ready = await ready;
  } catch (error) {
    await handle.stop();
    throw error;
  }
  return handle;
}

/** SIGKILL to every child still running, each by its own pid (Ctrl-C). */
export function killAllChildren() {
  for (const handle of live) {
    try {
      process.kill(handle.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  live.clear();
}
