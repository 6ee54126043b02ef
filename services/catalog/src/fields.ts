import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { type Call, changesBetween, SUBJECTS, sameJson, validationFailed } from "@rowbase/kit";
import {
  canChangeType,
  choiceRenames,
  fieldTypeFromProto,
  fieldTypeToProto,
  foldName,
  isReadOnlyType,
  isSelectType,
  MAX_FIELDS_PER_TABLE,
  optionsAfterTypeChange,
  parseFieldOptions,
} from "@rowbase/kit/field-types";
import type { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import {
  ChoiceRenameSchema,
  ChoicesRenamedSchema,
  FieldTypeChangedSchema,
  FieldUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { type Access, notFound, scopeOf } from "./access.js";
import type { Transactions } from "./change-set.js";
import { FIELD_NAME_KEY, fieldNameUsed, otherFieldsBytes, violates } from "./db/constraints.js";
import { Field, type FieldRow } from "./db/entities.js";
import {
  checkFieldDefinition,
  type FieldInput,
  READ_ONLY_REQUIRED,
  TYPE_MESSAGE,
} from "./domain/field-definition.js";
import { shiftFor, targetPosition } from "./domain/positions.js";
import { keepLinkIdentity } from "./domain/relational-options.js";
import { checkSchemaBytes, type SizedField, schemaBytesOf } from "./domain/schema-size.js";
import {
  fieldNameProblem,
  invalidFieldOptions,
  requiredDescription,
  requiredName,
} from "./domain/validation.js";
import { fieldLimitExceeded, fieldNameTaken, fieldTypeChangeInvalid } from "./errors.js";
import { announceFieldCreated, fieldValues } from "./field-events.js";
import { addInverse, checkRelations, checkRollupsOf, deleteWithDependents } from "./relations.js";
import type { TypeChangeCheck } from "./type-change-check.js";
import { toField } from "./wire.js";

export interface FieldPatch {
  name?: string | undefined;
  type?: FieldType | undefined;
  options?: JsonObject | undefined;
  required?: boolean | undefined;
  description?: string | undefined;
  position?: number | undefined;
}

/**
 * Refuses a field whose name, description and options would take its table's fields past
 * MAX_SCHEMA_BYTES; `exceptId` is the field it replaces. The caller holds the table's lock.
 */
async function checkSchemaSize(
  em: EntityManager,
  tableId: bigint,
  field: SizedField,
  exceptId = 0n,
): Promise<void> {
  const bytes = (await otherFieldsBytes(em, tableId, exceptId)) + schemaBytesOf(field);
  checkSchemaBytes(bytes, "options");
}

/** Fields of a table: create, list, reconfigure, move, delete. */
export class Fields {
  constructor(
    private readonly deps: {
      tx: Transactions;
      access: Access;
      /** Asks records whether stored values convert; absent until records runs. */
      typeChanges?: TypeChangeCheck | undefined;
    },
  ) {}

  /**
   * Adds a field at the end of the table's field order. What a link, lookup or rollup names is
   * checked against the database (`checkRelations`); a link gets its inverse in its target
   * table (`addInverse`), and both are announced once their options are final.
   */
  async create(call: Call, tableId: bigint, input: FieldInput): Promise<FieldRow> {
    const checked = checkFieldDefinition(input);
    if (!checked.ok) {
      if (checked.validation.length > 0) throw validationFailed(checked.validation);
      throw invalidFieldOptions(checked.options);
    }
    const definition = checked.field;
    try {
      return await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        const access = await this.deps.access.table(em, call.principal, tableId, "write", "update");
        if (await fieldNameUsed(em, tableId, definition.name)) throw fieldNameTaken();
        // The table's row is locked: parallel creates count one after the other.
        const position = await em.count(Field, { tableId });
        if (position >= MAX_FIELDS_PER_TABLE) throw fieldLimitExceeded();
        await checkSchemaSize(em, tableId, definition);
        const target = await checkRelations(em, access.table, definition);
        const field = em.create(Field, { tableId, ...definition, position });
        await em.flush();
        const inverse = target && (await addInverse(em, access.table, field, target));
        const scope = scopeOf(access);
        await announceFieldCreated(changes, scope, field);
        if (inverse) await announceFieldCreated(changes, scope, inverse);
        return field;
      });
    } catch (error) {
      if (violates(error, FIELD_NAME_KEY)) throw fieldNameTaken();
      throw error;
    }
  }

  /** The table's fields in position order. */
  async list(call: Call, tableId: bigint): Promise<FieldRow[]> {
    const em = this.deps.tx.em();
    await this.deps.access.table(em, call.principal, tableId, "read");
    return em.find(Field, { tableId }, { orderBy: { position: "asc" } });
  }

  /** Internal: the table and organization of a field, for services, without a role check. */
  async home(fieldId: bigint): Promise<{ tableId: bigint; organizationId: bigint }> {
    const rows = await this.deps.tx.em().execute<{ table_id: string; organization_id: string }[]>(
      `select f.table_id, d.organization_id
         from fields f join tables t on t.id = f.table_id join databases d on d.id = t.database_id
        where f.id = ?`,
      [fieldId],
    );
    const row = rows[0];
    if (!row) throw notFound("field_not_found");
    return { tableId: BigInt(row.table_id), organizationId: BigInt(row.organization_id) };
  }

  /**
   * Changes what the patch names. A type change must have a conversion (and, with records
   * running, every stored value must convert, as with new options of the same type); options
   * replace the old ones as a whole, and a type change without options keeps a select's choices
   * or starts from the new type's defaults. A choice that keeps its id under a new name is a
   * rename. A move shifts the fields in between by one. A link keeps its table and inverse;
   * made single (`multiple: false`), records' check refuses it while a record holds more than
   * one link. A field a rollup reads keeps a type the rollup's function takes.
   */
  async update(call: Call, fieldId: bigint, patch: FieldPatch): Promise<FieldRow> {
    const name =
      patch.name === undefined ? undefined : requiredName(patch.name, "name", fieldNameProblem);
    const description =
      patch.description === undefined ? undefined : requiredDescription(patch.description);
    const newType = patch.type === undefined ? undefined : fieldTypeFromProto(patch.type);
    if (patch.type !== undefined && newType === undefined) {
      throw validationFailed([
        { key: "type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" },
      ]);
    }
    if (patch.position !== undefined && patch.position < 0) {
      throw validationFailed([
        { key: "position", message: "must be 0 or more", source: "body", code: "out_of_range" },
      ]);
    }
    try {
      return await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        const access = await this.deps.access.field(em, call.principal, fieldId, "write", {
          lockTable: true,
        });
        const { field } = access;
        const old = { type: field.type, options: field.options };
        const before = fieldValues(field);
        const type = newType ?? field.type;
        const typeChanged = type !== field.type;
        if (typeChanged && !canChangeType(field.type, type)) throw fieldTypeChangeInvalid();
        if (typeChanged) await checkRollupsOf(em, access.table.databaseId, fieldId, type);

        let options = field.options;
        if (patch.options !== undefined) {
          const parsed = parseFieldOptions(type, patch.options, { previous: old });
          if (!parsed.ok) throw invalidFieldOptions(parsed.errors);
          options = parsed.options;
          // A link keeps its table and inverse (no type changes into or out of the relational
          // types: `type` is the field's own here); a lookup's or rollup's new options are
          // checked as a new field's.
          if (type === "link") options = keepLinkIdentity(field.options, options);
          else await checkRelations(em, access.table, { type, options });
        } else if (typeChanged) {
          options = optionsAfterTypeChange(old, type);
        }
        const required = patch.required ?? field.required;
        if (required && isReadOnlyType(type)) {
          throw invalidFieldOptions([{ key: "required", message: READ_ONLY_REQUIRED }]);
        }
        if (
          name !== undefined &&
          name !== field.name &&
          (await fieldNameUsed(em, field.tableId, name, fieldId))
        ) {
          throw fieldNameTaken();
        }
        const resized = {
          name: name ?? field.name,
          description: description ?? field.description,
          options,
        };
        // Only growth is refused: a table over the limit from before it can still shrink.
        if (schemaBytesOf(resized) > schemaBytesOf(field)) {
          await checkSchemaSize(em, field.tableId, resized, fieldId);
        }
        // New options of the same type can leave stored values outside them (a lower max_length
        // or max, fewer decimals, a removed choice): they are checked like a type change. So is
        // a field made required, and a required field's change, since no record may then hold
        // an empty value (a required field cannot be cleared), nor one the conversion
        // empties. Records holds writes to a field being made required until catalog's commit
        // has surely reached them; made optional again, records lets them go at once. A change
        // that fails after the check is not committed: records lets go of its writes at once
        // too, rather than after its marks expire, and holds them to a field it was to make
        // optional as required again. The change id names this attempt's marks, to the release
        // and to the change's event (which ends them, and no later equal change's).
        const optionsChanged =
          !typeChanged && !isReadOnlyType(type) && !sameJson(options, old.options);
        const requiredChanged = required !== field.required;
        const records = this.deps.typeChanges;
        const changeId = randomUUID();
        if ((typeChanged || optionsChanged || requiredChanged) && records) {
          let marks: readonly bigint[] = [];
          // Before the call: when its answer is lost, records may have left marks all the same,
          // which the change id names.
          changes.onAbandon(() => records.release(field.tableId, changeId, marks, call));
          marks = await records.check(
            toField(field),
            fieldTypeToProto(type),
            options,
            required,
            changeId,
            call,
          );
        }

        if (patch.position !== undefined) {
          const count = await em.count(Field, { tableId: field.tableId });
          const to = targetPosition(patch.position, count);
          const shift = shiftFor(field.position, to);
          if (shift) {
            await em.execute(
              `update fields set position = position + ?
               where table_id = ? and position between ? and ? and id <> ?`,
              [shift.by, field.tableId, shift.low, shift.high, fieldId],
            );
          }
          field.position = to;
        }
        if (name !== undefined) {
          field.name = name;
          field.nameKey = foldName(name);
        }
        if (description !== undefined) field.description = description;
        field.type = type;
        // Only when they differ: the same options in another key order would still be written
        // (and updated_at moved) at the commit.
        if (!sameJson(options, field.options)) field.options = options;
        field.required = required;

        const changed = changesBetween(before, fieldValues(field));
        if (changed.length === 0) return field;
        await em.flush();
        const scope = scopeOf(access);
        await changes.publish(SUBJECTS.fieldUpdated, FieldUpdatedSchema, { ...scope, fieldId });
        // Records convert the values (numbers re-rounded); a select's values follow renamed
        // choices through ChoicesRenamed instead, which also swaps names (a choice still in use
        // cannot be removed: the check refused it). It is sent for every change of the choices,
        // renames or not: it also ends the check's pending state, which holds writes of the
        // field's old choices to the new ones until then.
        if (typeChanged || (optionsChanged && !isSelectType(type))) {
          await changes.publish(SUBJECTS.fieldTypeChanged, FieldTypeChangedSchema, {
            ...scope,
            fieldId,
            oldType: fieldTypeToProto(old.type),
            newType: fieldTypeToProto(type),
            oldOptions: old.options,
            newOptions: options,
            fieldName: field.name,
            changeId,
          });
        } else if (optionsChanged) {
          await changes.publish(SUBJECTS.fieldChoicesRenamed, ChoicesRenamedSchema, {
            ...scope,
            fieldId,
            renames: choiceRenames(old.options, options).map((rename) =>
              create(ChoiceRenameSchema, rename),
            ),
            type: fieldTypeToProto(type),
            options,
            changeId,
          });
        }
        await changes.audit(scope, "field.updated", { type: "field", id: fieldId }, changed);
        return field;
      });
    } catch (error) {
      if (violates(error, FIELD_NAME_KEY)) throw fieldNameTaken();
      throw error;
    }
  }

  /**
   * Deletes a field and closes the gap in the order; records drop its values on the event. A
   * link takes its inverse along, and any field every lookup and rollup through or of it
   * (`deleteWithDependents`), each announced on its own.
   */
  async delete(call: Call, fieldId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const access = await this.deps.access.field(em, call.principal, fieldId, "write", {
        lockTable: true,
      });
      await deleteWithDependents(changes, scopeOf(access), [fieldId], [access.table.id]);
    });
  }
}
