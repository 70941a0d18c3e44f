import type { Socket } from 'node:net';
import { unmapped } from '../net/index.js';
import { oldestSilent, Overflow } from './overflow.js';

/** The connections of one client address (an IPv6 peer's /64). */
interface AddressSlots {
  open: number;
  /** Those that have sent nothing yet, by when they were accepted (a Map iterates in insertion order). */
  silent: Map<Socket, number>;
}

/** Where a new connection went: a slot, the overflow, or (closed at accept) nowhere. */
type Held = 'slot' | 'overflow' | undefined;

/**
 * Who holds the connection slots. A kubelet opens a fresh connection per probe and sends its
 * request at once; a slow client holds its slot until a timeout. One address holds at most its
 * share of the slots (as nginx's `limit_conn`): the kubelet, from the node's address, keeps its own
 * whatever other addresses do. Past a cap, a newcomer takes the slot of the connection that has
 * sent nothing for longest, once that is older than `SILENT_GRACE_MS` (overflow.ts); one that has
 * sent part of a request, or is idle between requests, is left to `requestTimeoutMs` and the
 * keep-alive timeout. When no slot can be taken the newcomer is not closed but overflows: it is
 * read like any (a probe among thousands of silent clients is answered, then closed); see
 * {@link Overflow}.
 * Closing newcomers, or the longest-waiting connection, at once is what failed probes: clients that
 * reconnect when cut then did so 8,000 to 33,000 times a second, the listen queue overflowed and
 * the kernel dropped probes' SYNs (a retransmit comes after 1 s, the kubelet's timeout). Held
 * instead, a silent client costs ~3 KB of heap and no CPU, as it does a plain node:http server.
 */
export class ConnectionSlots {
  readonly #max: number;
  readonly #maxPerAddress: number;
  /** Connections holding a slot, and their address. */
  readonly #open = new Map<Socket, string>();
  /** Those of them that have sent nothing yet, oldest first. */
  readonly #silent = new Map<Socket, number>();
  readonly #addresses = new Map<string, AddressSlots>();
  readonly #overflow: Overflow;

  constructor(max: number, maxPerAddress: number, maxOverflow: number) {
    this.#max = max;
    this.#maxPerAddress = maxPerAddress;
    this.#overflow = new Overflow(maxOverflow);
  }

  accept(socket: Socket): Held {
    const now = performance.now();
    const address = addressKey(socket.remoteAddress);
    let own = this.#addresses.get(address);
    // Past its address's share, room is made among that address's connections; past the cap, among all.
    let full: Map<Socket, number> | undefined;
    if (own !== undefined && own.open >= this.#maxPerAddress) full = own.silent;
    else if (this.#open.size >= this.#max) full = this.#silent;
    if (full !== undefined) {
      const evicted = oldestSilent(full, now, (spoke) => {
        this.#spoke(spoke);
      });
      if (evicted === undefined) return this.#overflow.accept(socket, address, now) ? 'overflow' : undefined;
      this.#forget(evicted);
      evicted.destroy();
      own = this.#addresses.get(address);
    }
    if (own === undefined) {
      own = { open: 0, silent: new Map() };
      this.#addresses.set(address, own);
    }
    own.open++;
    own.silent.set(socket, now);
    this.#silent.set(socket, now);
    this.#open.set(socket, address);
    socket.once('close', () => {
      this.#forget(socket);
    });
    return 'slot';
  }

  /** A slot holder has sent something: its slot is no longer for a newcomer to take. */
  #spoke(socket: Socket): void {
    this.#silent.delete(socket);
    const address = this.#open.get(socket);
    if (address !== undefined) this.#addresses.get(address)?.silent.delete(socket);
  }

  #forget(socket: Socket): void {
    const address = this.#open.get(socket);
    if (address === undefined) return;
    this.#open.delete(socket);
    this.#silent.delete(socket);
    const own = this.#addresses.get(address);
    if (own === undefined) return;
    own.silent.delete(socket);
    if (--own.open === 0) this.#addresses.delete(address);
  }
}

/**
 * The address a per-address share is counted for: an IPv4 address (IPv4-mapped IPv6 as IPv4), or
 * an IPv6 peer's /64, the block one host is usually given, so that a host cannot take every slot by
 * cycling the addresses of its own /64.
 */
function addressKey(address: string | undefined): string {
  if (address === undefined) return '';
  const v4 = unmapped(address);
  if (!v4.includes(':')) return v4;
  const bare = address.split('%')[0] ?? '';
  const halves = bare.split('::');
  const groups = (half: string | undefined) =>
    half === undefined || half === '' ? [] : half.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  const all = halves.length > 1 ? [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail] : head;
  return `${all
    .slice(0, 4)
    .map((g) => (Number.parseInt(g, 16) || 0).toString(16))
    .join(':')}::/64`;
}
