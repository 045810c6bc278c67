// `npm run build` (after the client's): compiles src/ into a new dist.*/ beside dist/, then
// puts it in dist/'s place. dist/ is never half-written, and absent only between two renames,
// so a server or a `plantstore` command run from this checkout keeps working while `npm test`
// (whose pretest builds) runs beside it. Deleting dist/ first, as the build did, left
// bin/plantstore saying "not built yet" for the whole compile. Each build has directories of
// its own: two at once (npm test beside a benchmark's build) do not take each other's.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const at = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const remove = (path: string) => rmSync(path, { recursive: true, force: true });

// Siblings of dist/: the source maps' relative paths hold once moved there. Made with the
// umask's mode, as tsc makes dist/ (mkdtemp's 0700 would hide it from the user a service runs
// as), named by this process: each build has its own.
const next = at(`dist.next-${process.pid}`);
remove(next);
mkdirSync(next);
try {
  execFileSync(process.execPath, [tsc, '-p', at('tsconfig.build.json'), '--outDir', next], {
    stdio: 'inherit',
  });
} catch (error) {
  remove(next);
  // A compile error: tsc has printed it (and exited with its status). Anything else says why.
  if ((error as { status?: number | null }).status == null) console.error(error);
  console.error('build failed; dist/ is left as it was');
  process.exit(1);
}
const old = next.replace('dist.next-', 'dist.old-');
try {
  if (existsSync(at('dist'))) renameSync(at('dist'), old);
  renameSync(next, at('dist'));
} finally {
  // Another build that swapped in between has its dist/ in place; this one's goes.
  remove(old);
  remove(next);
}
