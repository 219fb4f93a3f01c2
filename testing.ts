// The testing entry of opstate (`opstate/testing`): what tests and crash drills need and a service
// in production never should. Names are re-exported one by one.

// Fault points a crash drill sets on a worker or a copy deleter (through withFaults).
export type { DeleterFaults } from './deleter/DeleterFaults.ts';
export { crashHere } from './loops/crashHere.ts';
// A worker's or copy deleter's fault points, and its crash as a killed process would die.
export { crash, withFaults } from './loops/drill.ts';
// Simulated time: loops wait on it, the test moves it.
export { createSimulatedClock, SimulatedClock } from './machines/SimulatedClock.ts';
export type { LogLevel } from './observe/Logger.ts';
// Logs kept in memory, to assert on.
export { memoryLogger } from './observe/Logger.ts';
export { archiveStandIn } from './stages/archiveStandIn.ts';
export type { WorkerFaults } from './worker/WorkerFaults.ts';
