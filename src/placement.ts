/**
 * Where this deployment's Durable Objects live. An object is created near its first caller and
 * never moves (docs/platform-limits.md "Placement"): a bucket first called by the cron scan, which
 * runs on any machine, could sit on another continent than D1 and the consumers, and every claim,
 * report and flush would pay for it. With LOCATION_HINT set (docs/deploying.md, "Where it runs": the D1 shards are
 * created there too), every object is created there, whoever calls it first. Every stub of an
 * object of this deployment is got here.
 */
import { configOf } from "./config";
import { bucketName } from "./core/bucketing";

/** The object `name` of `namespace`, created (on its first call) where LOCATION_HINT says. */
export function objectOf<T extends Rpc.DurableObjectBranded | undefined>(
  env: Env,
  namespace: DurableObjectNamespace<T>,
  name: string,
): DurableObjectStub<T> {
  const locationHint = configOf(env).LOCATION_HINT;
  return locationHint === undefined ? namespace.getByName(name) : namespace.getByName(name, { locationHint });
}

/** The Bucket object of bucket `bucket`. */
export function bucketObject(env: Env, bucket: number) {
  return objectOf(env, env.BUCKET, bucketName(bucket));
}
