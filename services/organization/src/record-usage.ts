import { Code, ConnectError, callAs, createServiceClient } from "@rowbase/kit";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { RecordUsageLookup } from "./organizations.js";

/**
 * Record counts from RecordsService.GetRecordUsage, asked as the organization service. Records
 * being unreachable fails GetLimits with Unavailable (503) rather than showing a wrong count.
 */
export function recordsUsageLookup(baseUrl: string, internalSecret: string): RecordUsageLookup {
  const records = createServiceClient(RecordsService, baseUrl);
  return async (organizationId, requestId) => {
    try {
      const usage = await records.getRecordUsage(
        { organizationId },
        await callAs(internalSecret, { kind: "service", service: "organization" }, requestId),
      );
      return usage.records;
    } catch (error) {
      if (
        error instanceof ConnectError &&
        (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
      ) {
        throw new ConnectError("records service unavailable", Code.Unavailable);
      }
      throw new Error("RecordsService.GetRecordUsage failed", { cause: error });
    }
  };
}
