// The message shapes `npm run bench:floor` measures (FLOOR_SHAPES), and its report. Pure: no I/O,
// so test/unit/bench-floor.test.ts holds it.
import { count, markdownTable, range } from "../lib/table.mjs";

/** the platform's most messages in one consumer batch (cloudflare-docs queues/platform/limits.mdx) */
export const MAX_CONSUMER_BATCH = 100;
/** the most executions per message: FIRE_GROUP_SIZE's bound (src/config.ts); 100 such messages stay under sendBatch's 256 KB */
export const MAX_PER_MESSAGE = 100;

/**
 * @typedef {{ kind: "queue", consumerBatch: number, executionsPerMessage: number }
 *   | { kind: "direct", perAlarmStep: number }} Shape
 */

/**
 * FLOOR_SHAPES' text: a JSON list of [consumerBatch, executionsPerMessage] (a queue consumer taking
 * batches of that many messages, each carrying that many executions) or ["direct", k] (k at a time
 * from one Durable Object's alarm, no queue). Anything else is an error naming FLOOR_SHAPES.
 * @returns {Shape[]}
 */
export function parseShapes(text, name = "FLOOR_SHAPES") {
  const bad = (why) => new Error(`${name} ${why}, got ${JSON.stringify(text)} (e.g. '[[10,10],[1,6],["direct",6]]')`);
  let list;
  try {
    list = JSON.parse(text);
  } catch {
    throw bad("must be JSON");
  }
  if (!Array.isArray(list) || list.length === 0) throw bad("must be a non-empty list");
  const positive = (x, max) => Number.isInteger(x) && x >= 1 && x <= max;
  return list.map((item) => {
    if (!Array.isArray(item) || item.length !== 2) throw bad("must list pairs");
    const [first, second] = item;
    if (!positive(second, MAX_PER_MESSAGE))
      throw bad(`must give 1..${MAX_PER_MESSAGE} executions per message (or per alarm step) second in each pair`);
    if (first === "direct") return { kind: "direct", perAlarmStep: second };
    if (!positive(first, MAX_CONSUMER_BATCH))
      throw bad(`must give a consumer batch of 1..${MAX_CONSUMER_BATCH} or "direct" first in each pair`);
    return { kind: "queue", consumerBatch: first, executionsPerMessage: second };
  });
}

/** The shapes without repeats, in order (the local stack's and production's may be the same). */
export function distinctShapes(shapes) {
  const seen = new Set();
  return shapes.filter((s) => {
    const key = JSON.stringify(s);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** "consumer batch 10 × 10 executions per message", "a Durable Object's alarm, 6 at a time" */
export function shapeLabel(shape) {
  return shape.kind === "direct"
    ? `from a Durable Object's alarm, ${shape.perAlarmStep} at a time`
    : `consumer batch ${shape.consumerBatch} × ${shape.executionsPerMessage} per message`;
}

/** The report: a row per shape and delivery, each figure's range over the lines given. */
export function floorReport(lines) {
  const rows = new Map();
  for (const line of lines) {
    if (line.error) continue;
    const key = `${shapeLabel(line.shape)}|${line.delivery}`;
    if (!rows.has(key)) rows.set(key, []);
    rows.get(key).push(line);
  }
  const table = markdownTable(
    [
      "shape",
      "is",
      "delivery",
      "runs",
      "deliveries",
      "deliveries/s",
      "workerd CPU per delivery",
      "all of the runtime's CPU per delivery",
      "other processes' CPU",
    ],
    [...rows.values()].map((runs) => [
      shapeLabel(runs[0].shape),
      runs[0].label ?? "",
      runs[0].delivery === "binding" ? "service binding (RPC)" : "HTTP POST",
      runs.length,
      range(
        runs.map((r) => r.delivered),
        count,
      ),
      range(
        runs.map((r) => r.perSecond),
        count,
      ),
      range(
        runs.map((r) => r.cpuMsPerDelivery?.workerd),
        (v) => v.toFixed(3),
        "ms",
      ),
      range(
        runs.map((r) => r.cpuMsPerDelivery?.stack),
        (v) => v.toFixed(3),
        "ms",
      ),
      range(
        runs.map((r) => r.runtime?.machine?.otherCpuSeconds),
        (v) => v.toFixed(1),
        "s",
      ),
    ]),
  );
  const ok = lines.filter((l) => !l.error);
  const footer = ok.length
    ? `\nwrangler ${ok[0].versions.wrangler}; ${ok[0].machine.cpus} cores, node ${ok[0].machine.node}; ${ok[0].at} to ${ok[ok.length - 1].at}`
    : "";
  const failed = lines.filter((l) => l.error);
  const failures = failed.length ? `\n${failed.length} measurement(s) failed: ${failed.map((l) => l.label ?? "?").join(", ")}` : "";
  return `${table}\n${footer}${failures}\n`;
}
