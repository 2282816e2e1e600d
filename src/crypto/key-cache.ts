// A small bounded cache of keys in their library's form, least recently used
// out first: importing or expanding a key costs more than using it.
export class KeyCache<V> {
  private readonly entries = new Map<string, V>();
  // The most recently used entry, answered without touching the Map: a server
  // signs everything with one key, and moving it to the end of the Map on
  // every signature made the Map rebuild its table again and again.
  private recentKey: string | undefined;
  private recentValue: V | undefined;
  constructor(private readonly capacity: number) {}

  get(key: string, make: () => V): V {
    if (key === this.recentKey) return this.recentValue as V;
    const value = this.lookUp(key, make);
    this.recentKey = key;
    this.recentValue = value;
    return value;
  }

  private lookUp(key: string, make: () => V): V {
    const hit = this.entries.get(key);
    if (hit !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const value = make();
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return value;
  }
}
