import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import {
  type BusMessage,
  type Call,
  requestIdOf,
  requirePrincipal,
  requireService,
  SUBJECTS,
  type ValidationItem,
  validationFailed,
} from "@rowbase/kit";
import { fieldTypeToProto } from "@rowbase/kit/field-types";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { ChangeLog } from "./change-log.js";
import { renderTexts } from "./domain/record-output.js";
import type { Records } from "./records.js";
import type { TypeChanges } from "./type-changes.js";
import { countModeOf, dataOf, outputOptionsOf, toRecord, WRITE_OUTPUT } from "./wire.js";

export interface RecordsServerDeps {
  records: Records;
  changeLog: ChangeLog;
  typeChanges: TypeChanges;
  /** Applies one of catalog's events, as its consumer does (ApplyCatalogEvent). */
  applyCatalogEvent(message: BusMessage): Promise<boolean>;
  /** The organization's record count, for GetRecordUsage. */
  usage(organizationId: bigint): Promise<bigint>;
}

function callOf(ctx: HandlerContext): Call {
  return { principal: requirePrincipal(ctx), requestId: requestIdOf(ctx) };
}

/**
 * The records handlers: proto in, rule, proto out. Public RPCs act for the signed principal (an
 * API token inside its organization, or a member's session) and authorize through kit's
 * Authorizer; ResolveRecord, GetRecordUsage, CheckFieldTypeChange and ReleaseFieldTypeChange
 * answer other services only.
 * Writes answer with every field keyed by id, markdown as stored.
 */
/** The subjects of catalog's events (`SUBJECTS.catalog...`). */
const CATALOG_SUBJECTS: ReadonlySet<string> = new Set(
  (Object.values(SUBJECTS) as unknown[]).filter(
    (subject): subject is string =>
      typeof subject === "string" && subject.startsWith("catalog.") && !subject.endsWith(">"),
  ),
);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function createRoutes({
  records,
  changeLog,
  typeChanges,
  usage,
  applyCatalogEvent,
}: RecordsServerDeps) {
  return (router: ConnectRouter) =>
    router.service(RecordsService, {
      async createRecord(req, ctx) {
        const {
          schema,
          records: created,
          files,
        } = await records.create(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          [dataOf(req.dataJson, "data")],
          false,
        );
        const record = created[0]!;
        return {
          record: toRecord(record, schema.fields, WRITE_OUTPUT, files.get(record.rowId)),
        };
      },
      async getRecord(req, ctx) {
        const output = outputOptionsOf(req.responseFormat, req.richText);
        const { record, fields, files } = await records.get(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          req.rowId,
          req.fieldList,
        );
        const rendered = await renderTexts([record], fields, output.richText, ctx.signal);
        return {
          record: toRecord(record, fields, { ...output, rendered }, files.get(record.rowId)),
        };
      },
      async listRecords(req, ctx) {
        const output = outputOptionsOf(req.responseFormat, req.richText);
        const view = await records.list(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          {
            limit: req.limit,
            offset: req.offset,
            count: countModeOf(req.count),
            where: req.where,
            sort: req.sortList,
            fields: req.fieldList,
          },
        );
        const rendered = await renderTexts(view.records, view.fields, output.richText, ctx.signal);
        return {
          records: view.records.map((record) =>
            toRecord(record, view.fields, { ...output, rendered }, view.files.get(record.rowId)),
          ),
          total: view.total ?? undefined,
          totalEstimated: view.totalEstimated,
          hasMore: view.hasMore,
          limit: view.limit,
          offset: view.offset,
        };
      },
      async listChanges(req, ctx) {
        const page = await changeLog.list(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          {
            after: req.after,
            afterSource: req.afterSource === "header" ? "header" : "query",
            limit: req.limit,
            types: req.types,
            where: req.where,
            fields: req.fieldList,
            output: outputOptionsOf(req.responseFormat, req.richText),
          },
          ctx.signal,
        );
        return { changes: page.changes, next: page.next, hasMore: page.hasMore };
      },
      async updateRecord(req, ctx) {
        const {
          schema,
          records: updated,
          files,
        } = await records.update(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          [{ rowId: req.rowId, data: dataOf(req.dataJson, "data") }],
          false,
        );
        const record = updated[0]!;
        return {
          record: toRecord(record, schema.fields, WRITE_OUTPUT, files.get(record.rowId)),
        };
      },
      async deleteRecord(req, ctx) {
        await records.delete(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          [req.rowId],
          false,
        );
        return { deletedId: req.rowId };
      },
      async batchCreateRecords(req, ctx) {
        const {
          schema,
          records: created,
          files,
        } = await records.create(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          req.records.map((draft, i) => dataOf(draft.dataJson, `records.${i}.data`)),
          true,
        );
        return {
          records: created.map((record) =>
            toRecord(record, schema.fields, WRITE_OUTPUT, files.get(record.rowId)),
          ),
        };
      },
      async batchUpdateRecords(req, ctx) {
        const {
          schema,
          records: updated,
          files,
        } = await records.update(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          req.records.map((patch, i) => ({
            rowId: patch.rowId,
            data: dataOf(patch.dataJson, `records.${i}.data`),
          })),
          true,
        );
        return {
          records: updated.map((record) =>
            toRecord(record, schema.fields, WRITE_OUTPUT, files.get(record.rowId)),
          ),
        };
      },
      async batchDeleteRecords(req, ctx) {
        const deletedIds = await records.delete(
          callOf(ctx),
          { tableId: req.tableId, databaseId: req.databaseId },
          req.rowIds,
          true,
        );
        return { deletedIds };
      },
      async getRecordSchema(req, ctx) {
        const schema = await records.recordSchema(callOf(ctx), {
          tableId: req.tableId,
          databaseId: req.databaseId,
        });
        return {
          schema: {
            ...schema,
            fields: schema.fields.map((field) => ({
              ...field,
              type: fieldTypeToProto(field.type),
            })),
          },
        };
      },

      async resolveRecord(req, ctx) {
        requireService(ctx);
        return records.resolve(req.rowId);
      },
      async getRecordUsage(req, ctx) {
        requireService(ctx);
        return { records: await usage(req.organizationId) };
      },
      async checkFieldTypeChange(req, ctx) {
        requireService(ctx);
        if (!req.field) {
          throw validationFailed([
            { key: "field", message: "is required", source: "body", code: "required" },
          ]);
        }
        const marks = await typeChanges.check(
          req.field,
          req.newType,
          req.newOptions,
          req.newRequired,
          req.changeId,
          ctx.signal,
        );
        return { markIds: marks.map(BigInt) };
      },
      async releaseFieldTypeChange(req, ctx) {
        requireService(ctx);
        await typeChanges.release(req.tableId, req.markIds.map(String), req.changeId);
        return {};
      },
      async applyCatalogEvent(req, ctx) {
        requireService(ctx);
        const items: ValidationItem[] = [];
        if (!CATALOG_SUBJECTS.has(req.subject)) {
          items.push({
            key: "subject",
            message: "must be a catalog event's subject",
            source: "body",
            code: "invalid_value",
          });
        }
        if (!UUID.test(req.eventId)) {
          items.push({
            key: "event_id",
            message: "must be a UUID",
            source: "body",
            code: "invalid_value",
          });
        }
        if (items.length > 0) throw validationFailed(items);
        const applied = await applyCatalogEvent({
          subject: req.subject,
          data: req.payload,
          id: req.eventId,
          deliveryCount: 1,
        });
        return { applied };
      },
    });
}
