/**
 * What a job may point at. URLs are parsed by the WHATWG parser first, so decimal, hex and
 * short IPv4 forms arrive normalized ("http://2130706433/" has hostname 127.0.0.1).
 */
export type TargetVerdict = { ok: true; url: URL } | { ok: false; reason: string };

export function checkTargetUrl(raw: string, allowLoopback: boolean): TargetVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "must be an absolute http(s) URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return { ok: false, reason: "must use http or https" };
  if (url.username || url.password) return { ok: false, reason: "must not carry credentials in the URL" };
  if (allowLoopback) return { ok: true, url };
  if (url.protocol !== "https:") return { ok: false, reason: "must use https" };
  const host = url.hostname.toLowerCase().replace(/\.$/, ""); // "localhost." is localhost
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")) {
    return { ok: false, reason: "must not point at a local host name" };
  }
  if (isForbiddenAddress(host)) return { ok: false, reason: "must not point at a loopback, private, link-local or metadata address" };
  return { ok: true, url };
}

function isForbiddenAddress(host: string): boolean {
  const v4 = parseIPv4(host);
  if (v4) return isForbiddenIPv4(v4);
  if (host.startsWith("[") && host.endsWith("]")) return isForbiddenIPv6(host.slice(1, -1));
  return false;
}

function parseIPv4(host: string): number[] | null {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p))) return null;
  const octets = parts.map(Number);
  return octets.every((o) => o <= 255) ? octets : null;
}

function isForbiddenIPv4([a, b]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || // this network, private, loopback
    (a === 100 && b! >= 64 && b! <= 127) || // carrier-grade NAT
    (a === 169 && b === 254) || // link-local, cloud metadata
    (a === 172 && b! >= 16 && b! <= 31) ||
    (a === 192 && b === 168) ||
    a! >= 224 // multicast, reserved, broadcast
  );
}

function isForbiddenIPv6(address: string): boolean {
  const a = address.toLowerCase();
  if (a === "::" || a === "::1") return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (mapped) return isForbiddenIPv4(parseIPv4(mapped[1]!) ?? [0, 0]);
  const hexMapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(a);
  if (hexMapped) {
    const hi = parseInt(hexMapped[1]!, 16);
    const lo = parseInt(hexMapped[2]!, 16);
    return isForbiddenIPv4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
  }
  const first = parseInt(a.split(":")[0] || "0", 16);
  return (
    (first & 0xfe00) === 0xfc00 || // unique local fc00::/7
    (first & 0xffc0) === 0xfe80 || // link-local fe80::/10
    (first & 0xff00) === 0xff00 // multicast
  );
}
