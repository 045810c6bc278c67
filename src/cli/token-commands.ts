import { createInterface } from 'node:readline';
import { Command, Option } from 'commander';
import type { Scope } from '../core/scopes.js';
import { TOKEN_FORMAT, TOKEN_PREFIX, type TokenRecord } from '../core/tokens.js';
import { TOKEN_CACHE_TTL_MS, TokenService } from '../service/token-service.js';
import type { RevokeOutcome } from '../store/store.js';
import { named, withDatabase } from './database.js';
import {
  databaseUrlOption,
  type DatabaseOptions,
  dbOption,
  expiresOption,
  scopesOption,
  tokenIdArgument,
  USAGE,
} from './options.js';
import { forTerminal } from './terminal-text.js';

const iso = (date: Date | null) => date?.toISOString() ?? null;

/** A token as `token list --json` gives it: what is absent (no name, no expiry) is null. */
function describeToken(token: TokenRecord): Record<string, string | number | string[] | null> {
  return {
    id: token.id,
    name: token.name === '' ? null : token.name,
    scopes: token.scopes,
    created: token.createdAt.toISOString(),
    expires: iso(token.expiresAt),
    lastUsed: iso(token.lastUsedAt),
    revoked: iso(token.revokedAt),
  };
}

function table(tokens: TokenRecord[]): string {
  const rows = tokens.map((token) => {
    const row = describeToken(token);
    return [
      row.id,
      row.name,
      token.scopes.join(','),
      row.created,
      row.expires,
      row.lastUsed,
      row.revoked,
    ].map((cell) => forTerminal(String(cell ?? '-')));
  });
  const header = ['ID', 'NAME', 'SCOPES', 'CREATED', 'EXPIRES', 'LAST USED', 'REVOKED'];
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => row[i]!.length)),
  );
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function tokenCommand(): Command {
  const token = new Command('token').description('create, list and revoke access tokens');
  token.addCommand(createCommand());
  token.addCommand(listCommand());
  token.addCommand(revokeCommand());
  return token;
}

function createCommand(): Command {
  return new Command('create')
    .description(
      'create a token and print it (alone, on one line); it is not shown again. Creates the ' +
        'database if there is none, and says on stderr which database it wrote to',
    )
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .addOption(scopesOption())
    .option('--name <name>', 'a label to recognise the token by', '')
    .addOption(expiresOption())
    .action(async (options: CreateOptions, command: Command) => {
      await withDatabase(options, command, { create: true }, async (database) => {
        const { token: secret, record } = await new TokenService(database.store.tokens).create({
          name: options.name,
          scopes: options.scopes,
          expiresInMs: options.expiresIn ?? null,
        });
        process.stdout.write(`${secret}\n`);
        const expires = record.expiresAt ? `expires ${iso(record.expiresAt)}` : 'never expires';
        process.stderr.write(
          `created token ${record.id} in ${named(database)}: scopes ` +
            `${record.scopes.join(',')}, ${expires}\n`,
        );
      });
    });
}

interface CreateOptions extends DatabaseOptions {
  scopes: Scope[];
  name: string;
  expiresIn?: number;
}

function listCommand(): Command {
  return new Command('list')
    .description('list tokens (never the tokens themselves) of an existing database')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .option('--json', 'JSON Lines: one JSON object per token, null where a field has no value')
    .action(async (options: DatabaseOptions & { json?: boolean }, command: Command) => {
      const records = await withDatabase(options, command, { create: false }, ({ store }) =>
        new TokenService(store.tokens).list(),
      );
      const out = options.json
        ? records.map((record) => JSON.stringify(describeToken(record))).join('\n')
        : table(records);
      if (out !== '') process.stdout.write(`${out}\n`);
    });
}

const REVOCATION_DELAY = `${TOKEN_CACHE_TTL_MS / 1000} s`;

function revokeCommand(): Command {
  return new Command('revoke')
    .description(
      `revoke a token, by its id or by the token itself; running servers refuse it within ` +
        `${REVOCATION_DELAY} (each trusts a token it has looked up for up to ${REVOCATION_DELAY})`,
    )
    .argument('[id]', 'id of the token, from "token list"', tokenIdArgument)
    .addOption(
      new Option(
        '--token <token>',
        'the token itself (pst_...), found by its hash; - reads it from stdin, which keeps it ' +
          'out of the shell history and the process list',
      ),
    )
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action(async (id: number | undefined, options: RevokeOptions, command: Command) => {
      const secret = await revocationTarget(id, options, command);
      await withDatabase(options, command, { create: false }, async (database) => {
        const tokens = new TokenService(database.store.tokens);
        const revocation =
          secret === undefined
            ? { outcome: await tokens.revoke(id!) }
            : await tokens.revokeToken(secret);
        reportRevocation(revocation, id, database.name);
      });
    });
}

/**
 * The token `--token` gives, undefined when the id does; a usage error (exit 2) for neither,
 * both, or what is not a token (which is not echoed: it may be a secret all the same).
 */
async function revocationTarget(
  id: number | undefined,
  options: RevokeOptions,
  command: Command,
): Promise<string | undefined> {
  if ((id === undefined) === (options.token === undefined)) {
    const message =
      id === undefined
        ? 'say which token to revoke: its id (token list shows it), or --token'
        : 'give the id of the token to revoke or --token, not both';
    command.error(`error: ${message}`, { exitCode: USAGE });
  }
  if (options.token === undefined) return undefined;
  const secret = await tokenGiven(options.token);
  if (!TOKEN_FORMAT.test(secret)) {
    command.error(
      `error: what --token gave is not a plantstore token (${TOKEN_PREFIX} and 43 characters)`,
      { exitCode: USAGE },
    );
  }
  return secret;
}

interface RevokeOptions extends DatabaseOptions {
  token?: string;
}

/** The token of `--token`: the value, or with `-` the first line of stdin. */
async function tokenGiven(value: string): Promise<string> {
  if (value !== '-') return value;
  if (process.stdin.isTTY) process.stderr.write('token to revoke: ');
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  try {
    for await (const line of lines) return line.trim();
    return '';
  } finally {
    lines.close();
  }
}

/** Says what `token revoke` did; a token that is not there is a failure (exit 1). */
function reportRevocation(
  { outcome: result, record }: { outcome: RevokeOutcome; record?: TokenRecord },
  id: number | undefined,
  database: string,
): void {
  const which = record === undefined ? `token ${id}` : `token ${record.id}${label(record)}`;
  if (result === 'not-found') {
    process.stderr.write(
      id === undefined
        ? `no token in ${database} is the token given; nothing was revoked\n`
        : `no token has id ${id} in ${database}\n`,
    );
    process.exitCode = 1;
    return;
  }
  process.stderr.write(
    result === 'revoked'
      ? `revoked ${which} in ${database}; running servers refuse it within ${REVOCATION_DELAY}\n`
      : `${which} was already revoked in ${database}\n`,
  );
}

const label = (record: TokenRecord) =>
  record.name === '' ? '' : ` (${forTerminal(JSON.stringify(record.name))})`;
