import { type EntityManager, LockMode } from "@mikro-orm/postgresql";
import { type Call, changesBetween, type JsonValue, valuesRemoved, valuesSet } from "@rowbase/kit";
import { formAllowsType } from "@rowbase/kit/field-types";
import { type Access, notFound, scopeOf, type TableAccess } from "./access.js";
import type { Transactions } from "./change-set.js";
import { countUnderLock } from "./db/constraints.js";
import { Database, Field, type FieldRow, Form, type FormRow, Table } from "./db/entities.js";
import { checkFormInput, type FormInput, newFormKey } from "./domain/form-definition.js";
import { formLimitExceeded } from "./errors.js";

/** How many forms an organization's plan allows (organization's GetPlan, through the cache). */
export type FormAllowance = (organizationId: bigint, requestId: string) => Promise<bigint>;

/** What a form request may set; each absent key keeps its value (create: its default). */
export interface FormPatch extends FormInput {
  active?: boolean | undefined;
}

/** A form's properties as audit events show them. */
function formValues(form: FormRow): Record<string, JsonValue> {
  return {
    name: form.name,
    fields: form.fields,
    required: form.required,
    success_message: form.successMessage,
    redirect_url: form.redirectUrl,
    active: form.active,
  };
}

/** A deleted field leaves the forms of its table (in the deletion's transaction). */
export async function removeFromForms(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
): Promise<void> {
  const without = (column: string) =>
    `coalesce((select jsonb_agg(e) from jsonb_array_elements(${column}) e
                where e <> to_jsonb(?::bigint)), '[]'::jsonb)`;
  await em.execute(
    `update forms set fields = ${without("fields")}, required = ${without("required")}
      where table_id = ? and (fields @> to_jsonb(array[?::bigint]))`,
    [fieldId, fieldId, tableId, fieldId],
  );
}

async function candidatesOf(em: EntityManager, tableId: bigint) {
  return em.find(Field, { tableId }, { orderBy: { position: "asc" } });
}

/**
 * The public forms of tables. Members who may change a table (owner, admin, editor) manage its
 * forms; any member reads them. A form's fields are checked against its table when it is saved;
 * a field deleted later leaves every form (Fields.delete).
 */
export class Forms {
  constructor(
    private readonly deps: { tx: Transactions; access: Access; allowance: FormAllowance },
  ) {}

  /**
   * Creates a form of a table. The plan's `forms` is counted under a per-organization lock held
   * to the commit, so parallel creates cannot pass it.
   */
  async create(call: Call, tableId: bigint, input: FormPatch): Promise<FormRow> {
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const access = await this.deps.access.table(em, call.principal, tableId, "write", "share");
      const checked = checkFormInput(input, await candidatesOf(em, tableId));
      const { organizationId } = access.database;
      const allowed = await this.deps.allowance(organizationId, call.requestId);
      const held = await countUnderLock(
        em,
        `catalog.organization-forms:${organizationId}`,
        "select count(*)::int as n from forms where organization_id = ?",
        organizationId,
      );
      if (BigInt(held) >= allowed) throw formLimitExceeded();
      const form = em.create(Form, {
        formKey: newFormKey(),
        organizationId,
        databaseId: access.table.databaseId,
        tableId,
        name: checked.name ?? "",
        fields: checked.fields ?? [],
        required: checked.required ?? [],
        successMessage: checked.successMessage ?? "",
        redirectUrl: checked.redirectUrl ?? "",
        active: input.active ?? true,
      });
      await em.flush();
      await changes.audit(
        scopeOf(access),
        "form.created",
        { type: "form", id: form.id },
        valuesSet(formValues(form)),
      );
      return form;
    });
  }

  async get(call: Call, formId: bigint): Promise<FormRow> {
    const em = this.deps.tx.em();
    return (await this.formAccess(em, call, formId, "read")).form;
  }

  /** The table's forms, oldest first. */
  async list(call: Call, tableId: bigint): Promise<FormRow[]> {
    const em = this.deps.tx.em();
    await this.deps.access.table(em, call.principal, tableId, "read");
    return em.find(Form, { tableId }, { orderBy: { id: "asc" } });
  }

  async update(call: Call, formId: bigint, patch: FormPatch): Promise<FormRow> {
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { form, ...access } = await this.formAccess(em, call, formId, "write", true);
      const checked = checkFormInput(patch, await candidatesOf(em, form.tableId), form.fields);
      const before = formValues(form);
      if (checked.name !== undefined) form.name = checked.name;
      if (checked.fields !== undefined) form.fields = checked.fields;
      if (checked.required !== undefined) form.required = checked.required;
      else if (checked.keepRequired) form.required = form.required.filter(checked.keepRequired);
      if (checked.successMessage !== undefined) form.successMessage = checked.successMessage;
      if (checked.redirectUrl !== undefined) form.redirectUrl = checked.redirectUrl;
      if (patch.active !== undefined) form.active = patch.active;
      const changed = changesBetween(before, formValues(form));
      if (changed.length === 0) return form;
      await em.flush();
      await changes.audit(scopeOf(access), "form.updated", { type: "form", id: formId }, changed);
      return form;
    });
  }

  async delete(call: Call, formId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { form, ...access } = await this.formAccess(em, call, formId, "write", true);
      await em.nativeDelete(Form, { id: formId });
      await changes.audit(
        scopeOf(access),
        "form.deleted",
        { type: "form", id: formId },
        valuesRemoved(formValues(form)),
      );
    });
  }

  /**
   * An active form by its key with the fields it shows, in its order, for the public routes
   * (no role check: the caller is the gateway). Fields whose type changed to one a form cannot
   * hold are left out. Unknown or inactive: form_not_found.
   */
  async publicForm(formKey: string): Promise<{ form: FormRow; fields: FieldRow[] }> {
    const em = this.deps.tx.em();
    const form = await em.findOne(Form, { formKey });
    if (!form?.active) throw notFound("form_not_found");
    const byId = new Map(
      (await candidatesOf(em, form.tableId)).map((field) => [Number(field.id), field]),
    );
    const fields = form.fields
      .map((id) => byId.get(id))
      .filter((field): field is FieldRow => field !== undefined && formAllowsType(field.type));
    return { form, fields };
  }

  /** Counts one record submitted through the form; a form deleted meanwhile is no error. */
  async countSubmission(formId: bigint): Promise<void> {
    await this.deps.tx
      .em()
      .execute("update forms set submissions = submissions + 1 where id = ?", [formId]);
  }

  /**
   * A form with its table and the caller's role there: a form of a table the caller cannot see
   * is form_not_found, as a missing one is. `lock`: the form row is locked for update.
   */
  private async formAccess(
    em: EntityManager,
    call: Call,
    formId: bigint,
    permission: "read" | "write",
    lock = false,
  ): Promise<TableAccess & { form: FormRow }> {
    const form = await em.findOne(
      Form,
      { id: formId },
      lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
    );
    if (!form) throw notFound("form_not_found");
    const table = await em.findOne(Table, { id: form.tableId });
    const database = table ? await em.findOne(Database, { id: table.databaseId }) : null;
    if (!table || !database) throw notFound("form_not_found");
    const role = await this.deps.access.organization(
      call.principal,
      database.organizationId,
      permission,
      "form_not_found",
    );
    return { form, table, database, role };
  }
}
