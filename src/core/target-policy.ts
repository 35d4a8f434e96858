/**
 * What a job may point at ("validate at the door", STYLE.md habit 8). In production a target is
 * public https: an IP literal is refused unless IANA calls it globally reachable. URLs are parsed by
 * the WHATWG parser first, so every IPv4 spelling arrives as a dotted quad ("http://0x7f.1/" has
 * hostname 127.0.0.1) and every IPv6 literal arrives compressed and lowercase, without a dotted
 * quad ("[::ffff:1.2.3.4]" becomes "[::ffff:102:304]"). DNS names are not resolved here.
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
  const reason = refusedAddressReason(host);
  return reason === null ? { ok: true, url } : { ok: false, reason };
}

/** A row of an IANA address registry. */
type AddressBlock = {
  prefix: string;
  length: number;
  name: string;
  rfc: string;
  /** Only on rows the registry marks globally reachable that sit inside a refused row. */
  globallyReachable?: true;
};

/*
 * Transcribed from the IANA IPv4 and IPv6 Special-Purpose Address Registries
 * (iana.org/assignments/iana-ipv{4,6}-special-registry, as of 2025-10-09) and the IANA
 * IPv4 and IPv6 Address Space registries. A row without globallyReachable is "False" or "N/A" in
 * the registry; N/A marks the deprecated blocks and those that carry another address (6to4, Teredo),
 * so both are refused. Globally reachable rows that no refused row contains (192.31.196.0/24,
 * 192.52.193.0/24, 192.175.48.0/24, 2620:4f:8000::/48) need no row: an address in no row is public.
 */
const IPV4_BLOCKS: readonly AddressBlock[] = [
  { prefix: "0.0.0.0", length: 8, name: "this network", rfc: "RFC 791" },
  { prefix: "0.0.0.0", length: 32, name: "this host on this network", rfc: "RFC 1122" },
  { prefix: "10.0.0.0", length: 8, name: "private-use", rfc: "RFC 1918" },
  { prefix: "100.64.0.0", length: 10, name: "shared address space (carrier-grade NAT)", rfc: "RFC 6598" },
  { prefix: "127.0.0.0", length: 8, name: "loopback", rfc: "RFC 1122" },
  { prefix: "169.254.0.0", length: 16, name: "link-local (cloud metadata)", rfc: "RFC 3927" },
  { prefix: "172.16.0.0", length: 12, name: "private-use", rfc: "RFC 1918" },
  { prefix: "192.0.0.0", length: 24, name: "IETF protocol assignments", rfc: "RFC 6890" },
  { prefix: "192.0.0.0", length: 29, name: "IPv4 service continuity prefix", rfc: "RFC 7335" },
  { prefix: "192.0.0.8", length: 32, name: "IPv4 dummy address", rfc: "RFC 7600" },
  { prefix: "192.0.0.9", length: 32, name: "Port Control Protocol anycast", rfc: "RFC 7723", globallyReachable: true },
  { prefix: "192.0.0.10", length: 32, name: "TURN anycast", rfc: "RFC 8155", globallyReachable: true },
  { prefix: "192.0.0.170", length: 32, name: "NAT64/DNS64 discovery", rfc: "RFC 8880" },
  { prefix: "192.0.0.171", length: 32, name: "NAT64/DNS64 discovery", rfc: "RFC 8880" },
  { prefix: "192.0.2.0", length: 24, name: "documentation (TEST-NET-1)", rfc: "RFC 5737" },
  { prefix: "192.88.99.0", length: 24, name: "deprecated 6to4 relay anycast", rfc: "RFC 7526" },
  { prefix: "192.88.99.2", length: 32, name: "6a44 relay anycast", rfc: "RFC 6751" },
  { prefix: "192.168.0.0", length: 16, name: "private-use", rfc: "RFC 1918" },
  { prefix: "198.18.0.0", length: 15, name: "benchmarking", rfc: "RFC 2544" },
  { prefix: "198.51.100.0", length: 24, name: "documentation (TEST-NET-2)", rfc: "RFC 5737" },
  { prefix: "203.0.113.0", length: 24, name: "documentation (TEST-NET-3)", rfc: "RFC 5737" },
  { prefix: "224.0.0.0", length: 4, name: "multicast", rfc: "RFC 5771" }, // IPv4 Address Space registry
  { prefix: "240.0.0.0", length: 4, name: "reserved", rfc: "RFC 1112" },
  { prefix: "255.255.255.255", length: 32, name: "limited broadcast", rfc: "RFC 919" },
];

/** Only this block of the IPv6 Address Space registry is global unicast (RFC 4291 2.4). */
const IPV6_GLOBAL_UNICAST: AddressBlock = { prefix: "2000::", length: 3, name: "global unicast", rfc: "RFC 4291" };

const IPV6_BLOCKS: readonly AddressBlock[] = [
  // Outside 2000::/3, so refused whatever the registry says; the rows name the block in the reason.
  { prefix: "::", length: 128, name: "unspecified", rfc: "RFC 4291" },
  { prefix: "::1", length: 128, name: "loopback", rfc: "RFC 4291" },
  { prefix: "::", length: 96, name: "IPv4-compatible (deprecated)", rfc: "RFC 4291" },
  { prefix: "::ffff:0:0", length: 96, name: "IPv4-mapped", rfc: "RFC 4291" },
  { prefix: "64:ff9b::", length: 96, name: "IPv4/IPv6 translation (NAT64)", rfc: "RFC 6052" }, // registry: reachable, but it reaches an IPv4 address
  { prefix: "64:ff9b:1::", length: 48, name: "local-use IPv4/IPv6 translation", rfc: "RFC 8215" },
  { prefix: "100::", length: 64, name: "discard-only", rfc: "RFC 6666" },
  { prefix: "100:0:0:1::", length: 64, name: "dummy prefix", rfc: "RFC 9780" },
  { prefix: "5f00::", length: 16, name: "segment routing (SRv6) SIDs", rfc: "RFC 9602" },
  { prefix: "fc00::", length: 7, name: "unique-local", rfc: "RFC 4193" },
  { prefix: "fe80::", length: 10, name: "link-local unicast", rfc: "RFC 4291" },
  { prefix: "fec0::", length: 10, name: "site-local (deprecated)", rfc: "RFC 3879" },
  { prefix: "ff00::", length: 8, name: "multicast", rfc: "RFC 4291" },
  // Inside 2000::/3.
  { prefix: "2001::", length: 23, name: "IETF protocol assignments", rfc: "RFC 2928" },
  { prefix: "2001::", length: 32, name: "Teredo", rfc: "RFC 4380" },
  { prefix: "2001:1::1", length: 128, name: "Port Control Protocol anycast", rfc: "RFC 7723", globallyReachable: true },
  { prefix: "2001:1::2", length: 128, name: "TURN anycast", rfc: "RFC 8155", globallyReachable: true },
  { prefix: "2001:1::3", length: 128, name: "DNS-SD service registration anycast", rfc: "RFC 9665", globallyReachable: true },
  { prefix: "2001:2::", length: 48, name: "benchmarking", rfc: "RFC 5180" },
  { prefix: "2001:3::", length: 32, name: "AMT", rfc: "RFC 7450", globallyReachable: true },
  { prefix: "2001:4:112::", length: 48, name: "AS112-v6", rfc: "RFC 7535", globallyReachable: true },
  { prefix: "2001:10::", length: 28, name: "deprecated ORCHID", rfc: "RFC 4843" },
  { prefix: "2001:20::", length: 28, name: "ORCHIDv2", rfc: "RFC 7343", globallyReachable: true },
  { prefix: "2001:30::", length: 28, name: "drone remote ID entity tags", rfc: "RFC 9374", globallyReachable: true },
  { prefix: "2001:db8::", length: 32, name: "documentation", rfc: "RFC 3849" },
  { prefix: "2002::", length: 16, name: "6to4", rfc: "RFC 3056" },
  { prefix: "3fff::", length: 20, name: "documentation", rfc: "RFC 9637" },
];

type ParsedBlock = AddressBlock & { bytes: number[] };

const parseBlocks = (blocks: readonly AddressBlock[], parse: (text: string) => number[] | null): ParsedBlock[] =>
  blocks.map((block) => ({ ...block, bytes: parse(block.prefix) ?? fail(`unreadable prefix ${block.prefix}`) }));

function fail(message: string): never {
  throw new Error(message);
}

const PARSED_IPV4 = parseBlocks(IPV4_BLOCKS, parseIPv4);
const PARSED_IPV6 = parseBlocks(IPV6_BLOCKS, parseIPv6);
const [PARSED_GLOBAL_UNICAST] = parseBlocks([IPV6_GLOBAL_UNICAST], parseIPv6) as [ParsedBlock];

/** Why an IP-literal host is refused, or null when it is public or a DNS name. */
function refusedAddressReason(host: string): string | null {
  const isIPv6 = host.startsWith("[") && host.endsWith("]");
  const address = isIPv6 ? parseIPv6(host.slice(1, -1)) : parseIPv4(host);
  if (address === null) return isIPv6 ? "must be a readable IPv6 address" : null; // not an IPv4 literal: a DNS name
  const block = nonPublicBlock(address);
  if (block === null) return null;
  if (block === PARSED_GLOBAL_UNICAST) return "must not point at a non-public address (outside 2000::/3 global unicast, RFC 4291)";
  return `must not point at a non-public address (${block.prefix}/${block.length} ${block.name}, ${block.rfc})`;
}

/**
 * The block that makes an address non-public, or null. The most specific row decides, as in the
 * registry (192.0.0.9/32 is reachable inside the unreachable 192.0.0.0/24). IPv6 outside 2000::/3
 * is never public: that also refuses every IPv4-in-IPv6 form (mapped, compatible, NAT64).
 */
function nonPublicBlock(address: number[]): ParsedBlock | null {
  const blocks = address.length === 4 ? PARSED_IPV4 : PARSED_IPV6;
  let best: ParsedBlock | null = null;
  for (const block of blocks) {
    if (contains(block, address) && (best === null || block.length > best.length)) best = block;
  }
  if (address.length === 16 && !contains(PARSED_GLOBAL_UNICAST, address)) return best ?? PARSED_GLOBAL_UNICAST;
  return best !== null && !best.globallyReachable ? best : null;
}

function contains(block: ParsedBlock, address: number[]): boolean {
  const wholeBytes = block.length >> 3;
  for (let i = 0; i < wholeBytes; i++) if (address[i] !== block.bytes[i]) return false;
  const restBits = block.length & 7;
  if (restBits === 0) return true;
  const mask = (0xff << (8 - restBits)) & 0xff;
  return ((address[wholeBytes]! ^ block.bytes[wholeBytes]!) & mask) === 0;
}

/** "192.168.0.1" -> 4 bytes. The WHATWG parser has already turned other spellings into this one. */
function parseIPv4(text: string): number[] | null {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p))) return null;
  const octets = parts.map(Number);
  return octets.every((o) => o <= 255) ? octets : null;
}

/**
 * "2001:db8::1" -> 16 bytes. Hex groups with at most one "::"; no dotted quad, because the WHATWG
 * serializer never emits one, so an address that still has one is unreadable and refused.
 */
function parseIPv6(text: string): number[] | null {
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const [head, tail] = halves.map((half) => (half === "" ? [] : half.split(":"))) as [string[], string[]?];
  const zeroGroups = 8 - head.length - (tail?.length ?? 0);
  if (tail === undefined ? zeroGroups !== 0 : zeroGroups < 1) return null;
  const groups = [...head, ...Array<string>(tail === undefined ? 0 : zeroGroups).fill("0"), ...(tail ?? [])];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return null;
  return groups.flatMap((g) => {
    const value = parseInt(g, 16);
    return [value >> 8, value & 0xff];
  });
}
