import type { Socket } from 'node:net';

/**
 * The probe server's share of the event loop, which it shares with the app: a token bucket of
 * requests per second for the whole server (a burst of a tenth of a second's worth). A request read
 * past the budget is still answered (answers are cheap and a kubelet probe, one request per
 * connection, must not fail), but its connection stops being read: the kernel's TCP window then
 * slows the sender, and reading resumes, oldest connection first, as the budget refills. Refusing with 429 or
 * 503 instead would cost as much as answering and fail the probes it is meant to protect.
 */
export class RequestBudget {
  readonly #perMs: number;
  readonly #capacity: number;
  #tokens: number;
  #at = performance.now();
  readonly #paused = new Set<Socket>();
  #timer: NodeJS.Timeout | undefined;

  constructor(perSecond: number) {
    this.#perMs = perSecond / 1_000;
    this.#capacity = Math.max(1, perSecond / 10);
    this.#tokens = this.#capacity;
  }

  take(socket: Socket): void {
    this.#refill();
    this.#tokens -= 1;
    if (this.#tokens >= 0) return;
    reading(socket, false); // again if Node resumed it in between
    this.#paused.add(socket);
    this.#schedule();
  }

  #refill(): void {
    const now = performance.now();
    this.#tokens = Math.min(this.#capacity, this.#tokens + (now - this.#at) * this.#perMs);
    this.#at = now;
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(this.#release, Math.max(1, Math.ceil((1 - this.#tokens) / this.#perMs)));
    this.#timer.unref();
  }

  readonly #release = (): void => {
    this.#timer = undefined;
    this.#refill();
    let tokens = this.#tokens;
    for (const socket of this.#paused) {
      if (tokens < 1) break;
      this.#paused.delete(socket);
      if (socket.destroyed) continue;
      reading(socket, true);
      tokens -= 1;
    }
    if (this.#paused.size > 0) this.#schedule();
  };
}

type ReadingHandle = { reading?: boolean; readStart?: () => number; readStop?: () => number } | null;

/**
 * Stops or restarts reading `socket` from the kernel, whatever its stream does: past the budget, the
 * kernel's TCP window then pushes back on the sender. `socket.pause()` would not hold: Node resumes
 * the stream of a socket as it answers each request. The handle's `reading` flag stays set while it
 * is stopped, since net.Socket restarts a handle it believes stopped whenever its stream is read;
 * a stream paused by Node itself (answers queued up) stops the handle again once its buffer is full.
 */
function reading(socket: Socket, on: boolean): void {
  const handle = (socket as Socket & { _handle?: ReadingHandle })._handle;
  if (handle?.readStart === undefined || handle.readStop === undefined || socket.destroyed) return;
  if (on) handle.readStart();
  else handle.readStop();
  handle.reading = true;
}
