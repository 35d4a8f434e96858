/**
 * A pull queue leases its offers from their buckets (pull-queue.ts take): one leaseOffered RPC per
 * bucket, answered within BUCKET_ANSWER_MS or skipped, and a late answer's leases given back.
 */
import type { ClaimResult, LeaseGrant } from "../bucket/protocol";
import { bucketObject } from "../placement";
import type { OfferRow } from "./offers";

/**
 * A bucket that does not answer within this is skipped by the request (its offers stay for a later
 * one); what it grants after is given back (askBucket).
 */
export const BUCKET_ANSWER_MS = 5_000;

/**
 * One bucket's answers for its offers; null each when it could not be asked (or did not answer in
 * BUCKET_ANSWER_MS: what it grants after that is given back, giveBack, and tracked in `lateAnswers`).
 */
export async function askBucket(
  env: Env,
  bucket: number,
  rows: OfferRow[],
  request: { tenant: string; queue: string; leaseMs: number },
  lateAnswers: Set<Promise<void>>,
): Promise<{ row: OfferRow; result: LeaseGrant | { ok: false } | null }[]> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let asked: Promise<ClaimResult[]> | undefined;
  try {
    asked = bucketObject(env, bucket).leaseOffered(
      rows.map((r) => ({
        executionId: r.execution_id,
        dueAt: r.due_at,
        tenant: request.tenant,
        queue: request.queue,
        leaseMs: request.leaseMs,
      })),
    );
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer in ${BUCKET_ANSWER_MS} ms`)), BUCKET_ANSWER_MS);
    });
    const results = await Promise.race([asked, timedOut]);
    return rows.map((row, i) => {
      const result = results[i];
      return { row, result: result?.ok ? result : { ok: false } };
    });
  } catch (error) {
    console.error(`pull queue: leasing from bucket ${bucket} failed`, error);
    if (asked) giveBack(env, bucket, request.tenant, asked, lateAnswers);
    return rows.map((row) => ({ row, result: null }));
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A bucket's answer that came after this queue stopped waiting for it: the leases it granted went
 * to no worker, and would expire having used an attempt each (issue 36 item 6). Each is given back
 * with its token (a wait report: fenced like any, invariant 3; the bucket offers it again at its
 * due time without using an attempt and tells this queue: bucket/outcomes.ts release). If that
 * fails too, the lease expires and the execution runs again (at-least-once).
 */
function giveBack(env: Env, bucket: number, tenant: string, asked: Promise<ClaimResult[]>, lateAnswers: Set<Promise<void>>): void {
  const given = asked
    .then(
      async (results) => {
        const granted = results.filter((r): r is LeaseGrant => r.ok);
        if (granted.length === 0) return;
        await bucketObject(env, bucket).complete(
          granted.map((g) => ({ executionId: g.executionId, token: g.token, tenant, outcome: { kind: "wait", retryAt: Date.now() } })),
        );
      },
      () => undefined, // no answer at all: nothing was granted
    )
    .catch((error: unknown) => console.error(`pull queue: giving back bucket ${bucket}'s late leases failed; they expire`, error));
  lateAnswers.add(given);
  void given.finally(() => lateAnswers.delete(given));
}
