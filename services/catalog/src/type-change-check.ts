import type { JsonObject } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { type CallContext, Code, callAs, createServiceClient, errorInfoOf } from "@rowbase/kit";
import type { Field, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { fieldTypeChangeInvalid } from "./errors.js";

/**
 * How long catalog waits for a release. It can follow a check that waited for records its whole
 * deadline (`conversionMs`): together they stay within the gateway's wait for a schema change
 * (kit's `schemaChangeDeadlines`, 2 s more), so the caller still gets catalog's answer. A
 * release that times out leaves the marks to expire.
 */
const RELEASE_TIMEOUT_MS = 1_000;

/** Records' side of a change of a field's type, options or required flag. */
export interface TypeChangeCheck {
  /**
   * Asks whether every stored value of `field` converts to the new type and options, and, when
   * the field is to be `newRequired`, is not empty after it; throws field_type_change_invalid
   * when one does not. Answers the ids of the pending marks records left, which hold writes to
   * the change until its event arrives (or they expire); they carry `changeId`, the id catalog
   * gave this attempt at the change, which its event carries too.
   */
  check(
    field: Field,
    newType: FieldType,
    newOptions: JsonObject,
    newRequired: boolean,
    changeId: string,
    context: CallContext,
  ): Promise<bigint[]>;
  /**
   * Undoes the check of the change `changeId` of the table's field, which was not committed:
   * removes its marks (`markIds` too, for records replicas older than change ids), and holds
   * writes again to the required marks it lifted.
   */
  release(
    tableId: bigint,
    changeId: string,
    markIds: readonly bigint[],
    context: CallContext,
  ): Promise<void>;
}

/**
 * The check through RecordsService.CheckFieldTypeChange, called as the catalog service. A
 * refusal becomes catalog's own field_type_change_invalid (with the records service's
 * metadata); records being unreachable fails the update with Unavailable (503), since the
 * change cannot be judged safe without it. The check waits `conversionMs` (kit's
 * `schemaChangeDeadlines`): records converts a user table's column before it answers, and the
 * call's deadline is the conversion's, past which it rolls back whole (and catalog does not
 * commit: the route answers 503). The release through ReleaseFieldTypeChange.
 */
export function recordsTypeChangeCheck(
  baseUrl: string,
  internalSecret: string,
  conversionMs: number,
): TypeChangeCheck {
  const records = createServiceClient(RecordsService, baseUrl);
  const asCatalog = (context: CallContext) =>
    callAs(internalSecret, { kind: "service", service: "catalog" }, context.requestId);
  return {
    async check(field, newType, newOptions, newRequired, changeId, context) {
      try {
        const { markIds } = await records.checkFieldTypeChange(
          { field, newType, newOptions, newRequired, changeId },
          { ...(await asCatalog(context)), timeoutMs: conversionMs },
        );
        return markIds;
      } catch (error) {
        const info = errorInfoOf(error);
        if (info?.reason === "field_type_change_invalid") {
          throw fieldTypeChangeInvalid(info.metadata);
        }
        if (
          error instanceof ConnectError &&
          (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
        ) {
          throw new ConnectError("records service unavailable", Code.Unavailable);
        }
        throw new Error("RecordsService.CheckFieldTypeChange failed", { cause: error });
      }
    },
    async release(tableId, changeId, markIds, context) {
      await records.releaseFieldTypeChange(
        { tableId, changeId, markIds: [...markIds] },
        { ...(await asCatalog(context)), timeoutMs: RELEASE_TIMEOUT_MS },
      );
    },
  };
}
