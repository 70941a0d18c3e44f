import { EXIT_PASS, EXIT_UNREACHABLE, HEALTH_USAGE, healthCommand, type CommandIO } from './health-command.js';

const USAGE = `Usage: lifeline <command> [options]

Commands:
  health    print a lifeline probe server's verdicts (lifeline health --help)
`;

/** The `lifeline` CLI: dispatches to a command and returns the exit code. */
export async function cli(args: readonly string[], io: CommandIO): Promise<number> {
  const [command, ...rest] = args;
  if (command === 'health') return healthCommand(rest, io);
  if (command === '--help' || command === '-h' || command === 'help') {
    io.stdout.write(`${USAGE}\n${HEALTH_USAGE}`);
    return EXIT_PASS;
  }
  io.stderr.write(command === undefined ? USAGE : `lifeline: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
  return EXIT_UNREACHABLE;
}
