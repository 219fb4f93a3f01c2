/**
 * The `opstate` process: runs the command line and sets the exit code. `bin/opstate.js` loads
 * the built `dist/cli/run.js`; tests and drills run this file from the sources under tsx.
 */
import { main } from './main.ts';

process.exitCode = await main(process.argv.slice(2));
