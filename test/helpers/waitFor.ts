export { waitFor } from '../../chaos/waitFor.ts';
