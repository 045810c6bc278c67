/**
 * What a phase is given (PhaseContext) and what the phases find (Facts, beside the wrk rows):
 * the types the phases write and the report reads, in a module of their own so that neither
 * imports the other.
 */
import type { Start } from '../harness/servers.js';

/** Where the servers run: `0` when pinned (wrk and the harness take core 1). */
export interface Placement {
  serverCores: string;
  logLevel: string;
}

export interface PhaseContext {
  dir: string;
  at: Placement;
  rounds: number;
  turnSeconds: number;
  wrkCore?: number;
  facts: Facts;
  log: (line: string) => void;
}

/**
 * A server's memory in MB. Its RSS counts file pages too (Node's own binary, and on SQLite the
 * database's pages read through the memory map), which are the kernel's page cache, shared and
 * droppable; its own memory is the anonymous part.
 */
export interface Memory {
  /** Peak RSS, VmHWM. */
  peakMb: number;
  /** The largest RssAnon read at the end of a measured turn and of the phase. */
  ownPeakMb?: number;
  /** RssFile at the end of the phase. */
  fileMb?: number;
}

export interface Facts {
  /** plantstore's starts on the large database: spawn to the first /healthz 200. */
  starts: Start[];
  /** The memory of each plantstore server, read at the end of its phase. */
  memory: Record<string, Memory>;
  /** write + fdatasync of 4 KiB in the benchmark's directory, median in ms. */
  fsyncP50ms?: number;
  largePlants: number;
  smallPlants: number;
  /** The webhook rows, when the run made them. */
  webhooks?: WebhookFacts;
  /** A healthy endpoint's delivery lag beside hung ones, when the run measured it. */
  webhookLag?: LagFacts;
  /** The import rows, when the run made them. */
  imports?: ImportFacts;
  /** Webhook deliveries and the audit trail read back, when the run made them. */
  history?: HistoryFacts;
  /** The changes feed rows, when the run made them. */
  events?: EventsFacts;
}

export interface WebhookFacts {
  /** Messages in the backlog one process sent. */
  messages: number;
  /** From the sender's start (its first answers held until then) to the last receipt. */
  deliveriesPerSecond: number;
  /** The server's CPU over the same span, per delivery. */
  cpuUsPerDelivery: number | undefined;
  /** Writes made one at a time, each waiting for its message. */
  prompt: number;
  /** Median time from sending the write to the message's arrival: commit to leaving, and more. */
  promptP50ms: number;
}

/** One server's measurement of a healthy endpoint's delivery lag (phases/webhook-lag.ts). */
export interface LagRun {
  database: 'SQLite' | 'PostgreSQL';
  /** Endpoints subscribed beside the healthy one that take the connection and never answer. */
  hung: number;
  /** Creates measured, one message each for the healthy endpoint. */
  creates: number;
  /** Of those messages, how many reached the healthy endpoint within the wait. */
  arrived: number;
  /**
   * From the create's 201 (its answer's headers at the client) to the message's arrival at
   * the healthy endpoint (its whole request read), nearest rank over every create: Infinity
   * when the message of that rank never arrived. The p99 of 40 is the slowest.
   */
  p50ms: number;
  p99ms: number;
  /** Cores' worth of CPU that neither the server, its backends nor this harness used. */
  otherCores?: number;
}

export interface LagFacts {
  /** Creates measured per server, one every `paceMs`. */
  creates: number;
  paceMs: number;
  /** How long after the last create a message may still arrive. */
  waitMs: number;
  runs: LagRun[];
  /** What went wrong, or other load that disturbed a measurement. */
  problems: string[];
}

export const IMPORT_KINDS = ['without ids', 'with ids', 'without ids after with ids'] as const;
export type ImportKind = (typeof IMPORT_KINDS)[number];

export interface ImportRun {
  database: 'SQLite' | 'PostgreSQL';
  /** Plants 1..plants before the first import. */
  plants: number;
  kind: ImportKind;
  lines: number;
  /** The CLI's whole run, start to exit. */
  seconds: number;
  linesPerSecond: number;
  /** The server's CPU over the import, per line. */
  serverCpuUs?: number;
  /** The CLI's own CPU, per line. */
  cliCpuUs?: number;
  /** The server's PostgreSQL backends' CPU, per line. */
  dbCpuUs?: number;
  /**
   * Cores' worth of CPU that neither the server, its database backends, the CLI nor this
   * harness used: someone else's load. Above LIMITS.otherMax the run is invalid.
   */
  otherCores?: number;
}

export interface ImportFacts {
  lines: number;
  runs: ImportRun[];
  /** What went wrong: an import that failed or did not create every line. */
  problems: string[];
}

export interface HistoryRun {
  database: 'SQLite' | 'PostgreSQL';
  /** Messages kept, or audit entries: one per plant of the data set. */
  entries: number;
  what: 'deliveries' | 'audit';
  p50ms: number;
  /** wrk's p99 (deliveries); the slowest of the runs (audit). */
  p99ms: number;
  /** Requests answered (deliveries), or runs of the command (audit). */
  samples: number;
  /**
   * On the large size: its p50 over the small size's, the median of the rounds' ratios and
   * the lowest and highest round (both sizes alternate, so that the machine's drift between
   * two measurements minutes apart is not read as the data's cost).
   */
  vsSmall?: { ratio: number; spread: [number, number] };
  /**
   * Cores' worth of CPU that neither the server, its PostgreSQL backends, wrk, the CLI nor
   * this harness used (the audit command's own backend, gone when the command is, by the CPU
   * of the backends PostgreSQL's postmaster saw end meanwhile, when it runs on this machine):
   * someone else's load. Above LIMITS.otherMax the run is invalid.
   */
  otherCores?: number;
}

export interface HistoryFacts {
  /** Rounds of deliveries turns, one turn on each size a round. */
  rounds: number;
  runs: HistoryRun[];
  problems: string[];
}

/** Creates with streams following ÷ with none (phases/events.ts), medians of the rounds. */
export interface EventsCost {
  streams: number;
  /** Creates a second with the streams ÷ with none. */
  rpsRatio: number;
  /** CPU per create with none ÷ with the streams: above 1 is good, as in the wrk rows. */
  cpuRatio: number;
  /** The lowest and highest round of `cpuRatio`. */
  cpuRange: [number, number];
  createsPerSecond: number;
  /** The server's CPU, and its PostgreSQL backends', per create, the sending included. */
  cpuUsPerCreate: number;
  /** Shares of a core while wrk ran: the server's own, and wrk's with the harness's. */
  serverShare: number;
  loadShare: number;
}

/** One database's changes feed rows (phases/events.ts). */
export interface EventsRun {
  database: 'SQLite' | 'PostgreSQL';
  /** Creates with no stream open (the feed used before, so it is started). */
  alone: Omit<EventsCost, 'streams' | 'rpsRatio' | 'cpuRatio' | 'cpuRange'>;
  /** With 1 stream following, and with many. */
  costs: EventsCost[];
  /** Streams opened on a backlog: events each had, and each one's events a second. */
  catchUp: { streams: number; events: number; perStreamPerSecond: number }[];
  /** From a create's 201 at the client to its event on a stream, nearest rank. */
  lag: { creates: number; arrived: number; p50ms: number; p99ms: number };
  /** Cores' worth of CPU that neither the server, its backends, wrk nor this harness used. */
  otherCores?: number;
}

export interface EventsFacts {
  rounds: number;
  turnSeconds: number;
  /** Streams in the costlier turn. */
  streams: number;
  lagPaceMs: number;
  runs: EventsRun[];
  problems: string[];
}
