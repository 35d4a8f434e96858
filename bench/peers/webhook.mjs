// What the peer's worker sends for each job with DELIVER=http: the request a webhook scheduler makes
// (src/consumer/webhook.ts), a JSON POST signed as Standard Webhooks specifies (HMAC-SHA256 of
// "<webhook-id>.<webhook-timestamp>.<body>" under the whsec_ secret's bytes, base64, "v1,"), so
// the peer pays for the same signing, request and answer as the scheduler does.
import { createHmac } from "node:crypto";

/**
 * The headers of one signed delivery.
 * @param {string} secret `whsec_<base64>`
 * @param {string} id the webhook-id (stable across a job's attempts)
 * @param {number} timestampSeconds epoch seconds
 * @param {string} body the exact bytes sent
 */
export function signedHeaders(secret, id, timestampSeconds, body) {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
  const signature = createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64");
  return {
    "content-type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": `v1,${signature}`,
  };
}

/**
 * POSTs `body` to `url` signed with `secret`, with the other headers the scheduler sends
 * (idempotency-key, the attempt, the job id); resolves once the answer is read, rejects on a
 * non-2xx answer or after `timeoutMs` (the job then fails and BullMQ retries it, as the scheduler
 * retries a failed attempt).
 * @param {{ url: string, secret: string, id: string, jobId: string, attempt: number, body: string, timeoutMs: number }} delivery
 */
export async function deliver({ url, secret, id, jobId, attempt, body, timeoutMs }) {
  const headers = {
    ...signedHeaders(secret, id, Math.floor(Date.now() / 1000), body),
    "idempotency-key": id,
    "x-scheduler-attempt": String(attempt),
    "x-scheduler-job-id": jobId,
    "user-agent": "bench-peers/1",
  };
  const res = await fetch(url, { method: "POST", headers, body, signal: AbortSignal.timeout(timeoutMs) });
  await res.text();
  if (!res.ok) throw new Error(`the target answered ${res.status}`);
}
