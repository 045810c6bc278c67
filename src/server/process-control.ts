/**
 * The two things the runtime needs from its process, handed in by the CLI: the CLI alone
 * traps signals and exits (graphile/worker's cli.ts beside runner.ts), so the runtime can
 * be started by anything that supplies these, a test included.
 */
export interface ProcessControl {
  /** Calls `stop` when the process is asked to stop (SIGTERM, SIGINT), once per signal. */
  onStopSignal(stop: (signal: NodeJS.Signals) => void): void;
  /** Ends the process with this code; nothing after it runs. */
  exit(code: number): void;
}
