// Types of receiver.mjs, for the TypeScript tests (the integration project does not read JS).

/** One request the receiver got, filled in as it happens. */
export interface Received {
  /** the request target as sent: pathname and query */
  path: string;
  method: string;
  /** with `record`: every header, repeated ones joined with ", " */
  headers?: Record<string, string>;
  /** the body as UTF-8 text */
  body: string;
  /** with `record`: the body's exact bytes */
  bodyBase64?: string;
  /** Date.now() when the request's headers arrived */
  at: number;
  webhookId: string;
  /** x-scheduler-attempt, 0 when absent */
  attempt: number;
  jobId: string;
  /** with `secret`: null when the Standard Webhooks signature verified, else why not */
  signatureError?: string | null;
  /** the status answered; null while pending or when the caller went away first */
  status: number | null;
  /** Date.now() when the answer was fully written; null while pending or when the caller went away first */
  completedAt: number | null;
  /** the caller went away before the answer was fully written (a timeout, a crash) */
  aborted: boolean;
}

/** A request kept by `record: true`. */
export interface Recorded extends Received {
  headers: Record<string, string>;
  bodyBase64: string;
}

/** How to answer one request. */
export interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
  /** answer this long after the body arrived (a slow or hanging target) */
  afterMs?: number;
}

export interface ReceiverOptions {
  /** default 0: any free port */
  port?: number;
  /** called once per request after its body arrived; default: byPath() */
  respond?: (request: Received) => Answer;
  /** keep every request in `received`, with headers and exact bytes, and serve them at GET /__requests?path=<prefix> */
  record?: boolean;
  /** a whsec_ secret: verify each request's signature into `signatureError` */
  secret?: string;
  /** called once per request when its body arrived (or the caller went away mid-body), before it is answered */
  onRequest?: (request: Received) => void;
  /** called once per answer fully written */
  onAnswered?: (request: Received) => void;
}

export interface Receiver {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  /** with `record`: every request in arrival order; else empty */
  received: Recorded[];
  /** closes this receiver's connections and pending answers, then its listening socket */
  stop(): Promise<void>;
}

export function startReceiver(options?: ReceiverOptions): Promise<Receiver>;

/**
 * Behaviour by path: /fail/<status>[?retryAfter=<s>], /hang/<ms> (200 after ms), /flaky/<n>
 * (503 n times per path and query, then 200); anything else 200.
 */
export function byPath(): (request: Received) => Answer;

export const OK: Answer;
