/**
 * A FlowKey's throttle alerts (docs/alerts.md): the key follows its throttle episode (its target's
 * slow-downs chained, core/alert.ts). When one begins it asks its tenant's Alerts object once for
 * the threshold (throttledForMs); with one, the episode is stored and the key's alarm is set for
 * the moment it passes it, and an episode still throttled then is reported to the Alerts object,
 * once. Nothing of it runs on an ask; a tenant without a threshold stores nothing for it.
 */
import { alertsOf } from "../alerts/alerts";
import { type ThrottleEpisode, throttleAlertDue, throttleCheckAt, throttleEpisodeAfter } from "../core/alert";

/** What the episode needs of its FlowKey object. */
export interface ThrottleAlertHost {
  readonly env: Env;
  readonly storage: DurableObjectStorage;
  /** the tenant and key this object is; null: unnamed, nothing is reported */
  readonly name: { tenant: string; key: string } | null;
  /** keeps a setting in the object's flow_settings */
  put(name: string, value: unknown): void;
}

export class ThrottleAlert {
  constructor(
    private readonly host: ThrottleAlertHost,
    /** the episode stored (only with a threshold) */
    private episode: ThrottleEpisode | null,
  ) {}

  /**
   * The key's slow-down was set or extended to `until`: the episode goes on or a new one begins.
   * A new one asks the tenant's Alerts object for the threshold (one request per episode, on a
   * release: never on an ask).
   */
  async follow(until: number, now: number): Promise<void> {
    const { episode, began } = throttleEpisodeAfter(this.episode, until, now);
    this.episode = episode;
    if (began) {
      const name = this.host.name;
      if (!name) return;
      const target = await alertsOf(this.host.env, name.tenant)
        .target()
        .catch((error: unknown) => {
          console.error(`reading the alert threshold of ${name.tenant} failed; this episode is not reported`, error);
          return null;
        });
      // a release while it asked may have extended it (a copy): set it on whatever is current
      if (this.episode?.since !== episode.since) return;
      this.episode = { ...this.episode, thresholdMs: target?.throttledForMs ?? null };
    }
    await this.check(now);
  }

  /** Reports the episode if it passed its threshold (once), else sets the alarm for when it may. */
  async check(now: number): Promise<void> {
    const episode = this.episode;
    const name = this.host.name;
    if (episode === null || episode.thresholdMs === null || !name) return;
    if (throttleAlertDue(episode, now)) {
      const reported = await alertsOf(this.host.env, name.tenant)
        .recordThrottle({ key: name.key, since: episode.since, throttledUntil: episode.until, thresholdMs: episode.thresholdMs })
        .then(
          () => true,
          (error: unknown) => {
            console.error(`reporting the throttled key ${name.key} failed; its next slow-down tries again`, error);
            return false;
          },
        );
      if (reported && this.episode?.since === episode.since) this.episode = { ...this.episode, reported: true };
    }
    this.host.put("throttleEpisode", this.episode);
    const at = throttleCheckAt(this.episode);
    if (at !== null && (await this.host.storage.getAlarm()) !== at) await this.host.storage.setAlarm(at);
  }

  /** The slow-down was ended by hand: the episode is over, and its alarm with it. */
  async end(): Promise<void> {
    if (this.episode?.thresholdMs != null) {
      this.host.put("throttleEpisode", null);
      await this.host.storage.deleteAlarm();
    }
    this.episode = null;
  }
}
