// Under npm (`npm start`, `npx synapse serve`) the process a supervisor or a
// container signals is npm's, and npm runs the command through a shell that
// may keep it as a child: the shell dies of the SIGTERM npm passes on, and
// the server would run on as an orphan, holding its port and data dir. So a
// server started by npm stops, as on SIGTERM, once the process that started
// it has gone.

/** True when an npm script or `npm exec` (npx) started this process. */
export function startedByNpm(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.npm_lifecycle_event !== undefined;
}

/**
 * Calls `onExit` once this process's parent has exited (it is then adopted
 * by init or a subreaper, and its parent process id changes). Returns a
 * function that stops watching. Nothing is watched when the parent is init
 * already.
 */
export function whenParentExits(onExit: () => void, intervalMs = 250): () => void {
  const parent = process.ppid;
  if (parent <= 1) return () => {};
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onExit();
  }, intervalMs);
  // Watching alone keeps nobody alive.
  timer.unref();
  return () => clearInterval(timer);
}
