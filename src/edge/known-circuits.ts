/**
 * Whether a circuit may take outcomes from nginx's log (issue 32): the agent's `known(name)`
 * answers, kept for a while and bounded, so noise cannot make the agent ask the server about
 * every line (src/edge/syslog.ts asks here).
 */

/** Circuit names whose `known` answer is kept; past it the oldest is forgotten (names are at most 200 characters). */
export const MAX_KNOWN_NAMES = 10_000;
/** `known` questions in flight at once (a flood of distinct names asks no more); past it a line is dropped (`queue_full`). */
export const MAX_QUESTIONS = 64;

interface Answer {
  /** A boolean once answered; the question in flight until then. */
  value: boolean | Promise<boolean>;
  readonly until: number;
}

/**
 * `known(name)` answers, kept for a while so a flood of one name asks once per ttl: at most
 * `MAX_KNOWN_NAMES` names (the oldest forgotten first), one question in flight per name and
 * `MAX_QUESTIONS` in all, each given up after `timeoutMs` (then: unknown). A question that
 * throws or rejects is unknown.
 */
export class KnownCircuits {
  private readonly answers = new Map<string, Answer>();
  private inFlight = 0;

  constructor(
    private readonly known: (name: string) => boolean | Promise<boolean>,
    private readonly clock: () => number,
    private readonly knownTtlMs = 30_000, // 30 s
    private readonly unknownTtlMs = 5_000, // 5 s
    private readonly timeoutMs = 5_000, // 5 s
  ) {}

  /**
   * The answer for `name` at `now`: a boolean when one is kept or `known` answers at once, else
   * the question in flight; null when there is none yet and the caller may not wait for one
   * (`mayWait` false) or `MAX_QUESTIONS` are in flight.
   */
  answer(name: string, now: number, mayWait = true): boolean | Promise<boolean> | null {
    const kept = this.answers.get(name);
    if (kept !== undefined && typeof kept.value !== 'boolean') return mayWait ? kept.value : null;
    if (kept !== undefined && now < kept.until) return kept.value;
    if (!mayWait || this.inFlight >= MAX_QUESTIONS) return null;
    this.answers.delete(name);
    if (this.answers.size >= MAX_KNOWN_NAMES) this.answers.delete(this.answers.keys().next().value!);
    let asked: boolean | Promise<boolean>;
    try {
      asked = this.known(name);
    } catch {
      asked = false;
    }
    if (typeof asked === 'boolean') {
      this.keep(name, asked, now);
      return asked;
    }
    const question = this.await(name, asked);
    this.answers.set(name, { value: question, until: now + this.timeoutMs });
    return question;
  }

  /** Names kept (answered or asked). */
  get size(): number {
    return this.answers.size;
  }

  private keep(name: string, value: boolean, now: number): void {
    this.answers.delete(name); // (re-)inserted last: the oldest answers are forgotten first
    this.answers.set(name, { value, until: now + (value ? this.knownTtlMs : this.unknownTtlMs) });
  }

  /** The answer `asked` settles to (false: rejected, or not settled within `timeoutMs`), kept once settled. */
  private await(name: string, asked: Promise<boolean>): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    this.inFlight++;
    const question: Promise<boolean> = Promise.race([
      asked,
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), this.timeoutMs);
        timer.unref();
      }),
    ])
      .then((v) => v === true)
      .catch(() => false)
      .then((value) => {
        clearTimeout(timer);
        this.inFlight--;
        if (this.answers.get(name)?.value === question) this.keep(name, value, this.clock());
        return value;
      });
    return question;
  }
}
