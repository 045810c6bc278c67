import type client from 'prom-client';

interface RouteSeries {
  route: string;
  method: string;
  statuses: Map<number, number>;
  /** Answers per latency bucket (not cumulative), then sum and count. */
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * Requests by route template, method and status, and their latencies, counted in plain
 * objects on the request path and handed to prom-client only when scraped: its own `inc`
 * and `observe` check and hash their labels on every call, about 2 µs a request, 3% of a
 * GET one (bench/HISTORY.md). prom-client still writes the text and sums the workers.
 */
export class RequestTally {
  readonly series = new Map<string, RouteSeries>();

  constructor(private readonly bounds: readonly number[]) {}

  add(route: string, method: string, status: number, seconds: number): void {
    const key = `${method} ${route}`;
    let series = this.series.get(key);
    if (series === undefined) {
      series = { route, method, statuses: new Map(), buckets: [], sum: 0, count: 0 };
      series.buckets = this.bounds.map(() => 0);
      this.series.set(key, series);
    }
    series.statuses.set(status, (series.statuses.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < this.bounds.length && seconds > this.bounds[bucket]!) bucket += 1;
    // Above the last bound it is counted in +Inf only, which is the count.
    if (bucket < this.bounds.length) series.buckets[bucket]! += 1;
    series.sum += seconds;
    series.count += 1;
  }

  /**
   * The latencies as a prom-client metric: a registry reads any metric through `get`, in
   * the shape prom-client's own Histogram gives (`_bucket` with `le`, `_sum`, `_count`).
   */
  histogram(name: string, help: string): client.Metric {
    const metric = {
      name,
      help,
      type: 'histogram',
      aggregator: 'sum',
      get: async () => ({
        name,
        help,
        type: 'histogram',
        aggregator: 'sum',
        values: this.values(name),
      }),
      reset: () => this.series.clear(),
    };
    return metric as unknown as client.Metric;
  }

  private values(name: string) {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] =
      [];
    for (const { route, method, buckets, sum, count } of this.series.values()) {
      let below = 0;
      this.bounds.forEach((le, i) => {
        below += buckets[i]!;
        values.push({ labels: { le, route, method }, value: below, metricName: `${name}_bucket` });
      });
      values.push({
        labels: { le: '+Inf', route, method },
        value: count,
        metricName: `${name}_bucket`,
      });
      values.push({ labels: { route, method }, value: sum, metricName: `${name}_sum` });
      values.push({ labels: { route, method }, value: count, metricName: `${name}_count` });
    }
    return values;
  }
}
