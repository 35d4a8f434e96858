/**
 * Verifies deliveries from edge-scheduler, signed per Standard Webhooks. The HMAC check is the
 * standardwebhooks package's; this module adds what it leaves out: a stricter time window, rotation
 * across several secrets, replay detection, any body (empty or not JSON) and reading the raw body
 * from Fetch and Node requests.
 *
 * Only webhook-id, webhook-timestamp and the body are signed: x-scheduler-attempt and
 * x-scheduler-job-id are informational.
 */

import type { IncomingMessage } from "node:http";
import { WebhookVerificationError as StandardWebhookError, Webhook, type WebhookUnbrandedRequiredHeaders } from "standardwebhooks";

export interface Delivery<T = unknown> {
  /** webhook-id: the same for every attempt of one execution, so use it as your idempotency key */
  executionId: string;
  /** x-scheduler-job-id (unsigned) */
  jobId: string | null;
  /** x-scheduler-attempt, 1-based (unsigned; 1 when absent) */
  attempt: number;
  /** webhook-timestamp: when this attempt was sent */
  timestamp: Date;
  /** the parsed JSON; null for an empty body; the text itself when it is not JSON */
  body: T;
  rawBody: string;
}

export type VerificationFailure = "missing_headers" | "invalid_headers" | "stale" | "bad_signature" | "replayed";

/**
 * The delivery is not authentic or not acceptable: answer 401 (a 4xx fails the attempt for good);
 * but answer `replayed` with a 5xx: a genuine duplicate is then retried, with a new timestamp.
 */
export class WebhookVerificationError extends Error {
  readonly code: VerificationFailure;

  constructor(code: VerificationFailure, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.code = code;
  }
}

export interface ReceiverOptions {
  /** `whsec_<base64>`; during a rotation give the current and the next secret: either one verifies */
  secret: string | string[];
  /** how far webhook-timestamp may be from now, either way; at most (and by default) 300 */
  toleranceSeconds?: number;
  /**
   * Returns true if this key was seen before (and should remember it). The key is
   * `${webhookId}.${timestamp}`: a retry carries a new timestamp, so it is not a replay.
   */
  replayGuard?: (key: string) => boolean | Promise<boolean>;
  /**
   * Milliseconds since the epoch, for tests. Only the tolerance check uses it: standardwebhooks
   * itself still refuses timestamps more than 5 minutes from the system clock.
   */
  now?: () => number;
}

export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

/** standardwebhooks checks its own fixed window, so a wider one would never be honoured */
const MAX_TOLERANCE_SECONDS = 5 * 60;

const SIGNED_HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature"] as const;

const BODY_CONSUMED =
  "verifyNode: the request body was already read (e.g. parsed by express.json()), and the signature covers the raw body. " +
  'Mount express.raw({ type: "*/*" }) on this route instead, or keep the raw body as req.rawBody.';

export class Receiver {
  readonly #webhooks: Webhook[];
  readonly #toleranceSeconds: number;
  readonly #replayGuard: ReceiverOptions["replayGuard"];
  readonly #now: () => number;

  constructor(options: ReceiverOptions) {
    const secrets = typeof options.secret === "string" ? [options.secret] : options.secret;
    if (secrets.length === 0) throw new TypeError("Receiver: give at least one secret");
    const tolerance = options.toleranceSeconds ?? MAX_TOLERANCE_SECONDS;
    if (!(tolerance >= 0 && tolerance <= MAX_TOLERANCE_SECONDS)) {
      throw new RangeError(`Receiver: toleranceSeconds must be between 0 and ${MAX_TOLERANCE_SECONDS}, got ${tolerance}`);
    }
    this.#webhooks = secrets.map((secret) => new Webhook(secret));
    this.#toleranceSeconds = tolerance;
    this.#replayGuard = options.replayGuard;
    this.#now = options.now ?? Date.now;
  }

  /** `T` is not checked: validate the body yourself. */
  async verify<T = unknown>(rawBody: string | Uint8Array, headers: HeaderSource): Promise<Delivery<T>> {
    const header = headerLookup(headers);
    const signed = signedHeaders(header);
    const seconds = parseTimestamp(signed["webhook-timestamp"]);
    const attempt = parseAttempt(header("x-scheduler-attempt"));
    this.#checkFreshness(seconds);
    const text = typeof rawBody === "string" ? rawBody : utf8().decode(rawBody);
    this.#checkSignature(text, signed);
    const id = signed["webhook-id"];
    // only after the signature, so forged requests cannot fill the guard's store
    if (this.#replayGuard && (await this.#replayGuard(`${id}.${seconds}`))) {
      throw new WebhookVerificationError("replayed", `delivery ${id} with webhook-timestamp ${seconds} was already received`);
    }
    return {
      executionId: id,
      jobId: header("x-scheduler-job-id") ?? null,
      attempt,
      timestamp: new Date(seconds * 1000),
      body: parseBody(text) as T,
      rawBody: text,
    };
  }

  /** For a Fetch Request (Workers, Hono's c.req.raw, Next.js route handlers, Deno, Bun); reads its body. */
  async verifyRequest<T = unknown>(request: Request): Promise<Delivery<T>> {
    if (request.bodyUsed) {
      throw new TypeError("verifyRequest: the request body was already read; verify before reading it, or call verify(rawBody, headers)");
    }
    // bytes, not text(): text() drops a leading byte order mark, which the signature covers
    return this.verify<T>(new Uint8Array(await request.arrayBuffer()), request.headers);
  }

  /** For a node:http request (plain node:http, Express, Next.js API routes with bodyParser: false); reads its body unless a framework kept it raw. */
  async verifyNode<T = unknown>(req: IncomingMessage): Promise<Delivery<T>> {
    return this.verify<T>(await readNodeBody(req), req.headers);
  }

  #checkFreshness(seconds: number): void {
    const age = Math.floor(this.#now() / 1000) - seconds;
    if (Math.abs(age) <= this.#toleranceSeconds) return;
    const when = age > 0 ? `${age} s old` : `${-age} s in the future`;
    throw new WebhookVerificationError("stale", `webhook-timestamp is ${when}; the tolerance is ${this.#toleranceSeconds} s`);
  }

  #checkSignature(text: string, signed: WebhookUnbrandedRequiredHeaders): void {
    for (const webhook of this.#webhooks) {
      try {
        webhook.verify(text, signed, { jsonParse: false }); // any text is a valid body: parseBody reads it
        return;
      } catch (error) {
        if (!(error instanceof StandardWebhookError)) throw error;
        // headers and our window were checked first, so the library refuses either the signature
        // or a timestamp outside its own 5 minutes of the system clock (when `now` is another clock)
        if (/timestamp/i.test(error.message)) {
          throw new WebhookVerificationError("stale", `standardwebhooks: ${error.message} (it allows 5 minutes around the system clock)`);
        }
      }
    }
    const secrets = this.#webhooks.length === 1 ? "the secret" : `any of the ${this.#webhooks.length} secrets`;
    throw new WebhookVerificationError("bad_signature", `no webhook-signature entry matches the body signed with ${secrets}`);
  }
}

/** What verifyWebhook needs of a Hono context, typed structurally so this package does not load hono. */
export interface HonoContext {
  req: { raw: Request };
  set(key: "delivery", value: Delivery): void;
  json(body: { error: VerificationFailure; message: string }, status: 401 | 503): Response;
}

/**
 * Hono middleware: sets c.get("delivery") (declare `Variables: { delivery: Delivery }`), or answers
 * 401 `{ error, message }`; a replay is answered 503, so that if it was a genuine duplicate sent
 * within the same second the scheduler retries it (with a new timestamp) instead of failing the
 * execution for good on a 4xx. Other errors (a body read before it) go to the app's error handler.
 */
export function verifyWebhook(options: ReceiverOptions) {
  const receiver = new Receiver(options);
  return async (c: HonoContext, next: () => Promise<void>): Promise<Response | undefined> => {
    try {
      c.set("delivery", await receiver.verifyRequest(c.req.raw));
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      return c.json({ error: error.code, message: error.message }, error.code === "replayed" ? 503 : 401);
    }
    await next();
  };
}

/** A UTF-8 decoder that keeps a leading byte order mark: the scheduler signs the body with it. */
function utf8() {
  return new TextDecoder("utf-8", { ignoreBOM: true });
}

type HeaderLookup = (name: string) => string | undefined;

function headerLookup(headers: HeaderSource): HeaderLookup {
  if (headers instanceof Headers) return (name) => headers.get(name) ?? undefined;
  // repeated lines: only webhook-signature is expected to repeat, and its entries are space-separated
  const byName = new Map(
    Object.entries(headers).map(([name, value]) => [name.toLowerCase(), Array.isArray(value) ? value.join(" ") : value]),
  );
  return (name) => byName.get(name) || undefined;
}

function signedHeaders(header: HeaderLookup): WebhookUnbrandedRequiredHeaders {
  const id = header("webhook-id");
  const timestamp = header("webhook-timestamp");
  const signature = header("webhook-signature");
  if (!id || !timestamp || !signature) {
    const missing = SIGNED_HEADERS.filter((name) => !header(name));
    throw new WebhookVerificationError("missing_headers", `missing header: ${missing.join(", ")}`);
  }
  return { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature };
}

function parseTimestamp(value: string): number {
  if (!/^\d+$/.test(value)) {
    throw new WebhookVerificationError("invalid_headers", "webhook-timestamp must be whole seconds since the epoch");
  }
  return Number(value);
}

function parseAttempt(value: string | undefined): number {
  if (value === undefined) return 1;
  if (!/^[1-9]\d*$/.test(value)) throw new WebhookVerificationError("invalid_headers", "x-scheduler-attempt must be a positive integer");
  return Number(value);
}

function parseBody(text: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    return text; // the target's body may be any text
  }
}

/** Frameworks that keep the raw body put it in req.rawBody, or in req.body with express.raw/express.text. */
type NodeRequest = IncomingMessage & { rawBody?: unknown; body?: unknown };

async function readNodeBody(req: NodeRequest): Promise<string | Uint8Array> {
  for (const kept of [req.rawBody, req.body]) {
    if (typeof kept === "string" || kept instanceof Uint8Array) return kept;
  }
  if (req.readableDidRead) throw new TypeError(BODY_CONSUMED);
  const decoder = utf8();
  let text = "";
  for await (const chunk of req as AsyncIterable<Uint8Array | string>) {
    text += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}
