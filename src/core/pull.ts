/**
 * Pull workers (DESIGN.md "Delivery modes"): a worker leases a pull queue's executions over HTTP
 * and reports on each with the lease token it got. The token is opaque to the worker but names
 * what the API must reach: the execution's bucket (the one owner of its lease), the execution,
 * and the bucket's lease token (fencing, invariant 3). Forging one is no help: the bucket checks
 * the token part against its live lease and the tenant against the execution's.
 */

import { idPattern } from "./id";

/** A pull queue's name: lower case letters, digits, - and _ (it is a path segment of the API). */
export const PULL_QUEUE_NAME = /^[a-z0-9][a-z0-9_-]*$/;

/** What a pull lease token carries. */
export interface PullLeaseRef {
  bucket: number;
  executionId: string;
  /** the bucket's lease token */
  token: string;
}

const TOKEN_SHAPE = new RegExp(`^plt_(\\d{1,6})_(${idPattern("exe")})_([0-9a-f-]{36})$`);

/** The worker's token: `plt_<bucket>_<execution id>_<lease token>` (no character needs escaping in a URL). */
export function encodePullToken(ref: PullLeaseRef): string {
  return `plt_${ref.bucket}_${ref.executionId}_${ref.token}`;
}

/** The token's parts, or null when it is not one this API handed out. */
export function decodePullToken(text: string): PullLeaseRef | null {
  const match = TOKEN_SHAPE.exec(text);
  if (!match) return null;
  return { bucket: Number(match[1]), executionId: match[2]!, token: match[3]! };
}

/** A pull queue object's name: one per tenant and queue (a queue name holds no newline). */
export function pullQueueName(tenant: string, queue: string): string {
  return `${tenant}\n${queue}`;
}
