import { Command, CommanderError, Option } from 'commander';
import type { Durability } from '../store/sqlite/sqlite-store.js';
import { dbOption, parsePort } from './options.js';
import { tokenCommand } from './token-commands.js';

interface ServeCommandOptions {
  host: string;
  port: number;
  db: string;
  durability: Durability;
  logLevel: string;
}

/** Exit codes: 0 done, 1 failed, 2 the command line was wrong. */
const USAGE = 2;

function program(): Command {
  const root = new Command('plantstore')
    .description('The plant store HTTP API and its administration.')
    .showHelpAfterError()
    .exitOverride();

  root
    .command('serve')
    .description('serve the API, creating and migrating the database if needed')
    .addOption(new Option('--host <host>', 'address to listen on').env('HOST').default('127.0.0.1'))
    .addOption(
      new Option('--port <port>', 'port to listen on (0: any free port)')
        .env('PORT')
        .default(8080)
        .argParser(parsePort),
    )
    .addOption(dbOption())
    .addOption(
      new Option(
        '--durability <level>',
        'power: answer writes once fsynced; process: leave fsync to the OS (faster, may lose the last writes to a power cut)',
      )
        .env('PLANTSTORE_DURABILITY')
        .default('power')
        .choices(['power', 'process']),
    )
    .addOption(
      new Option('--log-level <level>', 'pino log level')
        .env('LOG_LEVEL')
        .default('info')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    )
    .action(async (options: ServeCommandOptions) => {
      // Loaded here so that token commands do not pay for the HTTP stack.
      const { serve } = await import('../http/server.js');
      await serve({
        host: options.host,
        port: options.port,
        dbFile: options.db,
        durability: options.durability,
        logLevel: options.logLevel,
      });
    });

  root.addCommand(tokenCommand());
  // Subcommands inherit neither exitOverride nor help-after-error; set them on each.
  const all = (command: Command): Command[] => [command, ...command.commands.flatMap(all)];
  for (const command of all(root)) command.exitOverride().showHelpAfterError();
  return root;
}

try {
  await program().parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : USAGE;
  } else {
    process.stderr.write(`plantstore: ${(error as Error).message}\n`);
    process.exitCode = 1;
  }
}
