/**
 * A tenant's alerts (issue 29 item 2), object "<tenant>": its alert target (PUT /v1/alerts) and
 * the dead executions waiting for the next digest. Buckets report deaths once their outcome is in
 * D1 (bucket.ts flush); an alarm sends at most one signed digest per DIGEST_INTERVAL_MS
 * (core/alert.ts), listing what died since the last. A digest that fails keeps its deaths for the
 * next one (alerts_failed_total); one that succeeds counts in alerts_sent_total.
 *
 * Stored (KV on the object's SQLite): the target, the waiting deaths and the last send. A tenant
 * without a target stores nothing: a death reported to it is dropped at once.
 */
import { DurableObject } from "cloudflare:workers";
import { configOf } from "../config";
import { SigningKeys } from "../consumer/signing";
import { sign } from "../consumer/webhook";
import { addPending, type Death, digestOf, nextDigestAt } from "../core/alert";
import { bucketName } from "../core/bucketing";

/** An alert target: a URL and the headers sent with it. */
export interface AlertTarget {
  url: string;
  headers: Record<string, string>;
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
    return (await this.ctx.storage.get<AlertTarget>("target")) ?? null;
  }

  /** Deaths of this tenant whose outcome is in D1: kept for the next digest, if the tenant has a target. */
  async record(deaths: Death[]): Promise<void> {
    if (deaths.length === 0 || (await this.target()) === null) return;
    const stored = await this.ctx.storage.get<Death[]>("pending");
    const { pending, dropped } = addPending(stored ?? [], (await this.ctx.storage.get<number>("dropped")) ?? 0, deaths);
    await this.ctx.storage.put({ pending, dropped });
    if ((await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(nextDigestAt((await this.ctx.storage.get<number>("lastSentAt")) ?? null, Date.now()));
    }
  }

  override async alarm(): Promise<void> {
    const [target, tenant, pending, dropped] = await Promise.all([
      this.target(),
      this.ctx.storage.get<string>("tenant"),
      this.ctx.storage.get<Death[]>("pending"),
      this.ctx.storage.get<number>("dropped"),
    ]);
    if (!target || !tenant || !pending || pending.length + (dropped ?? 0) === 0) return;
    const now = Date.now();
    const digest = digestOf(tenant, pending, dropped ?? 0, now);
    const digestId = (await this.ctx.storage.get<string>("digestId")) ?? `dig_${crypto.randomUUID().replaceAll("-", "")}`;
    const ok = await this.send(tenant, target, digestId, JSON.stringify(digest.body), now);
    await this.ctx.storage.put("lastSentAt", now);
    if (ok) {
      // what arrived while it was on its way waits for the next one
      const left = ((await this.ctx.storage.get<Death[]>("pending")) ?? []).filter(
        (d) => !pending.some((p) => p.executionId === d.executionId),
      );
      await this.ctx.storage.put({ pending: left, dropped: 0 });
      await this.ctx.storage.delete("digestId");
      if (left.length > 0) await this.ctx.storage.setAlarm(nextDigestAt(now, now));
    } else {
      await this.ctx.storage.put("digestId", digestId); // the same webhook-id on its retry
      await this.ctx.storage.setAlarm(nextDigestAt(now, now));
    }
    await this.env.BUCKET.getByName(bucketName(0))
      .bump(ok ? "alerts_sent_total" : "alerts_failed_total", tenant, 1)
      .catch(() => undefined);
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
