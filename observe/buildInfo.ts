import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { XSTATE_VERSION } from '../machines/snapshotEnvelope.ts';

/** What this process runs: opstate's version, Node's and xstate's. */
export interface BuildInfo {
  readonly version: string;
  readonly node: string;
  readonly xstate: string;
}

/**
 * The version in opstate's own package.json: the nearest one named `opstate` above this module
 * (the repository root from the sources, the package root from `dist/`); `unknown` if none is found.
 */
function opstateVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === 'opstate' && typeof manifest.version === 'string') {
        return manifest.version;
      }
    } catch {
      // no package.json here, or not JSON: look further up
    }
    const up = dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}

let cached: BuildInfo | undefined;

/**
 * What this process runs, read once: opstate's version, Node's (`process.version`) and xstate's
 * (the one stored beside every snapshot).
 *
 * @example
 * ```ts
 * buildInfo(); // { version: '0.1.0', node: 'v20.20.2', xstate: '5.33.3' }
 * ```
 */
export function buildInfo(): BuildInfo {
  cached ??= { version: opstateVersion(), node: process.version, xstate: XSTATE_VERSION };
  return cached;
}
