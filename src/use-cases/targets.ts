/** A job's target and callbacks, and a tenant's alert target, validated by one set of rules: every refusal names its field. */
import type { Config } from "../config";
import { grantedBinding } from "../core/handler-workers";
import { type CallbackTarget, isHttpTarget, isPullTarget, isReservedHeader, LIMITS, type Target } from "../core/job";
import { checkTargetUrl } from "../core/target-policy";
import type { CreateJobInput } from "../schemas/job-input";
import { ApiError } from "./errors";

const encoder = new TextEncoder();

const HTTP_FIELDS = ["method", "headers", "body"] as const;

const TARGET_KINDS = ["url", "worker", "pull"] as const;

/** An HTTP target (url), a handler Worker (worker) or a pull queue (pull), never a mix; every refusal names its field. */
export function targetOf(
  input: CreateJobInput["target"],
  ctx: { config: Config; tenant: string },
  field: (name: string) => string,
  kept: Record<string, string>,
  name: "target" | "callback" | "failureCallback" | "alert" = "target",
): Target {
  const kinds = TARGET_KINDS.filter((kind) => input[kind] !== undefined);
  if (kinds.length > 1) {
    throw new ApiError(
      "invalid_field",
      "give one of url (an HTTP target), worker (a handler Worker) and pull (a pull queue), not several",
      field(`${name}.${kinds[1]}`),
    );
  }
  if (input.worker !== undefined || input.pull !== undefined) {
    const http = HTTP_FIELDS.find((f) => input[f] !== undefined);
    if (http) throw new ApiError("invalid_field", `${name}.${http} applies to HTTP targets (url) only`, field(`${name}.${http}`));
  }
  if (input.pull !== undefined) return { pull: input.pull, payload: jsonTextOf(input.payload, field(`${name}.payload`)) };
  if (input.worker !== undefined) {
    if (grantedBinding(ctx.config.HANDLER_WORKERS, ctx.tenant, input.worker) === null) {
      // the same answer for a Worker that exists but is not granted: grants are not disclosed
      throw new ApiError(
        "invalid_field",
        `${name}.worker: no handler Worker "${input.worker}" is granted to your tenant`,
        field(`${name}.worker`),
      );
    }
    return { worker: input.worker, payload: jsonTextOf(input.payload, field(`${name}.payload`)) };
  }
  if (input.url === undefined) {
    throw new ApiError(
      "invalid_field",
      `${name}.url: give url (an HTTP target), worker (a handler Worker) or pull (a pull queue)`,
      field(`${name}.url`),
    );
  }
  if (input.payload !== undefined) {
    throw new ApiError(
      "invalid_field",
      `${name}.payload applies to handler Worker and pull targets only; an HTTP target sends body`,
      field(`${name}.payload`),
    );
  }
  const verdict = checkTargetUrl(input.url, ctx.config.ALLOW_LOOPBACK_TARGETS);
  if (!verdict.ok) throw new ApiError("invalid_field", `${name}.url ${verdict.reason}`, field(`${name}.url`));
  const method = input.method ?? "POST";
  const headers: Record<string, string> = {};
  for (const [header, value] of Object.entries(input.headers ?? {})) {
    if (isReservedHeader(header) && kept[header] !== value) {
      throw new ApiError(
        "invalid_field",
        `header "${header}" is reserved: the scheduler or the connection sets it`,
        field(`${name}.headers.${header}`),
      );
    }
    headers[header] = value;
  }
  let body: string | null = null;
  if (input.body !== undefined && input.body !== null) {
    if (method === "GET") throw new ApiError("invalid_field", "a GET request carries no body", field(`${name}.body`));
    body = typeof input.body === "string" ? input.body : JSON.stringify(input.body);
    if (typeof input.body !== "string" && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
      headers["content-type"] = "application/json";
    }
    if (encoder.encode(body).byteLength > LIMITS.bodyBytes) {
      throw new ApiError("invalid_field", `${name}.body is larger than ${LIMITS.bodyBytes} bytes`, field(`${name}.body`));
    }
  }
  return { url: verdict.url.toString(), method, headers, body };
}

/** A payload as JSON text (null for none), at most LIMITS.bodyBytes. */
function jsonTextOf(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  const text = JSON.stringify(value);
  if (encoder.encode(text).byteLength > LIMITS.bodyBytes) {
    throw new ApiError("invalid_field", `${name} is larger than ${LIMITS.bodyBytes} bytes`, name);
  }
  return text;
}

/** A tenant's alert target (PUT /v1/alerts): a URL by a job target's rules; errors name the body's fields. */
export function alertTargetOf(
  input: { url: string; headers?: Record<string, string> | undefined; throttledForMs?: number | null | undefined },
  ctx: { config: Config; tenant: string },
) {
  const target = targetOf(input, ctx, (name) => name.replace(/^alert\./, ""), {}, "alert");
  if (!isHttpTarget(target)) throw new ApiError("invalid_field", "url: give a URL", "url");
  return { url: target.url, headers: target.headers, throttledForMs: input.throttledForMs ?? null };
}

/** A callback target (core/callback.ts): a URL or a handler Worker, by the target's rules; none when not given. */
export function callbackOf(
  input: CreateJobInput["callback"],
  ctx: { config: Config; tenant: string },
  field: (name: string) => string,
  name: "callback" | "failureCallback",
): CallbackTarget | null {
  if (input === undefined || input === null) return null;
  const target = targetOf(input, ctx, field, {}, name);
  if (isPullTarget(target)) throw new ApiError("invalid_field", `${name}: give url or worker`, field(`${name}.url`));
  return target;
}
