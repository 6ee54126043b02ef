import type { EntityManager } from "@mikro-orm/postgresql";
import { hasSqlState, query, type ValidationItem, validationFailed } from "@rowbase/kit";
import { type FieldLike, linkOptionsOf } from "@rowbase/kit/field-types";
import type { LinkStorage } from "./link-values.js";
import { linkJunction, userTable } from "./names.js";

/** One record's new value of a link field: the linked row ids, `key` the value's key in the request. */
export interface LinkWrite {
  rowId: bigint;
  ids: readonly number[];
  key: string;
}

/** Whether the link's inverse field links one record at most (`multiple: false`). */
function inverseSingle(link: LinkStorage): boolean {
  const inverseId = linkOptionsOf(link.field.options)?.inverseFieldId?.toString();
  const inverse = link.targetFields?.find((field) => field.id === inverseId);
  return inverse !== undefined && linkOptionsOf(inverse.options)?.multiple === false;
}

function item(key: string, message: string, code: ValidationItem["code"]): ValidationItem {
  return { key, message, source: "body", code };
}

/**
 * Writes records' values of one link field, in the caller's transaction, which holds the
 * records written (locked, or just inserted): each record then links exactly the ids named. The
 * pairs no longer named are deleted and the new ones inserted; the records on the other side
 * are not written (their version and times stay). Refused with a 400 on the value's key, before
 * anything of the field is written (the caller's transaction rolls back the rest):
 * - an id that is no record of the linked table (missing, deleted, or another table's row):
 *   `not_found`. A record deleted after the check is caught by the junction's foreign key, with
 *   the same answer;
 * - when the inverse field links one record at most, an id another record links already, or
 *   that two records of the write name: `invalid_value`. The linked records are locked (in id
 *   order, for the transaction) so that two writes, from either side, cannot both take one.
 */
export async function writeLinks(
  em: EntityManager,
  link: LinkStorage,
  writes: readonly LinkWrite[],
): Promise<void> {
  if (writes.length === 0) return;
  const { junction } = link;
  const named = [...new Set(writes.flatMap((write) => write.ids))].sort((a, b) => a - b);
  const items: ValidationItem[] = [];
  if (named.length > 0) {
    const missing = await query<{ id: string }>(
      em,
      `select x::text as id from unnest($1::bigint[]) x
       where not exists (select from ${link.target} t where t.row_id = x)`,
      [named],
    );
    const gone = new Set(missing.map((row) => Number(row.id)));
    for (const write of writes) {
      const absent = write.ids.filter((id) => gone.has(id));
      if (absent.length > 0) {
        items.push(
          item(
            write.key,
            `${absent.length === 1 ? "row" : "rows"} ${absent.join(", ")} ${absent.length === 1 ? "is" : "are"} no record of the linked table`,
            "not_found",
          ),
        );
      }
    }
  }
  if (items.length === 0 && named.length > 0 && inverseSingle(link)) {
    items.push(...(await takenByOthers(em, link, writes, named)));
  }
  if (items.length > 0) throw validationFailed(items);

  const owners = writes.map((write) => write.rowId);
  const pairOwners = writes.flatMap((write) => write.ids.map(() => write.rowId));
  const pairTargets = writes.flatMap((write) => write.ids);
  await query(
    em,
    `delete from ${junction.relation} j where j.${junction.own} = any($1::bigint[])
       and not exists (select from unnest($2::bigint[], $3::bigint[]) p(own, other)
         where p.own = j.${junction.own} and p.other = j.${junction.other})`,
    [owners, pairOwners, pairTargets],
  );
  if (pairTargets.length === 0) return;
  try {
    await query(
      em,
      `insert into ${junction.relation} (${junction.own}, ${junction.other})
       select own, other from unnest($1::bigint[], $2::bigint[]) p(own, other)
       on conflict do nothing`,
      [pairOwners, pairTargets],
    );
  } catch (error) {
    // foreign_key_violation: a linked record was deleted since the check.
    if (!hasSqlState(error, "23503")) throw error;
    throw validationFailed(
      writes
        .filter((write) => write.ids.length > 0)
        .map((write) =>
          item(write.key, "names a record of the linked table that is gone", "not_found"),
        ),
    );
  }
}

/**
 * The refusals of a write to a link whose inverse links one record at most: a named record that
 * a record outside the write links already, or that an earlier record of the write names.
 */
async function takenByOthers(
  em: EntityManager,
  link: LinkStorage,
  writes: readonly LinkWrite[],
  named: readonly number[],
): Promise<ValidationItem[]> {
  const { junction } = link;
  // The linked records are locked, so that two writes naming one of them take turns, and a
  // write of that record (which locks it to write its own side of the link) waits too.
  await query(
    em,
    `select t.row_id from ${link.target} t where t.row_id = any($1::bigint[])
     order by t.row_id for no key update of t`,
    [named],
  );
  const taken = await query<{ other: string; own: string }>(
    em,
    `select j.${junction.other}::text as other, j.${junction.own}::text as own
     from ${junction.relation} j
     where j.${junction.other} = any($1::bigint[]) and j.${junction.own} <> all($2::bigint[])`,
    [named, writes.map((write) => write.rowId)],
  );
  const linker = new Map(taken.map((row) => [Number(row.other), row.own]));
  const items: ValidationItem[] = [];
  for (const write of writes) {
    const clashes: string[] = [];
    for (const id of write.ids) {
      const other = linker.get(id);
      if (other !== undefined && other !== write.rowId.toString()) {
        clashes.push(`row ${id} is linked to record ${other} already`);
      } else {
        linker.set(id, write.rowId.toString());
      }
    }
    if (clashes.length > 0) {
      items.push(
        item(
          write.key,
          `${clashes.join("; ")}, and its link back holds one record at most`,
          "invalid_value",
        ),
      );
    }
  }
  return items;
}

/** Why a link's change of options is refused: a few of the records in the way, and how many. */
export interface LinkChangeRefusal {
  rowIds: bigint[];
  count: number;
  message: string;
}

/**
 * Whether a link field's stored links allow its change of options: made single
 * (`multiple: false`), no record may link more than one record; made required, every record
 * must link one. Nothing is converted (a link has no column): the check only reads the
 * junction. Undefined when nothing is in the way (or the link has no junction yet).
 */
export async function linkChangeRefusal(
  em: EntityManager,
  table: { organizationId: bigint; tableId: bigint },
  fieldId: bigint,
  from: FieldLike,
  to: FieldLike,
  madeRequired: boolean,
  examples: number,
): Promise<LinkChangeRefusal | undefined> {
  const options = linkOptionsOf(to.options) ?? linkOptionsOf(from.options);
  if (!options?.inverseFieldId) return undefined;
  const junction = linkJunction(table.organizationId, fieldId, options.inverseFieldId);
  const [exists] = await query<{ found: boolean }>(
    em,
    "select to_regclass($1) is not null as found",
    [junction.relation],
  );
  if (!exists?.found) return undefined;
  const refusal = async (select: string, message: string) => {
    const rows = await query<{ row_id: string; total: string }>(
      em,
      `select row_id::text, count(*) over ()::text as total from (${select}) offending
       order by row_id limit ${examples}`,
    );
    if (rows.length === 0) return undefined;
    return {
      rowIds: rows.map((row) => BigInt(row.row_id)),
      count: Number(rows[0]!.total),
      message,
    };
  };
  if (linkOptionsOf(from.options)?.multiple !== false && options.multiple === false) {
    const refused = await refusal(
      `select j.${junction.own} as row_id from ${junction.relation} j
       group by j.${junction.own} having count(*) > 1`,
      "links more than one record",
    );
    if (refused) return refused;
  }
  if (madeRequired) {
    return refusal(
      `select r.row_id from ${userTable(table.organizationId, table.tableId)} r
       where not exists (select from ${junction.relation} j where j.${junction.own} = r.row_id)`,
      "is required and links no record",
    );
  }
  return undefined;
}
