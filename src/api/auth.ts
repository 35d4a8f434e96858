/** Bearer API keys: API_KEYS="tenant:key,tenant:key", compared in constant time, never logged. */
import type { MiddlewareHandler } from "hono";
import { configOf } from "../config";
import type { ApiEnv } from "./context";
import { ApiError } from "./errors";

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
      if (at <= 0 || at === pair.length - 1) return [];
      return [{ tenant: pair.slice(0, at), key: pair.slice(at + 1) }];
    });
}

const encoder = new TextEncoder();

/** Compares every configured key so timing reveals neither which key nor how much matched. */
export function tenantOfKey(keys: ApiKey[], presented: string): string | null {
  const given = encoder.encode(presented);
  let tenant: string | null = null;
  for (const k of keys) {
    const expected = encoder.encode(k.key);
    const sameLength = expected.byteLength === given.byteLength;
    // timingSafeEqual needs equal lengths: compare the given key with itself when they differ
    const equal = crypto.subtle.timingSafeEqual(sameLength ? expected : given, given);
    if (sameLength && equal && tenant === null) tenant = k.tenant;
  }
  return tenant;
}

export const requireApiKey: MiddlewareHandler<ApiEnv> = async (c, next) => {
  const header = c.req.header("authorization") ?? "";
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  const tenant = match ? tenantOfKey(parseApiKeys(configOf(c.env).API_KEYS), match[1]!) : null;
  if (tenant === null) {
    throw new ApiError(401, "unauthorized", "a valid API key is required: Authorization: Bearer <key>", "authorization", {
      "www-authenticate": "Bearer",
    });
  }
  c.set("tenant", tenant);
  await next();
};
