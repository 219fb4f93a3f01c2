// Types of the vendored postgres.js 3.4.9 (see README.md here): the `postgres` package's own, which
// stay a dependency for these declarations and for drizzle-orm's `postgres-js` driver module.
import postgres from 'postgres';

export default postgres;
