// How every command answers a command line it cannot take.
import type { Command } from 'commander';

/**
 * Makes every command of `root` throw on a usage error (main.ts turns it into exit 2), and
 * print after the error the command that shows its help. Subcommands inherit neither. A
 * pointer, not the help itself: serve's runs to a hundred lines, and printed after the error
 * it pushed the error out of sight.
 */
export function usageErrorsOf(root: Command): void {
  const all = (command: Command): Command[] => [command, ...command.commands.flatMap(all)];
  for (const command of all(root)) {
    command.exitOverride().showHelpAfterError(`(${commandPath(command)} --help lists the options)`);
  }
}

/** The words that run `command`: `plantstore webhooks create`. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c !== null; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}
