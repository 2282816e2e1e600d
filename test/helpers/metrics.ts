// Scrapes a server's GET /metrics and reads the Prometheus text format, so
// tests can compare two scrapes series by series.
import { expect } from "vitest";

/** Every sample of a scrape, by series: `name{label="value",...}` with labels sorted. */
export type Samples = Map<string, number>;

export interface Scrape {
  samples: Samples;
  /** The TYPE line of each family. */
  types: Map<string, string>;
  contentType: string | null;
}

/** `name{a="1",b="2"}` for a name and labels (sorted), as scrape() keys samples. */
export function series(name: string, labels: Record<string, string> = {}): string {
  const parts = Object.keys(labels)
    .sort()
    .map((key) => `${key}=${JSON.stringify(labels[key])}`);
  return parts.length === 0 ? name : `${name}{${parts.join(",")}}`;
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const pattern = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const match of text.matchAll(pattern)) {
    labels[match[1]!] = match[2]!.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
  }
  return labels;
}

export function parseMetrics(text: string): Omit<Scrape, "contentType"> {
  const samples: Samples = new Map();
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ");
      types.set(name!, type!);
      continue;
    }
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) throw new Error(`not a Prometheus sample line: ${line}`);
    const key = series(match[1]!, match[2] === undefined ? {} : parseLabels(match[2]));
    expect(samples.has(key), `${key} appears once`).toBe(false);
    samples.set(key, Number(match[3]));
  }
  return { samples, types };
}

export async function scrape(baseUrl: string): Promise<Scrape> {
  const response = await fetch(`${baseUrl}/metrics`);
  expect(response.status).toBe(200);
  return { ...parseMetrics(await response.text()), contentType: response.headers.get("content-type") };
}

/** How much a series grew between two scrapes (a series absent from a scrape counts as 0). */
export function delta(before: Scrape, after: Scrape, name: string, labels: Record<string, string> = {}): number {
  const key = series(name, labels);
  return (after.samples.get(key) ?? 0) - (before.samples.get(key) ?? 0);
}

/** The sum of a family's samples whose labels include `labels`. */
export function total(scraped: Scrape, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [key, value] of scraped.samples) {
    if (key !== name && !key.startsWith(`${name}{`)) continue;
    const own = key === name ? {} : parseLabels(key.slice(name.length));
    if (Object.entries(labels).every(([k, v]) => own[k] === v)) sum += value;
  }
  return sum;
}

/** A histogram's cumulative buckets for one label set, in bucket order, with +Inf last. */
export function buckets(scraped: Scrape, name: string, labels: Record<string, string>): Array<{ le: string; value: number }> {
  const found: Array<{ le: string; value: number }> = [];
  for (const [key, value] of scraped.samples) {
    if (!key.startsWith(`${name}_bucket{`)) continue;
    const own = parseLabels(key.slice(name.length + 7));
    const { le, ...rest } = own;
    if (Object.keys(rest).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => rest[k] === v)) found.push({ le: le!, value });
  }
  return found.sort((a, b) => (a.le === "+Inf" ? 1 : b.le === "+Inf" ? -1 : Number(a.le) - Number(b.le)));
}
