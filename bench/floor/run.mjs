// `npm run bench:floor`: the runtime's floor for webhook delivery, per message shape, on this machine
// with the project's own wrangler and workerd. worker.js does only what no scheduler on this stack
// can skip (a queue message or an alarm, and the POST); its workerd CPU per delivery, beside the
// scheduler's (`npm run bench`'s runtime.cpuMsPerDelivery.workerd) for the same shape, says how
// close the scheduler is to what the runtime allows. One JSON line per shape and delivery on stdout,
// the Markdown table on stderr; both also go to bench/results/floor-latest.{jsonl,md}.
// See bench/README.md "The runtime's floor".
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { effectiveConfig } from "../../scripts/config.mjs";
import { envList, envNumber, envString } from "../../scripts/lib/env.mjs";
import { LOCAL_RUNTIME_ENV, ROOT, WRANGLER } from "../../scripts/local-env.mjs";
import { OK, startReceiver } from "../../test/support/receiver.mjs";
import { freePort } from "../lib/port.mjs";
import { GroupSampler, waitForQuiet } from "../lib/procstat.mjs";
import { fireShape, productionShape } from "../lib/shape.mjs";
import { credentials } from "../lib/stack.mjs";
import { cpuMsPerDelivery, round, sleep } from "../lib/stats.mjs";
import { distinctShapes, floorReport, parseShapes, shapeLabel } from "./shapes.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(HERE, "..", "results");
const log = (line) => console.error(`[bench:floor ${new Date().toISOString().slice(11, 19)}] ${line}`);

const N = envNumber("FLOOR_N", 10_000, { integer: true, min: 1 });
const DELIVERIES = envList("FLOOR_DELIVERY", ["http"], {
  item: (s) => {
    if (s !== "http" && s !== "binding") throw new Error(`FLOOR_DELIVERY: unknown "${s}" (http, binding)`);
    return s;
  },
});
const TIMEOUT_MS = envNumber("FLOOR_TIMEOUT_S", 180) * 1000;
const QUIET_WAIT_MS = envNumber("QUIET_WAIT_S", envNumber("BENCH_QUIET_WAIT_S", 120)) * 1000;

/**
 * The shapes to measure, each with what it is: FLOOR_SHAPES if set, else the local stack's shape
 * and production's (wrangler.toml's fire consumer and FIRE_GROUP_SIZE, as deployed), and how many
 * deliveries at once (FLOOR_CONCURRENCY, else the stack's DELIVERY_CONCURRENCY).
 */
async function shapesToMeasure() {
  const { settings: local } = await effectiveConfig({ root: ROOT, place: "stack", vars: credentials().vars });
  const { settings: production } = await effectiveConfig({ root: ROOT, place: "production" });
  const localShape = await fireShape(ROOT, local);
  const prodShape = productionShape(ROOT, production);
  const concurrency = envNumber("FLOOR_CONCURRENCY", localShape.deliveryConcurrency, { integer: true, min: 1, max: 100 });
  const labelOf = (shape) => {
    const pair = shape.kind === "queue" ? JSON.stringify([shape.consumerBatch, shape.executionsPerMessage]) : null;
    const names = [];
    if (pair === JSON.stringify(localShape.floorShape)) names.push("the local stack's");
    if (pair === JSON.stringify(prodShape.floorShape)) names.push("production's");
    return names.join(", ");
  };
  const text = envString("FLOOR_SHAPES", undefined);
  const shapes = text
    ? parseShapes(text)
    : distinctShapes(parseShapes(JSON.stringify([localShape.floorShape, prodShape.floorShape].filter(Boolean)), "the default shapes"));
  return { shapes: shapes.map((shape) => ({ shape, label: labelOf(shape) })), concurrency };
}

/** The floor Worker's config: a queue whose consumer takes `batch` messages at once, the Direct object, the handler binding. */
function floorConfig(batch) {
  // the project's compatibility date and flags, so the floor runs the runtime the scheduler runs
  const project = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  const date = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(project)?.[1] ?? "2025-11-01";
  const flags = /^compatibility_flags\s*=\s*(\[[^\]]*\])/m.exec(project)?.[1] ?? "[]";
  return [
    'name = "floor"',
    'main = "worker.js"',
    `compatibility_date = "${date}"`,
    `compatibility_flags = ${flags}`,
    "[[queues.producers]]",
    'queue = "floor"',
    'binding = "Q"',
    "[[queues.consumers]]",
    'queue = "floor"',
    `max_batch_size = ${batch}`,
    "max_batch_timeout = 0",
    "[[durable_objects.bindings]]",
    'name = "D"',
    'class_name = "Direct"',
    "[[migrations]]",
    'tag = "v1"',
    'new_sqlite_classes = ["Direct"]',
    "[[services]]",
    'binding = "HANDLER"',
    'service = "floor"',
    'entrypoint = "Handler"',
    "",
  ].join("\n");
}

/**
 * Runs `body(runtime)` against `wrangler dev` of the floor Worker with consumer batches of `batch`,
 * in a temporary directory, as the local stack runs (local tracing off); then stops its process
 * group by the child's own id and removes the directory.
 */
async function withRuntime(batch, body) {
  const dir = mkdtempSync(join(tmpdir(), "bench-floor-"));
  copyFileSync(join(HERE, "worker.js"), join(dir, "worker.js"));
  writeFileSync(join(dir, "wrangler.toml"), floorConfig(batch));
  const port = await freePort();
  const args = [WRANGLER, "dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", join(dir, "state")];
  args.push("--show-interactive-dev-session=false", "--log-level", "warn");
  const child = spawn(process.execPath, args, {
    cwd: dir,
    detached: true, // its own process group: wrangler and its workerd, stopped together by the child's id
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, CI: "true" },
  });
  let exited = false;
  child.on("exit", () => {
    exited = true;
  });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const signalGroup = (signal) => {
    if (exited) return;
    try {
      process.kill(-(/** @type {number} */ (child.pid)), signal);
    } catch {
      /* already gone */
    }
  };
  const url = `http://127.0.0.1:${port}`;
  try {
    let up = false;
    for (let i = 0; i < 120 && !up && !exited; i++) {
      await sleep(500);
      up = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(5000) }).then(
        (r) => r.status === 404,
        () => false,
      );
    }
    if (!up) throw new Error(`wrangler dev of the floor Worker did not start; its last output:\n${stderr.slice(-1500)}`);
    return await body({ url, pgid: /** @type {number} */ (child.pid) });
  } finally {
    signalGroup("SIGTERM");
    for (let i = 0; i < 50 && !exited; i++) await sleep(100);
    signalGroup("SIGKILL");
    if (dir.startsWith(tmpdir()) && dir.includes("bench-floor-")) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * N deliveries of `shape` by `delivery`: from the request that starts them to the last one the
 * target (or the handler entrypoint) took; workerd's CPU over that time, from its process group.
 */
async function measure(runtime, receiver, shape, delivery, concurrency) {
  const quiet = await waitForQuiet(QUIET_WAIT_MS);
  const handledSoFar = () =>
    fetch(`${runtime.url}/handled`)
      .then((r) => r.text())
      .then(Number);
  const base = delivery === "binding" ? await handledSoFar() : 0;
  receiver.reset();
  const target = delivery === "binding" ? "binding:" : `${receiver.url}/hook`;
  const per = shape.kind === "direct" ? shape.perAlarmStep : shape.executionsPerMessage;
  const path = shape.kind === "direct" ? "/direct" : "/queue";
  const sampler = new GroupSampler(500);
  sampler.addGroup(runtime.pgid);
  sampler.start();
  sampler.mark("start");
  const t0 = Date.now();
  let delivered = 0;
  let lastAt = t0;
  try {
    const query = new URLSearchParams({ n: String(N), per: String(per), concurrency: String(concurrency), target });
    await fetch(`${runtime.url}${path}?${query}`).then((r) => r.text());
    const deadline = t0 + TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (delivery === "binding") {
        const n = (await handledSoFar()) - base;
        if (n !== delivered) {
          delivered = n;
          lastAt = Date.now();
        }
      } else {
        delivered = receiver.count();
        lastAt = receiver.lastAt() ?? lastAt;
      }
      if (delivered >= N) break;
      await sleep(25);
    }
    sampler.mark("end");
  } finally {
    sampler.stop();
  }
  const cpu = sampler.cpu("start", "end");
  const seconds = (lastAt - t0) / 1000;
  return {
    delivered,
    allDelivered: delivered >= N,
    seconds: round(seconds, 2),
    perSecond: seconds > 0 ? Math.round(delivered / seconds) : null,
    cpuMsPerDelivery: cpuMsPerDelivery(cpu, delivered),
    quietBeforeStart: quiet,
    // CPU seconds per process name (workerd, wrangler's MainThread) and the whole machine's: otherCpuSeconds is noise
    runtime: { cpuSeconds: cpu, machine: sampler.machine("start", "end") },
  };
}

async function main() {
  const { shapes, concurrency } = await shapesToMeasure();
  const wrangler = JSON.parse(readFileSync(join(ROOT, "node_modules", "wrangler", "package.json"), "utf8")).version;
  const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version };
  mkdirSync(RESULTS, { recursive: true });
  const jsonl = join(RESULTS, "floor-latest.jsonl");
  writeFileSync(jsonl, "");
  const lines = [];
  const emit = (line) => {
    const full = { ...line, versions: { wrangler }, machine, at: new Date().toISOString() };
    lines.push(full);
    process.stdout.write(`${JSON.stringify(full)}\n`);
    writeFileSync(jsonl, `${JSON.stringify(full)}\n`, { flag: "a" });
  };

  // the target, in this process (workerd's CPU is what is measured): 200 once the body is read
  let count = 0;
  let lastAt = null;
  const server = await startReceiver({
    respond: () => OK,
    onRequest: (request) => {
      count += 1;
      lastAt = request.at;
    },
  });
  const receiver = {
    url: server.url,
    count: () => count,
    lastAt: () => lastAt,
    reset() {
      count = 0;
      lastAt = null;
    },
  };
  // one runtime per consumer batch size (a config of its own); the alarm shapes run in the first
  const batches = new Map();
  for (const entry of shapes) {
    const batch =
      entry.shape.kind === "queue" ? entry.shape.consumerBatch : (shapes.find((s) => s.shape.kind === "queue")?.shape.consumerBatch ?? 1);
    batches.set(batch, [...(batches.get(batch) ?? []), entry]);
  }
  let failed = false;
  try {
    const why = (error) => (error instanceof Error ? error.message : String(error));
    for (const [batch, entries] of batches) {
      const pending = new Set(entries);
      try {
        await withRuntime(batch, async (runtime) => {
          for (const entry of entries) {
            pending.delete(entry);
            const { shape, label } = entry;
            for (const delivery of DELIVERIES) {
              log(`${shapeLabel(shape)}${label ? ` (${label})` : ""}, ${delivery}: ${N} deliveries, ${concurrency} at a time`);
              try {
                const result = await measure(runtime, receiver, shape, delivery, concurrency);
                emit({ shape, label, delivery, n: N, concurrency, ...result });
              } catch (error) {
                failed = true;
                emit({ shape, label, delivery, error: why(error) });
              }
            }
          }
        });
      } catch (error) {
        // the runtime did not start: every shape it was to run fails with the reason
        failed = true;
        for (const { shape, label } of pending) for (const delivery of DELIVERIES) emit({ shape, label, delivery, error: why(error) });
      }
    }
  } finally {
    await server.stop();
  }
  const report = floorReport(lines);
  writeFileSync(join(RESULTS, "floor-latest.md"), report);
  process.stderr.write(`\n${report}`);
  process.exitCode = failed ? 1 : 0;
}

try {
  await main();
} catch (error) {
  console.error(`bench:floor: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
