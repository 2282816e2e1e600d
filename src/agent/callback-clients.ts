// Clients of callback endpoints. One is kept per URL so that the pushes of
// successive tasks to the same requester reuse its connection; but callback
// URLs may differ per task (a path naming the task), and a client kept for
// every URL ever pushed to would grow with the tasks served. So only the
// most recently used are kept; older ones are closed, unless a delivery
// still pushes through them.
export interface Closable {
  close(): void;
}

/** Clients kept beyond those in use. */
export const KEPT_CALLBACK_CLIENTS = 32;

export class CallbackClients<T extends Closable> {
  private readonly entries = new Map<string, T>();

  constructor(
    private readonly make: (url: string) => T,
    private readonly keep = KEPT_CALLBACK_CLIENTS,
  ) {}

  /** The client for `url`; `inUse` names the URLs deliveries are pushing to (asked only when some must go). */
  get(url: string, inUse: () => ReadonlySet<string>): T {
    let entry = this.entries.get(url);
    if (entry !== undefined) {
      // Most recently used last.
      this.entries.delete(url);
      this.entries.set(url, entry);
      return entry;
    }
    entry = this.make(url);
    this.entries.set(url, entry);
    if (this.entries.size > this.keep) this.trim(inUse(), url);
    return entry;
  }

  private trim(inUse: ReadonlySet<string>, wanted: string): void {
    for (const [url, entry] of this.entries) {
      if (this.entries.size <= this.keep) return;
      if (url === wanted || inUse.has(url)) continue;
      entry.close();
      this.entries.delete(url);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  closeAll(): void {
    for (const entry of this.entries.values()) entry.close();
    this.entries.clear();
  }
}
