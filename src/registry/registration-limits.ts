// How many registrations a registry takes that it has not been told to
// trust (self-certifying ids, and open names): anyone can make a fresh key
// and register it, so per-identity rules alone do not bound the directory.
// New ones are taken at most at a rate (for all of them together, whoever
// sends them) and only while the directory holds fewer than a total. An
// agent renewing its own entry, and an id the operator bound to its key,
// are never refused here.
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { protocolError } from "../protocol/errors.js";

export interface RegistrationLimits {
  /** A new untrusted registration is refused while the directory holds this many agents (0: none taken). */
  maxUntrusted: number;
  /** New untrusted registrations taken per second, from all senders together; a second's worth may come at once. */
  ratePerSecond: number;
}

export const DEFAULT_REGISTRATION_LIMITS: Readonly<RegistrationLimits> = Object.freeze({ maxUntrusted: 1000, ratePerSecond: 20 });

export class RegistrationGate {
  private tokens: number;
  private filledAtMs: number;

  constructor(
    readonly limits: RegistrationLimits,
    private readonly now: () => number,
  ) {
    this.tokens = this.burst;
    this.filledAtMs = now();
  }

  private get burst(): number {
    return Math.max(1, this.limits.ratePerSecond);
  }

  /** Refuses a new untrusted registration when the directory is full for them or they come too fast; else takes its place in the rate. */
  admit(agentsHeld: number): void {
    if (agentsHeld >= this.limits.maxUntrusted) throw this.full(agentsHeld);
    const nowMs = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.filledAtMs) / 1000) * this.limits.ratePerSecond);
    this.filledAtMs = nowMs;
    if (this.tokens < 1) {
      const waitSeconds = this.limits.ratePerSecond > 0 ? Math.ceil((1 - this.tokens) / this.limits.ratePerSecond) : 60;
      throw protocolError(ErrorCode.RATE_LIMITED, `this registry takes at most ${this.limits.ratePerSecond} new registrations per second from agents it was not told to trust; try again shortly`, {
        retryAfterSeconds: Math.max(1, waitSeconds),
        details: { rule: "registration_rate", rate_per_second: this.limits.ratePerSecond },
      });
    }
    this.tokens -= 1;
  }

  /** The refusal when the directory already holds `agentsHeld` agents (also checked again once an entry is written). */
  full(agentsHeld: number) {
    return protocolError(
      ErrorCode.CONCURRENCY_LIMIT,
      `this registry holds ${agentsHeld} agents, the most it keeps while taking registrations it was not told to trust; try again when leases run out, or ask its operator to bind this agent's id`,
      { retryAfterSeconds: 60, details: { rule: "untrusted_registrations_full", max_untrusted: this.limits.maxUntrusted } },
    );
  }
}
