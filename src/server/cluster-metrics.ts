import cluster, { type Worker } from 'node:cluster';
import client from 'prom-client';

// The metrics of `serve --workers N`: the primary asks every worker for its registry over
// cluster IPC and merges them with prom-client's aggregation (each metric's `aggregator`:
// summed, or the max for a gauge every worker reads from the database).
//
// prom-client's own clusterMetrics() asks every forked worker, and fails the whole scrape
// after 5 s when one has not answered; a worker restarted after a crash is forked a second
// before it can answer, so the first scrape after a restart was a 500. Here a worker is
// asked only once it has said it answers, and one that exits while asked is not waited for.

const READY = 'plantstore:metrics-ready';
const ASK = 'plantstore:metrics-ask';
const ANSWER = 'plantstore:metrics';

/** How long a scrape waits for the workers' answers. */
const WORKER_ANSWER_MS = 5_000;

type MetricJson = Awaited<ReturnType<client.Registry['getMetricsAsJSON']>>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

// Without a callback, a send on a closed channel (the primary gone, this worker stopping)
// is an 'error' on the process, uncaught. The primary stops waiting for a worker that exits.
const unsent = () => undefined;

/** In a worker: answers the primary's asks with `registry`, then says it answers. */
export function answerPrimary(registry: client.Registry): void {
  const send = process.send?.bind(process);
  if (send === undefined) throw new Error('answerPrimary runs in a cluster worker only');
  process.on('message', (message: unknown) => {
    if (!isRecord(message) || message.type !== ASK || typeof message.id !== 'number') return;
    const { id } = message;
    registry.getMetricsAsJSON().then(
      (metrics) => send({ type: ANSWER, id, metrics }, undefined, undefined, unsent),
      (error: unknown) =>
        send({ type: ANSWER, id, error: String(error) }, undefined, undefined, unsent),
    );
  });
  send({ type: READY }, undefined, undefined, unsent);
}

/** A scrape before any worker has started: Prometheus should try again, not record zeros. */
export class NoWorkerYet extends Error {
  constructor() {
    super('no worker has started yet');
  }
}

interface Asking {
  waiting: Set<Worker>;
  answers: MetricJson[];
  done(error?: Error): void;
}

/** In the primary: the workers' metrics, merged. */
export class WorkerMetrics {
  private readonly answering = new Set<Worker>();
  private readonly asks = new Map<number, Asking>();
  private nextId = 0;
  readonly contentType = client.register.contentType;

  constructor() {
    cluster.on('message', (worker, message: unknown) => this.heard(worker, message));
    cluster.on('exit', (worker) => this.gone(worker));
  }

  private gone(worker: Worker): void {
    this.answering.delete(worker);
    for (const asking of this.asks.values()) {
      if (asking.waiting.delete(worker) && asking.waiting.size === 0) asking.done();
    }
  }

  /** The merged text of every worker that answers; rejects if one has not in time. */
  async metrics(): Promise<string> {
    const id = this.nextId++;
    const answers: MetricJson[] = [];
    const waiting = new Set(this.answering);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          finish(new Error(`${waiting.size} worker(s) did not answer in ${WORKER_ANSWER_MS} ms`)),
        WORKER_ANSWER_MS,
      );
      const finish = (error?: Error) => {
        clearTimeout(timer);
        this.asks.delete(id);
        if (error === undefined) resolve();
        else reject(error);
      };
      this.asks.set(id, { waiting, answers, done: finish });
      if (waiting.size === 0) finish(new NoWorkerYet());
      for (const worker of waiting) {
        // A worker whose channel has just closed is not waited for; its exit takes it out of
        // `answering`.
        worker.send({ type: ASK, id }, undefined, (error) => {
          if (error !== null && waiting.delete(worker) && waiting.size === 0) finish();
        });
      }
    });
    return client.AggregatorRegistry.aggregate(answers).metrics();
  }

  private heard(worker: Worker, message: unknown): void {
    if (!isRecord(message)) return;
    if (message.type === READY) {
      this.answering.add(worker);
      return;
    }
    if (message.type !== ANSWER || typeof message.id !== 'number') return;
    const asking = this.asks.get(message.id);
    if (asking === undefined || !asking.waiting.delete(worker)) return;
    if (typeof message.error === 'string') {
      asking.done(new Error(`worker ${worker.process.pid}: ${message.error}`));
      return;
    }
    if (Array.isArray(message.metrics)) asking.answers.push(message.metrics as MetricJson);
    if (asking.waiting.size === 0) asking.done();
  }
}
