import { forTerminal } from '../core/terminal-text.js';

// The log as a person reads it on a terminal (`npm start`), in place of pino's JSON lines,
// which stay what a pipe, a file or a log collector gets. Hand-written rather than
// pino-pretty: one line per entry needs nothing more.

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: 'TRACE', color: '90' },
  20: { name: 'DEBUG', color: '90' },
  30: { name: 'INFO ', color: '32' },
  40: { name: 'WARN ', color: '33' },
  50: { name: 'ERROR', color: '31' },
  60: { name: 'FATAL', color: '35' },
};

/** Said by the time, the level and the message, or the same on every line. */
const SHOWN_APART = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err']);

const two = (n: number) => String(n).padStart(2, '0');

function clock(epochMs: unknown): string {
  if (typeof epochMs !== 'number') return '--:--:--.---';
  const at = new Date(epochMs);
  const ms = String(at.getMilliseconds()).padStart(3, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${ms}`;
}

function value(field: unknown): string {
  if (typeof field === 'string')
    return /^[\w./:@+,-]+$/.test(field) ? field : JSON.stringify(field);
  if (typeof field === 'object' && field !== null) return JSON.stringify(field);
  return String(field);
}

/**
 * One pino JSON line (its final newline included) as a line for a person: local time to the
 * millisecond, the level, the message, the other fields as `key=value`, and an error's stack
 * indented on the lines after. Whatever could act on the terminal is escaped (forTerminal).
 * A line that is not a JSON object is passed on as it is.
 */
export function prettyLogLine(line: string, color: boolean): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return line;
  const fields = entry as Record<string, unknown>;
  const level = LEVELS[fields.level as number] ?? { name: String(fields.level), color: '0' };
  const paint = (code: string, text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const rest = Object.entries(fields)
    .filter(([key]) => !SHOWN_APART.has(key))
    .map(([key, field]) => `${key}=${value(field)}`)
    .join(' ');
  let text =
    `${paint('2', clock(fields.time))} ${paint(level.color, level.name)} ` +
    `${forTerminal(String(fields.msg ?? ''))}` +
    (rest === '' ? '' : ` ${paint('2', forTerminal(rest))}`);
  const err = fields.err as { stack?: unknown; message?: unknown } | undefined;
  const stack = typeof err?.stack === 'string' ? err.stack : err?.message;
  if (stack !== undefined) {
    text += String(stack)
      .split('\n')
      .map((stackLine) => `\n    ${forTerminal(stackLine)}`)
      .join('');
  }
  return `${text}\n`;
}
