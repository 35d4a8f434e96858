/**
 * The local profile: what production enforces and workerd does not, enforced (or only metered) on
 * a local run. It wraps the Worker's handlers and the Durable Object classes (platform/local-worker.ts
 * is the entry every local config and the integration tests run; wrangler.toml's `main` stays
 * src/index.ts, so none of this is deployed). Each invocation (a fetch, a queue batch, a cron run, a
 * Durable Object call) gets a record carried by AsyncLocalStorage through all its promises, and every
 * binding call and fetch made in it is checked against platform/limits.ts:
 *
 * - `waitUntil` work of a non-actor handler is cut WAIT_UNTIL_AFTER_RETURN_MS after the handler
 *   returns (its further I/O throws), a queue or cron invocation at INVOCATION_WALL_MS;
 * - subrequests and D1 queries per invocation; at most 6 connections (fetch, queue sends, R2)
 *   waiting for their answer at once (a 7th waits for a free one, as production queues it: its
 *   timeout runs meanwhile);
 * - SQL statements (D1 and Durable Object SQLite): bound parameters and statement bytes; D1 result bytes;
 * - queue sends: message and batch bytes, messages per batch, delay;
 * - RPC arguments' bytes; requests per Durable Object per second (production answers "overloaded").
 *
 * In "enforce" mode (tests, `npm start`) a breach throws PlatformLimitError and is recorded, so a test
 * fails even where the code catches the error; "meter" (the bench) only counts requests (per
 * invocation, per object), measuring no sizes, so its CPU figures stay near the runtime's. Either
 * way `platformReport()` gives the peaks, which the bench prints.
 */

import { breach, currentInvocation, metering, objectRequest, onConnection, peaks, subrequest } from "./invocations";
import * as LIMITS from "./limits";

/** `fetch` counted and limited per invocation (installed once, as the global). */
export function limitedFetch(original: typeof fetch): typeof fetch {
  return (input, init) => {
    if (!currentInvocation()) return original(input, init);
    subrequest("fetch");
    return onConnection(() => original(input, init));
  };
}

// ---------------------------------------------------------------------------------------------
// bindings

const bindingProxies = new WeakMap<object, object>();

/** The Worker's (or an object's) env with every binding counted and checked. */
export function limitedEnv<E extends object>(env: E): E {
  const cached = bindingProxies.get(env);
  if (cached) return cached as E;
  const limited = new Proxy(env, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      return typeof property === "string" ? limitedBinding(property, value) : value;
    },
  });
  bindingProxies.set(env, limited);
  return limited;
}

function limitedBinding(name: string, value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const cached = bindingProxies.get(value);
  if (cached) return cached;
  let limited: object;
  switch (Object.prototype.toString.call(value)) {
    case "[object DurableObjectNamespace]":
      limited = limitedNamespace(name, value as DurableObjectNamespace);
      break;
    case "[object WorkerQueue]":
      limited = limitedQueue(name, value as Queue);
      break;
    case "[object R2Bucket]":
      limited = countedCalls(name, value, true);
      break;
    case "[object Fetcher]":
      limited = countedCalls(name, value, false);
      break;
    default:
      if ((value as { constructor?: { name?: string } }).constructor?.name !== "D1Database") return value;
      limited = limitedD1(value as D1Database);
  }
  bindingProxies.set(value, limited);
  return limited;
}

/** Every method call a subrequest (R2, service bindings), an R2 call on a connection. */
function countedCalls(name: string, binding: object, connection: boolean): object {
  return new Proxy(binding, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof property !== "string" || typeof value !== "function" || property === "then") return value;
      return (...args: unknown[]) => {
        subrequest(`${name}.${property}`);
        const call = () => Reflect.apply(value as (...a: unknown[]) => Promise<unknown>, target, args);
        return connection ? onConnection(call) : call();
      };
    },
  });
}

function limitedNamespace(binding: string, namespace: DurableObjectNamespace): DurableObjectNamespace {
  const names = new WeakMap<DurableObjectId, string>();
  return new Proxy(namespace, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      switch (property) {
        case "idFromName":
          return (name: string) => {
            const id = target.idFromName(name);
            names.set(id, name);
            return id;
          };
        case "get":
          return (id: DurableObjectId, options?: DurableObjectNamespaceGetDurableObjectOptions) =>
            limitedStub(`${binding}:${names.get(id) ?? id.toString()}`, target.get(id, options));
        case "getByName":
          return (name: string, options?: DurableObjectNamespaceGetDurableObjectOptions) =>
            limitedStub(`${binding}:${name}`, target.getByName(name, options));
        default:
          return value.bind(target);
      }
    },
  });
}

function limitedStub<S extends object>(object: string, stub: S): S {
  return new Proxy(stub, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof property !== "string" || typeof value !== "function" || property === "then") return value;
      return (...args: unknown[]) => {
        subrequest(`${object}.${property}`);
        objectRequest(object);
        if (!metering()) {
          const bytes = jsonBytes(args);
          peaks.rpcBytes = Math.max(peaks.rpcBytes, bytes);
          if (bytes > LIMITS.RPC_MAX_BYTES) breach("RPC size", `${object}.${property} with ${bytes} bytes of arguments`);
        }
        return Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
      };
    },
  });
}

function limitedQueue(name: string, queue: Queue): Queue {
  const check = (bodies: { body: unknown; delaySeconds?: number | undefined }[]) => {
    subrequest(`${name}.send`);
    if (metering()) return;
    if (bodies.length > LIMITS.QUEUE_BATCH_MESSAGES) breach("queue batch", `${bodies.length} messages in one sendBatch to ${name}`);
    let total = 0;
    for (const { body, delaySeconds } of bodies) {
      const bytes = jsonBytes(body);
      total += bytes;
      peaks.queueMessageBytes = Math.max(peaks.queueMessageBytes, bytes);
      if (bytes > LIMITS.QUEUE_MESSAGE_BYTES) breach("queue message size", `a ${bytes}-byte message to ${name}`);
      if ((delaySeconds ?? 0) > LIMITS.QUEUE_MAX_DELAY_SECONDS) breach("queue delay", `delaySeconds ${delaySeconds} to ${name}`);
    }
    if (total > LIMITS.QUEUE_BATCH_BYTES) breach("queue batch", `${total} bytes in one sendBatch to ${name}`);
  };
  return new Proxy(queue, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === "send")
        return (body: unknown, options?: QueueSendOptions) => {
          check([{ body, delaySeconds: options?.delaySeconds }]);
          return onConnection(() => target.send(body, options));
        };
      if (property === "sendBatch")
        return (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
          const all = [...messages];
          check(all.map((m) => ({ body: m.body, delaySeconds: m.delaySeconds ?? options?.delaySeconds })));
          return onConnection(() => target.sendBatch(all, options));
        };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

// ---------------------------------------------------------------------------------------------
// SQL

const encoder = new TextEncoder();

function checkStatement(where: string, query: string, parameters: number): void {
  const bytes = encoder.encode(query).byteLength;
  if (bytes > LIMITS.SQL_MAX_STATEMENT_BYTES) breach("SQL statement size", `${bytes} bytes of SQL in ${where}`);
  if (parameters > LIMITS.SQL_MAX_BOUND_PARAMETERS)
    breach("SQL bound parameters", `${parameters} bound parameters in ${where} (at most ${LIMITS.SQL_MAX_BOUND_PARAMETERS})`);
}

/** `statements` D1 statements of the current invocation: a subrequest, and its share of the queries an invocation may run. */
function d1Queries(statements: number): void {
  subrequest("D1");
  const invocation = currentInvocation();
  if (!invocation) return;
  invocation.d1Queries += statements;
  peaks.d1QueriesPerInvocation = Math.max(peaks.d1QueriesPerInvocation, invocation.d1Queries);
  if (invocation.d1Queries > LIMITS.D1_QUERIES_PER_INVOCATION)
    breach("D1 queries per invocation", `${invocation.d1Queries} > ${LIMITS.D1_QUERIES_PER_INVOCATION} in ${invocation.kind}`);
}

function checkD1Result<T>(result: T): T {
  if (metering()) return result; // sizes cost CPU the bench must not count
  const bytes = jsonBytes(result);
  peaks.d1ResultBytes = Math.max(peaks.d1ResultBytes, bytes);
  if (bytes > LIMITS.D1_MAX_RESULT_BYTES) breach("D1 result size", `a ${bytes}-byte result`);
  return result;
}

/** D1: each query a subrequest, its statement and result checked; batches take the real statements. */
function limitedD1(d1: D1Database): D1Database {
  const real = new WeakMap<object, D1PreparedStatement>();
  const statement = (query: string, prepared: D1PreparedStatement): D1PreparedStatement => {
    const limited: D1PreparedStatement = new Proxy(prepared, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property === "bind")
          return (...values: unknown[]) => {
            checkStatement("a D1 statement", query, values.length);
            return statement(query, target.bind(...values));
          };
        if (property === "first" || property === "all" || property === "run" || property === "raw")
          return async (...args: unknown[]) => {
            d1Queries(1);
            return checkD1Result(await Reflect.apply(value as (...a: unknown[]) => Promise<unknown>, target, args));
          };
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    real.set(limited, prepared);
    return limited;
  };
  return new Proxy(d1, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === "prepare")
        return (query: string) => {
          checkStatement("a D1 statement", query, 0);
          return statement(query, target.prepare(query));
        };
      if (property === "batch")
        return async (statements: D1PreparedStatement[]) => {
          d1Queries(statements.length);
          const results = await target.batch(statements.map((s) => real.get(s) ?? s));
          for (const r of results) checkD1Result(r);
          return results;
        };
      if (property === "exec")
        return (query: string) => {
          d1Queries(1);
          checkStatement("D1 exec", query, 0);
          return target.exec(query);
        };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Checks the SQL statements of a Durable Object's state. In place: the runtime accepts only its own
 * state object, so its SQL's exec is replaced on that object.
 */
export function limitState(state: DurableObjectState): DurableObjectState {
  const sql = state.storage.sql;
  const exec = sql.exec.bind(sql);
  Object.defineProperty(sql, "exec", {
    configurable: true,
    writable: true,
    value: (query: string, ...bindings: unknown[]) => {
      checkStatement("a Durable Object SQL statement", query, bindings.length);
      return exec(query, ...bindings);
    },
  });
  return state;
}

/** A value's JSON size in bytes (what crosses a queue or an RPC, near enough); 0 when it is not JSON. */
function jsonBytes(value: unknown): number {
  try {
    return encoder.encode(JSON.stringify(value) ?? "").byteLength;
  } catch {
    return 0;
  }
}
