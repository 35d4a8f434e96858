/**
 * Handler Workers: targets called over a service binding instead of HTTP. HANDLER_WORKERS names
 * each one a job may target, with the binding that reaches it and the tenants granted it:
 * {"billing": {"binding": "BILLING_HANDLER", "tenants": ["acme"]}, "example": {..., "tenants": ["*"]}}.
 * A tenant can target only the Workers granted to it; to another tenant a name it was not
 * granted looks exactly like one that does not exist.
 */
/** Handler Workers by name (the setting is validated by config.ts). */
export type HandlerWorkers = Record<string, { binding: string; tenants: string[] }>;

/** The binding of a Worker granted to the tenant, or null (not granted, or no such Worker). */
export function grantedBinding(workers: HandlerWorkers, tenant: string, name: string): string | null {
  const worker = Object.hasOwn(workers, name) ? workers[name] : undefined;
  if (!worker) return null;
  return worker.tenants.includes("*") || worker.tenants.includes(tenant) ? worker.binding : null;
}
