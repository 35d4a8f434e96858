/**
 * A tenant's alerts (issue 29 item 2), object "<tenant>": its alert target (PUT /v1/alerts) and
 * what waits for the next digest. Buckets report deaths once their outcome is in D1 (bucket.ts
 * flush); a flow key reports a throttle episode that passed the target's throttledForMs
 * (flow/flow-key.ts, once per episode). An alarm sends at most one signed digest per
 * DIGEST_INTERVAL_MS (core/alert.ts), listing what died and which keys were throttled since the
 * last. A digest that fails is sent again unchanged (its webhook-id and body) after a growing pause
 * (alerts_failed_total); what died meanwhile waits for the next one. One that succeeds counts in
 * alerts_sent_total, its throttled keys in alerts_throttled_keys_total.
 *
 * Stored (KV on the object's SQLite): the target, the waiting deaths and throttled keys, and the
 * last send. A tenant without a target stores nothing: what is reported to it is dropped at once.
 */
import { DurableObject } from "cloudflare:workers";
import { configOf } from "../config";
import { addPending, addThrottle, type Death, DIGEST_INTERVAL_MS, digestOf, nextDigestAt, type Throttle } from "../core/alert";
import { SigningKeys, sign } from "../core/signing";
import { bucketObject, objectOf } from "../placement";

/** An alert target: a URL and the headers sent with it, and when a throttled flow key is reported (null: never). */
export interface AlertTarget {
  url: string;
  headers: Record<string, string>;
  throttledForMs: number | null;
}

const SEND_TIMEOUT_MS = 10_000;
/** A failing target's pause before the next try: DIGEST_INTERVAL_MS, doubling per failure in a row, at most 10 minutes. */
const RETRY_MAX_MS = 10 * 60_000;

export function retryDelayMs(failures: number): number {
  return Math.min(RETRY_MAX_MS, DIGEST_INTERVAL_MS * 2 ** Math.max(0, failures - 1));
}

/** A digest on its way: sent again unchanged until the target takes it. */
interface Outgoing {
  id: string;
  body: string;
  /** throttled keys it lists (counted when it is delivered) */
  throttledKeys: number;
  /** failed sends in a row */
  failures?: number;
  /** not sent again before then */
  retryAt?: number;
}

export function alertsOf(env: Env, tenant: string): DurableObjectStub<Alerts> {
  return objectOf(env, env.ALERTS, tenant);
}

export class Alerts extends DurableObject<Env> {
  async setTarget(tenant: string, target: AlertTarget | null): Promise<void> {
    if (target === null) {
      await this.ctx.storage.deleteAll();
      await this.ctx.storage.deleteAlarm();
      return;
    }
    await this.ctx.storage.put({ tenant, target });
  }

  async target(): Promise<AlertTarget | null> {
    const target = await this.ctx.storage.get<AlertTarget>("target");
    return target ? { ...target, throttledForMs: target.throttledForMs ?? null } : null;
  }

  /** Deaths of this tenant whose outcome is in D1: kept for the next digest, if the tenant has a target. */
  async record(deaths: Death[]): Promise<void> {
    if (deaths.length === 0 || (await this.target()) === null) return;
    const stored = await this.ctx.storage.get<Death[]>("pending");
    const { pending, dropped } = addPending(stored ?? [], (await this.ctx.storage.get<number>("dropped")) ?? 0, deaths);
    await this.ctx.storage.put({ pending, dropped });
    await this.armDigest();
  }

  /** A flow key throttled past the target's throttledForMs (one report per episode): kept for the next digest. */
  async recordThrottle(throttle: Throttle): Promise<void> {
    if ((await this.target())?.throttledForMs == null) return;
    const throttled = await this.ctx.storage.get<Throttle[]>("throttled");
    await this.ctx.storage.put("throttled", addThrottle(throttled ?? [], throttle));
    await this.armDigest();
  }

  private async armDigest(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(nextDigestAt((await this.ctx.storage.get<number>("lastSentAt")) ?? null, Date.now()));
    }
  }

  /**
   * Sends the digest on its way: the one a failure left (again, unchanged: the same webhook-id and
   * body, as a retried webhook must be), else a new one of what waits, taken out of the waiting
   * lists before it is sent (what arrives meanwhile waits for the next). Never two within
   * DIGEST_INTERVAL_MS; a failing target is tried again after a growing pause (retryDelayMs).
   */
  override async alarm(): Promise<void> {
    const [target, tenant, lastSentAt] = await Promise.all([
      this.target(),
      this.ctx.storage.get<string>("tenant"),
      this.ctx.storage.get<number>("lastSentAt"),
    ]);
    if (!target || !tenant) return;
    const now = Date.now();
    const due = nextDigestAt(lastSentAt ?? null, now);
    if (due > now) {
      await this.ctx.storage.setAlarm(due);
      return;
    }
    const failed = await this.ctx.storage.get<Outgoing>("outgoing");
    if (failed?.retryAt !== undefined && failed.retryAt > now) {
      await this.ctx.storage.setAlarm(failed.retryAt);
      return;
    }
    const outgoing = failed ?? (await this.takeDigest(tenant, now));
    if (!outgoing) return;
    const ok = await this.send(tenant, target, outgoing.id, outgoing.body, now);
    const failures = ok ? 0 : (outgoing.failures ?? 0) + 1;
    await this.ctx.storage.put("lastSentAt", now);
    if (ok) {
      await this.ctx.storage.delete("outgoing");
      const [left, leftThrottled] = await Promise.all([
        this.ctx.storage.get<Death[]>("pending"),
        this.ctx.storage.get<Throttle[]>("throttled"),
      ]);
      if ((left?.length ?? 0) + (leftThrottled?.length ?? 0) > 0) await this.ctx.storage.setAlarm(nextDigestAt(now, now));
    } else {
      const retryAt = now + retryDelayMs(failures);
      await this.ctx.storage.put("outgoing", { ...outgoing, failures, retryAt });
      await this.ctx.storage.setAlarm(retryAt);
    }
    const meter = bucketObject(this.env, 0);
    await meter.bump(ok ? "alerts_sent_total" : "alerts_failed_total", tenant, 1).catch(() => undefined);
    if (ok && outgoing.throttledKeys > 0)
      await meter.bump("alerts_throttled_keys_total", tenant, outgoing.throttledKeys).catch(() => undefined);
  }

  /** A new digest of what waits, stored as outgoing and taken out of the waiting lists in one write; none when nothing waits. */
  private async takeDigest(tenant: string, now: number): Promise<Outgoing | null> {
    const [stored, dropped, throttled] = await Promise.all([
      this.ctx.storage.get<Death[]>("pending"),
      this.ctx.storage.get<number>("dropped"),
      this.ctx.storage.get<Throttle[]>("throttled"),
    ]);
    const pending = stored ?? [];
    const throttles = throttled ?? [];
    if (pending.length + (dropped ?? 0) + throttles.length === 0) return null;
    const digest = digestOf(tenant, pending, dropped ?? 0, now, undefined, throttles);
    const outgoing: Outgoing = {
      id: `dig_${crypto.randomUUID().replaceAll("-", "")}`,
      body: JSON.stringify(digest.body),
      throttledKeys: throttles.length,
    };
    await this.ctx.storage.put({ outgoing, pending: [], dropped: 0, throttled: [] });
    return outgoing;
  }

  /** One signed POST (Standard Webhooks, the tenant's signing keys); whether it answered 2xx. */
  private async send(tenant: string, target: AlertTarget, id: string, body: string, now: number): Promise<boolean> {
    try {
      const keys = await new SigningKeys(configOf(this.env)).forTenant(tenant);
      const timestamp = Math.floor(now / 1000);
      const headers = new Headers(target.headers);
      headers.set("content-type", "application/json");
      headers.set("webhook-id", id);
      headers.set("webhook-timestamp", String(timestamp));
      headers.set("webhook-signature", (await Promise.all(keys.map((k) => sign(k, id, timestamp, body)))).join(" "));
      if (!headers.has("user-agent")) headers.set("user-agent", "edge-scheduler/1");
      const response = await fetch(target.url, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
      });
      await response.body?.cancel();
      return response.status >= 200 && response.status < 300;
    } catch (error) {
      console.error(`alert digest of tenant ${tenant} failed`, error);
      return false;
    }
  }
}
