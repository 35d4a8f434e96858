/**
 * Delivery to an HTTP target, signed per Standard Webhooks: webhook-id is the execution id,
 * stable across attempts and duplicate deliveries (invariant 5), so receivers can dedupe on it.
 */

import type { HttpTarget } from "../core/job";
import { classifyStatus, type DeliveryOutcome, EXCERPT_LENGTH, excerpt, parseRetryAfterMs } from "../core/response";
import { sign } from "../core/signing";
import type { AttemptTrace } from "../core/trace";

export interface Delivery {
  executionId: string;
  jobId: string;
  attempt: number;
  target: HttpTarget;
  timeoutMs: number;
  /** the attempt's W3C trace headers (core/trace.ts), when the job has a trace */
  trace?: AttemptTrace | null;
}

/** Calls the target once; `keys` are the tenant's active signing keys (two during a rotation). */
export async function deliver(delivery: Delivery, keys: CryptoKey[], now: number): Promise<DeliveryOutcome> {
  const method = delivery.target.method;
  let request: Request;
  try {
    const body = delivery.target.body ?? "";
    const timestamp = Math.floor(now / 1000);
    const headers = new Headers(delivery.target.headers);
    const signatures = await Promise.all(keys.map((key) => sign(key, delivery.executionId, timestamp, body)));
    headers.set("webhook-id", delivery.executionId);
    headers.set("webhook-timestamp", String(timestamp));
    headers.set("webhook-signature", signatures.join(" "));
    headers.set("idempotency-key", delivery.executionId);
    headers.set("x-scheduler-attempt", String(delivery.attempt));
    headers.set("x-scheduler-job-id", delivery.jobId);
    if (delivery.trace) {
      // the job's trace wins over headers of its own: a tracestate belongs to its traceparent
      headers.set("traceparent", delivery.trace.traceparent);
      if (delivery.trace.tracestate !== undefined) headers.set("tracestate", delivery.trace.tracestate);
      else headers.delete("tracestate");
    }
    if (!headers.has("user-agent")) headers.set("user-agent", "edge-scheduler/1");
    request = new Request(delivery.target.url, {
      method,
      headers,
      body: method === "GET" || delivery.target.body === null ? undefined : body,
      redirect: "manual", // a redirect is an answer, never followed (it could point anywhere)
    });
  } catch (error) {
    // validation at the door should make this impossible; if it happens, retrying cannot help
    const message = error instanceof Error ? error.message : String(error);
    return { kind: "failed", failure: "permanent", httpStatus: null, error: excerpt(`the request could not be built: ${message}`) };
  }
  try {
    const response = await fetch(request, { signal: AbortSignal.timeout(delivery.timeoutMs) });
    // read even a success's body: a body read to its end keeps the connection for the next
    // delivery (measured: cancelling it cost 30% more CPU per delivery in the burst bench)
    const text = await readExcerpt(response);
    const verdict = classifyStatus(response.status);
    if (verdict === "succeeded") return { kind: "succeeded", httpStatus: response.status, excerpt: text };
    const retryAfterMs = parseRetryAfterMs(response.headers.get("retry-after"), Date.now());
    return {
      kind: "failed",
      failure: verdict,
      httpStatus: response.status,
      error: excerpt(`HTTP ${response.status}${text ? `: ${text}` : ""}`),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
  } catch (error) {
    const name = error instanceof Error ? error.name : "";
    const message = error instanceof Error ? error.message : String(error);
    const timedOut = name === "TimeoutError" || name === "AbortError";
    return {
      kind: "failed",
      failure: "retryable",
      httpStatus: null,
      error: excerpt(timedOut ? `timeout after ${delivery.timeoutMs} ms` : `network error: ${message}`),
    };
  }
}

/** Reads about EXCERPT_LENGTH bytes of a body and drops the rest unread. */
async function readExcerpt(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < EXCERPT_LENGTH) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  const all = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    all.set(c, offset);
    offset += c.byteLength;
  }
  return excerpt(new TextDecoder().decode(all));
}
