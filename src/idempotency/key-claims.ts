/**
 * The callers' side of IdempotencyKeys (idempotency-keys.ts): which object holds a key, and claims
 * grouped by it. Apart from the object so that request code (and its unit tests) need not load a
 * Durable Object class.
 */
import { bucketOf } from "../core/bucketing";
import { objectOf } from "../placement";

/** A tenant's keys are spread over this many objects. Never change it: a key's home would move. */
export const KEY_SLOTS = 64;

export interface KeyClaim {
  key: string;
  jobId: string;
  requestHash: string;
}

/** Who owns a key: the job it names, the hash of the request that created it, and when it was claimed. */
export interface KeyOwner {
  key: string;
  jobId: string;
  requestHash: string;
  claimedAt: number;
}

/** The object of a tenant's key. */
export function idempotencyKeysOf(env: Env, tenant: string, key: string) {
  return objectOf(env, env.IDEMPOTENCY_KEYS, `${tenant}\n${keySlot(key)}`);
}

/** A key's slot: a stable hash of it. */
export function keySlot(key: string): number {
  return bucketOf(key, KEY_SLOTS);
}

/** Claims keys with as few requests as there are slots among them; the owner of each key, in any order. */
export async function claimKeys(env: Env, tenant: string, claims: KeyClaim[], now: number): Promise<KeyOwner[]> {
  const bySlot = Map.groupBy(claims, (c) => keySlot(c.key));
  const answers = await Promise.all([...bySlot.values()].map((group) => idempotencyKeysOf(env, tenant, group[0]!.key).claim(group, now)));
  return answers.flat();
}

/** Releases keys claimed for jobs that were not stored (IdempotencyKeys.release), grouped by slot. */
export async function releaseKeys(env: Env, tenant: string, keys: { key: string; jobId: string }[]): Promise<void> {
  const bySlot = Map.groupBy(keys, (k) => keySlot(k.key));
  await Promise.all([...bySlot.values()].map((group) => idempotencyKeysOf(env, tenant, group[0]!.key).release(group)));
}
