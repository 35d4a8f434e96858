/**
 * Delivery to a handler Worker over its service binding: one RPC, `deliver(delivery)`, per
 * attempt, its answer classified like an HTTP answer (core/response.ts). No signature: the
 * binding itself is the authentication. The grant is checked again here, so a Worker withdrawn
 * from a tenant by a deploy is never called for that tenant's jobs.
 */
import { HANDLER_METHOD, type HandlerDelivery } from "../../packages/handler/src/protocol";
import type { Config } from "../config";
import { grantedBinding } from "../core/handler-workers";
import type { WorkerTarget } from "../core/job";
import { classifyHandlerResult, type DeliveryOutcome, excerpt } from "../core/response";
import type { AttemptTrace } from "../core/trace";
import { toRfc3339 } from "../core/when";

export interface WorkerDelivery {
  executionId: string;
  jobId: string;
  tenant: string;
  attempt: number;
  dueAt: number;
  target: WorkerTarget;
  timeoutMs: number;
  /** the attempt's W3C trace headers, when the job has a trace */
  trace?: AttemptTrace | null;
}

type HandlerStub = { [HANDLER_METHOD]: (delivery: HandlerDelivery) => Promise<unknown> };

export async function deliverToWorker(delivery: WorkerDelivery, env: Env, config: Config): Promise<DeliveryOutcome> {
  const { target } = delivery;
  const binding = grantedBinding(config.HANDLER_WORKERS, delivery.tenant, target.worker);
  if (binding === null) {
    return {
      kind: "failed",
      failure: "permanent",
      httpStatus: null,
      error: `handler Worker "${target.worker}" is not granted to this tenant`,
    };
  }
  // own properties only: a binding named "constructor" or "toString" must not reach Object's
  const bindings = env as unknown as Record<string, HandlerStub | undefined>;
  const stub = Object.hasOwn(bindings, binding) ? bindings[binding] : undefined;
  if (!stub) {
    // the binding's name is the operator's business: the tenant's attempt says only that it is missing
    console.error(`handler Worker "${target.worker}" names binding ${binding}, which this deployment does not have`);
    return {
      kind: "failed",
      failure: "permanent",
      httpStatus: null,
      error: `handler Worker "${target.worker}" is not bound in this deployment`,
    };
  }
  const call: HandlerDelivery = {
    executionId: delivery.executionId,
    jobId: delivery.jobId,
    tenant: delivery.tenant,
    attempt: delivery.attempt,
    dueAt: toRfc3339(delivery.dueAt),
    payload: target.payload === null ? null : JSON.parse(target.payload),
    ...(delivery.trace ? delivery.trace : {}),
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), delivery.timeoutMs);
  });
  try {
    // an RPC cannot be cancelled: past the timeout the attempt is failed and the call left to end
    const result = await Promise.race([stub[HANDLER_METHOD](call), timedOut]);
    if (result === "timeout") {
      return { kind: "failed", failure: "retryable", httpStatus: null, error: `timeout after ${delivery.timeoutMs} ms` };
    }
    return classifyHandlerResult(result);
  } catch (error) {
    // a throw is like a 5xx: retried; only its message crosses the binding
    const message = error instanceof Error ? error.message : String(error);
    return { kind: "failed", failure: "retryable", httpStatus: null, error: excerpt(`the handler threw: ${message}`) };
  } finally {
    clearTimeout(timer);
  }
}
