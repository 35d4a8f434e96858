/** The OpenAPI entries of alerts.ts. */

import { AlertTargetInput } from "../../schemas/job-input";
import { AlertTargetView } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, json, jsonBody } from "../route-doc";

export const ALERT_ROUTES: ApiRoute[] = [
  {
    method: "put",
    path: "/v1/alerts",
    operationId: "setAlertTarget",
    summary:
      "Set the tenant's alert target: its dead executions and (with throttledForMs) its throttled flow keys, as signed digests (docs/alerts.md)",
    request: { ...jsonBody(AlertTargetInput) },
    responses: { 200: json(AlertTargetView, "the alert target"), ...BODY_ERRORS },
  },
  {
    method: "get",
    path: "/v1/alerts",
    operationId: "getAlertTarget",
    summary: "The tenant's alert target",
    responses: { 200: json(AlertTargetView, "the alert target"), 404: error("no alert target is set") },
  },
  {
    method: "delete",
    path: "/v1/alerts",
    operationId: "deleteAlertTarget",
    summary: "Remove the tenant's alert target (deaths waiting for a digest are dropped)",
    responses: { 204: { description: "removed (or there was none)" } },
  },
];
