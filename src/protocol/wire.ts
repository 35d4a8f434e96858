/**
 * The wire, in one table: every message a party sends another (the fire queues) and every RPC of a
 * Durable Object that other code calls, with the schemas of its arguments and of its answer. During
 * a deploy the Worker (API, consumers, scanner) and each object may each run the previous release
 * or the new one for minutes (test/contract/README.md), so every entry here is read by both.
 *
 * The table is checked against the code at compile time: each entry's schemas hold what its method
 * takes and answers (`Fits`), and every public method of each object has an entry. The contract
 * test (test/integration/contract.test.ts) holds real flows to it, and test/contract/ keeps each
 * release's JSON Schemas (wireJsonSchema) and recorded samples.
 */
import type { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import type { BulkAction } from "../actions/bulk-action";
import type { Alerts } from "../alerts/alerts";
import type { Bucket } from "../bucket/bucket";
import type { DebounceKeys } from "../debounce/debounce-keys";
import type { FlowKey } from "../flow/flow-key";
import type { IdempotencyKeys } from "../idempotency/idempotency-keys";
import type { PullQueue } from "../pull/pull-queue";
import {
  AppliedSchema,
  ArchiveCountSchema,
  BucketCountsSchema,
  BucketMetricsSchema,
  ClaimResultSchema,
  CompletionReportSchema,
  CompletionResultSchema,
  CounterNameSchema,
  D1MeterSchema,
  ExecutionRefSchema,
  HeartbeatResultSchema,
  InspectQuerySchema,
  JobDefinitionSchema,
  LeaseRefSchema,
  LiveExecutionSchema,
  OfferedLeaseRefSchema,
  OfferedRefSchema,
  OfferRefSchema,
  PoisonResultSchema,
  PullWindowResultSchema,
  RedriveOrderSchema,
  RedriveResultSchema,
} from "./bucket";
import { FireGroupSchema, FireMessageSchema } from "./fire";
import {
  ActionStateSchema,
  AlertTargetSchema,
  BulkStartSchema,
  DeathSchema,
  DebounceAnswerSchema,
  FlowAnswerSchema,
  FlowAskSchema,
  FlowKeyViewSchema,
  FlowLimitsSchema,
  FlowReleaseSchema,
  KeyClaimSchema,
  KeyOwnerSchema,
  KeyReleaseSchema,
  PreparedJobSchema,
  PullLeaseRequestSchema,
  PullLeaseSchema,
  PullQueueViewSchema,
  ThrottleSchema,
} from "./objects";

/** One RPC: its arguments (a tuple; trailing arguments beyond it are ignored, as JavaScript does) and its answer. */
export interface Rpc {
  args: z.ZodType<readonly unknown[]>;
  result: z.ZodType;
}

function rpc<const A extends readonly [] | readonly [z.ZodType, ...z.ZodType[]], R extends z.ZodType>(args: A, result: R) {
  return { args: z.tuple(args as unknown as [z.ZodType, ...z.ZodType[]]).rest(z.unknown()) as unknown as ArgsOf<A>, result };
}
/** The arguments' type as zod infers a tuple (a trailing optional schema is an optional argument). */
type ArgsOf<A extends readonly [] | readonly [z.ZodType, ...z.ZodType[]]> = z.ZodType<z.infer<z.ZodTuple<[...A], null>>>;

/** The fire queues' messages: every kind the consumer accepts (a bucket sends only the newest). */
export const MESSAGES = { FireGroup: FireGroupSchema, FireMessage: FireMessageSchema } as const;

const Void = z.void();

export const RPCS = {
  Bucket: rpcsOf<Bucket>()({
    applyJobs: rpc([z.number(), z.array(JobDefinitionSchema), z.array(D1MeterSchema).optional()], z.array(AppliedSchema)),
    pullWindow: rpc([z.number()], PullWindowResultSchema),
    redrive: rpc([z.number(), z.array(RedriveOrderSchema)], z.array(RedriveResultSchema)),
    claim: rpc([z.array(ExecutionRefSchema)], z.array(ClaimResultSchema)),
    leaseOffered: rpc([z.array(OfferedLeaseRefSchema)], z.array(ClaimResultSchema)),
    stillOffered: rpc([z.array(OfferedRefSchema)], z.array(z.boolean())),
    heartbeat: rpc([z.array(LeaseRefSchema)], z.array(HeartbeatResultSchema)),
    complete: rpc([z.array(CompletionReportSchema)], z.array(CompletionResultSchema)),
    markPoisoned: rpc([z.array(ExecutionRefSchema)], z.array(PoisonResultSchema)),
    metrics: rpc([], BucketMetricsSchema),
    bump: rpc([CounterNameSchema, z.string(), z.number()], Void),
    countD1RowsOf: rpc([z.array(D1MeterSchema), ArchiveCountSchema.optional()], Void),
    counts: rpc([], BucketCountsSchema),
    inspect: rpc([InspectQuerySchema], z.array(LiveExecutionSchema)),
  }),
  PullQueue: rpcsOf<PullQueue>()({
    offer: rpc([z.array(OfferRefSchema)], Void),
    lease: rpc([PullLeaseRequestSchema], z.array(PullLeaseSchema)),
    view: rpc([], PullQueueViewSchema),
  }),
  FlowKey: rpcsOf<FlowKey>()({
    ask: rpc([FlowLimitsSchema, z.array(FlowAskSchema)], z.array(FlowAnswerSchema)),
    release: rpc([z.array(FlowReleaseSchema)], Void),
    view: rpc([], FlowKeyViewSchema),
    setPaused: rpc([z.boolean()], FlowKeyViewSchema),
    changeLimits: rpc([FlowLimitsSchema.partial()], FlowKeyViewSchema),
    /** new in the release after 35be0c9 (an origin key's parts): a part of the previous release lacks it, and the caller logs that */
    slowDown: rpc([z.number()], Void),
  }),
  IdempotencyKeys: rpcsOf<IdempotencyKeys>()({
    claim: rpc([z.array(KeyClaimSchema), z.number()], z.array(KeyOwnerSchema)),
    release: rpc([z.array(KeyReleaseSchema)], Void),
  }),
  DebounceKeys: rpcsOf<DebounceKeys>()({
    submit: rpc([z.string(), PreparedJobSchema, z.number()], DebounceAnswerSchema),
  }),
  Alerts: rpcsOf<Alerts>()({
    setTarget: rpc([z.string(), AlertTargetSchema.nullable()], Void),
    target: rpc([], AlertTargetSchema.nullable()),
    record: rpc([z.array(DeathSchema)], Void),
    recordThrottle: rpc([ThrottleSchema], Void),
  }),
  BulkAction: rpcsOf<BulkAction>()({
    start: rpc([BulkStartSchema], z.object({ state: ActionStateSchema, reused: z.boolean() })),
    view: rpc([], ActionStateSchema.nullable()),
  }),
} as const;

export type ObjectName = keyof typeof RPCS;

// --- the compile-time check of the table against the objects -----------------------------------------

/** true when every value of type A is one of B (what the code sends validates against the schema). */
type Fits<A, B> = [A] extends [B] ? true : false;
/** An object's RPCs: its public methods beyond those every Durable Object has. */
type RpcNames<C> = { [K in Exclude<keyof C, keyof DurableObject>]: C[K] extends (...args: never[]) => unknown ? K : never }[Exclude<
  keyof C,
  keyof DurableObject
>];
type Checked<C, S> = {
  [K in keyof S]: K extends keyof C
    ? C[K] extends (...args: infer A) => infer R
      ? S[K] extends { args: z.ZodType<infer WA>; result: z.ZodType<infer WR> }
        ? Fits<A, WA> extends true
          ? Fits<Awaited<R>, WR> extends true
            ? S[K]
            : { error: "the method answers what its result schema does not hold" }
          : { error: "the method takes arguments its args schema does not hold" }
        : never
      : { error: "not a method of the object" }
    : { error: "not a method of the object" };
};
type Complete<C, S> = [Exclude<RpcNames<C>, keyof S>] extends [never] ? unknown : { missing: Exclude<RpcNames<C>, keyof S> };

/** The RPC table of one object, checked against its class: every entry fits its method, every method has an entry. */
function rpcsOf<C>() {
  return <S extends Record<string, Rpc>>(specs: S & Checked<C, S> & Complete<C, S>): S => specs;
}

// --- JSON Schema: what each release's snapshot keeps (test/contract/) -----------------------------------

export type JsonSchema = Record<string, unknown>;

/** The wire as JSON Schema (draft 2020-12, the input side of each schema): messages and RPCs by object. */
export interface WireJsonSchema {
  messages: Record<string, JsonSchema>;
  rpcs: Record<string, Record<string, { args: JsonSchema; result: JsonSchema }>>;
}

export function jsonSchemaOf(schema: z.ZodType): JsonSchema {
  const { $schema: _draft, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" });
  return rest;
}

export function wireJsonSchema(): WireJsonSchema {
  const messages = Object.fromEntries(Object.entries(MESSAGES).map(([name, schema]) => [name, jsonSchemaOf(schema)]));
  const rpcs = Object.fromEntries(
    Object.entries(RPCS).map(([object, methods]) => [
      object,
      Object.fromEntries(
        Object.entries(methods as Record<string, Rpc>).map(([method, { args, result }]) => [
          method,
          { args: jsonSchemaOf(args), result: jsonSchemaOf(result) },
        ]),
      ),
    ]),
  );
  return { messages, rpcs };
}
