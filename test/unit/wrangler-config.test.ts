/**
 * What wrangler.toml must keep for the consumer to isolate slow targets (issue 13, item 1), read
 * by wrangler's own config reader: the queue hands out the next batch without waiting for the
 * deliveries a batch left running in waitUntil, and no fire batch is larger than the connections
 * one invocation may open (a delivery beyond them would wait behind a slow one).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { ConfigSchema } from "../../src/config";

const wrangler = unstable_readConfig({ config: join(import.meta.dirname, "../../wrangler.toml") }, { hideWarnings: true });
const defaults = ConfigSchema.parse({});

describe("wrangler.toml", () => {
  it("lets the queue move on while deliveries run (queue_consumer_no_wait_for_wait_until)", () => {
    expect(wrangler.compatibility_flags).toContain("queue_consumer_no_wait_for_wait_until");
  });

  it("gives every fire consumer batches no larger than DELIVERY_CONCURRENCY", () => {
    const fire = (wrangler.queues.consumers ?? []).filter((c: { queue: string }) => !c.queue.endsWith("-dlq"));
    expect(fire.length).toBeGreaterThan(0);
    for (const consumer of fire) expect(consumer.max_batch_size, consumer.queue).toBeLessThanOrEqual(defaults.DELIVERY_CONCURRENCY);
  });
});
