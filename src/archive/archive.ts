/**
 * The history archive (docs/deploying.md, "History archive"): with an R2 bucket bound as ARCHIVE, the scan
 * writes finished executions to it before their rows leave D1 (scanner/scan.ts), and
 * GET /v1/executions/:id reads one back once D1 no longer has it.
 *
 * Layout, one object per tenant, hour and purge page:
 *   executions/tenant=<tenant, URI-encoded>/date=<YYYY-MM-DD>/hour=<HH>/<first execution id>.<content hash>.ndjson.gz
 * The hour (UTC) is the execution id's own time: a one-off job's creation, a recurring job's
 * occurrence time, so an id alone names its hour's prefix. An object is gzip-compressed NDJSON,
 * one ArchivedExecution per line, in id order; its custom metadata says its last id and count.
 *
 * Written once: a purge page is chosen in a fixed order (db/purge-archived.ts purgeArchivedHistory), so a
 * retried write after a failure produces the same key and the same bytes; the key ends with a hash
 * of the content, so an object is never overwritten with other content (a page whose rows changed
 * in between is another object, and an execution may then be in two: dedupe on id). Nothing is
 * deleted from D1 before every object of its page is durable (put resolved).
 */

import { timeOfId } from "../core/id";
import { toRfc3339 } from "../core/when";
import type { AttemptRecord } from "../protocol/bucket";
import type { AttemptView, ExecutionView as ExecutionResponse } from "../schemas/responses";
import { type ExecutionView, presentAttempt, presentExecution } from "../use-cases/present";

/** the format of a line; raised on any change a reader must know of */
export const ARCHIVE_SCHEMA_VERSION = 1;
export const ARCHIVE_ROOT = "executions/";

/** One line of an archive object: the execution as GET /v1/executions/:id shows it, and its context. */
export interface ArchivedExecution extends ExecutionResponse {
  tenant: string;
  /** "one-off": a one-off job's only execution; "occurrence": one run of a recurring job */
  kind: "one-off" | "occurrence";
  jobName: string | null;
  /** the job's labels (a recurring job's as they were when the occurrence was archived) */
  labels: Record<string, string>;
  /** every attempt: its times, outcome, HTTP status, error and response excerpt (a span id is not kept: the job's trace is not) */
  attemptLog: Omit<AttemptView, "spanId">[];
}

/** What the purge hands over: an execution leaving D1, with its job's name and labels. */
export interface LeavingExecution {
  tenant: string;
  kind: ArchivedExecution["kind"];
  view: ExecutionView;
  jobName: string | null;
  /** the job's labels JSON as D1 keeps it (null: none) */
  labels: string | null;
}

export function archivedExecution(e: LeavingExecution): ArchivedExecution {
  return {
    ...presentExecution(e.view),
    tenant: e.tenant,
    kind: e.kind,
    jobName: e.jobName,
    labels: e.labels === null ? {} : (JSON.parse(e.labels) as Record<string, string>),
    attemptLog: e.view.attemptLog.map((a: AttemptRecord) => {
      const { spanId: _notKept, ...attempt } = presentAttempt(a);
      return attempt;
    }),
  };
}

/** An archived execution as GET /v1/executions/:id shows one (its line less the context). */
export function executionOfArchived(a: ArchivedExecution): ExecutionResponse {
  const { id, jobId, dueAt, status, attempts, lastHttpStatus, lastError, deadReason, finishedAt } = a;
  // a line archived before callbacks existed has none
  return { id, jobId, dueAt, status, attempts, lastHttpStatus, lastError, deadReason, finishedAt, callbacks: a.callbacks ?? [] };
}

/** The prefix of a tenant's hour: every object holding executions whose id time falls in it. */
export function hourPrefix(tenant: string, at: number): string {
  const iso = new Date(Math.floor(at / 3_600_000) * 3_600_000).toISOString();
  return `${ARCHIVE_ROOT}tenant=${encodeURIComponent(tenant)}/date=${iso.slice(0, 10)}/hour=${iso.slice(11, 13)}/`;
}

/** The prefix of every object of a tenant. */
export function tenantPrefix(tenant: string): string {
  return `${ARCHIVE_ROOT}tenant=${encodeURIComponent(tenant)}/`;
}

export interface ArchiveObject {
  /** the tenant's hour, its first id and a hash of its text */
  key: string;
  /** NDJSON, one line per execution, in id order */
  text: string;
  first: string;
  last: string;
  count: number;
}

/** A purge page's executions as objects: one per tenant and hour of their ids, lines in id order. */
export async function objectsOf(leaving: readonly LeavingExecution[]): Promise<ArchiveObject[]> {
  const groups = Map.groupBy(leaving, (e) => hourPrefix(e.tenant, timeOfId(e.view.id) ?? e.view.dueAt));
  const objects = await Promise.all(
    [...groups].map(async ([prefix, group]) => {
      const lines = group.map(archivedExecution).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const first = lines[0]!.id;
      const text = lines.map((line) => `${JSON.stringify(line)}\n`).join("");
      return { key: `${prefix}${first}.${await contentHash(text)}${SUFFIX}`, text, first, last: lines.at(-1)!.id, count: lines.length };
    }),
  );
  return objects.sort((a, b) => (a.key < b.key ? -1 : 1));
}

const SUFFIX = ".ndjson.gz";

/** The first 16 hex digits of the text's SHA-256: other content, another key. */
async function contentHash(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return [...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** An object key's first execution id (its name up to the hash). */
function firstIdOf(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1).split(".")[0]!;
}

export async function gzip(text: string): Promise<Uint8Array> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export async function gunzip(bytes: ReadableStream | ArrayBuffer | Uint8Array): Promise<string> {
  const body = bytes instanceof ReadableStream ? bytes : new Blob([bytes as Uint8Array<ArrayBuffer>]).stream();
  return new Response(body.pipeThrough(new DecompressionStream("gzip"))).text();
}

/** What an archive write did: objects and compressed bytes put, executions in them. */
export interface ArchiveWrite {
  objects: number;
  bytes: number;
  executions: number;
}

/**
 * Writes a purge page's executions and resolves once every object is durable; a failed put rejects
 * (the caller deletes nothing, and the next scan writes the same objects again).
 */
export async function writeArchive(bucket: R2Bucket, leaving: readonly LeavingExecution[]): Promise<ArchiveWrite> {
  const objects = await objectsOf(leaving);
  let bytes = 0;
  // a page of many tenants is many objects: a few puts at a time
  for (let i = 0; i < objects.length; i += PUTS_AT_ONCE) {
    const sizes = await Promise.all(
      objects.slice(i, i + PUTS_AT_ONCE).map(async (o) => {
        const body = await gzip(o.text);
        await bucket.put(o.key, body, {
          httpMetadata: { contentType: "application/gzip" },
          customMetadata: { last: o.last, count: String(o.count), schema: String(ARCHIVE_SCHEMA_VERSION) },
        });
        return body.byteLength;
      }),
    );
    bytes += sizes.reduce((n, b) => n + b, 0);
  }
  return { objects: objects.length, bytes, executions: leaving.length };
}

/** puts in flight at once while a page is written (an invocation has 6 connections) */
const PUTS_AT_ONCE = 6;

/** the most list pages an id's hour is searched through (1,000 objects each) */
const FIND_LIST_PAGES = 20;

/**
 * An archived execution by id, or undefined. Its hour's prefix follows from the id; the objects of
 * that prefix whose [first, last] range holds the id are read, and the latest outcome found is
 * returned (a redriven execution is archived again). Costs one R2 list (a class A operation) per
 * 1,000 objects of the tenant's hour, searched up to FIND_LIST_PAGES, and one read (class B) per
 * object whose range holds the id: usually one.
 */
export async function findArchived(
  bucket: R2Bucket,
  tenant: string,
  id: string,
): Promise<{ execution: ArchivedExecution; key: string } | undefined> {
  const at = timeOfId(id);
  if (at === undefined) return undefined;
  const prefix = hourPrefix(tenant, at);
  let found: { execution: ArchivedExecution; key: string } | undefined;
  let cursor: string | undefined;
  for (let page = 0; page < FIND_LIST_PAGES; page++) {
    const listed = await bucket.list({ prefix, cursor, include: ["customMetadata"] });
    for (const object of listed.objects) {
      const first = firstIdOf(object.key);
      const last = object.customMetadata?.last ?? first;
      if (id < first || id > last) continue;
      const body = await bucket.get(object.key);
      if (!body) continue;
      for (const line of (await gunzip(body.body)).split("\n")) {
        if (!line.includes(id)) continue;
        const execution = JSON.parse(line) as ArchivedExecution;
        if (execution.id !== id || execution.tenant !== tenant) continue;
        if (!found || (execution.finishedAt ?? "") > (found.execution.finishedAt ?? "")) found = { execution, key: object.key };
      }
    }
    if (!listed.truncated) break;
    cursor = listed.cursor;
  }
  return found;
}

/** One archive object as GET /v1/archive lists it. */
export interface ArchiveObjectView {
  key: string;
  size: number;
  executions: number;
  firstId: string;
  lastId: string;
  uploadedAt: string;
}

/** A page of a tenant's archive objects in key order (time order: date, hour, first id). */
/**
 * The list's cursor as the API hands it out: R2's own, marked and encoded, so that one the API did
 * not hand out is told apart and refused (the local R2 answers an unknown cursor with an empty page,
 * which a paging client would take for the end).
 */
export function archiveCursorOf(r2Cursor: string): string {
  return `a1.${btoa(r2Cursor).replace(/=+$/, "").replaceAll("+", "-").replaceAll("/", "_")}`;
}

/** R2's cursor in one the API handed out, or null when `cursor` is not one. */
export function r2CursorOf(cursor: string): string | null {
  if (!cursor.startsWith("a1.")) return null;
  try {
    const decoded = atob(cursor.slice(3).replaceAll("-", "+").replaceAll("_", "/"));
    return decoded.length > 0 && archiveCursorOf(decoded) === cursor ? decoded : null;
  } catch {
    return null;
  }
}

export async function listArchive(
  bucket: R2Bucket,
  tenant: string,
  options: { cursor?: string | undefined; limit: number; prefix?: string | undefined },
): Promise<{ objects: ArchiveObjectView[]; nextCursor: string | null }> {
  const root = tenantPrefix(tenant);
  const listed = await bucket.list({
    prefix: `${root}${options.prefix ?? ""}`,
    cursor: options.cursor === undefined ? undefined : (r2CursorOf(options.cursor) ?? undefined),
    limit: options.limit,
    include: ["customMetadata"],
  });
  return {
    objects: listed.objects.map((o) => {
      const first = firstIdOf(o.key);
      return {
        key: o.key,
        size: o.size,
        executions: Number(o.customMetadata?.count ?? 0),
        firstId: first,
        lastId: o.customMetadata?.last ?? first,
        uploadedAt: toRfc3339(o.uploaded.getTime()),
      };
    }),
    nextCursor: listed.truncated ? archiveCursorOf(listed.cursor) : null,
  };
}
