/**
 * What a job may point at ("validate at the door", STYLE.md habit 8): in production only public
 * https targets; loopback, private, link-local and metadata addresses are refused in every spelling
 * the WHATWG URL parser normalizes (decimal, hex, short IPv4, IPv4-mapped IPv6).
 */
import { describe, expect, it } from "vitest";
import { checkTargetUrl } from "../../src/core/target-policy";

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
    ["https://[2606:4700:4700::1111]/", "https://[2606:4700:4700::1111]/"],
    ["https://[2001:db8::1]/", "https://[2001:db8::1]/"],
    ["https://localhost.example.com/", "https://localhost.example.com/"], // only the localhost TLD is local
    ["https://mylocalhost/", "https://mylocalhost/"],
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
    ["https://127.0.0.1/", "loopback"],
    ["https://127.255.255.254/", "loopback"],
    ["https://127.1/", "loopback"],
    ["https://2130706433/", "loopback"],
    ["https://0x7f000001/", "loopback"],
    ["https://0x7f.0.0.1/", "loopback"],
    ["https://017700000001/", "loopback"],
    ["https://127.0.0.1./", "loopback"],
    // private, CGNAT, link-local, metadata, this-network, multicast, broadcast
    ["https://10.0.0.1/", "loopback"],
    ["https://10.255.255.255/", "loopback"],
    ["https://172.16.0.1/", "loopback"],
    ["https://172.31.255.255/", "loopback"],
    ["https://192.168.1.1/", "loopback"],
    ["https://169.254.169.254/latest/meta-data/", "loopback"],
    ["https://169.254.0.1/", "loopback"],
    ["https://100.64.0.1/", "loopback"],
    ["https://100.127.255.255/", "loopback"],
    ["https://0.0.0.0/", "loopback"],
    ["https://0/", "loopback"],
    ["https://224.0.0.1/", "loopback"],
    ["https://255.255.255.255/", "loopback"],
    // IPv6
    ["https://[::1]/", "loopback"],
    ["https://[0:0:0:0:0:0:0:1]/", "loopback"],
    ["https://[::]/", "loopback"],
    ["https://[fc00::1]/", "loopback"],
    ["https://[fd12:3456:789a::1]/", "loopback"],
    ["https://[fe80::1]/", "loopback"],
    ["https://[febf::1]/", "loopback"],
    ["https://[ff02::1]/", "loopback"],
    ["https://[::ffff:127.0.0.1]/", "loopback"],
    ["https://[::ffff:7f00:1]/", "loopback"],
    ["https://[::ffff:10.0.0.1]/", "loopback"],
    ["https://[::ffff:a9fe:a9fe]/", "loopback"], // 169.254.169.254
    ["https://[::ffff:192.168.0.1]/", "loopback"],
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
