/**
 * The README and docs/ as a reader finds them (issue 37 item 2): the README stays a front door a
 * user reads in ten minutes (at most 300 lines; each feature's reference is a page under docs/),
 * every relative link in README.md and docs/*.md leads to a file of this repository, every
 * `#anchor` into a Markdown file names a heading (or an `id`) it has, by GitHub's slug rules, and
 * nothing points outside the repository's clone (`../shared`, which a user does not have).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const README = join(ROOT, "README.md");
const DOCS = join(ROOT, "docs");
const PAGES = [
  README,
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith(".md"))
    .map((f) => join(DOCS, f)),
];

/** A Markdown file's lines outside fenced code blocks (a `#` in a shell block is no heading, a `[x](y)` there no link). */
function proseLines(text: string): string[] {
  const lines: string[] = [];
  let fence: string | null = null;
  for (const line of text.split("\n")) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === null || marker.startsWith(fence))) {
      fence = fence === null ? marker : null;
      continue;
    }
    if (fence === null) lines.push(line);
  }
  return lines;
}

/**
 * GitHub's heading anchor (github-slugger): the heading's text as rendered (links as their text,
 * no code or emphasis marks), lower case, every character that is not a letter, digit, mark,
 * space, `-` or `_` removed, each space a `-`; a repeated slug gets `-1`, `-2`, ...
 */
function slugsOf(text: string): Set<string> {
  const slugs = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    for (const id of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) slugs.add(id[1]!);
    if (heading === undefined) continue;
    const rendered = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/<[^>]+>/g, "")
      .replace(/[`*]/g, "");
    const base = rendered
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    slugs.add(n === 0 ? base : `${base}-${n}`);
  }
  return slugs;
}

/** Every link target of a Markdown file's prose: inline links and images, `<img src>`, and reference definitions. */
function linksOf(text: string): string[] {
  const links: string[] = [];
  for (const line of proseLines(text)) {
    for (const m of line.matchAll(/!?\[(?:[^\][]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push(m[1]!);
    for (const m of line.matchAll(/<img\s[^>]*src="([^"]+)"/g)) links.push(m[1]!);
    const definition = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)/.exec(line);
    if (definition) links.push(definition[1]!);
  }
  return links;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target);
const slugCache = new Map<string, Set<string>>();
const anchorsOf = (file: string) => {
  if (!slugCache.has(file)) slugCache.set(file, slugsOf(readFileSync(file, "utf8")));
  return slugCache.get(file)!;
};

/** What is wrong with one relative link from `page`, or null. */
function brokenLink(page: string, target: string): string | null {
  const [path = "", anchor] = target.split("#", 2);
  const file = path === "" ? page : resolve(dirname(page), decodeURIComponent(path));
  if (!file.startsWith(ROOT)) return `${target}: outside the repository`;
  if (!existsSync(file)) return `${target}: no such file`;
  if (anchor === undefined || anchor === "") return null;
  if (statSync(file).isDirectory() || !file.endsWith(".md")) return `${target}: an anchor into something that is not a Markdown file`;
  return anchorsOf(file).has(decodeURIComponent(anchor)) ? null : `${target}: ${relative(ROOT, file)} has no heading #${anchor}`;
}

describe("the README and docs/", () => {
  it("the README is at most 300 lines", () => {
    expect(readFileSync(README, "utf8").trimEnd().split("\n").length).toBeLessThanOrEqual(300);
  });

  it.each(PAGES.map((p) => [relative(ROOT, p), p]))("%s: every relative link resolves, with its #anchor", (_, page) => {
    const broken = linksOf(readFileSync(page, "utf8"))
      .filter((target) => !isExternal(target))
      .map((target) => brokenLink(page, target))
      .filter((problem) => problem !== null);
    expect(broken).toEqual([]);
  });

  it.each(PAGES.map((p) => [relative(ROOT, p), p]))("%s: names nothing outside this repository's clone (../shared)", (_, page) => {
    const lines = readFileSync(page, "utf8").split("\n");
    expect(lines.flatMap((line, i) => (/\.\.\/shared\b/.test(line) ? [`line ${i + 1}: ${line}`] : []))).toEqual([]);
  });

  it("reads anchors as GitHub makes them", () => {
    const page = [
      "# edge-scheduler",
      "## Delivery modes: webhooks, handler Workers, pull workers",
      '### What "exactly-once" means here',
      "### `FIRE_GROUP_SIZE` and [groups](x.md)",
      "## Limits",
      "## Limits",
      "```sh",
      "# not a heading",
      "```",
      '<a id="custom"></a>',
    ].join("\n");
    expect([...slugsOf(page)]).toEqual([
      "edge-scheduler",
      "delivery-modes-webhooks-handler-workers-pull-workers",
      "what-exactly-once-means-here",
      "fire_group_size-and-groups",
      "limits",
      "limits-1",
      "custom",
    ]);
  });

  it("finds a broken link and a missing anchor", () => {
    expect(brokenLink(README, "docs/no-such-page.md")).toMatch(/no such file/);
    expect(brokenLink(README, "#no-such-heading")).toMatch(/has no heading/);
    expect(brokenLink(README, "DEVELOPERS.md")).toBeNull();
    expect(linksOf("[a](b.md) ![c](d.png) `x` [e `f`](g.md#h)\n```\n[no](link.md)\n```")).toEqual(["b.md", "d.png", "g.md#h"]);
  });
});
