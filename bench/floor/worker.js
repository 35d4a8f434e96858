// The runtime's floor for webhook delivery (npm run bench:floor): the least work any scheduler on
// this stack must do per delivery, a queue message (or a Durable Object alarm) and one POST to a
// loopback target with its answer read, `concurrency` at a time. No storage, no leases, no claims,
// no signing: so its CPU per delivery is a lower bound for a scheduler of the same message shape.
// With target "binding:" each delivery is a service-binding RPC to a handler entrypoint instead.
import { DurableObject, WorkerEntrypoint } from "cloudflare:workers";

/** deliveries the handler entrypoint took (GET /handled) */
let handled = 0;

/** a handler Worker's entrypoint: what a service-binding delivery calls (here, the same Worker) */
export class Handler extends WorkerEntrypoint {
  async handle(delivery) {
    handled++;
    return { ok: true, id: delivery.id };
  }
}

async function deliverAll(env, target, ids) {
  if (target === "binding:") {
    await Promise.all(ids.map((id) => env.HANDLER.handle({ id, body: JSON.stringify({ id, hello: "world" }) })));
    return;
  }
  await Promise.all(
    ids.map((id) =>
      fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json", "webhook-id": id },
        body: JSON.stringify({ id, hello: "world" }),
      }).then((r) => r.text()),
    ),
  );
}

/** `concurrency` at a time, as the scheduler's consumer delivers a batch */
async function deliverInSteps(env, target, ids, concurrency) {
  for (let i = 0; i < ids.length; i += concurrency) await deliverAll(env, target, ids.slice(i, i + concurrency));
}

/** delivers `n` executions from its alarm, `per` at a time: the shape without a queue hop */
export class Direct extends DurableObject {
  async start(target, n, per) {
    this.ctx.storage.kv.put("work", { target, n, per });
    await this.ctx.storage.setAlarm(Date.now());
  }
  async alarm() {
    const { target, n, per } = this.ctx.storage.kv.get("work");
    const ids = Array.from({ length: n }, (_, i) => `exe_${i}`);
    await deliverInSteps(this.env, target, ids, per);
  }
}

export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const n = Number(u.searchParams.get("n"));
    const per = Number(u.searchParams.get("per") || 1);
    const concurrency = Number(u.searchParams.get("concurrency") || 6);
    const target = u.searchParams.get("target");
    if (u.pathname === "/queue") {
      // `per` executions in each message, sent 100 messages per sendBatch (the platform's most)
      const messages = [];
      for (let i = 0; i < n; i += per) {
        const ids = [];
        for (let j = i; j < Math.min(n, i + per); j++) ids.push(`exe_${j}`);
        messages.push({ body: { target, ids, concurrency } });
      }
      for (let i = 0; i < messages.length; i += 100) await env.Q.sendBatch(messages.slice(i, i + 100));
      return new Response("sent");
    }
    if (u.pathname === "/handled") return new Response(String(handled));
    if (u.pathname === "/direct") {
      await env.D.get(env.D.idFromName("direct")).start(target, n, per);
      return new Response("started");
    }
    return new Response("not found", { status: 404 });
  },
  async queue(batch, env) {
    const { target, concurrency } = batch.messages[0].body;
    const ids = batch.messages.flatMap((m) => m.body.ids);
    await deliverInSteps(env, target, ids, concurrency);
    batch.ackAll();
  },
};
