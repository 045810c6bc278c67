import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

// docs/deploying.md installs the systemd service by copying parts of a checkout to
// /opt/plantstore and running `npm ci` there, whose `prepare` builds. The deploy tier's
// systemd test runs the unit on the checkout itself, so nothing else notices when the build
// starts to need a file the copy leaves out (scripts/build.ts did).

const root = new URL('../../', import.meta.url);
const deploying = readFileSync(new URL('docs/deploying.md', root), 'utf8');
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  scripts: Record<string, string>;
  workspaces?: string[];
};

/** The top-level names the copy takes, its globs (`tsconfig*.json`) matched against the checkout. */
function copied(): Set<string> {
  const line = /^mkdir -p \/opt\/plantstore && cp -r (.+) \/opt\/plantstore\/$/m.exec(deploying);
  assert.ok(line, 'docs/deploying.md copies the checkout with `cp -r ... /opt/plantstore/`');
  const names = new Set<string>();
  for (const word of line[1]!.split(/\s+/)) {
    if (!word.includes('*')) {
      names.add(word);
      continue;
    }
    const pattern = new RegExp(`^${word.replace(/\./g, '\\.').replace(/\*/g, '.*')}$`);
    for (const entry of readdirSync(root)) if (pattern.test(entry)) names.add(entry);
  }
  return names;
}

/** The scripts `npm ci` runs (prepare), with those they run in turn (`npm run X`). */
function installScripts(): string[] {
  const seen: string[] = [];
  const visit = (name: string) => {
    const script = pkg.scripts[name];
    if (script === undefined || seen.includes(script)) return;
    seen.push(script);
    for (const [, next] of script.matchAll(/npm run (?:--silent )?([\w:-]+)/g)) visit(next!);
  };
  visit('prepare');
  return seen;
}

test('the systemd install copies every file `npm ci` builds with', () => {
  const names = copied();
  const scripts = installScripts();
  assert.ok(scripts.length > 0, 'package.json has a prepare script');
  const needed = new Set<string>(['package.json', 'package-lock.json', 'bin', 'migrations']);
  for (const workspace of pkg.workspaces ?? []) needed.add(workspace.split('/')[0]!);
  for (const script of scripts) {
    for (const word of script.split(/\s+/)) {
      // A path of the checkout the script names (scripts/build.ts), not a command or a flag.
      if (
        /^[\w.-]+\/[\w./-]+$|^[\w-]+\.(json|ts|js|mjs)$/.test(word) &&
        existsSync(new URL(word, root))
      ) {
        needed.add(word.split('/')[0]!);
      }
    }
  }
  // What scripts/build.ts compiles with.
  for (const entry of readdirSync(root)) if (/^tsconfig.*\.json$/.test(entry)) needed.add(entry);
  needed.add('src');
  const missing = [...needed].filter((name) => !names.has(name));
  assert.deepEqual(missing, [], `docs/deploying.md's copy lacks ${missing.join(', ')}`);
});
