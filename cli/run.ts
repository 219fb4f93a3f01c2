/**
 * The `opstate` process: runs the command line and sets the exit code. `bin/opstate.js` loads
 * the built `dist/cli/run.js`, as do the processes tests, drills and the chaos run start.
 */
import { main } from './main.ts';

process.exitCode = await main(process.argv.slice(2));
