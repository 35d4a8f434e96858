/** The OpenAPI entries of flow-control.ts. */
import { z } from "zod";
import { FlowLimitsInput } from "../../schemas/job-input";
import { FlowKeyView } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, json, jsonBody } from "../route-doc";

const flowKey = z.object({
  key: z.string().meta({
    description: "a key of yours (letters, digits and . _ : @ -) or an origin's, URL-encoded: origin%3Ahttps%3A%2F%2Fapi.example.com",
  }),
});

export const FLOW_CONTROL_ROUTES: ApiRoute[] = [
  {
    method: "get",
    path: "/v1/flow-control/{key}",
    operationId: "getFlowKey",
    summary: "A flow-control key",
    request: { params: flowKey },
    responses: { 200: json(FlowKeyView, "the key"), 400: BODY_ERRORS[400] },
  },
  {
    method: "patch",
    path: "/v1/flow-control/{key}",
    operationId: "updateFlowKey",
    summary: "Change a key's limits live (null lifts one)",
    request: { params: flowKey, ...jsonBody(FlowLimitsInput.meta({ id: "FlowLimits" })) },
    responses: { 200: json(FlowKeyView, "the key"), ...BODY_ERRORS },
  },
  {
    method: "post",
    path: "/v1/flow-control/{key}/pause",
    operationId: "pauseFlowKey",
    summary: "Stop starting the key's executions",
    request: { params: flowKey },
    responses: { 200: json(FlowKeyView, "the key"), 400: BODY_ERRORS[400] },
  },
  {
    method: "post",
    path: "/v1/flow-control/{key}/resume",
    operationId: "resumeFlowKey",
    summary: "Start the key's executions again",
    request: { params: flowKey },
    responses: { 200: json(FlowKeyView, "the key"), 400: BODY_ERRORS[400] },
  },
];
