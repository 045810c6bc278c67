import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The README and the pages of docs/ link to each other and to their own headings: every such
// link must lead somewhere, or a reader following one lands on nothing (GitHub shows a page
// without complaint when its #anchor matches no heading).

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DOCS = join(ROOT, 'docs');
const pages = readdirSync(DOCS)
  .filter((name) => name.endsWith('.md'))
  .map((name) => join(DOCS, name));
const files = [join(ROOT, 'README.md'), ...pages];

/** The lines outside fenced code blocks, where a `#` starts a shell comment, not a heading. */
function prose(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').filter((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return false;
    }
    return fence === undefined;
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

interface Heading {
  level: number;
  anchor: string;
}

/** The headings of a file with their anchors; a repeated one gets -1, -2, ... as on GitHub. */
function headings(file: string): Heading[] {
  const seen = new Map<string, number>();
  return prose(readFileSync(file, 'utf8')).flatMap((line) => {
    const match = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (match === null) return [];
    const base = slug(match[2]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    return [{ level: match[1]!.length, anchor: count === 0 ? base : `${base}-${count}` }];
  });
}

/** Every link target of a file's prose, code spans left out. */
function links(file: string): string[] {
  return prose(readFileSync(file, 'utf8')).flatMap((line) =>
    [...line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map(
      (match) => match[1]!,
    ),
  );
}

const shown = (file: string) => relative(ROOT, file);

test('every relative link and #anchor in README.md and docs/ leads somewhere', () => {
  const broken: string[] = [];
  for (const file of files) {
    for (const target of links(file)) {
      if (/^[a-z][a-z\d+.-]*:/i.test(target)) continue; // https:, mailto: ...
      const [path = '', anchor] = target.split('#');
      const to = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (!existsSync(to)) {
        broken.push(`${shown(file)}: ${target} (no such file)`);
      } else if (anchor !== undefined) {
        const found = to.endsWith('.md') && headings(to).some((h) => h.anchor === anchor);
        if (!found) broken.push(`${shown(file)}: ${target} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test('every page of docs/ starts with a contents list linking each of its sections', () => {
  for (const page of pages) {
    const lines = prose(readFileSync(page, 'utf8'));
    const title = lines.findIndex((line) => line.startsWith('# '));
    assert.ok(title >= 0, `${shown(page)} has no # title`);
    const body = lines.slice(title + 1).filter((line) => line.trim() !== '');
    const end = body.findIndex((line) => !/^\s*- \[/.test(line));
    const contents = end === -1 ? body : body.slice(0, end);
    assert.ok(contents.length > 0, `${shown(page)} does not start with a contents list`);
    const listed = contents.map((line) => /\]\(#([^)]+)\)/.exec(line)?.[1]);
    const sections = headings(page)
      .filter((h) => h.level === 2)
      .map((h) => h.anchor);
    assert.deepEqual(
      listed.filter((anchor) => anchor !== undefined && sections.includes(anchor)),
      sections,
      `${shown(page)}: the contents list must link every ## section, in order`,
    );
  }
});

test('the README links every page of docs/', () => {
  const linked = new Set(
    links(join(ROOT, 'README.md')).map((target) => resolve(ROOT, target.split('#')[0]!)),
  );
  assert.deepEqual(pages.filter((page) => !linked.has(page)).map(shown), []);
});
