// Whether Redis takes writes now. ioredis reports reconnects ('ready'), but a command can also
// fail on a live connection (timeout, LOADING); then a PING probe decides when to try again,
// so the ledger does not wait out a timeout per event while Redis is sick.
import type { RedisClient } from '../redis/index.js';
import { logger, metrics } from '../telemetry/index.js';

export class RedisHealth {
  private healthy_ = false;
  private probe: NodeJS.Timeout | null = null;
  private listeners: (() => void)[] = [];
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly probeMs = 1000,
  ) {
    redis.on('ready', () => this.set(true));
    redis.on('close', () => this.set(false));
    redis.on('error', (err: Error) => {
      // ioredis emits one error per failed reconnect; the state change is what matters.
      if (this.healthy_) logger.warn({ err: err.message }, 'redis error');
    });
    metrics.redisUp.set(0);
  }

  get healthy(): boolean {
    return this.healthy_;
  }

  onHealthy(f: () => void): void {
    this.listeners.push(f);
  }

  /** A command failed: stop writing until Redis answers a PING again. */
  markFailed(reason: string): void {
    this.set(false, reason);
    if (this.probe || this.closed) return;
    this.probe = setInterval(() => {
      if (this.redis.status !== 'ready') return; // the 'ready' event will report the reconnect
      this.redis.ping().then(
        () => this.set(true),
        () => undefined,
      );
    }, this.probeMs);
    this.probe.unref();
  }

  close(): void {
    this.closed = true;
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
  }

  private set(up: boolean, reason = 'connection closed'): void {
    const was = this.healthy_;
    if (was && !up) logger.warn({ reason }, 'redis unavailable; usage events go to the journal');
    this.healthy_ = up;
    metrics.redisUp.set(up ? 1 : 0);
    if (up && this.probe) {
      clearInterval(this.probe);
      this.probe = null;
    }
    if (up && !was) {
      logger.info('redis available; usage ledger writing to redis');
      for (const f of this.listeners) f();
    }
  }
}
