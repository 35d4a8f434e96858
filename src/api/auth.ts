/** Bearer API keys: API_KEYS="tenant:key,tenant:key", compared in constant time, never logged. */
import type { MiddlewareHandler } from "hono";
import { configOf } from "../config";
import { ApiError } from "../use-cases/errors";
import type { ApiEnv } from "./context";

export interface ApiKey {
  tenant: string;
  key: string;
}

export function parseApiKeys(value: string): ApiKey[] {
  return value
    .split(",")
    .map((pair) => pair.trim())
    .filter((pair) => pair.length > 0)
    .flatMap((pair) => {
      const at = pair.indexOf(":");
      const tenant = pair.slice(0, Math.max(0, at)).trim();
      const key = pair.slice(at + 1).trim();
      return at > 0 && tenant && key ? [{ tenant, key }] : [];
    });
}

const encoder = new TextEncoder();

/** Compares every configured key so timing reveals neither which key nor how much matched. */
export function tenantOfKey(keys: ApiKey[], presented: string): string | null {
  return matchKey(keys, presented)?.tenant ?? null;
}

/** The matching key's tenant and its position in API_KEYS (which names it for rate limiting without the secret). */
function matchKey(keys: ApiKey[], presented: string): { tenant: string; index: number } | null {
  const given = encoder.encode(presented);
  let match: { tenant: string; index: number } | null = null;
  keys.forEach((k, index) => {
    const expected = encoder.encode(k.key);
    const sameLength = expected.byteLength === given.byteLength;
    // timingSafeEqual needs equal lengths: compare the given key with itself when they differ
    const equal = crypto.subtle.timingSafeEqual(sameLength ? expected : given, given);
    if (sameLength && equal && match === null) match = { tenant: k.tenant, index };
  });
  return match;
}

/** The rate limiter's period (wrangler.toml [[ratelimits]] simple.period), for Retry-After. */
const RATE_LIMIT_PERIOD_SECONDS = 10;

export const requireApiKey: MiddlewareHandler<ApiEnv> = async (c, next) => {
  const header = c.req.header("authorization") ?? "";
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  const key = match ? matchKey(parseApiKeys(configOf(c.env).API_KEYS), match[1]!) : null;
  if (key === null) {
    throw new ApiError("unauthorized", "a valid API key is required: Authorization: Bearer <key>", "authorization", {
      "www-authenticate": "Bearer",
    });
  }
  const limiter = c.env.API_RATE_LIMITER;
  if (limiter && !(await limiter.limit({ key: `${key.tenant}#${key.index}` })).success) {
    throw new ApiError("rate_limited", "too many requests for this API key; retry later", "authorization", {
      "retry-after": String(RATE_LIMIT_PERIOD_SECONDS),
    });
  }
  c.set("tenant", key.tenant);
  await next();
};
