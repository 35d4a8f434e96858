/**
 * Pull workers: a worker leases executions of one of its tenant's pull queues, heartbeats and
 * reports each lease; each lease is the bucket's, fenced like the consumer's (invariant 3).
 * Documented in pull.openapi.ts.
 */
import { type Context, Hono } from "hono";
import { MAX_BUCKET } from "../../consumer/message";
import { isPullTarget } from "../../core/job";
import { decodePullToken, encodePullToken } from "../../core/pull";
import type { DeliveryOutcome } from "../../core/response";
import { attemptTraceHeaders } from "../../core/trace";
import { toRfc3339 } from "../../core/when";
import { bucketObject } from "../../placement";
import { type PullLease, pullQueueOf } from "../../pull/pull-queue";
import { PullQueueName } from "../../schemas/job-input";
import { PullFailInput, PullLeaseInput } from "../../schemas/requests";
import type { PullLeaseView } from "../../schemas/responses";
import { ApiError, fromZodError } from "../../use-cases/errors";
import type { ApiEnv } from "../context";
import { limit, readJson, SINGLE_BODY_BYTES } from "../request";

export const pull = new Hono<ApiEnv>();

/**
 * The queue's object asks its buckets, oldest first, and with nothing to lease holds the request
 * up to waitMs (long polling).
 */
pull.post("/v1/pull/:queue/lease", limit(SINGLE_BODY_BYTES), async (c) => {
  const queue = PullQueueName.safeParse(c.req.param("queue"));
  if (!queue.success) throw fromZodError(queue.error, "queue");
  const input = PullLeaseInput.safeParse(await readJson(c, { emptyIs: {} }));
  if (!input.success) throw fromZodError(input.error);
  const tenant = c.get("tenant");
  const leases = await pullQueueOf(c.env, tenant, queue.data).lease({ tenant, queue: queue.data, ...input.data });
  return c.json({ leases: leases.map(presentPullLease) });
});

pull.get("/v1/pull/:queue", async (c) => {
  const queue = PullQueueName.safeParse(c.req.param("queue"));
  if (!queue.success) throw fromZodError(queue.error, "queue");
  const view = await pullQueueOf(c.env, c.get("tenant"), queue.data).view();
  return c.json({
    queue: queue.data,
    waiting: view.waiting,
    oldestDueAt: view.oldestDueAt === null ? null : toRfc3339(view.oldestDueAt),
    pollers: view.pollers,
  });
});

pull.post("/v1/pull/leases/:token/heartbeat", async (c) => {
  const { stub, ref } = pullLeaseOf(c);
  const [result] = await stub.heartbeat([ref]);
  if (!result?.ok) throw staleLease();
  return c.json({
    executionId: result.executionId,
    leaseDeadlineAt: toRfc3339(result.leaseDeadlineAt),
    canceled: result.canceled === true,
  });
});

pull.post("/v1/pull/leases/:token/complete", limit(SINGLE_BODY_BYTES), (c) =>
  reportPull(c, pullLeaseOf(c), { kind: "succeeded", httpStatus: null, excerpt: "" }),
);

pull.post("/v1/pull/leases/:token/fail", limit(SINGLE_BODY_BYTES), async (c) => {
  const lease = pullLeaseOf(c); // the token first: a bad one is named before the body
  const input = PullFailInput.safeParse(await readJson(c, { emptyIs: {} }));
  if (!input.success) throw fromZodError(input.error);
  const { retryable, error, retryAfterMs } = input.data;
  return reportPull(c, lease, {
    kind: "failed",
    failure: retryable ? "retryable" : "permanent",
    httpStatus: null,
    error: `the pull worker failed: ${error ?? (retryable ? "no reason given" : "permanent failure, no reason given")}`,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
});

/** A pull worker's report on its lease, recorded by the bucket as the consumer's is (fenced). */
async function reportPull(c: Context<ApiEnv>, { stub, ref }: ReturnType<typeof pullLeaseOf>, outcome: DeliveryOutcome) {
  const [result] = await stub.complete([{ ...ref, outcome }]);
  if (!result?.ok) throw staleLease();
  return c.json({ executionId: result.executionId, status: result.status });
}

/** The bucket and lease a worker's token names, checked against the caller's tenant by the bucket. */
function pullLeaseOf(c: Context<ApiEnv>) {
  const decoded = decodePullToken(c.req.param("token") ?? "");
  // a bucket number beyond any the consumer accepts would make its object exist just to answer no
  if (!decoded || decoded.bucket >= MAX_BUCKET)
    throw new ApiError("invalid_field", "token: not a lease token this API handed out", "token");
  const stub = bucketObject(c.env, decoded.bucket);
  return { stub, ref: { executionId: decoded.executionId, token: decoded.token, tenant: c.get("tenant") } };
}

function staleLease(): ApiError {
  return new ApiError(
    "stale_lease",
    "the lease is no longer yours: it expired (the execution may run again elsewhere) or was already reported",
    "token",
  );
}

function presentPullLease({ bucket, grant }: PullLease): PullLeaseView {
  const payload = isPullTarget(grant.target) && grant.target.payload !== null ? JSON.parse(grant.target.payload) : null;
  return {
    token: encodePullToken({ bucket, executionId: grant.executionId, token: grant.token }),
    executionId: grant.executionId,
    jobId: grant.jobId,
    attempt: grant.attempt,
    dueAt: toRfc3339(grant.dueAt),
    leaseDeadlineAt: toRfc3339(grant.leaseDeadlineAt),
    payload,
    ...((grant.trace && attemptTraceHeaders(grant.trace, grant.executionId, grant.attempt)) || {}),
  };
}
