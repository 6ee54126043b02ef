import type { EventBus } from "./bus.js";
import type { Logger } from "./logger.js";
import { MemoryBus } from "./memory-bus.js";
import { NatsBus } from "./nats-bus.js";

/** The bus of a process: JetStream at `url`, or the in-memory bus when there is none. */
export async function createBus(
  url: string | undefined,
  logger: Logger,
  namespace?: string,
): Promise<EventBus> {
  return url ? NatsBus.connect(url, logger, namespace) : new MemoryBus(logger);
}
