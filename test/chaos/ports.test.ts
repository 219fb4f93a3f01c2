import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { freePort, markPort, PORT_MARKS } from '../../chaos/ports.ts';

/** A port in the range freePort never draws from, so these tests cannot meet a real mark. */
let next = 40_000 + (process.pid % 5_000) * 4;
const testPort = () => {
  mkdirSync(PORT_MARKS, { recursive: true });
  return next++;
};

describe('freePort', () => {
  it('never gives one process the same port twice, and marks each as its own', async () => {
    const ports = [];
    for (let i = 0; i < 100; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(100);
    for (const port of ports) {
      expect(readFileSync(join(PORT_MARKS, String(port)), 'utf8')).toBe(String(process.pid));
    }
  });

  it("skips a port a live process holds, and clears a dead one's mark without taking it at once", async () => {
    const port = testPort();
    const holder = spawn('sleep', ['60'], { stdio: 'ignore' });
    const exited = new Promise((r) => holder.once('exit', r));
    try {
      writeFileSync(join(PORT_MARKS, String(port)), String(holder.pid));
      expect(markPort(port)).toBe(false);
      expect(markPort(port)).toBe(false);
    } finally {
      holder.kill('SIGKILL');
      await exited;
    }
    // The owner is gone: the first ask clears the mark and still refuses, the next one takes it.
    expect(markPort(port)).toBe(false);
    expect(existsSync(join(PORT_MARKS, String(port)))).toBe(false);
    expect(markPort(port)).toBe(true);
    expect(readFileSync(join(PORT_MARKS, String(port)), 'utf8')).toBe(String(process.pid));
    expect(markPort(port)).toBe(false);
  });

  it('clears a mark that names no process', () => {
    const port = testPort();
    writeFileSync(join(PORT_MARKS, String(port)), 'not a pid');
    expect(markPort(port)).toBe(false);
    expect(markPort(port)).toBe(true);
  });

  it("clears every mark of a process that is gone at a process's first ask, and leaves a live one's", async () => {
    const [gone, kept] = [testPort(), testPort()];
    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    writeFileSync(join(PORT_MARKS, String(gone)), String(dead.pid));
    writeFileSync(join(PORT_MARKS, String(kept)), String(process.pid));
    // A new process, as a test worker or a drill's child is: its first freePort sweeps.
    await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '-e', "import('./chaos/ports.ts').then((m) => m.freePort())"],
      { cwd: join(import.meta.dirname, '../..') },
    );
    expect(existsSync(join(PORT_MARKS, String(gone)))).toBe(false);
    expect(readFileSync(join(PORT_MARKS, String(kept)), 'utf8')).toBe(String(process.pid));
    unlinkSync(join(PORT_MARKS, String(kept)));
  });
});
