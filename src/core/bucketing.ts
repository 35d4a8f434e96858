/** Stable partitioning: a job and all its executions live in bucket fnv1a(jobId) mod buckets. */
export function bucketOf(jobId: string, buckets: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < jobId.length; i++) {
    hash ^= jobId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % buckets;
}

/**
 * A job's bucket hashes the random part of its id, which its executions' ids share
 * (core/id.ts), so an execution id alone names its bucket.
 */
export function bucketOfJob(jobId: string, buckets: number): number {
  return bucketOf(jobId.slice(-16), buckets);
}

export function bucketOfExecution(executionId: string, buckets: number): number {
  return bucketOf(executionId.slice(-16), buckets);
}

export function bucketName(bucket: number): string {
  return `bucket-${bucket}`;
}

/** Fire traffic is spread over the fire queues by bucket (DESIGN.md: several queues for 10k/s). */
export function fireQueueOf(bucket: number, queues: number): number {
  return bucket % queues;
}
