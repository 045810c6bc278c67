// What could act on the terminal instead of showing: control characters (ESC and the C1
// CSI begin escape sequences that move the cursor, rewrite lines or set the title), format
// characters (bidi overrides reorder the text after them) and the line and paragraph
// separators (a line break to some terminals and viewers).
const ACTIVE = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;

/**
 * `text` for a human's terminal: every control, format and separator character written as
 * `\u{hex}`, so data in the database (a plant or token name) cannot forge or hide output.
 * Machine output (`--json`) stays exact instead.
 */
export function forTerminal(text: string): string {
  return text.replace(ACTIVE, (char) => `\\u{${char.codePointAt(0)!.toString(16)}}`);
}
