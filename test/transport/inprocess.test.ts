import { createInProcessTransport } from '../../transport/inprocess/createInProcessTransport.ts';
import { transportContract } from './transportContract.ts';

transportContract('in-process', async (options) => {
  const transport = createInProcessTransport(options);
  return {
    transport,
    publishRaw: async (route, data) => transport.publishRaw(route, data),
    dispose: () => transport.close(),
  };
});
