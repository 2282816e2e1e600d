// Counts in words: "1 sentence", "2 sentences". Browser-safe (the console uses it too).

/** `count` followed by `singular`, or by `plural` (default: singular + "s") when count is not 1. */
export function counted(count: number | bigint, singular: string, plural = `${singular}s`): string {
  return `${count} ${count === 1 || count === 1n ? singular : plural}`;
}
