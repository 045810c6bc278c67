import { Command } from 'commander';
import type { Scope } from '../core/scopes.js';
import type { TokenRecord } from '../core/tokens.js';
import { TokenService } from '../service/token-service.js';
import { openStore } from '../store/open.js';
import {
  databaseUrlOption,
  type DatabaseOptions,
  dbOption,
  expiresOption,
  scopesOption,
  storeConfig,
  tokenIdArgument,
} from './options.js';
import { forTerminal } from './terminal-text.js';

/** Runs `work` with a token service on the database, closing it whatever happens. */
async function withTokens<T>(
  options: DatabaseOptions,
  work: (tokens: TokenService) => Promise<T>,
): Promise<T> {
  const store = await openStore(storeConfig(options));
  try {
    return await work(new TokenService(store.tokens));
  } finally {
    await store.close();
  }
}

const iso = (date: Date | null) => date?.toISOString() ?? '-';

function describeToken(token: TokenRecord): Record<string, string | number | string[]> {
  return {
    id: token.id,
    name: token.name,
    scopes: token.scopes,
    created: iso(token.createdAt),
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
      row.name || '-',
      token.scopes.join(','),
      row.created,
      row.expires,
      row.lastUsed,
      row.revoked,
    ].map((cell) => forTerminal(String(cell)));
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

  token
    .command('create')
    .description('create a token and print it (alone, on one line); it is not shown again')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .addOption(scopesOption())
    .option('--name <name>', 'a label to recognise the token by', '')
    .addOption(expiresOption())
    .action(
      async (options: DatabaseOptions & { scopes: Scope[]; name: string; expiresIn?: number }) => {
        const { token: secret, record } = await withTokens(options, (tokens) =>
          tokens.create({
            name: options.name,
            scopes: options.scopes,
            expiresInMs: options.expiresIn ?? null,
          }),
        );
        process.stdout.write(`${secret}\n`);
        process.stderr.write(
          `created token ${record.id} with scopes ${record.scopes.join(',')}, expires ${iso(record.expiresAt)}\n`,
        );
      },
    );

  token
    .command('list')
    .description('list tokens (never the tokens themselves)')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .option('--json', 'one JSON object per line instead of a table')
    .action(async (options: DatabaseOptions & { json?: boolean }) => {
      const records = await withTokens(options, (tokens) => tokens.list());
      const out = options.json
        ? records.map((record) => JSON.stringify(describeToken(record))).join('\n')
        : table(records);
      if (out !== '') process.stdout.write(`${out}\n`);
    });

  token
    .command('revoke')
    .description('revoke a token; a running server refuses it from its next request')
    .argument('<id>', 'id of the token, from "token list"', tokenIdArgument)
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action(async (id: number, options: DatabaseOptions) => {
      const outcome = await withTokens(options, (tokens) => tokens.revoke(id));
      if (outcome === 'not-found') {
        process.stderr.write(`no token has id ${id}\n`);
        process.exitCode = 1;
        return;
      }
      process.stderr.write(
        outcome === 'revoked' ? `revoked token ${id}\n` : `token ${id} was already revoked\n`,
      );
    });

  return token;
}
