/**
 * What a job may point at ("validate at the door", STYLE.md habit 8): in production only public
 * https targets. An IP literal is public when the IANA registries call it globally reachable, in
 * every spelling the WHATWG URL parser normalizes (decimal, hex, octal, short IPv4; compressed,
 * full and uppercase IPv6; IPv4 inside IPv6 as mapped, compatible, NAT64, 6to4 or Teredo).
 *
 * The registry tables below are this file's own transcription, not imported from the source, and
 * membership is decided by node:net BlockList, so a wrong row or wrong bit arithmetic on either side
 * shows up as a disagreement.
 */
import { BlockList } from "node:net";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkTargetUrl } from "../../src/core/target-policy";

const allowed = (raw: string) => checkTargetUrl(raw, false).ok;

describe("checkTargetUrl with allowLoopback false (production)", () => {
  it.each([
    ["https://example.com/hook", "https://example.com/hook"],
    ["https://example.com", "https://example.com/"],
    ["https://EXAMPLE.com:8443/a?b=c#d", "https://example.com:8443/a?b=c#d"],
    ["https://api.example.co.uk/v1/hooks", "https://api.example.co.uk/v1/hooks"],
    ["https://93.184.216.34/", "https://93.184.216.34/"],
    ["https://8.8.8.8/", "https://8.8.8.8/"],
    ["https://172.15.255.255/", "https://172.15.255.255/"], // just below 172.16/12
    ["https://172.32.0.1/", "https://172.32.0.1/"], // just above 172.16/12
    ["https://100.63.255.255/", "https://100.63.255.255/"], // just below 100.64/10
    ["https://100.128.0.1/", "https://100.128.0.1/"], // just above 100.64/10
    ["https://192.169.0.1/", "https://192.169.0.1/"],
    ["https://169.253.1.1/", "https://169.253.1.1/"],
    ["https://11.0.0.1/", "https://11.0.0.1/"],
    ["https://192.0.0.9/", "https://192.0.0.9/"], // PCP anycast: globally reachable inside 192.0.0.0/24
    ["https://[2606:4700:4700::1111]/", "https://[2606:4700:4700::1111]/"],
    ["https://[2001:4860:4860::8888]/", "https://[2001:4860:4860::8888]/"],
    ["https://[2001:3::1]/", "https://[2001:3::1]/"], // AMT: globally reachable inside 2001::/23
    ["https://[2001:200::1]/", "https://[2001:200::1]/"], // just above 2001::/23
    ["https://localhost.example.com/", "https://localhost.example.com/"], // only the localhost TLD is local
    ["https://mylocalhost/", "https://mylocalhost/"],
    ["https://12.34.56.78.example.com/", "https://12.34.56.78.example.com/"], // a DNS name, not resolved here
  ])("allows %s", (raw, normalized) => {
    const verdict = checkTargetUrl(raw, false);
    expect(verdict.ok).toBe(true);
    if (verdict.ok) expect(verdict.url.toString()).toBe(normalized);
  });

  it.each([
    // scheme
    ["http://example.com/", "https"],
    ["ftp://example.com/file", "http"],
    ["file:///etc/passwd", "http"],
    ["javascript:alert(1)", "http"],
    ["data:text/plain,hi", "http"],
    ["ws://example.com/", "http"],
    // not a URL
    ["not a url", "absolute"],
    ["", "absolute"],
    ["/relative/path", "absolute"],
    ["example.com/hook", "absolute"],
    ["https://", "absolute"],
    ["https://1.2.3.4.5/", "absolute"], // ends in a number, so the URL parser wants IPv4 and fails
    ["https://[fe80::1%25eth0]/", "absolute"], // zone ids are not URL syntax
    // credentials
    ["https://user:pass@example.com/", "credentials"],
    ["https://user@example.com/", "credentials"],
    ["https://:pass@example.com/", "credentials"],
    // local host names
    ["https://localhost/", "host name"],
    ["https://LOCALHOST:8443/", "host name"],
    ["https://api.localhost/", "host name"],
    ["https://metadata.google.internal/", "host name"],
    // loopback in every spelling
    ["https://127.0.0.1/", "non-public"],
    ["https://127.255.255.254/", "non-public"],
    ["https://127.1/", "non-public"],
    ["https://2130706433/", "non-public"],
    ["https://0x7f000001/", "non-public"],
    ["https://0x7f.0.0.1/", "non-public"],
    ["https://017700000001/", "non-public"],
    ["https://127.0.0.1./", "non-public"],
    // private, CGNAT, link-local, metadata, this-network, multicast, broadcast
    ["https://10.0.0.1/", "non-public"],
    ["https://10.255.255.255/", "non-public"],
    ["https://172.16.0.1/", "non-public"],
    ["https://172.31.255.255/", "non-public"],
    ["https://192.168.1.1/", "non-public"],
    ["https://169.254.169.254/latest/meta-data/", "non-public"],
    ["https://169.254.0.1/", "non-public"],
    ["https://100.64.0.1/", "non-public"],
    ["https://100.127.255.255/", "non-public"],
    ["https://0.0.0.0/", "non-public"],
    ["https://0/", "non-public"],
    ["https://224.0.0.1/", "non-public"],
    ["https://255.255.255.255/", "non-public"],
    // IPv6
    ["https://[::1]/", "non-public"],
    ["https://[0:0:0:0:0:0:0:1]/", "non-public"],
    ["https://[::]/", "non-public"],
    ["https://[fc00::1]/", "non-public"],
    ["https://[fd12:3456:789a::1]/", "non-public"],
    ["https://[fe80::1]/", "non-public"],
    ["https://[febf::1]/", "non-public"],
    ["https://[ff02::1]/", "non-public"],
    ["https://[::ffff:127.0.0.1]/", "non-public"],
    ["https://[::ffff:7f00:1]/", "non-public"],
    ["https://[::ffff:10.0.0.1]/", "non-public"],
    ["https://[::ffff:a9fe:a9fe]/", "non-public"], // 169.254.169.254
    ["https://[::ffff:192.168.0.1]/", "non-public"],
    ["https://[2001:db8::1]/", "non-public"], // documentation
  ])("refuses %s (%s)", (raw, reasonWord) => {
    const verdict = checkTargetUrl(raw, false);
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.reason).toContain(reasonWord);
  });

  it.each([["https://localhost./"], ["https://api.localhost./"], ["https://LOCALHOST./x"], ["https://metadata.google.internal./"]])(
    "refuses %s: a trailing dot is the same local host name (fully qualified)",
    (raw) => {
      expect(checkTargetUrl(raw, false).ok).toBe(false);
    },
  );

  // The IPv4-in-IPv6 and legacy IPv6 forms the old list of spellings let through; the reason names the block.
  it.each([
    ["https://[64:ff9b::7f00:1]/", "64:ff9b::/96 IPv4/IPv6 translation (NAT64), RFC 6052"],
    ["https://[64:ff9b::127.0.0.1]/", "64:ff9b::/96 IPv4/IPv6 translation (NAT64), RFC 6052"],
    ["https://[64:ff9b::a00:1]/", "64:ff9b::/96"],
    ["https://[64:ff9b::808:808]/", "64:ff9b::/96"], // even a public IPv4 inside: use the IPv4 form
    ["https://[64:ff9b:1::a00:1]/", "64:ff9b:1::/48"],
    ["https://[2002:7f00:1::]/", "2002::/16 6to4, RFC 3056"],
    ["https://[2002:c0a8:101::1]/", "2002::/16 6to4"],
    ["https://[::127.0.0.1]/", "::/96 IPv4-compatible (deprecated), RFC 4291"],
    ["https://[::a00:1]/", "::/96 IPv4-compatible"],
    ["https://[::ffff:8.8.8.8]/", "::ffff:0:0/96 IPv4-mapped"],
    ["https://[fec0::1]/", "fec0::/10 site-local (deprecated), RFC 3879"],
    ["https://[feff::1]/", "fec0::/10"],
    ["https://[2001::1]/", "2001::/32 Teredo, RFC 4380"],
    ["https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "2001::/32 Teredo"],
    ["https://[2001:2::1]/", "2001:2::/48 benchmarking"],
    ["https://[2001:10::1]/", "2001:10::/28 deprecated ORCHID"],
    ["https://[2001:1::4]/", "2001::/23 IETF protocol assignments"],
    ["https://[3fff::1]/", "3fff::/20 documentation, RFC 9637"],
    ["https://[5f00::1]/", "5f00::/16"],
    ["https://[100::1]/", "100::/64 discard-only"],
    ["https://[4000::1]/", "outside 2000::/3 global unicast"],
    ["https://192.168.0.1/", "192.168.0.0/16 private-use, RFC 1918"],
    ["https://192.0.0.8/", "192.0.0.8/32 IPv4 dummy address, RFC 7600"],
    ["https://192.88.99.1/", "192.88.99.0/24 deprecated 6to4 relay anycast"],
    ["https://198.19.255.255/", "198.18.0.0/15 benchmarking"],
    ["https://169.254.169.254/", "169.254.0.0/16 link-local (cloud metadata), RFC 3927"],
  ])("refuses %s and names the block (%s)", (raw, block) => {
    const verdict = checkTargetUrl(raw, false);
    expect(verdict).toEqual({ ok: false, reason: expect.stringContaining(`must not point at a non-public address (${block}`) });
  });
});

describe("checkTargetUrl with allowLoopback true (local development)", () => {
  it.each([
    ["http://127.0.0.1:8787/hook"],
    ["http://localhost:3000/"],
    ["http://[::1]:9000/"],
    ["https://127.0.0.1/"],
    ["http://192.168.1.10/"],
    ["https://example.com/"],
    ["http://example.com/"],
    ["http://[64:ff9b::7f00:1]/"],
    ["http://[fec0::1]/"],
  ])("allows %s", (raw) => {
    expect(checkTargetUrl(raw, true).ok).toBe(true);
  });

  it.each([
    ["ftp://127.0.0.1/", "http"],
    ["file:///etc/passwd", "http"],
    ["http://user:pass@127.0.0.1/", "credentials"],
    ["not a url", "absolute"],
  ])("still refuses %s (%s)", (raw, reasonWord) => {
    const verdict = checkTargetUrl(raw, true);
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.reason).toContain(reasonWord);
  });
});

// The policy reads hostnames only after the WHATWG parser; these are the forms it relies on.
describe("the URL parser's normalized hosts", () => {
  it.each([
    ["https://0x7f.1/", "127.0.0.1"],
    ["https://0177.0.0.1/", "127.0.0.1"],
    ["https://256/", "0.0.1.0"],
    ["https://127.0.0.1./", "127.0.0.1"],
    ["https://[::FFFF:127.0.0.1]/", "[::ffff:7f00:1]"],
    ["https://[64:ff9b::127.0.0.1]/", "[64:ff9b::7f00:1]"],
    ["https://[::127.0.0.1]/", "[::7f00:1]"],
    ["https://[::0.0.0.1]/", "[::1]"],
    ["https://[1:2:3:4:5:6:1.2.3.4]/", "[1:2:3:4:5:6:102:304]"], // no dotted quad survives
    ["https://[0000:0000:0000:0000:0000:0000:0000:0001]/", "[::1]"],
    ["https://[1:0:0:2:0:0:0:3]/", "[1:0:0:2::3]"], // the longest zero run is compressed
    ["https://[::2:3:4:5:6:7:8]/", "[0:2:3:4:5:6:7:8]"], // a single zero group is not
    ["https://[2002:7F00:0001::]/", "[2002:7f00:1::]"],
  ])("%s has hostname %s", (raw, hostname) => {
    expect(new URL(raw).hostname).toBe(hostname);
  });
});

// ---------------------------------------------------------------------------------------------
// This file's transcription of the registries. reachable is the registry's "Globally Reachable"
// column; rows from the Address Space registries (multicast, reserved IPv6 space) say "False".
// Rule under test: public when the most specific row containing the address says "True" (or no
// row does), and for IPv6 only inside 2000::/3.

type Reachable = "True" | "False" | "N/A";
type RegistryRow = { prefix: string; length: number; name: string; rfc: string; reachable: Reachable };
const row = (cidr: string, name: string, rfc: string, reachable: Reachable): RegistryRow => {
  const [prefix, length] = cidr.split("/") as [string, string];
  return { prefix, length: Number(length), name, rfc, reachable };
};

const IPV4_REGISTRY: RegistryRow[] = [
  // IANA IPv4 Special-Purpose Address Registry
  row("0.0.0.0/8", "This network", "RFC791", "False"),
  row("0.0.0.0/32", "This host on this network", "RFC1122", "False"),
  row("10.0.0.0/8", "Private-Use", "RFC1918", "False"),
  row("100.64.0.0/10", "Shared Address Space", "RFC6598", "False"),
  row("127.0.0.0/8", "Loopback", "RFC1122", "False"),
  row("169.254.0.0/16", "Link Local", "RFC3927", "False"),
  row("172.16.0.0/12", "Private-Use", "RFC1918", "False"),
  row("192.0.0.0/24", "IETF Protocol Assignments", "RFC6890", "False"),
  row("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC7335", "False"),
  row("192.0.0.8/32", "IPv4 dummy address", "RFC7600", "False"),
  row("192.0.0.9/32", "Port Control Protocol Anycast", "RFC7723", "True"),
  row("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC8155", "True"),
  row("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC8880", "False"),
  row("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC8880", "False"),
  row("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC5737", "False"),
  row("192.31.196.0/24", "AS112-v4", "RFC7535", "True"),
  row("192.52.193.0/24", "AMT", "RFC7450", "True"),
  row("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC7526", "N/A"),
  row("192.88.99.2/32", "6a44-relay anycast address", "RFC6751", "False"),
  row("192.168.0.0/16", "Private-Use", "RFC1918", "False"),
  row("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC7534", "True"),
  row("198.18.0.0/15", "Benchmarking", "RFC2544", "False"),
  row("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC5737", "False"),
  row("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC5737", "False"),
  row("240.0.0.0/4", "Reserved", "RFC1112", "False"),
  row("255.255.255.255/32", "Limited Broadcast", "RFC8190", "False"),
  // IANA IPv4 Address Space Registry
  row("224.0.0.0/4", "Multicast", "RFC5771", "False"),
];

const IPV6_REGISTRY: RegistryRow[] = [
  // IANA IPv6 Special-Purpose Address Registry
  row("::1/128", "Loopback Address", "RFC4291", "False"),
  row("::/128", "Unspecified Address", "RFC4291", "False"),
  row("::ffff:0:0/96", "IPv4-mapped Address", "RFC4291", "False"),
  row("64:ff9b::/96", "IPv4-IPv6 Translat.", "RFC6052", "True"),
  row("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC8215", "False"),
  row("100::/64", "Discard-Only Address Block", "RFC6666", "False"),
  row("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC9780", "False"),
  row("2001::/23", "IETF Protocol Assignments", "RFC2928", "False"),
  row("2001::/32", "TEREDO", "RFC4380", "N/A"),
  row("2001:1::1/128", "Port Control Protocol Anycast", "RFC7723", "True"),
  row("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC8155", "True"),
  row("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC9665", "True"),
  row("2001:2::/48", "Benchmarking", "RFC5180", "False"),
  row("2001:3::/32", "AMT", "RFC7450", "True"),
  row("2001:4:112::/48", "AS112-v6", "RFC7535", "True"),
  row("2001:10::/28", "Deprecated (previously ORCHID)", "RFC4843", "N/A"),
  row("2001:20::/28", "ORCHIDv2", "RFC7343", "True"),
  row("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC9374", "True"),
  row("2001:db8::/32", "Documentation", "RFC3849", "False"),
  row("2002::/16", "6to4", "RFC3056", "N/A"),
  row("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC7534", "True"),
  row("3fff::/20", "Documentation", "RFC9637", "False"),
  row("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC9602", "False"),
  row("fc00::/7", "Unique-Local", "RFC4193", "False"),
  row("fe80::/10", "Link-Local Unicast", "RFC4291", "False"),
  // IANA IPv6 Address Space registry: everything but 2000::/3 global unicast
  row("::/8", "Reserved by IETF", "RFC4291", "False"),
  row("::/96", "IPv4-compatible (deprecated; RFC 4291 2.5.5.1)", "RFC4291", "False"),
  row("100::/8", "Reserved by IETF", "RFC4291", "False"),
  row("200::/7", "Reserved by IETF", "RFC4048", "False"),
  row("400::/6", "Reserved by IETF", "RFC4291", "False"),
  row("800::/5", "Reserved by IETF", "RFC4291", "False"),
  row("1000::/4", "Reserved by IETF", "RFC4291", "False"),
  row("4000::/3", "Reserved by IETF", "RFC4291", "False"),
  row("6000::/3", "Reserved by IETF", "RFC4291", "False"),
  row("8000::/3", "Reserved by IETF", "RFC4291", "False"),
  row("a000::/3", "Reserved by IETF", "RFC4291", "False"),
  row("c000::/3", "Reserved by IETF", "RFC4291", "False"),
  row("e000::/4", "Reserved by IETF", "RFC4291", "False"),
  row("f000::/5", "Reserved by IETF", "RFC4291", "False"),
  row("f800::/6", "Reserved by IETF", "RFC4291", "False"),
  row("fe00::/9", "Reserved by IETF", "RFC4291", "False"),
  row("fec0::/10", "Reserved by IETF (formerly site-local)", "RFC3879", "False"),
  row("ff00::/8", "Multicast", "RFC4291", "False"),
];

type Family = "ipv4" | "ipv6";
const BITS: Record<Family, number> = { ipv4: 32, ipv6: 128 };

/** One BlockList per row, so the most specific row can be chosen (BlockList only says yes or no). */
const withList = (rows: RegistryRow[], family: Family) =>
  rows.map((r) => {
    const list = new BlockList();
    list.addSubnet(r.prefix, r.length, family);
    return { ...r, family, list };
  });
const V4_ROWS = withList(IPV4_REGISTRY, "ipv4");
const V6_ROWS = withList(IPV6_REGISTRY, "ipv6");
const GLOBAL_UNICAST = new BlockList();
GLOBAL_UNICAST.addSubnet("2000::", 3, "ipv6");

function mostSpecificRow(text: string, family: Family) {
  const rows = family === "ipv4" ? V4_ROWS : V6_ROWS;
  return rows.filter((r) => r.list.check(text, family)).sort((a, b) => b.length - a.length)[0];
}

/** The test's verdict, from its own table. text is dotted IPv4 or full 8-group IPv6. */
function expectedPublic(text: string, family: Family): boolean {
  if (family === "ipv6" && !GLOBAL_UNICAST.check(text, "ipv6")) return false;
  const found = mostSpecificRow(text, family);
  return found === undefined || found.reachable === "True";
}

// Address arithmetic on bigints: IPv4 as 32 bits, IPv6 as 128.
const dotted = (n: bigint) => [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join(".");
const fullIPv6 = (n: bigint) =>
  Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16).padStart(4, "0")).join(":");
const text = (n: bigint, family: Family) => (family === "ipv4" ? dotted(n) : fullIPv6(n));

function prefixValue(prefix: string, family: Family): bigint {
  if (family === "ipv4") return prefix.split(".").reduce((acc, octet) => (acc << 8n) | BigInt(octet), 0n);
  // Expand "::" by padding with as many zero groups as are missing, then read 8 groups.
  const groupsPresent = prefix.split(":").filter((g) => g !== "").length;
  const expanded = prefix.includes("::") ? prefix.replace("::", `:${"0:".repeat(8 - groupsPresent)}`).replace(/^:|:$/g, "") : prefix;
  return expanded.split(":").reduce((acc, group) => (acc << 16n) | BigInt(`0x${group}`), 0n);
}

function span(r: { prefix: string; length: number; family: Family }) {
  const bits = BigInt(BITS[r.family] - r.length);
  const first = prefixValue(r.prefix, r.family);
  const last = first + (1n << bits) - 1n;
  return { first, last, inside: first + ((1n << bits) >> 1n) };
}

/** How an IPv4 address can be written in a URL host. */
function ipv4Spellings(n: bigint): string[] {
  const octets = dotted(n).split(".").map(Number);
  return [
    dotted(n),
    String(n),
    `0x${n.toString(16)}`,
    octets.map((o) => `0${o.toString(8)}`).join("."),
    `${octets[0]}.${(n & 0xffffffn).toString()}`, // a.b24 short form
  ];
}

/** IPv6 wrappers around an IPv4 address: none of them lies in public space. */
function ipv4InIPv6Spellings(n: bigint): string[] {
  const hi = ((n >> 16n) & 0xffffn).toString(16);
  const lo = (n & 0xffffn).toString(16);
  const inverted = n ^ 0xffffffffn;
  return [
    `[::ffff:${dotted(n)}]`,
    `[::ffff:${hi}:${lo}]`,
    `[::${dotted(n)}]`,
    `[64:ff9b::${dotted(n)}]`,
    `[64:ff9b::${hi}:${lo}]`,
    `[64:ff9b:1::${hi}:${lo}]`,
    `[2002:${hi}:${lo}::1]`,
    `[2001:0:${hi}:${lo}:8000:63bf:${((inverted >> 16n) & 0xffffn).toString(16)}:${(inverted & 0xffffn).toString(16)}]`, // Teredo
  ];
}

function ipv6Spellings(n: bigint): string[] {
  const full = fullIPv6(n);
  const compressed = new URL(`https://[${full}]/`).hostname.slice(1, -1);
  return [`[${full}]`, `[${full.toUpperCase()}]`, `[${compressed}]`, `[${compressed.toUpperCase()}]`];
}

const spellings = (n: bigint, family: Family) => (family === "ipv4" ? ipv4Spellings(n) : ipv6Spellings(n));
const ALL_ROWS = [...V4_ROWS, ...V6_ROWS];
const label = (r: RegistryRow) => `${r.prefix}/${r.length} ${r.name} (${r.rfc}, reachable ${r.reachable})`;

describe("the registry tables (test side) are consistent with node:net", () => {
  it.each(ALL_ROWS.map((r) => [label(r), r] as const))("%s: first, last and inside are in it, their neighbours are not", (_, r) => {
    const { first, last, inside } = span(r);
    for (const n of [first, last, inside]) expect(r.list.check(text(n, r.family), r.family), text(n, r.family)).toBe(true);
    if (first > 0n) expect(r.list.check(text(first - 1n, r.family), r.family)).toBe(false);
    if (last < (1n << BigInt(BITS[r.family])) - 1n) expect(r.list.check(text(last + 1n, r.family), r.family)).toBe(false);
  });
});

describe("every registry row: first, last and an inside address, in every spelling", () => {
  it.each(ALL_ROWS.map((r) => [label(r), r] as const))("%s", (_, r) => {
    const { first, last, inside } = span(r);
    for (const n of [first, last, inside]) {
      // A row that is not globally reachable is refused outright; a reachable one is public unless it
      // lies outside IPv6 global unicast (64:ff9b::/96 reaches an IPv4 address, which may be private).
      const expected = r.reachable === "True" ? expectedPublic(text(n, r.family), r.family) : false;
      for (const spelling of spellings(n, r.family)) {
        expect(allowed(`https://${spelling}/`), `${spelling} in ${label(r)}`).toBe(expected);
      }
    }
  });

  it.each(V4_ROWS.map((r) => [label(r), r] as const))("%s: refused inside IPv6 (mapped, compatible, NAT64, 6to4, Teredo)", (_, r) => {
    const { first, last, inside } = span(r);
    for (const n of [first, last, inside]) {
      for (const spelling of ipv4InIPv6Spellings(n)) expect(allowed(`https://${spelling}/`), spelling).toBe(false);
    }
  });
});

describe("just outside each row: allowed when globally reachable", () => {
  it.each(ALL_ROWS.map((r) => [label(r), r] as const))("%s", (_, r) => {
    const { first, last } = span(r);
    const max = (1n << BigInt(BITS[r.family])) - 1n;
    for (const n of [first - 1n, last + 1n].filter((v) => v >= 0n && v <= max)) {
      const expected = expectedPublic(text(n, r.family), r.family);
      for (const spelling of spellings(n, r.family)) {
        expect(allowed(`https://${spelling}/`), `${spelling} next to ${label(r)}`).toBe(expected);
      }
    }
  });

  it.each([
    ["https://9.255.255.255/"],
    ["https://11.0.0.0/"],
    ["https://126.255.255.255/"],
    ["https://128.0.0.0/"],
    ["https://172.15.255.255/"],
    ["https://172.32.0.0/"],
    ["https://192.167.255.255/"],
    ["https://192.169.0.0/"],
    ["https://198.17.255.255/"],
    ["https://198.20.0.0/"],
    ["https://223.255.255.255/"],
    ["https://192.0.0.9/"],
    ["https://192.0.0.10/"],
    ["https://192.0.1.0/"],
    ["https://[2000::]/"],
    ["https://[3fff:1000::]/"],
    ["https://[2001:200::]/"],
    ["https://[2001:db7:ffff:ffff:ffff:ffff:ffff:ffff]/"],
    ["https://[2001:db9::]/"],
    ["https://[2001:1::1]/"],
    ["https://[2001:4:112::1]/"],
    ["https://[2001:20::1]/"],
    ["https://[2001:30::1]/"],
    ["https://[2003::]/"],
    ["https://[2001:ffff::]/"],
  ])("allows %s", (raw) => {
    expect(allowed(raw)).toBe(true);
  });
});

describe("property: the verdict on a random address equals the test table's (fast-check)", () => {
  const near = (family: Family, rows: typeof ALL_ROWS) =>
    fc
      .tuple(fc.constantFrom(...rows), fc.bigInt({ min: 0n, max: (1n << BigInt(BITS[family])) - 1n }), fc.integer({ min: -2, max: 2 }))
      .map(([r, random, step]) => {
        // A random address inside the row, or a step past one of its edges.
        const { first, last } = span(r);
        const inside = first + (random % (last - first + 1n));
        const n = step === 0 ? inside : step < 0 ? first + BigInt(step) : last + BigInt(step);
        const max = (1n << BigInt(BITS[family])) - 1n;
        return n < 0n ? 0n : n > max ? max : n;
      });

  it("for IPv4 in dotted, decimal and hex spellings", () => {
    const address = fc.oneof(fc.bigInt({ min: 0n, max: 0xffffffffn }), near("ipv4", V4_ROWS));
    fc.assert(
      fc.property(address, fc.constantFrom(0, 1, 2), (n, spelling) => {
        const host = [dotted(n), String(n), `0x${n.toString(16)}`][spelling]!;
        expect(allowed(`https://${host}/`), host).toBe(expectedPublic(dotted(n), "ipv4"));
      }),
      { numRuns: 3000 },
    );
  });

  it("for IPv6 in full hex, either case", () => {
    const address = fc.oneof(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), near("ipv6", V6_ROWS));
    fc.assert(
      fc.property(address, fc.boolean(), (n, upper) => {
        const host = upper ? fullIPv6(n).toUpperCase() : fullIPv6(n);
        expect(allowed(`https://[${host}]/`), host).toBe(expectedPublic(fullIPv6(n), "ipv6"));
      }),
      { numRuns: 3000 },
    );
  });
});
