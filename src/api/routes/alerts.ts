/** The tenant's alert target (docs/alerts.md): its dead executions, as signed digests. Documented in alerts.openapi.ts. */
import { Hono } from "hono";
import { type AlertTarget, alertsOf } from "../../alerts/alerts";
import { configOf } from "../../config";
import { DIGEST_INTERVAL_MS, DIGEST_MAX_LISTED } from "../../core/alert";
import { AlertTargetInput } from "../../schemas/job-input";
import { ApiError, fromZodError } from "../../use-cases/errors";
import { alertTargetOf } from "../../use-cases/targets";
import type { ApiEnv } from "../context";
import { limit, readJson, SINGLE_BODY_BYTES } from "../request";

export const alerts = new Hono<ApiEnv>();

alerts.put("/v1/alerts", limit(SINGLE_BODY_BYTES), async (c) => {
  const parsed = AlertTargetInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  const tenant = c.get("tenant");
  const target = alertTargetOf(parsed.data, { config: configOf(c.env), tenant });
  await alertsOf(c.env, tenant).setTarget(tenant, target);
  return c.json(presentAlertTarget(target));
});

alerts.get("/v1/alerts", async (c) => {
  const target = await alertsOf(c.env, c.get("tenant")).target();
  if (!target) throw new ApiError("not_found", "no alert target is set", null);
  return c.json(presentAlertTarget(target));
});

alerts.delete("/v1/alerts", async (c) => {
  await alertsOf(c.env, c.get("tenant")).setTarget(c.get("tenant"), null);
  return c.body(null, 204);
});

function presentAlertTarget(target: AlertTarget) {
  return { ...target, digestIntervalMs: DIGEST_INTERVAL_MS, digestMaxListed: DIGEST_MAX_LISTED };
}
