// crash: N jobs whose target takes 2 s, all due at T0 + 3 s; kill -9 of the runtime's whole
// process group once half of them have started (arrived at the target); restart on the same
// state directory. Recovery = kill -> first re-delivery of an interrupted execution (one that
// arrived before the kill and was not answered). Bounded by BENCH_CRASH_TIMEOUT_S.
import { arrivalsPerSecond, enqueueSequential, jobSpec, rate } from "../lib/jobs.mjs";
import { withSession } from "../lib/session.mjs";
import { round, shuffle, sleep, waitUntil } from "../lib/stats.mjs";

export async function crash(params, ctx) {
  const { n, leadMs = 3000, handlerMs = 2000, timeoutMs, killWaitMs, killAtFraction = 0.5 } = params;
  return withSession(
    "crash",
    { ...ctx, targetDelayMs: handlerMs },
    async ({ quiet, loadAvgAtStart, target, first, api, sampler, restart, alive, schedulerFigures }) => {
      const url = `${target.url}/slow`;
      const order = shuffle(
        Array.from({ length: n }, (_, i) => i),
        3,
      );
      sampler.mark("start");
      const t0 = Date.now();
      const dueAt = t0 + leadMs;
      const enq = await enqueueSequential(api, order, (i) => ({ ...jobSpec(url, i, dueAt) }), n);
      const enqueueMs = enq.endedAt - t0;

      const distinctStarted = () => {
        const seen = new Set();
        for (const a of target.arrivals) seen.add(a.id);
        return seen.size;
      };
      const accepted = n - enq.refused;
      if (accepted === 0) throw new Error(`every job was refused: ${enq.firstError}`);
      const killThreshold = Math.ceil(accepted * killAtFraction);
      const reachedHalf = await waitUntil(() => !alive() || distinctStarted() >= killThreshold, dueAt + killWaitMs, 20);
      first.stack.kill9();
      const killAt = Date.now();
      const started = new Set();
      const answered = new Set();
      for (const a of target.arrivals) {
        if (a.at <= killAt) started.add(a.id);
        if (a.answeredAt !== null && a.answeredAt <= killAt) answered.add(a.id);
      }
      const interrupted = new Set([...started].filter((id) => !answered.has(id)));
      const preKillStartRate = rate(started.size, killAt - dueAt);
      await waitUntil(() => first.stack.exited(), Date.now() + 10_000, 50);
      const second = await restart();
      const restartedAt = Date.now();

      // every job answered 200 at least once (its target finished the 2 s handler and wrote the 200)
      const answeredIndexes = () => {
        const done = new Uint8Array(n);
        let count = 0;
        for (const a of target.arrivals) {
          if (a.answeredAt !== null && a.i >= 0 && a.i < n && done[a.i] === 0) {
            done[a.i] = 1;
            count += 1;
          }
        }
        return { done, count };
      };
      const deadline = killAt + timeoutMs;
      // stop early once the scheduler holds nothing open: every execution succeeded or dead
      let terminalAt = 0;
      let lastTerminalCheck = 0;
      const settled = async () => {
        if (Date.now() - lastTerminalCheck < 5000) return false;
        lastTerminalCheck = Date.now();
        const c = (await schedulerFigures()).counters;
        if (c && (c.succeeded_total ?? 0) + (c.dead_total ?? 0) >= accepted) terminalAt ||= Date.now();
        return terminalAt > 0 && Date.now() - terminalAt > 5000;
      };
      const allAnswered =
        (await waitUntil(async () => !alive() || answeredIndexes().count >= n || (await settled()), deadline, 250)) &&
        answeredIndexes().count >= n;
      await sleep(1000);
      sampler.mark("end");

      // figures
      const firstAnswer = new Float64Array(n).fill(Number.NaN);
      const perId = new Map();
      let firstAfterRestart = null;
      let recoveryAt = null;
      for (const a of target.arrivals) {
        perId.set(a.id, (perId.get(a.id) ?? 0) + 1);
        if (a.at > killAt) {
          if (firstAfterRestart === null || a.at < firstAfterRestart) firstAfterRestart = a.at;
          if (interrupted.has(a.id) && (recoveryAt === null || a.at < recoveryAt)) recoveryAt = a.at;
        }
        if (a.answeredAt !== null && a.i >= 0 && a.i < n && (Number.isNaN(firstAnswer[a.i]) || a.answeredAt < firstAnswer[a.i])) {
          firstAnswer[a.i] = a.answeredAt;
        }
      }
      let lost = 0;
      let lastAnswer = -Infinity;
      for (let i = 0; i < n; i++) {
        if (Number.isNaN(firstAnswer[i])) lost += 1;
        else lastAnswer = Math.max(lastAnswer, firstAnswer[i]);
      }
      const twice = [...perId.entries()].filter(([, c]) => c > 1);
      const interruptedRerun = twice.filter(([id]) => interrupted.has(id)).length;
      const redeliveredInterrupted = [...interrupted].filter((id) => target.arrivals.some((a) => a.id === id && a.at > killAt)).length;
      const scheduler = await schedulerFigures();
      return {
        scenario: "crash",
        params: { n, handlerMs, leadMs, killAtFraction, killWaitMs, timeoutMs, settings: ctx.settings },
        enqueue: { ms: enqueueMs, refused: enq.refused, firstError: enq.firstError },
        reachedKillThreshold: reachedHalf,
        killAfterDueMs: killAt - dueAt,
        startedBeforeKill: started.size,
        answeredBeforeKill: answered.size,
        interrupted: interrupted.size,
        preKillStartsPerSec: preKillStartRate,
        restartMs: restartedAt - killAt,
        recoveryMs: recoveryAt === null ? null : recoveryAt - killAt,
        firstArrivalAfterKillMs: firstAfterRestart === null ? null : firstAfterRestart - killAt,
        interruptedRedelivered: redeliveredInterrupted,
        allDelivered: allAnswered,
        stoppedWaitingBecauseAllTerminal: terminalAt > 0 && !allAnswered,
        allDeliveredAfterKillMs: allAnswered ? lastAnswer - killAt : null,
        allDeliveredAfterDueMs: allAnswered ? lastAnswer - dueAt : null,
        lost,
        deliveredTwice: twice.length,
        deliveredTwiceInterrupted: interruptedRerun,
        deliveredTwiceOther: twice.length - interruptedRerun,
        requests: target.arrivals.length,
        startsPerSecFromDue: arrivalsPerSecond(target, dueAt),
        quietBeforeStart: quiet,
        loadAvgAtStart,
        runtime: {
          cpuSeconds: sampler.cpu("start", "end"),
          wallSeconds: round((Date.now() - t0) / 1000, 1),
          peakRssMb: sampler.peakRssMb(),
          processes: sampler.processCounts(),
          stackAliveAtEnd: alive(),
          machine: sampler.machine("start", "end"),
          stackStartMs: [first.startMs, second.startMs],
        },
        scheduler,
      };
    },
  );
}
