import { createHash } from 'node:crypto';
import type { ArchiveStore, ArchiveStoreFactory } from '../../stages/ArchiveStore.ts';

/** One object as the memory store keeps it. */
interface Held {
  readonly bytes: Buffer;
  readonly version: string;
  readonly sha256: string;
}

/** The buckets behind `mem:<bucket>` storage roots, shared by every store made for one name. */
const buckets = new Map<string, Map<string, Held>>();
let generation = 0;

/**
 * A test-only archive store that keeps objects in this process's memory, in named buckets: the
 * change-cost probe of the archive store interface (one file, plus one `registerArchiveStore`
 * line where it is used). Versions are a generation counter; it keeps each object's sha256. A put
 * whose body fails midway stores nothing, as a writer that dies midway must leave the key free.
 *
 * @example
 * ```ts
 * registerArchiveStore('mem', memoryArchiveStore);   // storageRoot 'mem:lta-1'
 * ```
 */
export class MemoryArchiveStore implements ArchiveStore {
  private readonly objects: Map<string, Held>;

  constructor(readonly bucket: string) {
    this.objects = buckets.get(bucket) ?? new Map();
    buckets.set(bucket, this.objects);
  }

  describe(key: string): string {
    return `mem:${this.bucket}/${key}`;
  }

  async putIfAbsent(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<{ created: boolean; version: string }> {
    const chunks: Uint8Array[] = [];
    for await (const chunk of body) chunks.push(Buffer.from(chunk));
    const there = this.objects.get(key);
    if (there !== undefined) return { created: false, version: there.version };
    const bytes = Buffer.concat(chunks);
    generation++;
    const held = {
      bytes,
      version: `g${generation}`,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    };
    this.objects.set(key, held);
    return { created: true, version: held.version };
  }

  async read(key: string): Promise<{ version: string; body: AsyncIterable<Uint8Array> } | null> {
    const held = this.objects.get(key);
    if (held === undefined) return null;
    const half = Math.floor(held.bytes.length / 2);
    async function* body() {
      yield held?.bytes.subarray(0, half) as Buffer;
      yield held?.bytes.subarray(half) as Buffer;
    }
    return { version: held.version, body: body() };
  }

  async stat(key: string): Promise<{ size: number; version: string; sha256: string } | null> {
    const held = this.objects.get(key);
    if (held === undefined) return null;
    return { size: held.bytes.length, version: held.version, sha256: held.sha256 };
  }
}

/** The factory for `registerArchiveStore('mem', …)`: `mem:<bucket>`. */
export const memoryArchiveStore: ArchiveStoreFactory = (location) =>
  new MemoryArchiveStore(location.slice('mem:'.length));
