/**
 * A tenant's alerts (issue 29 item 2), object "<tenant>": its alert target (PUT /v1/alerts) and
 * what waits for the next digest. Buckets report deaths once their outcome is in D1 (bucket.ts
 * flush); a flow key reports a throttle episode that passed the target's throttledForMs
 * (flow/flow-key.ts, once per episode). An alarm sends at most one signed digest per
 * DIGEST_INTERVAL_MS (core/alert.ts), listing what died and which keys were throttled since the
 * last. A digest that fails keeps what it listed for the next one (alerts_failed_total); one that
 * succeeds counts in alerts_sent_total, its throttled keys in alerts_throttled_keys_total.
 *
 * Stored (KV on the object's SQLite): the target, the waiting deaths and throttled keys, and the
 * last send. A tenant without a target stores nothing: what is reported to it is dropped at once.
 */
import { DurableObject } from "cloudflare:workers";
import { configOf } from "../config";
import { SigningKeys } from "../consumer/signing";
import { sign } from "../consumer/webhook";
import { addPending, addThrottle, type Death, digestOf, nextDigestAt, type Throttle } from "../core/alert";
import { bucketName } from "../core/bucketing";

/** An alert target: a URL and the headers sent with it, and when a throttled flow key is reported (null: never). */
export interface AlertTarget {
  url: string;
  headers: Record<string, string>;
  throttledForMs: number | null;
}

const SEND_TIMEOUT_MS = 10_000;

export function alertsOf(env: Env, tenant: string): DurableObjectStub<Alerts> {
  return env.ALERTS.getByName(tenant);
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

  override async alarm(): Promise<void> {
    const [target, tenant, stored, dropped, throttled] = await Promise.all([
      this.target(),
      this.ctx.storage.get<string>("tenant"),
      this.ctx.storage.get<Death[]>("pending"),
      this.ctx.storage.get<number>("dropped"),
      this.ctx.storage.get<Throttle[]>("throttled"),
    ]);
    const pending = stored ?? [];
    const throttles = throttled ?? [];
    if (!target || !tenant || pending.length + (dropped ?? 0) + throttles.length === 0) return;
    const now = Date.now();
    const digest = digestOf(tenant, pending, dropped ?? 0, now, undefined, throttles);
    const digestId = (await this.ctx.storage.get<string>("digestId")) ?? `dig_${crypto.randomUUID().replaceAll("-", "")}`;
    const ok = await this.send(tenant, target, digestId, JSON.stringify(digest.body), now);
    await this.ctx.storage.put("lastSentAt", now);
    if (ok) {
      // what arrived while it was on its way waits for the next one
      const left = ((await this.ctx.storage.get<Death[]>("pending")) ?? []).filter(
        (d) => !pending.some((p) => p.executionId === d.executionId),
      );
      const leftThrottled = ((await this.ctx.storage.get<Throttle[]>("throttled")) ?? []).filter(
        (t) => !throttles.some((s) => s.key === t.key && s.since === t.since),
      );
      await this.ctx.storage.put({ pending: left, dropped: 0, throttled: leftThrottled });
      await this.ctx.storage.delete("digestId");
      if (left.length + leftThrottled.length > 0) await this.ctx.storage.setAlarm(nextDigestAt(now, now));
    } else {
      await this.ctx.storage.put("digestId", digestId); // the same webhook-id on its retry
      await this.ctx.storage.setAlarm(nextDigestAt(now, now));
    }
    const meter = this.env.BUCKET.getByName(bucketName(0));
    await meter.bump(ok ? "alerts_sent_total" : "alerts_failed_total", tenant, 1).catch(() => undefined);
    if (ok && throttles.length > 0) await meter.bump("alerts_throttled_keys_total", tenant, throttles.length).catch(() => undefined);
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
