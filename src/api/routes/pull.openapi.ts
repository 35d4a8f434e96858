/** The OpenAPI entries of pull.ts. */
import { z } from "zod";
import { PullFailInput, PullLeaseInput } from "../../schemas/requests";
import { PullHeartbeatView, PullLeasesView, PullQueueStatusView, PullReportView } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, json, jsonBody } from "../route-doc";

const pullQueue = z.object({ queue: z.string().meta({ description: "the pull queue's name (lower case letters, digits, - and _)" }) });
const pullToken = z.object({ token: z.string().meta({ description: "a lease token from POST /v1/pull/{queue}/lease" }) });
const STALE_LEASE = error(
  "stale_lease: the lease is no longer yours (it expired, and the execution may run again elsewhere, or it was already reported); the rejection is counted",
);

export const PULL_ROUTES: ApiRoute[] = [
  {
    method: "post",
    path: "/v1/pull/{queue}/lease",
    operationId: "leasePull",
    summary: "A pull worker leases due executions of a pull queue (long polling with waitMs)",
    request: { params: pullQueue, ...jsonBody(PullLeaseInput.meta({ id: "PullLeaseRequest" }), false) },
    responses: {
      200: json(PullLeasesView, "the leases granted, oldest due first (none when nothing was due within waitMs)"),
      ...BODY_ERRORS,
    },
  },
  {
    method: "get",
    path: "/v1/pull/{queue}",
    operationId: "getPullQueue",
    summary: "How much waits in a pull queue",
    request: { params: pullQueue },
    responses: { 200: json(PullQueueStatusView, "the queue"), 400: BODY_ERRORS[400] },
  },
  {
    method: "post",
    path: "/v1/pull/leases/{token}/heartbeat",
    operationId: "heartbeatPullLease",
    summary: "Extend a lease by its length",
    request: { params: pullToken },
    responses: { 200: json(PullHeartbeatView, "extended"), 400: BODY_ERRORS[400], 409: STALE_LEASE },
  },
  {
    method: "post",
    path: "/v1/pull/leases/{token}/complete",
    operationId: "completePullLease",
    summary: "Report the attempt succeeded",
    request: { params: pullToken },
    responses: { 200: json(PullReportView, "recorded"), 400: BODY_ERRORS[400], 409: STALE_LEASE },
  },
  {
    method: "post",
    path: "/v1/pull/leases/{token}/fail",
    operationId: "failPullLease",
    summary: "Report the attempt failed: retried with the job's backoff, or dead when not retryable or out of attempts",
    request: { params: pullToken, ...jsonBody(PullFailInput.meta({ id: "PullFailure" }), false) },
    responses: { 200: json(PullReportView, "recorded"), ...BODY_ERRORS, 409: STALE_LEASE },
  },
];
