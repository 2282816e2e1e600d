// Counters and histograms cheap enough for every call and every message:
// each label combination is a cell, found by a key the caller already has
// (a number, an interned string) and updated as plain numbers. Label
// strings are made once per cell; Prometheus text is made only on a
// scrape. The families register in a prom-client Registry, which formats
// them with its own metrics (they answer get() as prom-client's do).
import type { Metric, Registry } from "prom-client";

export type Labels = Record<string, string>;

interface Value {
  labels: Labels | Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface Collected {
  name: string;
  help: string;
  type: "counter" | "histogram";
  aggregator: "sum";
  values: Value[];
}

/** What prom-client's Registry asks of a metric. */
abstract class Family {
  readonly aggregator = "sum";
  abstract readonly type: "counter" | "histogram";

  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  /** Registers in a prom-client Registry, which takes any object that answers get() as its metrics do. */
  register(registry: Registry): this {
    registry.registerMetric(this as unknown as Metric);
    return this;
  }

  abstract get(): Promise<Collected>;
  abstract reset(): void;
}

export interface CounterCell {
  readonly labels: Labels;
  value: number;
}

/** A counter family; `cell(key)` is the cell for a key, made with `labelsOf(key)` the first time. */
export class CounterFamily<K> extends Family {
  readonly type = "counter";
  private readonly cells = new Map<K, CounterCell>();

  constructor(name: string, help: string, private readonly labelsOf: (key: K) => Labels) {
    super(name, help);
  }

  cell(key: K): CounterCell {
    let cell = this.cells.get(key);
    if (cell === undefined) {
      cell = { labels: this.labelsOf(key), value: 0 };
      this.cells.set(key, cell);
    }
    return cell;
  }

  inc(key: K, by = 1): void {
    this.cell(key).value += by;
  }

  async get(): Promise<Collected> {
    const values = [...this.cells.values()].map(({ labels, value }) => ({ labels, value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const cell of this.cells.values()) cell.value = 0;
  }
}

export class HistogramCell {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]!++;
        return;
      }
    }
  }
}

/** Latency buckets in seconds, from a millisecond to five minutes (waited Sends, streams). */
export const SECONDS_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** A histogram family. Cells are made with `create(labels)` (the caller keeps them) or by key with `cell(key)`. */
export class HistogramFamily<K = never> extends Family {
  readonly type = "histogram";
  private readonly all: HistogramCell[] = [];
  private readonly byKey = new Map<K, HistogramCell>();

  constructor(
    name: string,
    help: string,
    private readonly bounds: readonly number[] = SECONDS_BUCKETS,
    private readonly labelsOf?: (key: K) => Labels,
  ) {
    super(name, help);
  }

  create(labels: Labels): HistogramCell {
    const cell = new HistogramCell(labels, this.bounds);
    this.all.push(cell);
    return cell;
  }

  cell(key: K): HistogramCell {
    let cell = this.byKey.get(key);
    if (cell === undefined) {
      cell = this.create(this.labelsOf!(key));
      this.byKey.set(key, cell);
    }
    return cell;
  }

  async get(): Promise<Collected> {
    const values: Value[] = [];
    for (const cell of this.all) {
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += cell.counts[i]!;
        values.push({ labels: { ...cell.labels, le: bound }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { ...cell.labels, le: "+Inf" }, value: cell.count, metricName: `${this.name}_bucket` });
      values.push({ labels: cell.labels, value: cell.sum, metricName: `${this.name}_sum` });
      values.push({ labels: cell.labels, value: cell.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** A counter family reading this histogram's counts: the same numbers, under a counter's name. */
  countsAs(name: string, help: string): Family {
    const all = this.all;
    return new (class extends Family {
      readonly type = "counter";
      async get(): Promise<Collected> {
        return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: all.map((cell) => ({ labels: cell.labels, value: cell.count })) };
      }
      reset(): void {}
    })(name, help);
  }

  reset(): void {
    for (const cell of this.all) {
      cell.counts.fill(0);
      cell.sum = 0;
      cell.count = 0;
    }
  }
}
