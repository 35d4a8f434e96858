/** The tenant's metrics, as JSON and in Prometheus text format. Documented in metrics.openapi.ts. */
import { type Context, Hono } from "hono";
import { configOf } from "../../config";
import type { FlowKeyView } from "../../core/flow";
import { type BucketMetrics, summarize, toPrometheus } from "../../core/metrics";
import { highestBucketOfAll } from "../../db/shards";
import { flowKeyOf } from "../../flow/flow-key";
import { bucketObject } from "../../placement";
import { errorBody } from "../../use-cases/errors";
import { listFlowKeysOfAll, shardGauges } from "../../use-cases/read-model";
import type { ApiEnv } from "../context";
import { presentFlowKey } from "./flow-control";

export const metrics = new Hono<ApiEnv>();

metrics.get("/v1/metrics", async (c) => {
  const buckets = await bucketsOfMetrics(c.env);
  const [summary, flow, shards] = await Promise.all([
    gatherMetrics(c, buckets),
    readFlowKeys(c, METRICS_FLOW_KEYS.json),
    shardGauges(c.env, buckets),
  ]);
  const keys = flow.keys.map(({ key, view }) =>
    view ? presentFlowKey(key, view) : { key, ...errorBody("unavailable", "the key's object did not answer; read it again") },
  );
  const listError = flow.listFailed ? errorBody("unavailable", "the flow-control keys could not be listed; read again") : {};
  return c.json({ ...summary, d1_shards: shards, flowControl: { keys, truncated: flow.truncated, ...listError } });
});

metrics.get("/metrics", async (c) => {
  const buckets = await bucketsOfMetrics(c.env);
  const [summary, flow, shards] = await Promise.all([
    gatherMetrics(c, buckets),
    readFlowKeys(c, METRICS_FLOW_KEYS.prometheus),
    shardGauges(c.env, buckets),
  ]);
  c.header("content-type", "text/plain; version=0.0.4; charset=utf-8");
  return c.body(toPrometheus(summary, flow, shards));
});

/** Every bucket any job names, even beyond a lowered BUCKETS (the metrics read them all). */
async function bucketsOfMetrics(env: Env): Promise<number> {
  return Math.max(configOf(env).BUCKETS, (await highestBucketOfAll(env)) + 1);
}

async function gatherMetrics(c: Context<ApiEnv>, buckets: number) {
  const parts: BucketMetrics[] = await Promise.all(Array.from({ length: buckets }, (_, k) => bucketObject(c.env, k).metrics()));
  return summarize(parts, c.get("tenant"));
}

/** Flow-control keys a metrics read lists, of the caller's tenant: each costs one request to its object. */
const METRICS_FLOW_KEYS = { json: 100, prometheus: 1_000 } as const;

/**
 * The caller's flow-control keys (D1's registry, in key order, at most `limit`), each key's view
 * read from its object in parallel. A key whose object fails is shown as unreadable, never a 500.
 */
async function readFlowKeys(
  c: Context<ApiEnv>,
  limit: number,
): Promise<{ tenant: string; keys: { key: string; view: FlowKeyView | null }[]; truncated: boolean; listFailed: boolean }> {
  const tenant = c.get("tenant");
  let listed: string[];
  try {
    listed = await listFlowKeysOfAll(c.env, tenant, limit + 1);
  } catch (error) {
    // the buckets' metrics still answer: a D1 outage must not take them down with the key list
    console.error("listing flow keys for the metrics failed", error);
    return { tenant, keys: [], truncated: false, listFailed: true };
  }
  const keys = await Promise.all(
    listed.slice(0, limit).map((key) =>
      flowKeyOf(c.env, tenant, key)
        .view()
        .then(
          (view) => ({ key, view }),
          (error: unknown) => {
            console.error(`reading flow key ${key} for the metrics failed`, error);
            return { key, view: null };
          },
        ),
    ),
  );
  return { tenant, keys, truncated: listed.length > limit, listFailed: false };
}
