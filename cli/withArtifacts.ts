import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';

/** Opens the database, hands the artifact repository to `fn`, closes the database. */
export async function withArtifacts<T>(
  open: () => Promise<Database>,
  fn: (artifacts: ArtifactRepository) => Promise<T>,
): Promise<T> {
  const database = await open();
  try {
    return await fn(new ArtifactRepository(database));
  } finally {
    await database.close();
  }
}
