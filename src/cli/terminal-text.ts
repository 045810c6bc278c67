// The commands' escaping of data for a terminal lives in core, which the server's log lines
// for a terminal use too (src/server/pretty-log.ts).
export { forTerminal } from '../core/terminal-text.js';
