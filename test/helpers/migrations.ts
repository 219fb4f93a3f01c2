import journal from '../../persistence/migrations/meta/_journal.json' with { type: 'json' };

/** How many migrations the repository holds (so no test hard-codes it). */
export const MIGRATION_COUNT: number = journal.entries.length;
