/** Flow control: one key of the caller's tenant, read, paused, resumed, its limits changed. Documented in flow-control.openapi.ts. */
import { type Context, Hono } from "hono";
import { configOf } from "../../config";
import type { FlowKeyView } from "../../core/flow";
import { isOriginKey, ORIGIN_KEY_PREFIX } from "../../core/origin-key";
import { type FlowKeyControl, flowKeyOf, originKeyControl } from "../../flow/flow-key";
import { FlowKeyName, FlowLimitsInput } from "../../schemas/job-input";
import type { FlowKeyView as FlowKeyResponse } from "../../schemas/responses";
import { ApiError, fromZodError } from "../../use-cases/errors";
import type { ApiEnv } from "../context";
import { limit, readJson, SINGLE_BODY_BYTES } from "../request";

export const flowControl = new Hono<ApiEnv>();

flowControl.get("/v1/flow-control/:key", async (c) => c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).view())));
flowControl.post("/v1/flow-control/:key/pause", async (c) =>
  c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).setPaused(true))),
);
flowControl.post("/v1/flow-control/:key/resume", async (c) =>
  c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).setPaused(false))),
);
flowControl.patch("/v1/flow-control/:key", limit(SINGLE_BODY_BYTES), async (c) => {
  const parsed = FlowLimitsInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  const { rate, periodSeconds, parallelism } = parsed.data;
  const change = {
    ...(rate === undefined ? {} : { rate }),
    ...(parallelism === undefined ? {} : { parallelism }),
    ...(periodSeconds === undefined ? {} : { periodMs: periodSeconds * 1_000 }),
  };
  return c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).changeLimits(change)));
});

/** A key of the caller's tenant: a job's own, or an origin's as encodeURIComponent("origin:https://api.example.com") spells it. */
function flowKeyStub(c: Context<ApiEnv>): FlowKeyControl {
  const name = c.req.param("key") ?? "";
  if (name.startsWith(ORIGIN_KEY_PREFIX)) {
    if (isOriginKey(name)) return originKeyControl(c.env, c.get("tenant"), name, configOf(c.env).ORIGIN_PARALLELISM);
    throw new ApiError(
      "invalid_field",
      `key: an origin key is "${ORIGIN_KEY_PREFIX}" and an origin: scheme://host[:port], lower case, no path, no default port`,
      "key",
    );
  }
  const key = FlowKeyName.safeParse(name);
  if (!key.success) throw fromZodError(key.error, "key");
  return flowKeyOf(c.env, c.get("tenant"), key.data);
}

/** A key's view as the API answers it (here and in the metrics). */
export function presentFlowKey(key: string, view: FlowKeyView): FlowKeyResponse {
  return {
    key,
    limits: {
      rate: view.limits.rate,
      periodSeconds: view.limits.periodMs / 1_000,
      parallelism: view.limits.parallelism,
      from: view.limitsFrom,
    },
    paused: view.paused,
    throttledUntil: view.throttledUntil === null ? null : new Date(view.throttledUntil).toISOString(),
    inFlight: view.inFlight,
    waiting: view.waiting,
    currentRate: view.currentRate,
    grantedTotal: view.grantedTotal,
    throttledTotal: view.throttledTotal,
  };
}
