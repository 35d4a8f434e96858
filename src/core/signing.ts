/**
 * Standard Webhooks signatures, as every request the scheduler sends is signed (a delivery:
 * consumer/webhook.ts; an alert digest: alerts/alerts.ts). Signing secrets per tenant, with
 * rotation: WEBHOOK_SECRETS="acme:whsec_current whsec_next,..." gives a tenant up to two active
 * secrets (the webhook-signature header then carries one signature per secret, space-separated, so
 * a receiver holding either verifies); every other tenant signs with WEBHOOK_SECRET. Computation
 * only (WebCrypto's HMAC): the settings come in.
 */

/** The settings a tenant's secrets are read from (config.ts). */
export interface SigningSettings {
  WEBHOOK_SECRET: string;
  WEBHOOK_SECRETS: string;
}

export const MAX_ACTIVE_SECRETS = 2;

export function secretsOf(config: SigningSettings, tenant: string): string[] {
  for (const entry of config.WEBHOOK_SECRETS.split(",")) {
    const at = entry.indexOf(":");
    if (at <= 0 || entry.slice(0, at).trim() !== tenant) continue;
    const secrets = entry
      .slice(at + 1)
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .slice(0, MAX_ACTIVE_SECRETS);
    if (secrets.length > 0) return secrets; // an empty entry falls back to WEBHOOK_SECRET
  }
  return config.WEBHOOK_SECRET ? [config.WEBHOOK_SECRET] : [];
}

/** Imports a `whsec_<base64>` secret as an HMAC-SHA256 key. */
export async function importSecret(secret: string): Promise<CryptoKey> {
  const raw = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  const bytes = Uint8Array.from(atob(raw), (c) => c.charCodeAt(0));
  return crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** Imported keys per tenant, kept for the isolate's life (secrets change only with a deploy). */
export class SigningKeys {
  private readonly keys = new Map<string, Promise<CryptoKey[]>>();

  constructor(private readonly config: SigningSettings) {}

  forTenant(tenant: string): Promise<CryptoKey[]> {
    let keys = this.keys.get(tenant);
    if (!keys) {
      const secrets = secretsOf(this.config, tenant);
      keys =
        secrets.length === 0
          ? Promise.reject(new Error(`no signing secret for tenant "${tenant}": set WEBHOOK_SECRET or WEBHOOK_SECRETS`))
          : Promise.all(secrets.map(importSecret));
      this.keys.set(tenant, keys);
    }
    return keys;
  }
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` */
export async function sign(key: CryptoKey, id: string, timestampSeconds: number, body: string): Promise<string> {
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${id}.${timestampSeconds}.${body}`));
  let binary = "";
  for (const b of new Uint8Array(mac)) binary += String.fromCharCode(b);
  return `v1,${btoa(binary)}`;
}
