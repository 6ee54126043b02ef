import {
  type Authorizer,
  Code,
  domainError,
  type Permission,
  type Principal,
  type Role,
} from "@rowbase/kit";
import type { FieldLike } from "@rowbase/kit/field-types";
import type { Upstream } from "./upstream.js";

/** A record the caller may act on, with where it lives. */
export interface RecordTarget {
  rowId: bigint;
  tableId: bigint;
  databaseId: bigint;
  organizationId: bigint;
  role: Role;
}

/** A file field of a record the caller may act on. */
export interface PairTarget extends RecordTarget {
  fieldId: bigint;
  field: FieldLike;
}

export function recordNotFound() {
  return domainError(Code.NotFound, "record_not_found");
}

export function fileNotFound() {
  return domainError(Code.NotFound, "file_not_found");
}

export function fieldNotFileType() {
  return domainError(Code.InvalidArgument, "field_not_file_type");
}

export function fieldNotFound() {
  return domainError(Code.NotFound, "field_not_found");
}

/**
 * Finds what a call addresses and checks the caller's role there: the row's table and
 * organization come from records, the role from kit's Authorizer, the field from the table's
 * schema. A row the caller's organization does not own is record_not_found, whatever the field.
 * A field of the row's organization that is not a file field of the row's table is
 * field_not_file_type; a field that exists nowhere, or only in another organization, is
 * field_not_found (one answer for both, so that no caller learns what another organization
 * holds).
 */
export class Access {
  constructor(
    private readonly upstream: Upstream,
    private readonly authorizer: Authorizer,
  ) {}

  async record(
    principal: Principal,
    rowId: bigint,
    permission: Permission,
    requestId: string,
  ): Promise<RecordTarget & { schema: Awaited<ReturnType<Upstream["tableSchema"]>> }> {
    if (rowId <= 0n) throw recordNotFound();
    const home = await this.upstream.resolveRecord(rowId, requestId);
    const role = await this.authorizer.authorize(
      principal,
      home.organizationId,
      permission,
      "record_not_found",
    );
    const schema = await this.upstream.tableSchema(home.tableId, requestId);
    if (!schema || schema.organizationId !== home.organizationId) throw recordNotFound();
    return {
      rowId,
      tableId: home.tableId,
      databaseId: schema.databaseId,
      organizationId: home.organizationId,
      role,
      schema,
    };
  }

  async pair(
    principal: Principal,
    rowId: bigint,
    fieldId: bigint,
    permission: Permission,
    requestId: string,
  ): Promise<PairTarget> {
    const { schema, ...record } = await this.record(principal, rowId, permission, requestId);
    const field = schema?.fields.find((f) => f.id === fieldId.toString());
    if (field?.type === "file") return { ...record, fieldId, field };
    if (field) throw fieldNotFileType();
    const owner = await this.upstream.fieldOrganization(fieldId, requestId);
    if (owner !== record.organizationId) throw fieldNotFound();
    throw fieldNotFileType();
  }
}
