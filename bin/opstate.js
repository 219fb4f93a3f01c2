#!/usr/bin/env node
// The opstate command runs the built JavaScript in dist/ (`npm ci` builds it through `prepare`;
// `npm run build` rebuilds it).
try {
  await import('../dist/cli/run.js');
} catch (err) {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/cli/run.js')) {
    process.stderr.write('opstate: dist/ is missing; run `npm run build` (or `npm ci`) first\n');
    process.exit(1);
  }
  throw err;
}
