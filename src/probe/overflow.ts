import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';

/**
 * How long a connection that has sent nothing keeps its slot against a newcomer. A prober sends its
 * request as soon as it is connected, so longer than that takes on a loaded machine (a CPU-throttled
 * pod gets the CPU back within one 100 ms CFS period; twice that and a margin), and shorter than the
 * kubelet's 1 s timeout, past which a probe still silent has failed anyway. It also bounds churn: a
 * slot changes hands at most once per this time, whatever the rate of newcomers.
 */
const SILENT_GRACE_MS = 300;

/** One address's overflowing connections, oldest first. */
interface AddressOverflow {
  all: Set<Socket>;
  /** Those that have sent nothing yet, by when they were accepted. */
  silent: Map<Socket, number>;
}

/**
 * Connections past the caps: read, answered once, never kept alive (`ClientLimits` lets each
 * send one small request). When full, a newcomer takes the place of one that has sent nothing for
 * {@link SILENT_GRACE_MS} (none of those is a probe); failing that, of the address holding the most
 * (grace ignored): of another address if its own holds fewer, the oldest silent one else the
 * oldest, or of its own, the oldest silent one. So an address holding none is never turned away,
 * and one opening thousands of connections a second (or a mesh through which every client is
 * 127.0.0.1) churns only its own while a kubelet's fresh connection, read as soon as it comes, is
 * answered as plain node:http would answer it. Only a newcomer whose address holds the most and
 * whose own are all talking is closed at accept.
 */
export class Overflow {
  readonly #max: number;
  /** Every overflowing connection, and its address. */
  readonly #address = new Map<Socket, string>();
  /** Those that have sent nothing yet, oldest first. */
  readonly #silent = new Map<Socket, number>();
  readonly #byAddress = new Map<string, AddressOverflow>();
  /** Addresses by how many they hold (index), to find the one holding the most at once. */
  readonly #holding: Set<string>[] = [];
  #most = 0;

  constructor(max: number) {
    this.#max = max;
  }

  /** Holds `socket` (from `address`), making room if full; false when it was closed instead. */
  accept(socket: Socket, address: string, now: number): boolean {
    if (this.#address.size >= this.#max) {
      const evicted = oldestSilent(this.#silent, now, (spoke) => this.#silent.delete(spoke)) ?? this.#heaviestGiving(address);
      if (evicted === undefined) {
        socket.destroy();
        return false;
      }
      this.#forget(evicted);
      evicted.destroy();
    }
    let own = this.#byAddress.get(address);
    if (own === undefined) {
      own = { all: new Set(), silent: new Map() };
      this.#byAddress.set(address, own);
    }
    this.#recount(address, own.all.size, own.all.size + 1);
    own.all.add(socket);
    own.silent.set(socket, now);
    this.#address.set(socket, address);
    this.#silent.set(socket, now);
    socket.once('close', () => {
      this.#forget(socket);
    });
    return true;
  }

  /** The connection to give way to a newcomer of `address` when none is silent past the grace. */
  #heaviestGiving(address: string): Socket | undefined {
    const mine = this.#byAddress.get(address)?.all.size ?? 0;
    const own = mine >= this.#most;
    const from = own ? address : this.#holding[this.#most]?.values().next().value;
    const entries = from === undefined ? undefined : this.#byAddress.get(from);
    if (entries === undefined) return undefined;
    for (const socket of entries.silent.keys()) {
      if (socket.bytesRead === 0) return socket;
      entries.silent.delete(socket); // bytes sent are never unsent
    }
    return own ? undefined : entries.all.values().next().value;
  }

  #forget(socket: Socket): void {
    const address = this.#address.get(socket);
    if (address === undefined) return;
    this.#address.delete(socket);
    this.#silent.delete(socket);
    const own = this.#byAddress.get(address);
    if (own === undefined) return;
    own.silent.delete(socket);
    own.all.delete(socket);
    this.#recount(address, own.all.size + 1, own.all.size);
    if (own.all.size === 0) this.#byAddress.delete(address);
  }

  /** `address` went from holding `from` to `to` (one more or one fewer). */
  #recount(address: string, from: number, to: number): void {
    if (from > 0) this.#holding[from]?.delete(address);
    if (to > 0) (this.#holding[to] ??= new Set()).add(address);
    if (to > this.#most) this.#most = to;
    while (this.#most > 0 && (this.#holding[this.#most]?.size ?? 0) === 0) this.#most--;
  }
}

/** Most overflowing connections by default, whatever the process may open. */
const MAX_DEFAULT_OVERFLOW = 4_096;

let openFilesLimit: number | undefined;

/**
 * A quarter of the files this process may open, at most {@link MAX_DEFAULT_OVERFLOW}: descriptors
 * held past the limit make the app's own accepts, calls and file opens fail with EMFILE (ECS long
 * had a hard limit of 4,096). Node raises the soft limit to the hard one at start-up, so the soft
 * limit read from `/proc/self/limits` (once: `process.report` would walk every handle) is the one
 * in force. Where it cannot be read (not Linux), 1,024 is assumed, a common small limit.
 */
export function defaultMaxOverflow(): number {
  openFilesLimit ??= softOpenFiles() ?? 1_024;
  return Math.min(MAX_DEFAULT_OVERFLOW, Math.floor(openFilesLimit / 4));
}

function softOpenFiles(): number | undefined {
  let limits: string;
  try {
    limits = readFileSync('/proc/self/limits', 'latin1');
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
  if (soft === 'unlimited') return Infinity;
  const files = Number(soft);
  return Number.isSafeInteger(files) && files > 0 ? files : undefined;
}

/**
 * The oldest connection of `candidates` (accept times, oldest first) that has sent nothing, if it is
 * older than {@link SILENT_GRACE_MS}. Those found to have sent something are handed to `spoke`,
 * which removes them: bytes sent are never unsent, so each is looked at once.
 */
export function oldestSilent(candidates: Map<Socket, number>, now: number, spoke: (socket: Socket) => void): Socket | undefined {
  for (const [socket, accepted] of candidates) {
    if (socket.bytesRead === 0) return now - accepted >= SILENT_GRACE_MS ? socket : undefined;
    spoke(socket);
  }
  return undefined;
}
