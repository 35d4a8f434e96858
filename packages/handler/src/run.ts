/**
 * The conversion at the heart of the kit, free of "cloudflare:workers" (so it runs and is tested
 * anywhere): a handler's return or throw becomes the HandlerResult the scheduler reads. It is done
 * inside the handler Worker because only an error's message survives RPC, not its class.
 */
import type { HandlerDelivery, HandlerResult } from "./protocol.ts";

/** What a handler does with one attempt: return (optionally a short detail) to succeed, throw to fail. */
// biome-ignore lint/suspicious/noConfusingVoidType: void, not undefined, so `async handle() {}` (Promise<void>) is a Handle
export type Handle<Payload = unknown> = (delivery: HandlerDelivery<Payload>) => Promise<void | string> | void | string;

const PERMANENT = Symbol.for("edge-scheduler-handler.PermanentError");
const RETRY_LATER = Symbol.for("edge-scheduler-handler.RetryLater");

/** Throw to fail the execution at once, with no more attempts (dead, reason "permanent"), like a 4xx. */
export class PermanentError extends Error {
  readonly [PERMANENT] = true;
  override name = "PermanentError";
}

/** Throw to have the attempt retried with the job's backoff, no sooner than `afterMs` if given. */
export class RetryLater extends Error {
  readonly [RETRY_LATER] = true;
  override name = "RetryLater";
  readonly afterMs: number | undefined;
  constructor(message: string, options: { afterMs?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.afterMs = options.afterMs;
  }
}

// Branded by a registered symbol rather than instanceof alone: two bundled copies of the kit
// still recognise each other's errors.
function isPermanent(error: unknown): error is PermanentError {
  return error instanceof PermanentError || (error instanceof Error && PERMANENT in error);
}

function isRetryLater(error: unknown): error is RetryLater {
  return error instanceof RetryLater || (error instanceof Error && RETRY_LATER in error);
}

/** An error's message (its name when the message is empty), or the thrown value as text. */
function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

/**
 * Runs `handle` for one attempt and says how it went: a return is success (a string returned is
 * kept as the detail); PermanentError → permanent; RetryLater → retry (with retryAfterMs when
 * it gave a finite afterMs ≥ 0); any other throw → retry with its message, and logged with its
 * stack (console.error), since the stack does not travel back to the scheduler.
 */
export async function runHandler<Payload>(handle: Handle<Payload>, delivery: HandlerDelivery<Payload>): Promise<HandlerResult> {
  try {
    const detail = await handle(delivery);
    return typeof detail === "string" ? { outcome: "succeeded", detail } : { outcome: "succeeded" };
  } catch (error) {
    if (isPermanent(error)) return { outcome: "permanent", error: messageOf(error) };
    if (isRetryLater(error)) {
      const afterMs = error.afterMs;
      return afterMs !== undefined && Number.isFinite(afterMs) && afterMs >= 0
        ? { outcome: "retry", error: messageOf(error), retryAfterMs: Math.ceil(afterMs) }
        : { outcome: "retry", error: messageOf(error) };
    }
    console.error(`handler failed: execution ${delivery.executionId} attempt ${delivery.attempt}`, error);
    return { outcome: "retry", error: messageOf(error) };
  }
}
