import { writeSync } from 'node:fs';

/** Written to stderr directly: console output of a worker goes through the main thread, which is blocked. */
export function log(message: string): void {
  try {
    writeSync(2, `${JSON.stringify({ level: 40, time: Date.now(), pid: process.pid, name: 'lifeline', msg: message })}\n`);
  } catch {
    // nowhere to say it
  }
}
