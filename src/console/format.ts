// Times, durations and JSON for people: local clock times, "+1.2 s" between
// events, "4:59" left on a deadline, JSON values as the user would type them.
import type { JsonValue } from "@bufbuild/protobuf";
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";

export function msOf(timestamp: Timestamp | undefined): number | undefined {
  return timestamp === undefined ? undefined : timestampMs(timestamp);
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** "14:03:27.120" today, "2026-01-02 14:03:27" on other days. */
export function clockTime(ms: number | undefined, withMillis = false): string {
  if (ms === undefined || !Number.isFinite(ms)) return "—";
  const date = new Date(ms);
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}${withMillis ? `.${pad(date.getMilliseconds(), 3)}` : ""}`;
  const today = new Date();
  if (date.toDateString() === today.toDateString()) return time;
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${time}`;
}

/** "850 ms", "1.2 s", "3 min 4 s", "2 h 5 min". */
export function duration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  if (abs < 60_000) return `${(abs / 1000).toFixed(abs < 10_000 ? 1 : 0)} s`;
  if (abs < 3_600_000) return `${Math.floor(abs / 60_000)} min ${Math.floor((abs % 60_000) / 1000)} s`;
  return `${Math.floor(abs / 3_600_000)} h ${Math.floor((abs % 3_600_000) / 60_000)} min`;
}

/** "12 s ago", "in 4 min 3 s". */
export function relative(ms: number | undefined, now = Date.now()): string {
  if (ms === undefined) return "—";
  const delta = ms - now;
  if (Math.abs(delta) < 1000) return "now";
  return delta < 0 ? `${duration(delta)} ago` : `in ${duration(delta)}`;
}

/** "4:59" (or "1:02:03") left until `deadlineMs`; "0:00" once it has passed. */
export function countdown(deadlineMs: number, now = Date.now()): string {
  const left = Math.max(0, Math.ceil((deadlineMs - now) / 1000));
  const hours = Math.floor(left / 3600);
  const minutes = Math.floor((left % 3600) / 60);
  const seconds = left % 60;
  return hours > 0 ? `${hours}:${pad(minutes)}:${pad(seconds)}` : `${minutes}:${pad(seconds)}`;
}

/** A JSON value in one line, as a user would type it (strings quoted). */
export function jsonInline(value: JsonValue | undefined): string {
  return value === undefined ? "" : JSON.stringify(value);
}

/** What the user typed, as JSON when it parses (3, true, "x", [1]), else as the string itself. */
export function parseTyped(text: string): JsonValue {
  const trimmed = text.trim();
  try {
    return JSON.parse(trimmed) as JsonValue;
  } catch {
    return text;
  }
}
