import { Code, ConnectError, callAs, createServiceClient } from "@rowbase/kit";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { StorageUsageLookup } from "./organizations.js";

/**
 * Stored bytes from FilesService.GetStorageUsage (live and soft-deleted files until purged), asked
 * as the organization service. Files being unreachable fails GetLimits with Unavailable (503)
 * rather than showing a wrong figure.
 */
export function filesStorageUsageLookup(
  baseUrl: string,
  internalSecret: string,
): StorageUsageLookup {
  const files = createServiceClient(FilesService, baseUrl);
  return async (organizationId, requestId) => {
    try {
      const usage = await files.getStorageUsage(
        { organizationId },
        await callAs(internalSecret, { kind: "service", service: "organization" }, requestId),
      );
      return usage.fileStorageBytes;
    } catch (error) {
      if (
        error instanceof ConnectError &&
        (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
      ) {
        throw new ConnectError("files service unavailable", Code.Unavailable);
      }
      throw new Error("FilesService.GetStorageUsage failed", { cause: error });
    }
  };
}
