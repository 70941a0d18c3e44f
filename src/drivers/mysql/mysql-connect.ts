/**
 * A mysql2 connection's connect phase under a deadline: the handshake it adds first is bounded in
 * its maker's context (a blackholed SYN, a server that never greets). Lifeline's own kill
 * connection is left unbounded.
 */
import { armDeadline, type DeadlinePolicy } from '../../policy/index.js';
import { deadlineError, driverDeadline } from '../driver-deadline.js';
import { makingKillConnection } from './mysql-kill.js';
import { driver, mysqlAttributes, type AddCommand, type MysqlCommand, type MysqlConnection, type MysqlCopy } from './mysql-driver.js';

/** `addCommand`: the handshake a new connection adds first is its connect phase, bounded in its maker's context. */
export function boundAddCommand(original: AddCommand, copy: MysqlCopy): AddCommand {
  return function addCommand(this: MysqlConnection, command: MysqlCommand): MysqlCommand {
    const rules = driver.policy;
    if (rules !== undefined && !makingKillConnection() && command instanceof copy.ClientHandshake) boundHandshake(this, command, rules);
    return original.call(this, command);
  };
}

function boundHandshake(connection: MysqlConnection, handshake: MysqlCommand, rules: DeadlinePolicy): void {
  const deadline = driverDeadline(rules, () => mysqlAttributes(connection.config, undefined));
  if (deadline === undefined) return;
  const stream = connection.stream;
  const timer = armDeadline(
    deadline,
    (made: MysqlConnection) => {
      stream.removeListener('close', cancel);
      if (made._command !== handshake || made._closing === true || made._fatalError) return;
      // The error reaches connect()'s callback, a pool's waiter, the promise API's createConnection,
      // a query queued behind the handshake; a connection whose queued query left at its own
      // deadline may have no one else to tell, and an unheard 'error' would end the process.
      if (made.listenerCount('error') === 0) made.once('error', () => {});
      made.stream.destroy(deadlineError(deadline));
    },
    connection,
  );
  const cancel = (): void => {
    timer.cancel();
    stream.removeListener('close', cancel);
  };
  handshake.once('end', cancel);
  stream.once('close', cancel);
}
