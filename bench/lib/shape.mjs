// The message shape a stack runs (docs/guarantees.md "Delivery groups"): the fire consumers' batch, executions
// per message, deliveries at once per invocation. `npm run bench` prints the local stack's with every
// line (`shape`); `npm run bench:floor` measures the runtime's floor for the local stack's and
// production's shapes by default, so each can be compared with the floor of its own shape.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * The shape of a wrangler config's text: the first fire queue consumer's max_batch_size,
 * FIRE_GROUP_SIZE and DELIVERY_CONCURRENCY of `settings` (parsed, as effectiveConfig gives them).
 * `floorShape` is what FLOOR_SHAPES takes: [consumerBatch, executionsPerMessage].
 */
export function shapeOf(wranglerText, settings) {
  const batch = /queue = "fire"\nmax_batch_size = (\d+)/.exec(wranglerText);
  const groupSize = Number(settings.FIRE_GROUP_SIZE ?? 1);
  return {
    consumerBatch: batch ? Number(batch[1]) : null,
    executionsPerMessage: groupSize,
    deliveryConcurrency: Number(settings.DELIVERY_CONCURRENCY),
    floorShape: batch ? [Number(batch[1]), groupSize] : null,
  };
}

/** The local stack's shape: wrangler.toml as the local config rewrites it (scripts/local-env.mjs), with the stack's settings. */
export async function fireShape(codeRoot, settings) {
  const { withLocalFireBatches } = await import(pathToFileURL(resolve(join(codeRoot, "scripts", "local-env.mjs"))).href);
  return shapeOf(withLocalFireBatches(readFileSync(join(codeRoot, "wrangler.toml"), "utf8")), settings);
}

/** Production's shape: wrangler.toml as deployed, with production's settings. */
export function productionShape(codeRoot, settings) {
  return shapeOf(readFileSync(join(codeRoot, "wrangler.toml"), "utf8"), settings);
}
