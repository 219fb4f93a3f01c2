#!/usr/bin/env node
// The opstate command runs straight from the TypeScript sources: tsx compiles on load,
// so a fresh clone needs `npm ci` and nothing else.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
