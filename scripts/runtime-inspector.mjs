// The memory of a local stack (scripts/local-stack.mjs), read from /proc and over the DevTools
// protocol of the runtime. wrangler dev runs two workerd processes in the stack's process group:
// its dev proxy (the address the stack answers on; it has no inspector) and the runtime, which
// runs the scheduler's worker and Durable Objects next to miniflare's local D1, queue broker and
// other services, each in an isolate of its own, all listed by the runtime's inspector.
//
// Why the soak collects garbage itself: local workerd does not tell V8 how much native memory the
// objects of a request, RPC or subrequest hold, so an isolate with a small JS heap is rarely
// collected while its native memory grows (cloudflare/workerd#6894: uncollected garbage, not a
// leak; a full collection frees it). The stack must run with the V8 flag --expose-gc
// (startStack({ v8Flags })): the inspector's HeapProfiler.collectGarbage goes unanswered in
// workerd, so the collection is `gc()` evaluated in each isolate. What survives it is reachable,
// which is what a leak would grow.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import WebSocket from "ws";

/** The workerd processes of process group `pgrp`: { runtime, proxy } pids (either may be missing). */
export function stackProcesses(pgrp) {
  const found = {};
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      if (Number(stat.slice(close + 2).split(" ")[2]) !== pgrp) continue;
      const argv = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (!argv[0]?.endsWith("workerd")) continue;
      found[argv.some((a) => a.startsWith("--inspector-addr")) ? "runtime" : "proxy"] = Number(name);
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

/** Resident memory (VmRSS) of a process in kB, or null once it is gone. */
export function residentKb(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return null;
  }
}

/** TCP ports process `pid` listens on (its sockets matched against /proc/net/tcp). */
function listeningPorts(pid) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (socket) inodes.add(socket[1]);
    } catch {
      /* closed meanwhile */
    }
  }
  const ports = [];
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    const listening = f[3] === "0A";
    if (listening && inodes.has(f[9])) ports.push(parseInt(f[1].split(":")[1], 16));
  }
  return ports;
}

/**
 * One DevTools session on a fresh connection: `run(call)` sends calls and awaits their answers;
 * the session rejects on close, error or timeout and never hangs. `contextId` resolves with the
 * first execution context the isolate reports after Runtime.enable.
 */
function devtoolsSession(url, run, timeoutMs = 15_000) {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    const waiting = new Map();
    let nextId = 1;
    let announceContext;
    const contextId = new Promise((r) => (announceContext = r));
    const done = (error, result) => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on("error", () => {});
      socket.terminate();
      if (error) reject(error);
      else resolve(result);
    };
    const timer = setTimeout(() => done(new Error(`${url}: no answer in ${timeoutMs} ms`)), timeoutMs);
    const call = (method, params = {}) =>
      new Promise((answer, fail) => {
        const id = nextId++;
        waiting.set(id, (message) => (message.error ? fail(new Error(`${method}: ${message.error.message}`)) : answer(message.result)));
        socket.send(JSON.stringify({ id, method, params }));
      });
    socket.on("message", (data) => {
      const message = JSON.parse(String(data));
      if (message.method === "Runtime.executionContextCreated") announceContext(message.params.context.id);
      const settle = waiting.get(message.id);
      if (!settle) return;
      waiting.delete(message.id);
      settle(message);
    });
    socket.on("open", () =>
      run(call, contextId).then(
        (result) => done(null, result),
        (error) => done(error),
      ),
    );
    socket.on("error", (error) => done(error));
    socket.on("close", () => done(new Error(`${url}: connection closed`)));
  });
}

/**
 * A full collection in the isolate behind `url`, then its JS heap in use (bytes). `contexts`
 * remembers each isolate's execution context: wrangler's proxy announces it to its first session only.
 */
function collectAndMeasureIsolate(url, contexts) {
  return devtoolsSession(url, async (call, contextId) => {
    await call("Runtime.enable");
    const context = contexts.get(url) ?? (await Promise.race([contextId, new Promise((r) => setTimeout(() => r(null), 2000))]));
    if (context === null) throw new Error("no execution context announced");
    contexts.set(url, context);
    const evaluated = await call("Runtime.evaluate", {
      expression: "typeof gc === 'function' ? (gc(), 'collected') : 'no gc'",
      contextId: context,
    });
    if (evaluated.result?.value !== "collected") throw new Error("gc() is not exposed: start the stack with v8Flags ['--expose-gc']");
    return (await call("Runtime.getHeapUsage")).usedSize;
  });
}

/**
 * The runtime's inspector: the isolates it lists. Resolves once the runtime listens (bounded by
 * `timeoutMs`). The scheduler's own isolate (`core:user:<wrangler.toml name>`) is reached through
 * wrangler's inspector proxy at `workerInspectorPort`: wrangler holds the runtime's session to it.
 */
export async function connectRuntimeInspector({ pgrp, workerName, workerInspectorPort, timeoutMs = 30_000 }) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { runtime } = stackProcesses(pgrp);
    for (const port of runtime ? listeningPorts(runtime) : []) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(1000) });
        const targets = res.ok ? await res.json().catch(() => null) : null;
        if (Array.isArray(targets) && targets.length > 0 && targets.every((t) => t.webSocketDebuggerUrl)) {
          return runtimeInspector(runtime, targets, `core:user:${workerName}`, `ws://127.0.0.1:${workerInspectorPort}/ws`);
        }
      } catch {
        /* not the inspector */
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error("the runtime's inspector did not answer");
}

/**
 * The collections V8 traced (--trace-gc) in `output`, one per line: the process, the isolate's
 * address, the milliseconds since it started, the kind (Scavenge, Mark-Compact, ...), the heap in
 * use before and after (MB) and the reason ("testing" for gc() called by collectWorker).
 * DevTools cannot read a heap while a request runs (the runtime answers between requests), so a
 * peak inside a scan is read from these. The runtime must print them: startStack with v8Flags
 * ["--trace-gc"] and its stdout line-buffered (LD_PRELOAD libstdbuf with _STDBUF_O=L), else they
 * sit in a buffer a stop discards.
 * @param {string} output
 */
export function parseGcTrace(output) {
  const collections = [];
  const line =
    /\[(\d+):(0x[0-9a-f]+)\]\s+(\d+) ms: ([A-Za-z-]+)(?: \([^)]*\))? ([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB.*?\) (.*)$/;
  for (const text of output.split("\n")) {
    const m = line.exec(text);
    if (!m) continue;
    collections.push({
      pid: Number(m[1]),
      isolate: m[2],
      ms: Number(m[3]),
      kind: m[4],
      beforeMB: Number(m[5]),
      afterMB: Number(m[7]),
      reason: m[9].trim(),
    });
  }
  return collections;
}

function runtimeInspector(pid, targets, workerIsolate, workerUrl) {
  const contexts = new Map();
  return {
    pid,
    isolates: targets.map((t) => t.id),
    /** A full collection in the scheduler's isolate (its Worker and Durable Objects), then its JS heap in use (bytes). */
    collectWorker() {
      return collectAndMeasureIsolate(workerUrl, contexts);
    },
    /**
     * Collects garbage in every isolate, then reads their JS heaps: bytes in use in all of them
     * and in the scheduler's. Isolates that do not answer are skipped and listed with the reason.
     */
    async collectAndMeasure() {
      let allBytes = 0;
      let workerBytes = null;
      const unanswered = [];
      for (const target of targets) {
        const worker = target.id === workerIsolate;
        try {
          const bytes = await collectAndMeasureIsolate(worker ? workerUrl : target.webSocketDebuggerUrl, contexts);
          allBytes += bytes;
          if (worker) workerBytes = bytes;
        } catch (error) {
          unanswered.push(`${target.id}: ${error.message}`);
        }
      }
      return { allBytes, workerBytes, unanswered };
    },
  };
}
