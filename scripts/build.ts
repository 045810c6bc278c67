// `npm run build` (after the client's): compiles src/ into dist.next/ beside dist/, then puts
// it in dist/'s place. dist/ is never half-written, and absent only between two renames, so a
// server or a `plantstore` command run from this checkout keeps working while `npm test`
// (whose pretest builds) runs beside it. Deleting dist/ first, as the build did, left
// bin/plantstore saying "not built yet" for the whole compile.
import { execFileSync } from 'node:child_process';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const at = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const remove = (name: string) => rmSync(at(name), { recursive: true, force: true });

// A sibling of dist/: the source maps' relative paths hold once it is moved there.
remove('dist.next');
try {
  execFileSync(
    process.execPath,
    [tsc, '-p', at('tsconfig.build.json'), '--outDir', at('dist.next')],
    { stdio: 'inherit' },
  );
} catch {
  // tsc has printed why; dist/ stays as it was.
  remove('dist.next');
  process.exit(1);
}
remove('dist.old');
if (existsSync(at('dist'))) renameSync(at('dist'), at('dist.old'));
renameSync(at('dist.next'), at('dist'));
remove('dist.old');
