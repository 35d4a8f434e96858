/** The OpenAPI entries of metrics.ts. */

import { Metrics } from "../../schemas/responses";
import { type ApiRoute, json } from "../route-doc";

export const METRICS_ROUTES: ApiRoute[] = [
  {
    method: "get",
    path: "/v1/metrics",
    operationId: "getMetrics",
    summary: "Counters, dead by reason, fire lag and flow-control keys of your tenant",
    responses: { 200: json(Metrics, "the metrics") },
  },
  {
    method: "get",
    path: "/metrics",
    operationId: "getPrometheusMetrics",
    summary: "The metrics in Prometheus text format",
    responses: { 200: { description: "Prometheus text format 0.0.4", content: { "text/plain": { schema: { type: "string" } } } } },
  },
];
