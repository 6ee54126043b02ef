import net from "node:net";

/** Ports this process has handed out, so that two callers never get the same one. */
const handedOut = new Set<number>();

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A loopback port that nothing listens on, chosen at random below the ephemeral ranges (Linux
 * 32768-60999, Windows and macOS 49152-65535). A port the kernel picks (`listen(0)`) lies in
 * the ephemeral range, where any outgoing connection of a busy machine (a test run opens
 * thousands) may take it between this check and the server's own listen; below the range only
 * another listener can, and a random pick makes that unlikely even across parallel processes.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error("no free port between 20000 and 32000");
}
