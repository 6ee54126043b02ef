import net from "node:net";

/**
 * For tests: the base URL of a loopback port nothing listens on, for service clients whose
 * calls must fail as "unavailable" (503) so that a test sees that the call was made.
 */
export async function closedPortUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
