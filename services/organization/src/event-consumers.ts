import { consumeOnce, type EventBus, type Logger, type Orm, SUBJECTS } from "@rowbase/kit";
import type { AuditLog } from "./audit-log.js";
import type { UsageStats } from "./usage-stats.js";

/** The organization service's durable consumers (also its names in `processed_event`). */
export const DURABLES = {
  audit: "organization_audit",
  usage: "organization_usage",
} as const;

/** How often the audit partitions are prepared and expired events removed. */
export const AUDIT_MAINTENANCE_INTERVAL_MS = 3600 * 1000;

/**
 * The audit store's and usage statistics' consumers (applied once per event id, acknowledged
 * after the commit) and the hourly audit maintenance, which also runs once before consuming so
 * that this month's partition exists.
 */
export async function startEventConsumers(deps: {
  orm: Orm;
  bus: EventBus;
  logger: Logger;
  auditLog: AuditLog;
  usage: UsageStats;
  maintenanceIntervalMs?: number;
}): Promise<{ stop(): Promise<void> }> {
  const { orm, bus, logger } = deps;
  let maintaining: Promise<void> | undefined;
  const maintain = () => {
    maintaining ??= deps.auditLog.maintain().finally(() => {
      maintaining = undefined;
    });
    return maintaining;
  };
  await maintain();
  const timer = setInterval(maintain, deps.maintenanceIntervalMs ?? AUDIT_MAINTENANCE_INTERVAL_MS);
  timer.unref();

  const consumers: { stop(): Promise<void> }[] = [];
  const stop = async () => {
    clearInterval(timer);
    for (const consumer of consumers) await consumer.stop();
    await maintaining;
  };
  try {
    consumers.push(
      await consumeOnce(
        orm,
        bus,
        { stream: "AUDIT", durable: DURABLES.audit, subject: SUBJECTS.auditAny },
        async (em, message) => {
          await deps.auditLog.store(em, message);
        },
        { logger },
      ),
    );
    consumers.push(
      await consumeOnce(
        orm,
        bus,
        { stream: "USAGE", durable: DURABLES.usage, subject: SUBJECTS.usageAny },
        (em, message) => deps.usage.apply(em, message),
        { logger },
      ),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { stop };
}
