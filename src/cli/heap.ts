// How far a serving process's V8 heap may grow past what its last full GC
// kept. V8 sizes the next full GC's trigger by a factor of up to 4x the live
// heap, tuned for throughput: a server with some 22 MiB live (10,000 signed
// tasks done, SQLite store) then holds 75 MiB of old space and about 200 MiB
// RSS, most of it garbage waiting for that GC. Ten percent keeps the old space
// near the live heap; full GCs run more often, but marking 22 MiB is cheap
// (no CPU difference within the noise of `npm run bench -- memory`, and RSS
// after 100k tasks 147 MiB instead of 207).
//
// V8 reads this flag whenever it sets the next GC trigger, so it can be
// changed after start; the young generation's size cannot (see the README's
// memory section for node's --max-semi-space-size).
import { setFlagsFromString } from "node:v8";

export const DEFAULT_HEAP_GROWTH_PERCENT = 10;

/** Applies the growth bound; 0 leaves V8's own heuristics, and a --heap-growing-percent given to node itself wins. */
export function boundHeapGrowth(percent: number): void {
  if (percent === 0) return;
  const fromNode = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)].some((flag) => /^--heap[-_]growing[-_]percent/.test(flag));
  if (!fromNode) setFlagsFromString(`--heap-growing-percent=${percent}`);
}
