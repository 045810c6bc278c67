/**
 * What the service and the store need of a logger: pino's methods of the same names fit,
 * and so does any structured logger with (fields, message) calls. The layers below HTTP
 * take one of these instead of importing a logging library.
 */
export interface Log {
  error(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/** For tests and tools that want no output. */
export const silentLog: Log = {
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
};
